"""The int8 depthwise conv with its requantize epilogue fused (x86): qnn.conv2d (groups = channels) + bias +
requantize (per-channel scales) + clip (ReLU6), optionally a residual qnn.add, against a numpy reference written
from the QNN definitions (zero points, TVM's fixed-point requantize with UPWARD rounding, saturation), on odd
shapes; that the requantize, the clip and the add land in the depthwise conv's fused function; and that the same
graphs compile for AVX-512 and VNNI targets (compiled, not run, on hosts without them)."""
import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.contrib import graph_executor
from kiln.relay import qnn
from kiln.target.x86 import host_can_run

AVX2 = "llvm -mcpu=core-avx2"
RNG = np.random.default_rng(1926)
DW_OPS = ("nn.contrib_depthwise_conv2d_NCHWc", "nn.conv2d")
needs_avx2 = pytest.mark.skipif(not host_can_run(kiln.target.Target(AVX2)), reason="host lacks AVX2")


# -- numpy reference from the definitions -------------------------------------------------------------------------

def dw_acc(d, w, zp_d, zp_w, stride, pad):
    """int64 sum over the window of (d - zp_d) * (w - zp_w), the padding holding zp_d (so contributing 0)."""
    n, c, h, wd = d.shape
    kh, kw = w.shape[2:]
    x = np.pad(d.astype(np.int64) - zp_d, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    k = w.astype(np.int64) - np.asarray(zp_w, np.int64).reshape(-1, 1, 1, 1)
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, c, oh, ow), np.int64)
    for y in range(kh):
        for xx in range(kw):
            out += x[:, :, y:y + stride * oh:stride, xx:xx + stride * ow:stride] * k[None, :, 0, y, xx, None, None]
    return out


def fixed_point(m: float):
    """TVM's requantize multiplier: m = q * 2**(e - 31), q rounded half away from zero to 31 bits."""
    mant, e = np.frexp(np.float64(m))
    q = int(np.sign(mant) * np.floor(abs(mant) * (1 << 31) + 0.5))
    if q == 1 << 31:
        q, e = q // 2, e + 1
    return q, int(e)


def requantize_ref(acc, s_in, zp_in, s_out, zp_out, lo=0, hi=255):
    """zp_out + round_upward((acc - zp_in) * s_in[c] / s_out) in TVM's fixed point, per channel; saturated."""
    s_in = np.broadcast_to(np.asarray(s_in, np.float32), (acc.shape[1],))
    out = np.empty(acc.shape, np.int64)
    for c in range(acc.shape[1]):
        q, e = fixed_point(np.float64(s_in[c]) / np.float64(np.float32(s_out)))
        x = acc[:, c].astype(np.int64) - zp_in
        left, right = max(e, 0), 31 - min(e, 0)
        p = (x << left) * q   # |x| < 2**24 here: the product fits int64
        out[:, c] = ((p + (1 << (right - 1))) >> right) + zp_out
    return np.clip(out, lo, hi)


# -- the graph --------------------------------------------------------------------------------------------------

S_DATA, S_OUT, ZP_OUT = 0.05, 0.04, 3


