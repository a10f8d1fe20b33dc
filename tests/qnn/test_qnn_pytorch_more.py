"""More torch.ao quantized models against PyTorch's own quantized outputs: dynamic quantization of nn.Linear
(quantize_dynamic, int8 and float16), quantized ConvTranspose2d, a mobilenet_v3-like block (Hardswish,
Hardsigmoid squeeze-excite, residual), the activation / normalization modules eager mode swaps in,
add_scalar / mul_scalar, quantize_per_channel activations."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.ao.quantization as tq  # noqa: E402
from torch import nn  # noqa: E402

import kiln  # noqa: E402
from kiln import relay  # noqa: E402
from kiln.contrib import graph_executor  # noqa: E402

from test_qnn_pytorch import _run_kiln, quantize_fx_model, trace as _trace  # noqa: E402


@pytest.fixture
def engine():
    """Set torch's quantized engine for one test and restore it afterwards."""
    old = torch.backends.quantized.engine

    def set_engine(name):
        torch.backends.quantized.engine = name
    yield set_engine
    torch.backends.quantized.engine = old


def _kinds(traced):
    return {n.kind() for n in traced.inlined_graph.nodes()}


# -- dynamic quantization of nn.Linear --------------------------------------------------------------------------
class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.relu = nn.Linear(13, 37), nn.ReLU()
        self.fc2, self.fc3 = nn.Linear(37, 29), nn.Linear(29, 5)

    def forward(self, x):
        return self.fc3(torch.tanh(self.fc2(self.relu(self.fc1(x)))))


def _dynamic_mlp(dtype, fuse):
    torch.manual_seed(0)
    m = MLP().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec = {nn.Linear}
        if fuse:
            m = tq.fuse_modules(m, [["fc1", "relu"]])
            spec = {nn.Linear, torch.ao.nn.intrinsic.LinearReLU}
        return tq.quantize_dynamic(m, spec, dtype=dtype)


# Inputs that reach every branch of PyTorch's choice of the input's scale and zero point: mixed signs, all
# positive (min 0), all negative (max 0), all zero (scale 0 -> 0.1), a range so small that the scale is raised
# to 6.1e-5, a large range.
_DYNAMIC_INPUTS = {
    "mixed": lambda: torch.randn(2, 3, 13),
    "positive": lambda: torch.rand(2, 3, 13) + 0.1,
    "negative": lambda: -torch.rand(2, 3, 13) - 0.1,
    "zeros": lambda: torch.zeros(2, 3, 13),
    "tiny": lambda: torch.randn(2, 3, 13) * 1e-4,
    "large": lambda: torch.randn(2, 3, 13) * 300,
}


@pytest.mark.parametrize("fuse", [False, True])
def test_dynamic_linear_mlp_matches_pytorch(engine, fuse):
    """quantized::linear_dynamic / linear_relu_dynamic (x86 engine: fbgemm, reduce_range): kiln computes the
    input's parameters with PyTorch's formulas, the int32 accumulation exactly and the float scaling in
    fbgemm's order, so the outputs agree to float rounding. The one possible larger difference is a flipped
    input rounding (kiln divides by the scale, fbgemm multiplies by its reciprocal): one input step times one
    weight in one row, which these seeded inputs do not hit; the bound below is far under one such step."""
    engine("x86")
    m = _dynamic_mlp(torch.qint8, fuse)
    torch.manual_seed(1)
    for name, make in _DYNAMIC_INPUTS.items():
        x = make()
        traced, want = _trace(m, x)
        kinds = _kinds(traced)
        assert "quantized::linear_dynamic" in kinds
        assert ("quantized::linear_relu_dynamic" in kinds) == fuse
        got, mod = _run_kiln(traced, x)
        assert "qnn.dense" in mod.astext()
        assert got.shape == want.shape
        tol = 1e-5 * max(1.0, float(np.abs(want).max()))
        assert np.max(np.abs(got - want)) <= tol, (name, np.max(np.abs(got - want)))


