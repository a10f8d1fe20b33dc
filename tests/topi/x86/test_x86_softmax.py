"""x86 softmax: lane-split row reductions (topi.x86.softmax_x86), the row-local schedule with a fused elementwise
epilogue, FuseOps parity with TVM v0.13 (softmax ops are kOutEWiseFusable), numerics against numpy on odd row
lengths, masked (-inf) rows, NaN and inf; code for AVX2 run, for AVX-512 compiled and inspected."""
import re

import numpy as np
import pytest

import kiln as tvm
from kiln import relay, te, topi
from kiln.contrib import graph_executor
from kiln.relay import transform
from kiln.relay.testing import run_opt_pass
from kiln.topi.x86 import softmax as sm_x86

AVX2 = "llvm -mcpu=core-avx2"
AVX512 = "llvm -mcpu=skylake-avx512"


def _ref_softmax(a, axis=-1):
    with np.errstate(invalid="ignore"):
        x = a.astype(np.float64)
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)


def _ref_log_softmax(a, axis=-1):
    with np.errstate(invalid="ignore", divide="ignore"):
        x = a.astype(np.float64)
        s = x - x.max(axis=axis, keepdims=True)
        return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


def _scores(shape, seed=0):
    """Attention-like scores with special rows: masked entries, a fully masked row, a NaN, a +inf."""
    a = (np.random.default_rng(seed).standard_normal(shape) * 5).astype("float32")
    flat = a.reshape(-1, shape[-1])
    flat[::3, ::5] = -np.inf  # masked positions (a causal / padding mask)
    if flat.shape[0] > 3:
        flat[1, :] = -np.inf  # a fully masked row: NaN, as numpy and PyTorch give
        flat[2, shape[-1] // 2] = np.nan  # NaN propagates to its row
        flat[3, 0] = np.inf  # +inf - +inf: NaN row
    return a


# -- the compute and schedule --------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(12, 128, 64), (3, 37), (5, 8), (2, 3, 24), (4, 5), (7, 1), (6, 136)])
def test_softmax_x86_numerics(shape):
    x = te.placeholder(shape, name="x")
    with tvm.target.Target(AVX2):
        y = topi.x86.softmax_x86(x, -1)
        s = topi.x86.schedule_softmax([y])
        f = tvm.build(s, [x, y], target=AVX2)
    a = _scores(shape)
    out = tvm.nd.empty(shape, "float32")
    f(tvm.nd.array(a), out)
    np.testing.assert_allclose(out.numpy(), _ref_softmax(a), rtol=2e-6, atol=1e-7)
    src = f.get_source()
    assert "expf(" not in src
    if shape[-1] % 8 == 0:
        assert "_mm256_round_ps" in src  # fast exp's floor by the AVX round instruction
    lanes_used = sm_x86.lane_split_applies(shape, len(shape) - 1, "float32", 8)
    assert lanes_used == (shape[-1] % 8 == 0)
    if lanes_used:
        text = str(tvm.lower(s, [x, y], simple_mode=True))
        # vector accumulators of 8 lanes, one row at a time, and no vector division
        assert re.search(r"T_softmax_maxelem_lanes_1\[0:8\] = T\.max", text)
        assert re.search(r"T_softmax_expsum_lanes_1\[0:8\] = T_softmax_expsum_lanes_1\[0:8\] \+", text)
        assert "T.parallel" in text and " / T.Broadcast" not in text


def test_softmax_x86_other_axis_and_dtype_fall_back():
    x = te.placeholder((4, 16, 8), name="x")
    with tvm.target.Target(AVX2):
        y = topi.x86.softmax_x86(x, 1)
        assert "T_softmax_maxelem_lanes" not in {t.op.name for t in y.op.input_tensors}
        s = topi.x86.schedule_softmax([y])
        f = tvm.build(s, [x, y], target=AVX2)
    a = _scores((4, 16, 8), seed=2)
    out = tvm.nd.empty((4, 16, 8), "float32")
    f(tvm.nd.array(a), out)
    np.testing.assert_allclose(out.numpy(), _ref_softmax(a, 1), rtol=2e-6, atol=1e-7)
    xd = te.placeholder((4, 16), name="xd", dtype="float64")
    with tvm.target.Target(AVX2):
        assert topi.x86.softmax_x86(xd, -1).op.name == "T_softmax_norm"  # the generic compute, exact exp
        assert "T_softmax_maxelem_lanes" not in str(topi.x86.softmax_x86(xd, -1).op.input_tensors)


# -- FuseOps: softmax ops are kOutEWiseFusable (TVM v0.13) ----------------------------------------------------------
def _prim(f):
    return f.with_attr("Primitive", tvm.tir.IntImm("int32", 1))


@pytest.mark.parametrize("op", [relay.nn.softmax, relay.nn.fast_softmax, relay.nn.log_softmax])
def test_fuse_softmax_with_elementwise_consumers_like_tvm(op):
    """TVM: the broadcast ops before softmax stay a group of their own (their edge into softmax has softmax's
    pattern, not elemwise); the elementwise ops after it join it; a reshape after it (injective edge) does not."""
    shape, mshape = (2, 4, 16), (2, 1, 16)

    def before():
        x = relay.var("x", shape=shape)
        m = relay.var("m", shape=mshape)
        y = relay.add(relay.divide(x, relay.const(8.0)), m)
        z = relay.cast(relay.multiply(op(y), relay.const(2.0)), "float64")
        return relay.Function([x, m], relay.reshape(z, (8, 16)))

    def expected():
        p0, p1 = relay.var("p0", shape=shape), relay.var("p1", shape=mshape)
        f_pre = _prim(relay.Function([p0, p1], relay.add(relay.divide(p0, relay.const(8.0)), p1)))
        q0 = relay.var("p0", shape=shape)
        f_sm = _prim(relay.Function([q0], relay.cast(relay.multiply(op(q0), relay.const(2.0)), "float64")))
        r0 = relay.var("p0", shape=shape, dtype="float64")
        f_rs = _prim(relay.Function([r0], relay.reshape(r0, (8, 16)))).with_attr(
            "relay.reshape_only", tvm.tir.IntImm("int32", 1))
        x = relay.var("x", shape=shape)
        m = relay.var("m", shape=mshape)
        return relay.Function([x, m], relay.Call(f_rs, [relay.Call(f_sm, [relay.Call(f_pre, [x, m])])]))

    got = run_opt_pass(before(), transform.FuseOps(fuse_opt_level=2))
    want = run_opt_pass(expected(), transform.InferType())
    assert tvm.ir.structural_equal(got, want), got


def test_fuse_softmax_same_shape_multiply_and_not_a_reduction():
    """An elementwise binary op with a same-shape tensor fuses in (elemwise edge); a following reduction does not."""
    x = relay.var("x", shape=(3, 24))
    w = relay.var("w", shape=(3, 24))
    body = relay.sum(relay.multiply(relay.nn.softmax(x), w), axis=[1])
    got = run_opt_pass(relay.Function([x, w], body), transform.FuseOps(fuse_opt_level=2))
    calls = []
    e = got.body
    while isinstance(e, relay.Call):
        calls.append(e)
        e = e.args[0]
    assert len(calls) == 2  # [softmax, multiply] then [sum]
    assert calls[1].op.body.op.name == "multiply" and calls[1].op.body.args[0].op.name == "nn.softmax"
    assert calls[0].op.body.op.name == "sum"


# -- fused kernels: numerics (AVX2, run) and generated code (AVX-512, compiled) -------------------------------------
def _fused_graph(shape, op=relay.nn.softmax, out_dtype="float64"):
    x = relay.var("x", shape=shape)
    m = relay.var("m", shape=(1,) * (len(shape) - 1) + (shape[-1],))
    y = op(relay.add(relay.multiply(x, relay.const(0.125)), m))
    z = relay.cast(relay.multiply(y, relay.const(3.0)), out_dtype)
    return tvm.IRModule.from_expr(relay.Function([x, m], z))


def _build(mod, target):
    with tvm.transform.PassContext(opt_level=3):
        return relay.build(mod, target=target)


@pytest.mark.parametrize("shape", [(2, 12, 16, 32), (3, 37), (4, 24), (1, 2, 5, 7)])
@pytest.mark.parametrize("op,ref", [(relay.nn.softmax, _ref_softmax), (relay.nn.log_softmax, _ref_log_softmax)])
def test_fused_softmax_epilogue_numerics_avx2(shape, op, ref):
    lib = _build(_fused_graph(shape, op), AVX2)
    names = [k.prim_func.attrs["global_symbol"] if hasattr(k, "prim_func") else "" for k in lib.lowered]
    assert any(re.search(r"softmax_multiply_cast", str(n)) for n in names), names
    a = _scores(shape, seed=5)
    mask = np.where(np.random.default_rng(1).random((1,) * (len(shape) - 1) + (shape[-1],)) < 0.2, -np.inf,
                    0.0).astype("float32")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    m.set_input("x", a)
    m.set_input("m", mask)
    m.run()
    got = m.get_output(0).numpy()
    assert got.dtype == np.float64
    want = ref((a.astype(np.float64) * 0.125 + mask).astype("float32")) * 3.0
    np.testing.assert_allclose(got, want, rtol=3e-6, atol=3e-7)


def test_fused_softmax_kernel_is_row_local():
    lib = _build(_fused_graph((2, 12, 16, 32)), AVX2)
    (kernel,) = [k for k in lib.lowered if "softmax" in str(k.prim_func.attrs["global_symbol"])]
    text = str(kernel.prim_func)
    # one loop over the rows (parallel when the work is large enough: relay's parallel policy), inside it every
    # stage of one row: the exponentials are realized for one row only
    assert len(re.findall(r"for i0_i1_fused_i2_fused in", text)) == 1
    region = re.search(r"T\.realize\(T_softmax_exp\[([^\]]*)\]", text).group(1)
    assert region.count("+ 1") == 3 and region.endswith("0:32"), region
    src = lib.get_lib().get_source()
    assert "expf(" not in src and "_mm256_round_ps" in src


def test_fused_softmax_compiles_for_avx512():
    """skylake-avx512 (compiled, not run): 16-lane accumulators, the 512-bit round for fast exp's floor."""
    lib = _build(_fused_graph((2, 4, 8, 48)), AVX512)
    (kernel,) = [k for k in lib.lowered if "softmax" in str(k.prim_func.attrs["global_symbol"])]
    text = str(kernel.prim_func)
    assert "T_softmax_maxelem_lanes = T.Buffer((2, 4, 8, 16))" in text and "T.vectorized(16)" in text
    src = lib.get_lib().get_source()
    assert "_mm512_roundscale_ps" in src and "kiln_f32x16" in src and "expf(" not in src