def make_graph(c, h, w, stride, pad, dtype, zp_d, residual):
    info = np.iinfo(dtype)
    d = RNG.integers(info.min, info.max + 1, (1, c, h, w)).astype(dtype)
    wt = RNG.integers(-100, 101, (c, 1, 3, 3)).astype("int8")
    zp_w = np.array(RNG.integers(-3, 4, c), "int32")
    s_w = np.array(RNG.uniform(0.004, 0.02, c), "float32")
    bias = np.array(RNG.integers(-3000, 3000, c), "int32")
    s_acc = (np.float32(S_DATA) * s_w).astype("float32")
    relu6_hi = ZP_OUT + int(round(6.0 / S_OUT))
    oh, ow = (h + 2 * pad - 3) // stride + 1, (w + 2 * pad - 3) // stride + 1
    other = RNG.integers(0, 256, (1, c, oh, ow)).astype("uint8")

    def body(x, y):
        acc = qnn.op.conv2d(x, relay.const(wt), zp_d, relay.const(zp_w), S_DATA, relay.const(s_w),
                            kernel_size=(3, 3), channels=c, groups=c, strides=(stride, stride), padding=(pad, pad))
        acc = relay.nn.bias_add(acc, relay.const(bias))
        q = qnn.op.requantize(acc, relay.const(s_acc), 0, S_OUT, ZP_OUT, axis=1, out_dtype="int32")
        q = relay.cast(relay.clip(q, ZP_OUT, relu6_hi), "uint8")
        if residual:
            q = qnn.op.add(q, y, S_OUT, ZP_OUT, 0.03, 5, 0.06, 7)
        return q

    acc = dw_acc(d, wt, zp_d, zp_w, stride, pad) + bias[None, :, None, None]
    want = np.clip(requantize_ref(acc, s_acc, 0, S_OUT, ZP_OUT, -2**31, 2**31), ZP_OUT, relu6_hi)
    if residual:
        ra = requantize_ref(want, [S_OUT] * c, ZP_OUT, 0.06, 7, -2**31, 2**31)
        rb = requantize_ref(other.astype(np.int64), [0.03] * c, 5, 0.06, 7, -2**31, 2**31)
        want = np.clip(ra + rb - 7, 0, 255)
    return d, other, body, want.astype("uint8")


def build(body, d, other, target):
    x = relay.var("x", shape=d.shape, dtype=str(d.dtype))
    y = relay.var("y", shape=other.shape, dtype="uint8")
    mod = kiln.IRModule.from_expr(relay.Function([x, y], body(x, y)))
    with kiln.transform.PassContext(opt_level=3):
        opt, _ = relay.optimize(mod, target)
        lib = relay.build(mod, target)
    return opt, lib


def fused_functions(opt):
    """Each primitive function of the optimized module as the list of its op names."""
    found = []

    def visit(e):
        if isinstance(e, relay.Function) and e.attrs is not None and e.get_attr("Primitive"):
            ops = []
            relay.analysis.post_order_visit(e.body, lambda n: ops.append(n.op.name) if isinstance(n, relay.Call)
                                            and hasattr(n.op, "name") else None)
            found.append(ops)
    relay.analysis.post_order_visit(opt["main"], visit)
    return found


def depthwise_function(opt):
    funcs = [f for f in fused_functions(opt) if any(op in DW_OPS for op in f)]
    assert len(funcs) == 1, funcs
    return funcs[0]


CASES = [  # c, h, w, stride, pad, data dtype, data zero point, residual
    (32, 11, 9, 1, 1, "uint8", 0, False),     # blocked NCHW16c (AlterOpLayout), odd H/W
    (40, 13, 7, 2, 1, "uint8", 17, True),     # 40 = 5 x 8: NCHW8c, stride 2, zero point padding, residual add
    (20, 9, 12, 2, 1, "int8", -9, False),     # 20 channels: packed inside to a 16-block, int8 data
    (21, 7, 7, 1, 0, "uint8", 200, True),     # odd channels, no padding, residual
    (16, 5, 6, 2, 0, "int8", 0, True),        # stride 2 without padding
]


@needs_avx2
@pytest.mark.parametrize("c,h,w,stride,pad,dtype,zp_d,residual", CASES)
def test_fused_depthwise_requantize_matches_the_definition(c, h, w, stride, pad, dtype, zp_d, residual):
    d, other, body, want = make_graph(c, h, w, stride, pad, dtype, zp_d, residual)
    opt, lib = build(body, d, other, AVX2)
    ops = depthwise_function(opt)
    # the requantize, the ReLU6 clip and (with a residual) the add and its requantizes run in the conv's epilogue
    assert "fixed_point_multiply_broadcast" in ops and "clip" in ops, ops
    assert ops[-1] == "cast", ops     # the function stores the uint8 result: no int32 tensor between kernels
    if residual:
        # the conv's requantize, its own operand's requantize to the add's scale, the add, the add's clip (the
        # other operand, an NCHW graph input here, is requantized where the layout transform to NCHWc is)
        assert ops.count("fixed_point_multiply_broadcast") >= 2 and ops.count("clip") == 2, ops
    dtypes = []
    relay.analysis.post_order_visit(opt["main"], lambda e: dtypes.append(e.args[0].checked_type.dtype) if (
        isinstance(e, relay.Call) and getattr(e.op, "name", "") in DW_OPS) else None)
    assert dtypes == ["uint8"], dtypes    # the int8 depthwise kernel, not the float32 lowering
    m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    m.set_input(x=d, y=other)
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), want)


