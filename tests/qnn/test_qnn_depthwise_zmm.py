"""The int8 depthwise conv (qnn.conv2d with groups = channels, bias, per-channel requantize, ReLU6 clip: mobilenet's
depthwise layers) on AVX-512 targets: its 16-lane uint8 -> int32 widenings are one ``vpmovzxbd`` into a zmm and
its accumulators stay in registers, checked in gcc's assembly of the kernel for named AVX-512 targets (compiled,
never run unless the host has AVX-512). Before, each widening was two ymm halves stored to the stack and reloaded
as a zmm (a failed store-to-load forward) and the epilogue read the accumulators back in 8-lane pieces: 6x as many
vector stack accesses as FMAs, and the kernels took 75% of int8 mobilenet_v2 on Sapphire Rapids.
Values: the host's own target (an AVX-512 host runs the zmm code) against a numpy reference of the QNN definitions,
equal to the ``core-avx2`` build, and a QDQ model from ONNX Runtime's quantizer against ONNX Runtime."""
import re

import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.contrib import graph_executor
from kiln.relay import qnn
from kiln.target.x86 import host_can_run
from vector_code_util import target_asm

AVX512_TARGETS = ["llvm -mcpu=skylake-avx512", "llvm -mcpu=cascadelake", "llvm -mcpu=sapphirerapids"]
AVX2 = "llvm -mcpu=core-avx2"
S_DATA, S_OUT, ZP_OUT = 0.05, 0.04, 3


def _fixed_point(m: float):
    mant, e = np.frexp(np.float64(m))
    q = int(np.floor(abs(mant) * (1 << 31) + 0.5)) * int(np.sign(mant))
    if q == 1 << 31:
        q, e = q // 2, e + 1
    return q, int(e)