def test_dynamic_linear_float16_weights():
    """quantize_dynamic(dtype=float16): quantized::linear_dynamic_fp16, a float dense on the weights rounded to
    float16 (fbgemm computes in float32)."""
    m = _dynamic_mlp(torch.float16, False)
    x = torch.randn(3, 13)
    traced, want = _trace(m, x)
    assert "quantized::linear_dynamic_fp16" in _kinds(traced)
    got, _ = _run_kiln(traced, x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


class Encoder(nn.Module):
    """A transformer encoder layer written out: Q/K/V and output projections, softmax attention (float), two
    LayerNorms, a GELU feed-forward; under quantize_dynamic every nn.Linear becomes linear_dynamic."""

    def __init__(self, d=24, heads=2, ff=40):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads

        def split(y):
            return y.reshape(b, t, h, d // h).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        att = torch.softmax(q @ k.transpose(-1, -2) / (d // h) ** 0.5, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = self.ln1(x + self.o(y))
        return self.ln2(x + self.ff2(nn.functional.gelu(self.ff1(x))))


def test_dynamic_linear_encoder_block(engine):
    """Six dynamically quantized linears (3-D inputs, each quantized at run time from its own range) inside an
    attention block with float softmax / LayerNorm / GELU: within 1e-4 of PyTorch (float rounding through
    softmax and the LayerNorms; no quantization-step differences)."""
    engine("x86")
    torch.manual_seed(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = tq.quantize_dynamic(Encoder().eval(), {nn.Linear}, dtype=torch.qint8)
    x = torch.randn(2, 7, 24)
    traced, want = _trace(m, x)
    assert sum(n.kind() == "quantized::linear_dynamic" for n in traced.inlined_graph.nodes()) == 6
    got, _ = _run_kiln(traced, x)
    assert np.max(np.abs(got - want)) <= 1e-4, np.max(np.abs(got - want))


# -- quantized ConvTranspose2d ----------------------------------------------------------------------------------
class Wrap(nn.Module):
    def __init__(self, body):
        super().__init__()
        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
        self.body = body

    def forward(self, x):
        return self.dequant(self.body(self.quant(x)))


def _eager(model, shape, eng, per_tensor_weights=False, seed=0):
    torch.manual_seed(seed)
    model = model.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qconfig = tq.get_default_qconfig(eng)
        if per_tensor_weights:  # PyTorch observes ConvTranspose weights per tensor only
            qconfig = tq.QConfig(activation=qconfig.activation, weight=tq.default_weight_observer)
        model.qconfig = qconfig
        tq.prepare(model, inplace=True)
        for _ in range(4):
            model(torch.randn(*shape))
        tq.convert(model, inplace=True)
    return model


class Decoder(nn.Module):
    """conv -> ConvTranspose2d (stride 2, padding, output_padding) -> relu -> grouped, dilated ConvTranspose2d
    with a non-square kernel, on odd spatial sizes."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.up1 = nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1)
        self.relu = nn.ReLU()
        self.up2 = nn.ConvTranspose2d(8, 6, (2, 3), stride=(2, 1), groups=2, dilation=(1, 2))

    def forward(self, x):
        return self.up2(self.relu(self.up1(self.conv(x))))


def test_conv_transpose2d_matches_pytorch_qnnpack(engine):
    """quantized::conv_transpose2d against PyTorch's qnnpack engine (integer requantization, as kiln's):
    equal integers. (In torch 2.13 on this Zen 5 host the x86 engine's conv_transpose2d gives outputs tens of
    steps from the float computation on its own dequantized operands for many shapes, and fbgemm's packing of
    some weights cannot be unpacked; qnnpack agrees with that computation: it is the reference here.)"""
    engine("qnnpack")
    m = _eager(Wrap(Decoder()), (2, 3, 9, 7), "qnnpack", per_tensor_weights=True)
    x = torch.randn(1, 3, 9, 7)
    traced, want = _trace(m, x)
    assert "quantized::conv_transpose2d" in _kinds(traced)
    got, mod = _run_kiln(traced, x)
    assert "qnn.conv2d_transpose" in mod.astext()
    assert got.shape == want.shape == (1, 6, 36, 18)
    assert np.max(np.abs(got - want)) <= float(m.body.up2.scale) * 1.001


@pytest.mark.parametrize("cin,cout,k,stride", [(16, 8, 2, 2), (6, 4, 3, 1)])
def test_conv_transpose2d_matches_its_definition(engine, cin, cout, k, stride):
    """kiln's quantized ConvTranspose2d against the float transposed convolution of the dequantized input and
    weights plus the float bias, quantized with the output's parameters: within one output step (requantize
    rounding). The model is packed under the x86 engine, whose own conv_transpose2d outputs for these shapes
    are tens of steps from that definition in torch 2.13 on this Zen 5 host (not asserted: PyTorch's)."""
    engine("x86")
    m = _eager(Wrap(nn.ConvTranspose2d(cin, cout, k, stride=stride)), (2, cin, 6, 5), "x86",
               per_tensor_weights=True)
    x = torch.randn(1, cin, 6, 5)
    traced, _ = _trace(m, x)
    got, _ = _run_kiln(traced, x)
    body = m.body
    qx = m.quant(x)
    ref = nn.functional.conv_transpose2d(qx.dequantize(), body.weight().dequantize(), body.bias(), stride=stride)
    ref = torch.quantize_per_tensor(ref, float(body.scale), int(body.zero_point), torch.quint8).dequantize()
    assert np.max(np.abs(got - ref.numpy())) <= float(body.scale) * 1.001


def test_conv_transpose2d_unstable_unpack_is_a_clear_error(engine, monkeypatch):
    """torch 2.13's fbgemm packing of some ConvTranspose2d weights (16 -> 8 channels, 2x2 kernel on this host)
    unpacks to values that change from call to call; the importer unpacks more than once and refuses such a
    weight. Emulated here (the real failure comes and goes) by an unpack whose second answer differs."""
    from kiln.error import KilnError
    engine("qnnpack")
    m = _eager(Wrap(nn.ConvTranspose2d(4, 6, 3)), (2, 4, 6, 5), "qnnpack", per_tensor_weights=True)
    traced, _ = _trace(m, torch.randn(1, 4, 6, 5))
    real = torch.ops.quantized.conv_transpose2d_unpack
    calls = []

    def unstable(packed):
        w, b = real(packed)
        calls.append(1)
        if len(calls) > 1:
            w = torch.quantize_per_tensor(w.dequantize() + w.q_scale(), w.q_scale(), w.q_zero_point(), w.dtype)
        return w, b
    monkeypatch.setattr(torch.ops.quantized, "conv_transpose2d_unpack", unstable)
    with pytest.raises(KilnError, match="different weight each time"):
        relay.frontend.from_pytorch(traced, [("x", (1, 4, 6, 5))])


# -- mobilenet_v3-like block -------------------------------------------------------------------------------------
class MBV3Block(nn.Module):
    """Stem conv-bn-hardswish, expand, depthwise 5x5, squeeze-excite (pool, 1x1 relu, 1x1 hardsigmoid, mul),
    project, residual add, classifier."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.Hardswish())
        self.expand = nn.Sequential(nn.Conv2d(16, 40, 1), nn.BatchNorm2d(40), nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(40, 40, 5, padding=2, groups=40), nn.BatchNorm2d(40), nn.Hardswish())
        self.se1, self.se2, self.hsig = nn.Conv2d(40, 12, 1), nn.Conv2d(12, 40, 1), nn.Hardsigmoid()
        self.project = nn.Sequential(nn.Conv2d(40, 16, 1), nn.BatchNorm2d(16))
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.stem(x)
        y = self.dw(self.expand(x))
        se = self.hsig(self.se2(torch.relu(self.se1(nn.functional.adaptive_avg_pool2d(y, 1)))))
        y = x + self.project(y * se)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


def test_mobilenet_v3_block_quantize_fx(engine):
    """quantize_fx (x86): quantized::hardswish, aten::hardsigmoid on a quantized tensor (PyTorch's fixed output
    parameters, scale 1/256), quantized::mul / add. Top-1 equal; within two output steps (0-1 seen over seeds
    3-6): a conv's requantize may round one step apart (kiln: TVM's fixed-point UPWARD, fbgemm: float, ties to
    even), and a step passes on through the following layers."""
    engine("x86")
    torch.manual_seed(3)
    x = torch.randn(1, 3, 19, 17)
    q = quantize_fx_model(MBV3Block(), x)
    traced, want = _trace(q, x)
    kinds = _kinds(traced)
    assert {"quantized::hardswish", "aten::hardsigmoid", "quantized::mul"} <= kinds
    got, mod = _run_kiln(traced, x)
    assert "qnn.hardswish" in mod.astext()
    assert got.argmax() == want.argmax()
    assert np.max(np.abs(got - want)) <= 2 * float(q.fc.scale) + 1e-6


class HardsigmoidBlock(nn.Module):
    """torchvision's first quantizable mobilenet_v3 spelling of hard sigmoid: relu6(x + 3) * (1/6) through
    FloatFunctional add_scalar / mul_scalar, then a gating mul, nn.Hardswish."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.hs = nn.Hardswish()
        self.add3, self.div6, self.gate = (torch.ao.nn.quantized.FloatFunctional() for _ in range(3))
        self.relu6 = nn.ReLU6()

    def forward(self, x):
        y = self.hs(self.conv(x))
        s = self.div6.mul_scalar(self.relu6(self.add3.add_scalar(y, 3.0)), 1.0 / 6.0)
        return self.gate.mul(y, s)


def test_eager_hardswish_and_scalar_ops(engine):
    """Eager mode (x86): quantized::hardswish, add_scalar, relu6, mul_scalar, mul: within one output step."""
    engine("x86")
    m = _eager(Wrap(HardsigmoidBlock()), (2, 3, 11, 9), "x86")
    x = torch.randn(1, 3, 11, 9)
    traced, want = _trace(m, x)
    assert {"quantized::hardswish", "quantized::add_scalar", "quantized::mul_scalar",
            "quantized::relu6"} <= _kinds(traced)
    got, _ = _run_kiln(traced, x)
    assert np.max(np.abs(got - want)) <= float(m.body.gate.scale) * 1.001


# -- single quantized ops ------------------------------------------------------------------------------------------
class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


_UNARY = {
    "hardswish": (nn.Hardswish, "quantized::hardswish"),
    "leaky_relu": (lambda: nn.LeakyReLU(0.2), "quantized::leaky_relu"),
    "elu": (lambda: nn.ELU(0.7), "quantized::elu"),
    "relu6": (nn.ReLU6, "quantized::relu6"),
    "batch_norm": (lambda: nn.BatchNorm2d(5), "quantized::batch_norm2d"),
    "layer_norm": (lambda: nn.LayerNorm([13]), "quantized::layer_norm"),
    "group_norm": (lambda: nn.GroupNorm(5, 5), "quantized::group_norm"),
    "instance_norm": (lambda: nn.InstanceNorm2d(5, affine=True), "quantized::instance_norm"),
    "sigmoid": (lambda: Fn(torch.sigmoid), "aten::sigmoid"),
    "hardsigmoid": (lambda: Fn(nn.functional.hardsigmoid), "aten::hardsigmoid"),
    "tanh": (lambda: Fn(torch.tanh), "aten::tanh"),
    "gelu": (lambda: Fn(nn.functional.gelu), "aten::gelu"),
    "upsample_nearest": (lambda: Fn(lambda v: nn.functional.interpolate(v, scale_factor=2)),
                         "aten::upsample_nearest2d"),
    "clamp": (lambda: Fn(lambda v: torch.clamp(v, -0.5, 1.2)), "aten::clamp"),
    "clamp_min": (lambda: Fn(lambda v: torch.clamp(v, min=0.3)), "aten::clamp"),
    "quantized_clamp": (lambda: Fn(lambda v: torch.ops.quantized.clamp(v, None, 0.7) if v.is_quantized
                                   else torch.clamp(v, max=0.7)), "quantized::clamp"),  # float when calibrating
}


@pytest.mark.parametrize("name", sorted(_UNARY))
def test_unary_quantized_ops(engine, name):
    """Each op alone on a quantized (2, 5, 11, 13) tensor, x86 engine: the same integers as PyTorch (all of
    these compute in float between a dequantize and a quantize, or move values; sigmoid / hardsigmoid / tanh
    with PyTorch's fixed output parameters)."""
    engine("x86")
    make, kind = _UNARY[name]
    body = make()
    if isinstance(body, nn.BatchNorm2d):
        body.running_mean.uniform_(-0.3, 0.3)
        body.running_var.uniform_(0.5, 2.0)
    m = _eager(Wrap(body), (2, 5, 11, 13), "x86")
    x = torch.randn(2, 5, 11, 13)
    traced, want = _trace(m, x)
    assert kind in _kinds(traced)
    got, _ = _run_kiln(traced, x)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


class ScalarOps(nn.Module):
    def __init__(self, op, c):
        super().__init__()
        self.op, self.c = op, c

    def forward(self, x):
        q = torch.quantize_per_tensor(x, 0.05, 100, torch.quint8)
        return getattr(torch.ops.quantized, self.op)(q, self.c).dequantize()


@pytest.mark.parametrize("op", ["add_scalar", "add_scalar_relu", "mul_scalar", "mul_scalar_relu"])
@pytest.mark.parametrize("c", [0.75, -2.0, 9.0, -9.0, 0.0])
def test_add_mul_scalar(op, c):
    """add_scalar folds c into the zero point, or requantizes to a shifted range when the zero point would leave
    [0, 255] (c = +-9 with scale 0.05, zero point 100); mul_scalar scales, reflects (c < 0) or zeroes: the
    output's parameters come from PyTorch's kernel (asked at import time); the integers equal PyTorch's here (bound:
    one step, the requantize rounding of the shifted-range case)."""
    x = torch.randn(3, 17) * 4
    m = ScalarOps(op, c)
    traced, want = _trace(m, x)
    assert f"quantized::{op}" in _kinds(traced)
    got, _ = _run_kiln(traced, x)
    q = getattr(torch.ops.quantized, op)(torch.quantize_per_tensor(x, 0.05, 100, torch.quint8), c)
    assert np.max(np.abs(got - want)) <= q.q_scale() * 1.001


class PerChannel(nn.Module):
    def __init__(self, op=None):
        super().__init__()
        self.register_buffer("scales", torch.tensor([0.02, 0.05, 0.1]))
        self.register_buffer("zps", torch.tensor([0, 10, 128]))
        self.op = op

    def forward(self, x):
        q = torch.quantize_per_channel(x, self.scales, self.zps, 1, torch.quint8)
        if self.op is not None:
            q = self.op(q)
        return q.dequantize()


def test_quantize_per_channel_activation():
    """aten::quantize_per_channel -> dequantize converts (qnn.quantize / dequantize on the channel axis); a
    quantized op on the per-channel tensor is a clear error."""
    x = torch.randn(2, 3, 5) * 3
    traced, want = _trace(PerChannel(), x)
    got, _ = _run_kiln(traced, x)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    traced, _ = _trace(PerChannel(torch.clone), x)
    from kiln.error import KilnError
    with pytest.raises(KilnError, match="quantized per channel"):
        relay.frontend.from_pytorch(traced, [("x", tuple(x.shape))])


def test_graph_executor_runs_dynamic_model_twice_with_different_ranges(engine):
    """The input's scale and zero point are computed at run time: one compiled module serves inputs of very
    different ranges."""
    engine("x86")
    m = _dynamic_mlp(torch.qint8, False)
    x = torch.randn(4, 13)
    traced, _ = _trace(m, x)
    mod, params = relay.frontend.from_pytorch(traced, [("x", (4, 13))])
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    gm = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    for scale in (0.01, 1.0, 50.0):
        x = torch.randn(4, 13) * scale
        gm.set_input("x", x.numpy())
        gm.run()
        want = m(x).detach().numpy()
        assert np.max(np.abs(gm.get_output(0).numpy() - want)) <= 1e-5 * max(1.0, float(np.abs(want).max()))


class Conv1dNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.relu = nn.Conv1d(4, 10, 5, stride=2, padding=2, dilation=1), nn.ReLU()
        self.conv2 = nn.Conv1d(10, 6, 3, groups=2, dilation=2)
        self.up = nn.ConvTranspose1d(6, 5, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x):
        return self.up(self.conv2(self.relu(self.conv(x))))


def test_conv1d_and_conv_transpose1d(engine):
    """quantized::conv1d_relu, conv1d (grouped, dilated) and conv_transpose1d (qnnpack, the transposed
    convolution's reliable engine, see above) on an odd length: within one output step of PyTorch."""
    engine("qnnpack")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = tq.fuse_modules(Conv1dNet().eval(), [["conv", "relu"]])
    m = _eager(Wrap(net), (2, 4, 23), "qnnpack", per_tensor_weights=True)
    x = torch.randn(1, 4, 23)
    traced, want = _trace(m, x)
    assert {"quantized::conv1d_relu", "quantized::conv1d", "quantized::conv_transpose1d"} <= _kinds(traced)
    got, _ = _run_kiln(traced, x)
    assert got.shape == want.shape
    assert np.max(np.abs(got - want)) <= float(m.body.up.scale) * 1.001


def test_conv1d_x86_per_channel(engine):
    """quantized::conv1d(_relu) under the x86 qconfig (per-channel weights): within one output step."""
    engine("x86")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = tq.fuse_modules(Conv1dNet().eval(), [["conv", "relu"]])
    net.up = nn.Identity()
    m = _eager(Wrap(net), (2, 4, 23), "x86")
    x = torch.randn(1, 4, 23)
    traced, want = _trace(m, x)
    got, _ = _run_kiln(traced, x)
    assert np.max(np.abs(got - want)) <= float(m.body.conv2.scale) * 1.001


class DirectOps(nn.Module):
    """quantized:: ops that eager / FX conversion rarely emit, called directly on a quantized tensor."""

    def __init__(self, which):
        super().__init__()
        self.which = which
        self.register_buffer("w", torch.rand(5) + 0.5)
        self.register_buffer("b", torch.randn(5) * 0.1)
        self.register_buffer("mean", torch.randn(5) * 0.2)
        self.register_buffer("var", torch.rand(5) + 0.5)

    def forward(self, x):
        q = torch.quantize_per_tensor(x, 0.04, 120, torch.quint8)
        ops = torch.ops.quantized
        if self.which == "celu":
            y = ops.celu(q, 0.03, 100, 0.8)
        elif self.which == "sigmoid":
            y = ops.sigmoid(q, 1.0 / 256, 0)
        elif self.which == "batch_norm2d_relu":
            y = ops.batch_norm2d_relu(q, self.w, self.b, self.mean, self.var, 1e-5, 0.05, 10)
        else:
            y = ops.batch_norm2d(q, self.w, self.b, self.mean, self.var, 1e-5, 0.05, 128)
        return y.dequantize()


@pytest.mark.parametrize("which", ["celu", "sigmoid", "batch_norm2d", "batch_norm2d_relu"])
def test_direct_quantized_ops(engine, which):
    """quantized::celu, sigmoid (the op form with explicit output parameters), batch_norm2d(_relu) on a
    (2, 5, 7, 9) tensor: the same integers as PyTorch's here (bound one step)."""
    engine("x86")
    torch.manual_seed(2)
    x = torch.randn(2, 5, 7, 9) * 2
    m = DirectOps(which)
    traced, want = _trace(m, x)
    assert f"quantized::{which}" in _kinds(traced)
    got, _ = _run_kiln(traced, x)
    step = {"celu": 0.03, "sigmoid": 1.0 / 256}.get(which, 0.05)
    assert np.max(np.abs(got - want)) <= step * 1.001, np.max(np.abs(got - want)) / step


class ScalarArith(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3)

    def forward(self, x):
        y = self.conv(x)
        y = (0.25 + (y + 0.5) * 1.5) * -0.75
        z = torch.relu(y + 1.0)
        return z * y


def test_quantize_fx_tensor_scalar_arithmetic(engine):
    """quantize_fx turns ``x + c``, ``c + x``, ``x * c`` into the Scalar overloads of quantized::add / add_relu /
    mul (two arguments, no output parameters: PyTorch's add_scalar / mul_scalar rules): the same integers as
    PyTorch's here (bound one step)."""
    engine("x86")
    torch.manual_seed(6)
    x = torch.randn(1, 3, 9, 8)
    q = quantize_fx_model(ScalarArith(), x, batches=3)
    traced, want = _trace(q, x)
    scalar_calls = [n for n in traced.inlined_graph.nodes()
                    if n.kind() in ("quantized::add", "quantized::add_relu", "quantized::mul")
                    and len(list(n.inputs())) == 2]
    assert len(scalar_calls) >= 4
    got, _ = _run_kiln(traced, x)
    step = np.diff(np.unique(want)).min()  # the output's scale (the smallest gap between its distinct values)
    assert np.max(np.abs(got - want)) <= step * 1.001


class EmbedMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(23, 12)
        self.fc = nn.Linear(12, 4)

    def forward(self, idx):
        return self.fc(self.emb(idx).mean(1))


def test_weight_only_quantized_embedding_and_dynamic_linear(engine):
    """nn.Embedding under float_qparams_weight_only_qconfig (quantized::embedding_byte: 8-bit rows with a float
    scale and bias) feeding a dynamically quantized linear: within float rounding of PyTorch."""
    engine("x86")
    torch.manual_seed(7)
    m = EmbedMLP().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.emb.qconfig = tq.float_qparams_weight_only_qconfig
        tq.prepare(m, inplace=True)
        tq.convert(m, inplace=True)
        m = tq.quantize_dynamic(m, {nn.Linear})
    idx = torch.tensor([[1, 22, 3, 0, 7], [4, 4, 9, 13, 21]])
    traced, want = _trace(m, idx)
    assert {"quantized::embedding_byte", "quantized::linear_dynamic"} <= _kinds(traced)
    mod, params = relay.frontend.from_pytorch(traced, [("idx", ((2, 5), "int64"))])
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    gm = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    gm.set_input("idx", idx.numpy())
    gm.run()
    got = gm.get_output(0).numpy()
    assert np.max(np.abs(got - want)) <= 1e-5 * max(1.0, float(np.abs(want).max()))


class OnednnFusions(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1)
        self.c3 = nn.Conv2d(8, 8, 1)
        self.fc, self.lrelu, self.fc2 = nn.Linear(8, 9), nn.LeakyReLU(0.1), nn.Linear(9, 4)

    def forward(self, x):
        y = self.c1(x)
        y = self.c2(y) + y
        y = torch.relu(self.c3(y) + y)
        y = y.mean((2, 3))
        return self.fc2(self.lrelu(self.fc(y)))


def test_quantize_fx_onednn_backend_fusions(engine):
    """quantize_fx with the onednn backend config fuses conv + add (+ relu) into quantized::conv2d_add(_relu) and
    linear + leaky_relu into quantized::linear_leaky_relu (onednn kernels: float post-ops); kiln computes them
    in float after the int32 conv / dense, quantizing once (equal to onednn's alone, see the next test). The
    model: top-1 equal, within three output steps (1-3 over seeds 8-11): the plain convs' requantize rounds a
    few outputs one step apart (TVM's fixed point vs onednn's float) and the residual chain carries them on."""
    from torch.ao.quantization.backend_config import get_onednn_backend_config
    engine("onednn")
    torch.manual_seed(8)
    x = torch.randn(1, 3, 11, 9)
    q = quantize_fx_model(OnednnFusions(), x, qconfig="onednn", backend_config=get_onednn_backend_config())
    traced, want = _trace(q, x)
    kinds = _kinds(traced)
    assert "quantized::conv2d_add" in kinds and "quantized::linear_leaky_relu" in kinds
    got, _ = _run_kiln(traced, x)
    assert got.argmax() == want.argmax()
    assert np.max(np.abs(got - want)) <= 3 * float(q.fc2.scale) + 1e-6


class ConvAdd(nn.Module):
    def __init__(self, packed, op):
        super().__init__()
        self.packed, self.op = packed, op

    def forward(self, x):
        q = torch.quantize_per_tensor(x, 0.03, 128, torch.quint8)
        accum = torch.quantize_per_tensor(x * 0.5, 0.02, 120, torch.quint8)
        return getattr(torch.ops.quantized, self.op)(q, accum, self.packed, 0.05, 128).dequantize()


@pytest.mark.parametrize("op", ["conv2d_add", "conv2d_add_relu"])
def test_conv2d_add_alone(engine, op):
    """quantized::conv2d_add(_relu) (onednn) with per-channel weights and a bias on an odd (11, 9) map: the same
    integers as PyTorch's here (bound one step)."""
    engine("onednn")
    torch.manual_seed(0)
    w = torch.quantize_per_channel(torch.randn(8, 8, 3, 3) * 0.1, torch.rand(8) * 0.002 + 0.001,
                                   torch.zeros(8, dtype=torch.long), 0, torch.qint8)
    packed = torch.ops.quantized.conv2d_prepack(w, torch.randn(8) * 0.1, [1, 1], [1, 1], [1, 1], 1)
    x = torch.randn(1, 8, 11, 9)
    traced, want = _trace(ConvAdd(packed, op), x)
    assert f"quantized::{op}" in _kinds(traced)
    got, _ = _run_kiln(traced, x)
    assert np.max(np.abs(got - want)) <= 0.05 * 1.001


class LinearTanh(nn.Module):
    def __init__(self, packed):
        super().__init__()
        self.packed = packed

    def forward(self, x):
        q = torch.quantize_per_tensor(x, 0.03, 128, torch.quint8)
        return torch.ops.quantized.linear_tanh(q, self.packed, 1.0 / 128, 128).dequantize()


def test_linear_tanh(engine):
    """quantized::linear_tanh (onednn), called directly on a 3-D input: within one output step."""
    engine("onednn")
    torch.manual_seed(9)
    w = torch.quantize_per_tensor(torch.randn(7, 11) * 0.2, 0.003, 0, torch.qint8)
    packed = torch.ops.quantized.linear_prepack(w, torch.randn(7) * 0.1)
    x = torch.randn(2, 3, 11)
    traced, want = _trace(LinearTanh(packed), x)
    assert "quantized::linear_tanh" in _kinds(traced)
    got, _ = _run_kiln(traced, x)
    assert got.shape == want.shape
    assert np.max(np.abs(got - want)) <= (1.0 / 128) * 1.001


# -- dynamically quantized LSTM / GRU ----------------------------------------------------------------------------
class RNNAll(nn.Module):
    """The RNN's output and final states, flattened into one tensor; an optional non-zero initial state."""

    def __init__(self, rnn, init=None):
        super().__init__()
        self.rnn, self.init = rnn, init

    def forward(self, x):
        out = self.rnn(x) if self.init is None else self.rnn(x, self.init)
        states = out[1] if isinstance(out[1], tuple) else (out[1],)
        return torch.cat([out[0].flatten()] + [s.flatten() for s in states])


_RNN_CONFIGS = [dict(batch_first=True), dict(num_layers=2), dict(bidirectional=True, batch_first=True),
                dict(num_layers=2, bidirectional=True)]


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("config", range(len(_RNN_CONFIGS)))
def test_dynamic_quantized_rnn(engine, kind, config):
    """quantize_dynamic({nn.LSTM / nn.GRU}) traces to aten::quantized_lstm / quantized_gru: kiln unrolls the
    sequence with PyTorch's CPU order (each layer's input projection over the whole sequence at once, one
    dynamic quantization; the hidden projection quantized per step) and PyTorch's cells. Output and final
    states (odd sizes: input 7, hidden 10, 3 or 6 steps) within 1e-5 of PyTorch's: float rounding only."""
    engine("x86")
    torch.manual_seed(config)
    kw = _RNN_CONFIGS[config]
    rnn = getattr(nn, kind)(7, 10, **kw)
    init = None
    if config == 1:  # an explicit initial state
        h0 = torch.randn(2, 6, 10) * 0.5  # (layers, batch, hidden); the input is (steps 3, batch 6, 7)
        init = (h0, torch.randn(2, 6, 10) * 0.5) if kind == "LSTM" else h0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = tq.quantize_dynamic(RNNAll(rnn, init).eval(), {getattr(nn, kind)})
    x = torch.randn(3, 6, 7)
    traced, want = _trace(m, x)
    assert f"aten::quantized_{kind.lower()}" in _kinds(traced)
    got, _ = _run_kiln(traced, x)
    assert got.shape == want.shape
    assert np.max(np.abs(got - want)) <= 1e-5, np.max(np.abs(got - want))


@pytest.mark.parametrize("eng,per_channel", [("qnnpack", False), ("onednn", False), ("x86", True)])
def test_dynamic_linear_other_engines_and_per_channel(engine, eng, per_channel):
    """The dynamic MLP under the qnnpack engine (PyTorch ignores reduce_range there, [0, 255]; kiln reads the
    engine at import) and onednn, and with per-channel weights (per_channel_dynamic_qconfig): float rounding
    only, on every input of _DYNAMIC_INPUTS."""
    engine(eng)
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec = {nn.Linear: tq.per_channel_dynamic_qconfig} if per_channel else {nn.Linear}
        m = tq.quantize_dynamic(MLP().eval(), spec)
    torch.manual_seed(1)
    for name, make in _DYNAMIC_INPUTS.items():
        x = make()
        traced, want = _trace(m, x)
        got, _ = _run_kiln(traced, x)
        tol = 1e-5 * max(1.0, float(np.abs(want).max()))
        assert np.max(np.abs(got - want)) <= tol, (name, np.max(np.abs(got - want)))


@pytest.mark.parametrize("scale,zp", [(0.060913704335689545, 3), (0.024144867435097694, 0), (0.09022555500268936, 10)])
def test_clamp_bounds_quantized_as_pytorch(scale, zp):
    """relu6, clamp and hardtanh on a quantized tensor clamp at the bounds PyTorch quantizes with ``quantize_val``
    (times the float32 reciprocal of the scale, rounded half to even). For these scales 6.0 / scale rounds one
    step away from 6.0 * (1 / scale): the quotient put every output at the bound one step off. Every integer of
    the quint8 range goes through, so each bound is met."""
    class M(nn.Module):
        def forward(self, x):
            q = torch.quantize_per_tensor(x, scale, zp, torch.quint8)
            return torch.cat([nn.functional.relu6(q).dequantize(), torch.clamp(q, min=-0.5, max=6.0).dequantize(),
                              nn.functional.hardtanh(q, -1.0, 6.0).dequantize()])
    x = torch.tensor(((np.arange(256) - zp) * scale).astype(np.float32))
    traced, want = _trace(M().eval(), x)
    got, _ = _run_kiln(traced, x)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("scale,zp,c", [(0.0371, 3, -4.4), (0.0371, 250, 3.3), (0.05, 100, -9.0), (0.013, 128, 2.2),
                                        (0.05, 100, 9.0)])
def test_scalar_ops_leave_their_input_alone_and_round_as_pytorch(scale, zp, c):
    """add_scalar whose zero point stays in range and mul_scalar by c > 0 keep the integers: their result was the
    input expression itself, so setting its parameters overwrote the input's, and a second use of the input (here
    add_scalar_relu, mul_scalar and its own dequantize) read the wrong zero point / scale (up to 119 steps off).
    The shifted-range add_scalar (zero point out of range) requantizes as PyTorch's kernel (float multiplier,
    ties to even; qnn.requantize was one step off for some integers). Every quint8 integer, equal outputs."""
    class M(nn.Module):
        def forward(self, x):
            q = torch.quantize_per_tensor(x, scale, zp, torch.quint8)
            return torch.cat([torch.ops.quantized.add_scalar(q, c).dequantize(),
                              torch.ops.quantized.add_scalar_relu(q, c).dequantize(),
                              torch.ops.quantized.mul_scalar(q, abs(c)).dequantize(), q.dequantize()])
    x = torch.tensor(((np.arange(256) - zp) * scale).astype(np.float32))
    traced, want = _trace(M().eval(), x)
    got, _ = _run_kiln(traced, x)
    np.testing.assert_array_equal(got, want)
