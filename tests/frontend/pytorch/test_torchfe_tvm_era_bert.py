"""TVM v0.13's test_forward_pretrained_bert_base_uncased, re-expressed for kiln.

TVM downloads bert-base-uncased (pytorch_pretrained_bert's BertForMaskedLM and its tokenizer). Without network,
the same architecture comes from transformers' ``BertConfig`` (bert-base-uncased's sizes: 12 layers, hidden 768,
12 heads, intermediate 3072, vocabulary 30522) with random weights, and the input is TVM's 14-token sentence
pair shape: [CLS] ... [SEP] ... [SEP] with one [MASK] at position 8 (bert-base-uncased's special ids 101, 102,
103; the other ids are random words) and TVM's segment ids. As TVM's test, the model is traced, imported with
the input names ``input_ids`` / ``input.2``, built with the old ``graph, lib, params = relay.build(...)``
spelling, run by ``graph_executor.create``, compared with PyTorch at 1e-3, and the top-1 prediction at the
masked position must agree."""
import numpy as np
import pytest

from torch_frontend_util import import_torchvision, torch

import kiln
from kiln import relay
from kiln.contrib import graph_executor

MASKED_INDEX = 8
SEGMENTS = [0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1]


def _bert_for_masked_lm(**sizes):
    import_torchvision()  # transformers imports torchvision when it is installed
    tf = pytest.importorskip("transformers")
    cfg = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
               intermediate_size=3072, max_position_embeddings=512, type_vocab_size=2)
    cfg.update(sizes)
    torch.manual_seed(0)
    return OldStyleMaskedLM(tf.BertForMaskedLM(tf.BertConfig(**cfg)).eval()).eval(), cfg["vocab_size"]


class OldStyleMaskedLM(torch.nn.Module):
    """pytorch_pretrained_bert's call convention, which TVM's test traces: ``model(input_ids, token_type_ids)``
    returning the prediction scores as one tensor (transformers' second positional argument is the attention mask,
    and it returns a ModelOutput)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, token_type_ids):
        return self.model(input_ids=input_ids, token_type_ids=token_type_ids, return_dict=False)[0]


def _tokens(vocab):
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(1000, vocab, (14,), generator=gen)
    ids[0], ids[6], ids[13], ids[MASKED_INDEX] = 101, 102, 102, 103  # [CLS], [SEP], [SEP], [MASK]
    return ids[None], torch.tensor([SEGMENTS])


def _run_like_tvm(model, vocab):
    tokens, segments = _tokens(vocab)
    with torch.no_grad():
        torch_preds = model(tokens, segments).numpy()
        traced = torch.jit.trace(model, (tokens, segments)).eval()
    shape_list = [("input_ids", list(tokens.shape)), ("input.2", list(segments.shape))]
    mod, params = relay.frontend.from_pytorch(traced, shape_list)
    with kiln.transform.PassContext(opt_level=3):
        with pytest.warns(DeprecationWarning):
            graph, lib, relay_params = relay.build(mod, target="llvm", params=params)
    m = graph_executor.create(graph, lib, kiln.cpu(0))
    m.set_input(**relay_params)
    m.set_input("input_ids", tokens.numpy())
    m.set_input("input.2", segments.numpy())
    m.run()
    out = m.get_output(0).numpy()
    np.testing.assert_allclose(out, torch_preds, rtol=1e-3, atol=1e-3)
    assert out[0, MASKED_INDEX].argmax() == torch_preds[0, MASKED_INDEX].argmax()


@pytest.mark.slow
def test_forward_bert_base_uncased_architecture():
    """bert-base-uncased's full sizes, random weights."""
    _run_like_tvm(*_bert_for_masked_lm())


@pytest.mark.slow
def test_forward_bert_masked_lm_small():
    """The same model and flow with smaller sizes (2 layers, hidden 64, vocabulary 1200): about a minute, most
    of it compiling (test_pytorch_models.py's test_bert_built covers a small BertModel in the fast suite)."""
    _run_like_tvm(*_bert_for_masked_lm(vocab_size=1200, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                       intermediate_size=96))
