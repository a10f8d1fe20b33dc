"""torch.ao.quantization eager-mode models (fused conv-bn-relu, residual add/add_relu, cat, pooling, linear),
traced and imported with from_pytorch, against PyTorch's quantized model."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.ao.quantization as tq  # noqa: E402
from torch import nn  # noqa: E402

import kiln  # noqa: E402
from kiln import relay  # noqa: E402
from kiln.contrib import graph_executor  # noqa: E402


class QuantCNN(nn.Module):
    """torchvision-style: stem conv-bn-relu, max pool, a residual block, a concat branch, classifier."""

    def __init__(self):
        super().__init__()
        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
        self.conv1, self.bn1, self.relu1 = nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False), \
            nn.BatchNorm2d(16), nn.ReLU()
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        self.conv2, self.bn2, self.relu2 = nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU()
        self.conv3, self.bn3 = nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)
        self.skip = torch.ao.nn.quantized.FloatFunctional()
        self.branch = nn.Conv2d(16, 8, 1, groups=2)
        self.catf = torch.ao.nn.quantized.FloatFunctional()
        self.mulf = torch.ao.nn.quantized.FloatFunctional()
        self.avg = nn.AdaptiveAvgPool2d(1)
        self.fc1, self.relu3 = nn.Linear(24, 32), nn.ReLU()
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = self.quant(x)
        x = self.pool(self.relu1(self.bn1(self.conv1(x))))
        y = self.relu2(self.bn2(self.conv2(x)))
        y = self.skip.add_relu(self.bn3(self.conv3(y)), x)
        z = self.catf.cat([y, self.branch(y)], dim=1)
        z = self.mulf.add(z, z)
        z = torch.flatten(self.avg(z), 1)
        return self.dequant(self.fc2(self.relu3(self.fc1(z))))


def _quantized_model(seed):
    torch.manual_seed(seed)
    m = QuantCNN().eval()
    for bn in (m.bn1, m.bn2, m.bn3):  # non-trivial batch-norm statistics
        bn.running_mean.uniform_(-0.2, 0.2)
        bn.running_var.uniform_(0.5, 2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = tq.fuse_modules(m, [["conv1", "bn1", "relu1"], ["conv2", "bn2", "relu2"], ["conv3", "bn3"],
                                ["fc1", "relu3"]])
        torch.backends.quantized.engine = "x86"
        m.qconfig = tq.get_default_qconfig("x86")
        tq.prepare(m, inplace=True)
        for _ in range(6):
            m(torch.randn(2, 3, 21, 19))
        tq.convert(m, inplace=True)
    return m


def _run_kiln(traced, x):
    mod, params = relay.frontend.from_pytorch(traced, [("x", tuple(x.shape))])
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    gm = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    gm.set_input("x", x.numpy())
    gm.run()
    return gm.get_output(0).numpy(), mod


def trace(m, x):
    """``torch.jit.trace`` of quantized module ``m`` on ``x`` and its own output, warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(m, x).eval()
        want = m(x).detach().numpy()
    return traced, want


def quantize_fx_model(model, x, batches=4, calib_scale=1.0, qconfig="x86", backend_config=None):
    """``model`` through torch.ao's ``prepare_fx`` / ``convert_fx`` with ``qconfig``'s default mapping, calibrated
    on ``batches`` random batches of 2 shaped like ``x`` (times ``calib_scale``)."""
    from torch.ao.quantization import get_default_qconfig_mapping, quantize_fx
    extra = {} if backend_config is None else {"backend_config": backend_config}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prepared = quantize_fx.prepare_fx(model.eval(), get_default_qconfig_mapping(qconfig), (x,), **extra)
        for _ in range(batches):
            prepared(torch.randn(2, *x.shape[1:]) * calib_scale)
        return quantize_fx.convert_fx(prepared, **extra)


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_quantized_cnn_matches_pytorch(seed):
    m = _quantized_model(seed)
    x = torch.randn(1, 3, 21, 19)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(m, x).eval()
        want = m(x).numpy()
    got, mod = _run_kiln(traced, x)
    text = mod.astext()
    for op in ("qnn.conv2d", "qnn.dense", "qnn.concatenate", "qnn.quantize", "qnn.dequantize"):
        assert op in text, op
    step = m.fc2.scale
    assert got.argmax() == want.argmax()
    # equal on this host (seeds 0-3) since quantized::add is computed as PyTorch does (dequantize, float add,
    # quantize once; TVM's qnn.add rounded twice: two steps); the bound leaves one step for the requantize
    # rounding (TVM's UPWARD fixed point vs fbgemm's float multiply, ties to even) and float contraction
    assert np.max(np.abs(got - want)) <= step + 1e-6, (np.max(np.abs(got - want)), step)