def test_requantize_reference_rounds_upward_and_saturates():
    # the reference itself: ties go toward +inf, multipliers above 1 shift left, results saturate
    acc = np.array([[-5, -3, -1, 1, 3, 5, 10**6]], np.int64).reshape(1, 1, 1, 7)
    got = requantize_ref(acc, [0.5], 0, 1.0, 0, -2**31, 2**31)
    np.testing.assert_array_equal(got.ravel(), [-2, -1, 0, 1, 2, 3, 500000])
    got = requantize_ref(acc, [3.0], 1, 1.0, 10)
    np.testing.assert_array_equal(got.ravel(), [0, 0, 4, 10, 16, 22, 255])


@pytest.mark.parametrize("target", ["llvm -mcpu=skylake-avx512", "llvm -mcpu=cascadelake"])
def test_fused_depthwise_compiles_for_avx512_and_vnni(target):
    d, other, body, want = make_graph(40, 9, 9, 2, 1, "uint8", 17, True)
    opt, lib = build(body, d, other, target)
    ops = depthwise_function(opt)
    assert "fixed_point_multiply_broadcast" in ops and "clip" in ops, ops
    assert lib.get_lib() is not None
    if host_can_run(kiln.target.Target(target)):
        m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
        m.set_input(x=d, y=other)
        m.run()
        np.testing.assert_array_equal(m.get_output(0).numpy(), want)


@needs_avx2
def test_epilogue_parameters_are_loaded_once_per_tile():
    # the per-channel bias / multiplier / shift vectors are copied to locals before the tile's stores (a uint8 store
    # may alias any memory, so read from the parameter pointers GCC reloads them and redoes the helper's constant
    # arithmetic for every 8 outputs); the locals become registers
    d, other, body, want = make_graph(32, 11, 9, 1, 1, "uint8", 0, False)
    _, lib = build(body, d, other, AVX2)
    src = lib.get_lib().get_source()
    start = src.index("depthwise_conv2d_NCHWc")
    body_src = src[start:]
    locals_ = {line.split()[-1].rstrip(";") for line in body_src.splitlines()
               if line.strip().startswith("kiln_i32x8 p") and "_local" in line}
    assert len(locals_) >= 3, locals_   # bias, multiplier, shift (at least) per tile


@needs_avx2
def test_int8_1x1_conv_epilogue_parameters_are_loaded_once_per_tile():
    # the same copy in the int8 conv's schedule (mobilenet's expand / project 1x1 convs), exact against numpy
    ic, oc = 48, 32
    d = RNG.integers(0, 256, (1, ic, 7, 9)).astype("uint8")
    w = RNG.integers(-60, 61, (oc, ic, 1, 1)).astype("int8")
    s_w = RNG.uniform(0.004, 0.02, oc).astype("float32")
    bias = RNG.integers(-3000, 3000, oc).astype("int32")
    s_acc = (np.float32(S_DATA) * s_w).astype("float32")

    def body(x, y):
        acc = qnn.op.conv2d(x, relay.const(w), 0, 0, S_DATA, relay.const(s_w), kernel_size=(1, 1), channels=oc)
        acc = relay.nn.bias_add(acc, relay.const(bias))
        q = qnn.op.requantize(acc, relay.const(s_acc), 0, S_OUT, ZP_OUT, axis=1, out_dtype="int32")
        return relay.cast(relay.clip(q, ZP_OUT, 200), "uint8")
    other = np.zeros((1, 1, 1, 1), "uint8")
    opt, lib = build(body, d, other, AVX2)
    src = lib.get_lib().get_source()
    assert any(line.strip().startswith("kiln_i32x8 p") and "_local" in line for line in src.splitlines())
    acc = np.einsum("nchw,oc->nohw", d.astype(np.int64), w[:, :, 0, 0].astype(np.int64)) + bias[None, :, None, None]
    want = np.clip(requantize_ref(acc, s_acc, 0, S_OUT, ZP_OUT, -2**31, 2**31), ZP_OUT, 200).astype("uint8")
    m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    m.set_input(x=d, y=other)
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), want)
