"""ONNX-export acceptance: PyTorch models exported with torch.onnx.export, imported with from_onnx, built with
relay.build, and compared with ONNX Runtime (and PyTorch) on random inputs (random weights, nothing downloaded)."""
from __future__ import annotations

import io
import sys
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

from onnx_helpers import run_kiln, run_ort  # noqa: E402


def export(model, example, opset=17):
    """torch.onnx.export with the TorchScript exporter (the dynamo one needs onnxscript, not installed here)."""
    buf = io.BytesIO()
    model.eval()
    kwargs = {"dynamo": False} if "dynamo" in torch.onnx.export.__code__.co_varnames else {}
    with torch.no_grad():
        torch.onnx.export(model, (example,), buf, opset_version=opset, input_names=["input"],
                          output_names=["output"], **kwargs)
    return onnx.load_from_string(buf.getvalue())


def check_model(model, example, opset=17, rtol=1e-4, atol=1e-4):
    proto = export(model, example, opset)
    x = example.numpy()
    ours = run_kiln(proto, {"input": x})[0]
    ref = run_ort(proto, {"input": x})[0]
    np.testing.assert_allclose(ours, ref, rtol=rtol, atol=atol)
    with torch.no_grad():
        np.testing.assert_allclose(ours, model(example).numpy(), rtol=rtol, atol=atol)


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, stride=2, groups=2)
        self.pool = torch.nn.MaxPool2d(2, ceil_mode=True)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        x = torch.nn.functional.hardswish(self.bn(self.conv1(x)))
        x = self.pool(torch.relu(self.conv2(x)))
        x = torch.nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
        return torch.softmax(self.fc(x), dim=-1)


class Block(torch.nn.Module):
    """A pre-norm transformer encoder block: multi-head self-attention and a GELU MLP."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q, k, v = (t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        att = torch.softmax(q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5, dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.ln2(x))


@pytest.mark.parametrize("opset", [11, 13, 17])
def test_small_cnn(opset):
    torch.manual_seed(0)
    check_model(SmallCNN(), torch.randn(2, 3, 17, 15), opset=opset)


@pytest.mark.parametrize("opset", [14, 17])
def test_transformer_block(opset):
    torch.manual_seed(0)
    check_model(Block(), torch.randn(2, 7, 32), opset=opset)


def test_upsample_and_concat_decoder():
    class Decoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up = torch.nn.ConvTranspose2d(4, 4, 2, stride=2)
            self.conv = torch.nn.Conv2d(8, 3, 3, padding=1)

        def forward(self, x):
            a = self.up(x)
            b = torch.nn.functional.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
            return torch.sigmoid(self.conv(torch.cat([a, b], dim=1)))

    torch.manual_seed(0)
    check_model(Decoder(), torch.randn(1, 4, 5, 6))


def _torchvision():
    sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
    return pytest.importorskip("torchvision")


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2",
                                  pytest.param("mobilenet_v3_small", marks=pytest.mark.slow),
                                  pytest.param("efficientnet_b0", marks=pytest.mark.slow),
                                  pytest.param("resnet50", marks=pytest.mark.slow)])
def test_torchvision_models(name):
    tv = _torchvision()
    torch.manual_seed(0)
    model = getattr(tv.models, name)(weights=None)
    check_model(model, torch.randn(1, 3, 224, 224), rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_vit_small_config():
    tv = _torchvision()
    from torchvision.models.vision_transformer import VisionTransformer
    torch.manual_seed(0)
    model = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4, hidden_dim=64, mlp_dim=128,
                              num_classes=10).eval()
    # In eval mode torch routes nn.MultiheadAttention through a fused fast path
    # (aten::_native_multi_head_attention) that its ONNX exporter cannot export; use the plain path.
    enabled = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        check_model(model, torch.randn(2, 3, 32, 32))
    finally:
        torch.backends.mha.set_fastpath_enabled(enabled)


class _HiddenStates(torch.nn.Module):
    """transformers 5 returns ModelOutputs; export the last hidden state as a plain tensor."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask)
        return out[0] if isinstance(out, tuple) else out.last_hidden_state


def _small_transformer(kind):
    _torchvision()  # transformers imports torchvision when it is installed
    tf = pytest.importorskip("transformers")
    torch.manual_seed(0)
    if kind == "bert":
        model = tf.BertModel(tf.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                           intermediate_size=37, max_position_embeddings=64))
    elif kind == "gpt2":
        model = tf.GPT2Model(tf.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=2, n_positions=64,
                                           use_cache=False))
    else:
        model = tf.DistilBertModel(tf.DistilBertConfig(vocab_size=100, dim=32, n_layers=2, n_heads=2, hidden_dim=37,
                                                       max_position_embeddings=64))
    return _HiddenStates(model.eval()).eval()


@pytest.mark.parametrize("kind", ["bert", pytest.param("gpt2", marks=pytest.mark.slow),
                                  pytest.param("distilbert", marks=pytest.mark.slow)])
def test_transformers_models(kind):
    """BertModel / GPT2Model / DistilBert (small random configs) through torch.onnx.export + from_onnx."""
    model = _small_transformer(kind)
    ids = torch.randint(0, 100, (2, 7))
    mask = torch.ones(2, 7, dtype=torch.int64)
    mask[-1, 5:] = 0  # padding in the last sequence
    buf = io.BytesIO()
    kwargs = {"dynamo": False} if "dynamo" in torch.onnx.export.__code__.co_varnames else {}
    with torch.no_grad():
        torch.onnx.export(model, (ids, mask), buf, opset_version=17, input_names=["input_ids", "attention_mask"],
                          output_names=["output"], **kwargs)
        expected = model(ids, mask).numpy()
    proto = onnx.load_from_string(buf.getvalue())
    feeds = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
    ours = run_kiln(proto, feeds)[0]
    np.testing.assert_allclose(ours, run_ort(proto, feeds)[0], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_vgg11():
    """torchvision vgg11 (random weights) at 224x224 (torch's ONNX exporter needs the adaptive pool's output
    size to divide its input, which holds at the real size)."""
    tv = _torchvision()
    torch.manual_seed(0)
    check_model(tv.models.vgg11(weights=None), torch.randn(1, 3, 224, 224), rtol=1e-4, atol=1e-4)