def reference(d, wt, zp_d, zp_w, bias, s_acc, stride, pad, hi):
    """int64 window sums of (d - zp_d) * (w - zp_w) + bias, requantized per channel in TVM's fixed point (UPWARD
    rounding) to S_OUT / ZP_OUT, clipped to [ZP_OUT, hi]."""
    n, c, h, w = d.shape
    x = np.pad(d.astype(np.int64) - zp_d, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    k = wt.astype(np.int64) - zp_w.astype(np.int64).reshape(-1, 1, 1, 1)
    oh, ow = (h + 2 * pad - 3) // stride + 1, (w + 2 * pad - 3) // stride + 1
    acc = np.zeros((n, c, oh, ow), np.int64)
    for y in range(3):
        for xx in range(3):
            acc += x[:, :, y:y + stride * oh:stride, xx:xx + stride * ow:stride] * k[None, :, 0, y, xx, None, None]
    acc += bias[None, :, None, None]
    out = np.empty_like(acc)
    for ch in range(c):
        q, e = _fixed_point(np.float64(s_acc[ch]) / np.float64(np.float32(S_OUT)))
        right = 31 - min(e, 0)
        out[:, ch] = (((acc[:, ch] << max(e, 0)) * q + (1 << (right - 1))) >> right) + ZP_OUT
    return np.clip(out, ZP_OUT, hi).astype("uint8")


def make_case(c, h, w, stride, seed=0):
    rng = np.random.default_rng(seed + c * 131 + h)
    d = rng.integers(0, 256, (1, c, h, w)).astype("uint8")
    wt = rng.integers(-100, 101, (c, 1, 3, 3)).astype("int8")
    zp_w = rng.integers(-3, 4, c).astype("int32")
    s_w = rng.uniform(0.004, 0.02, c).astype("float32")
    bias = rng.integers(-3000, 3000, c).astype("int32")
    s_acc = (np.float32(S_DATA) * s_w).astype("float32")
    hi = ZP_OUT + int(round(6.0 / S_OUT))
    zp_d = 7
    x = relay.var("x", shape=d.shape, dtype="uint8")
    acc = qnn.op.conv2d(x, relay.const(wt), relay.const(zp_d), relay.const(zp_w), relay.const(S_DATA),
                        relay.const(s_w), kernel_size=(3, 3), channels=c, groups=c, strides=(stride, stride),
                        padding=(1, 1))
    acc = relay.nn.bias_add(acc, relay.const(bias))
    q = qnn.op.requantize(acc, relay.const(s_acc), relay.const(0), relay.const(S_OUT), relay.const(ZP_OUT),
                          axis=1, out_dtype="int32")
    out = relay.cast(relay.clip(q, ZP_OUT, hi), "uint8")
    mod = kiln.IRModule.from_expr(relay.Function([x], out))
    return mod, d, reference(d, wt, zp_d, zp_w, bias, s_acc, stride, 1, hi)


def build(mod, target):
    with kiln.transform.PassContext(opt_level=3):
        return relay.build(mod, target)


def run(lib, d):
    m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    m.set_input(x=d)
    m.run()
    return m.get_output(0).numpy()


def depthwise_asm(lib, target, tmp_path) -> list:
    """gcc's assembly of the depthwise kernel's loop body (the parallel closure, or the kernel itself), as
    instruction lines."""
    asm = target_asm(lib.get_lib().get_source(), target)
    bodies = re.findall(r"\n((?:kiln_par_)?tvmgen_default_fused_nn_contrib_depthwise\w*):\n(.*?)\.cfi_endproc", asm,
                        re.S)
    assert bodies, "no depthwise kernel in the assembly"
    name, body = max(bodies, key=lambda b: b[1].count("vfmadd"))
    return [ln.strip() for ln in body.splitlines() if ln.startswith("\t") and not ln.strip().startswith(".")]


# mobilenet_v2's depthwise channel counts at (reduced) spatial sizes, stride 1 and 2: every shape for
# sapphirerapids (AVX-512 + VNNI + AMX), one of each stride for the two older AVX-512 CPUs
AVX512_CASES = ([("llvm -mcpu=sapphirerapids", c, h, s) for c, h, s in [(32, 20, 1), (96, 21, 2), (144, 14, 1),
                                                                           (576, 7, 2)]]
                + [(t, c, h, s) for t in AVX512_TARGETS[:2] for c, h, s in [(32, 20, 1), (576, 7, 2)]])


@pytest.mark.parametrize("target,c,h,stride", AVX512_CASES)
def test_avx512_depthwise_int8_stays_in_zmm_registers(target, c, h, stride, tmp_path):
    mod, d, want = make_case(c, h, h, stride)
    lib = build(mod, target)
    insns = depthwise_asm(lib, target, tmp_path)
    fmas = [i for i in insns if i.startswith("vfmadd")]
    assert fmas and all("%zmm" in i for i in fmas), fmas[:4]           # 16-lane float32 accumulators
    widen = [i for i in insns if i.startswith("vpmovzxbd")]
    assert widen and all(re.search(r"%zmm\d+$", i) for i in widen), [i for i in widen if "zmm" not in i][:4]
    stack = [i for i in insns if re.search(r"\((%rsp|%rbp)\)", i) and "mm" in i]
    assert len(stack) * 2 <= len(fmas), (len(stack), len(fmas), stack[:8])
    # the requantize epilogue: one zmm of int32 lanes truncated to 16 bytes per store
    assert any(i.startswith("vpmovdb") and "%zmm" in i for i in insns), "no zmm -> uint8 truncation"
    if host_can_run(kiln.target.Target(target)):
        np.testing.assert_array_equal(run(lib, d), want)


HOST_CASES = [(32, 13, 11, 1), (24, 9, 14, 2), (40, 7, 7, 1), (20, 11, 9, 2), (144, 15, 9, 2), (96, 6, 5, 1)]


@pytest.mark.parametrize("c,h,w,stride", HOST_CASES)
def test_depthwise_int8_on_the_host_matches_the_definition(c, h, w, stride):
    # 24 / 40: 8-channel blocks; 20: channels padded to a block inside; odd sizes; the host's own ISA
    mod, d, want = make_case(c, h, w, stride)
    got = run(build(mod, "llvm"), d)
    np.testing.assert_array_equal(got, want)
    if host_can_run(kiln.target.Target(AVX2)):
        np.testing.assert_array_equal(run(build(mod, AVX2), d), got)


def test_qdq_depthwise_block_matches_onnxruntime(tmp_path):
    # mobilenet's inverted-residual depthwise part (3x3 depthwise + ReLU6, stride 2, then stride 1) quantized by
    # ONNX Runtime's QDQ quantizer, rewritten to QNN by FakeQuantizationToInteger: within one output step of ORT
    torch = pytest.importorskip("torch")
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Block(torch.nn.Module):
        def __init__(self, c):
            super().__init__()
            self.d1 = torch.nn.Conv2d(c, c, 3, stride=2, padding=1, groups=c)
            self.d2 = torch.nn.Conv2d(c, c, 3, padding=1, groups=c)

        def forward(self, x):
            return torch.clamp(self.d2(torch.clamp(self.d1(x), 0, 6)), 0, 6)

    c, shape = 48, (1, 48, 17, 15)
    torch.manual_seed(0)
    f32, q = str(tmp_path / "dw.onnx"), str(tmp_path / "dw_q.onnx")
    torch.onnx.export(Block(c).eval(), torch.randn(*shape), f32, input_names=["x"], output_names=["y"],
                      opset_version=13, dynamo=False)
    rng = np.random.default_rng(5)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": rng.standard_normal(shape).astype("float32")} for _ in range(4)])

        def get_next(self):
            return next(self.it, None)
    quantize_static(f32, q, Reader(), quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8, per_channel=True, reduce_range=True)
    mod, params = relay.frontend.from_onnx(onnx.load(q), shape={"x": shape}, freeze_params=True)
    mod = relay.transform.FakeQuantizationToInteger()(relay.transform.InferType()(mod))
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    assert re.search(r"depthwise_conv2d_NCHWc\w*fixed_point", lib.get_lib().get_source())   # the int8 kernel
    model = onnx.load(q)
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    last = {o: n for n in model.graph.node for o in n.output}[model.graph.output[0].name]
    step = float(inits[last.input[1]])
    sess = ort.InferenceSession(q, providers=["CPUExecutionProvider"])
    for _ in range(2):
        x = rng.standard_normal(shape).astype("float32")
        m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
        m.set_input("x", x)
        m.run()
        got = m.get_output(0).numpy()
        want = sess.run(None, {"x": x})[0]
        assert np.max(np.abs(got - want)) <= step * 1.001, (np.max(np.abs(got - want)), step)
