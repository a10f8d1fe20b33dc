"""Real models (random weights, nothing downloaded) through TorchScript and torch.export, compared with
PyTorch at 1e-4. Small inputs and configs keep CI fast; the full-size runs are marked slow."""
import pytest

from torch_frontend_util import import_torchvision, torch, verify_model


def _torchvision_model(name, **kwargs):
    tv = import_torchvision()
    torch.manual_seed(0)
    return getattr(tv.models, name)(**kwargs).eval()


# model name, constructor kwargs, input size: each through both importers and the debug interpreter
VISION = [
    ("resnet18", {}, 32),
    ("mobilenet_v2", {}, 32),
    ("mobilenet_v3_small", {}, 32),
    ("efficientnet_b0", {}, 32),
    ("VisionTransformer", {"image_size": 32, "patch_size": 8, "num_layers": 2, "num_heads": 2, "hidden_dim": 32,
                           "mlp_dim": 64, "num_classes": 10}, 32),
]


@pytest.mark.parametrize("name, kwargs, size", VISION, ids=[v[0] for v in VISION])
def test_torchvision_interpreted(name, kwargs, size):
    model = _torchvision_model(name, **kwargs)
    verify_model(model, [torch.randn(1, 3, size, size)])


def test_resnet18_built():
    """resnet18 through both importers, compiled with relay.build and run by the graph executor."""
    model = _torchvision_model("resnet18")
    verify_model(model, [torch.randn(1, 3, 64, 64)], executor="graph")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "vgg11",
                                  "efficientnet_b0"])
def test_torchvision_full_size_built(name):
    model = _torchvision_model(name)
    verify_model(model, [torch.randn(1, 3, 224, 224)], executor="graph")


@pytest.mark.slow
def test_vit_b_16_built():
    model = _torchvision_model("vit_b_16")
    verify_model(model, [torch.randn(1, 3, 224, 224)], executor="graph", paths=("export",))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet50", "vgg11"])
def test_torchvision_big_interpreted(name):
    model = _torchvision_model(name)
    verify_model(model, [torch.randn(1, 3, 32, 32)])


# -- transformers ----------------------------------------------------------------------------------
def _transformers():
    import_torchvision()  # transformers imports torchvision when it is installed
    return pytest.importorskip("transformers")


class HiddenStates(torch.nn.Module):
    """Returns the last hidden state as a tensor (transformers 5 returns dicts/ModelOutputs)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask)
        return out[0] if isinstance(out, tuple) else out.last_hidden_state


def small_transformer(kind):
    tf = _transformers()
    torch.manual_seed(0)
    if kind == "bert":
        cfg = tf.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                            intermediate_size=37, max_position_embeddings=64)
        model = tf.BertModel(cfg)
    elif kind == "gpt2":
        cfg = tf.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=2, n_positions=64, use_cache=False)
        model = tf.GPT2Model(cfg)
    else:
        cfg = tf.DistilBertConfig(vocab_size=100, dim=32, n_layers=2, n_heads=2, hidden_dim=37,
                                  max_position_embeddings=64)
        model = tf.DistilBertModel(cfg)
    return HiddenStates(model.eval()).eval()


def _text_inputs(batch=2, length=7):
    ids = torch.randint(0, 100, (batch, length))
    mask = torch.ones(batch, length, dtype=torch.int64)
    mask[-1, length - 2:] = 0  # padding in the last sequence
    return [ids, mask]


@pytest.mark.parametrize("kind", ["bert", "gpt2", "distilbert"])
def test_transformers_interpreted(kind):
    verify_model(small_transformer(kind), _text_inputs())


def test_bert_built():
    verify_model(small_transformer("bert"), _text_inputs(), executor="graph")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gpt2", "distilbert"])
def test_transformers_built(kind):
    verify_model(small_transformer(kind), _text_inputs(), executor="graph")