def test_quantized_linear_3d_input_and_relu_on_quantized_tensor():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
            self.fc = nn.Linear(7, 5)
            self.relu = nn.ReLU()

        def forward(self, x):
            return self.dequant(self.relu(self.fc(self.quant(x))))

    torch.manual_seed(0)
    m = M().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.qconfig = tq.get_default_qconfig("x86")
        tq.prepare(m, inplace=True)
        m(torch.randn(4, 3, 7))
        tq.convert(m, inplace=True)
        x = torch.randn(2, 3, 7)
        traced = torch.jit.trace(m, x).eval()
        want = m(x).numpy()
    got, _ = _run_kiln(traced, x)
    assert got.shape == want.shape
    assert np.max(np.abs(got - want)) <= m.fc.scale * 1.001
    assert np.all(got >= 0)


def test_unquantized_input_to_quantized_op_is_a_clear_error():
    from kiln.error import KilnError
    from kiln.relay.frontend.aten import lookup
    from kiln.relay.frontend.aten.registry import AtenContext
    ctx = AtenContext()
    ctx.op_name = "quantized::add"
    x = relay.var("x", shape=(2,), dtype="uint8")
    with pytest.raises(KilnError, match="not a quantized tensor"):
        lookup("quantized::add")(ctx, [x, x, 0.1, 0])


def test_quantize_fx_model():
    """FX graph mode (prepare_fx / convert_fx): scales and zero points are tensor attributes of the module."""

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.bn = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
            self.c2 = nn.Conv2d(8, 8, 3, padding=1)
            self.fc = nn.Linear(8, 5)

        def forward(self, x):
            y = torch.relu(self.bn(self.c1(x)))
            y = torch.relu(self.c2(y) + y)
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))

    torch.manual_seed(2)
    x = torch.randn(1, 3, 11, 9)
    q = quantize_fx_model(M(), x)
    traced, want = trace(q, x)
    got, mod = _run_kiln(traced, x)
    assert got.argmax() == want.argmax()
    assert np.max(np.abs(got - want)) <= float(q.fc.scale) + 1e-6


def test_quantize_fx_relu6_block():
    """mobilenet_v2's inverted residual under quantize_fx: ReLU6 stays an aten::hardtanh_ on the quantized tensor
    (a clamp between the quantized bounds), depthwise conv, residual quantized::add; top-1 and values within two
    output steps of PyTorch's quantized model."""

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU6())
            self.expand = nn.Sequential(nn.Conv2d(16, 48, 1), nn.BatchNorm2d(48), nn.ReLU6())
            self.dw = nn.Sequential(nn.Conv2d(48, 48, 3, padding=1, groups=48), nn.BatchNorm2d(48), nn.ReLU6())
            self.project = nn.Sequential(nn.Conv2d(48, 16, 1), nn.BatchNorm2d(16))
            self.fc = nn.Linear(16, 7)

        def forward(self, x):
            x = self.stem(x)
            x = x + self.project(self.dw(self.expand(x)))
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))

    torch.manual_seed(5)
    x = torch.randn(1, 3, 17, 15)
    torch.backends.quantized.engine = "x86"
    q = quantize_fx_model(Block(), x, calib_scale=2)
    traced, want = trace(q, x)
    assert "aten::hardtanh" in str(traced.inlined_graph)
    got, mod = _run_kiln(traced, x)
    assert got.argmax() == want.argmax()
    assert np.max(np.abs(got - want)) <= 2 * float(q.fc.scale) + 1e-6
