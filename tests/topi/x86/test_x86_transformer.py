"""Transformer fast paths on x86: GEMMs whose column count no SIMD width divides (GPT-2's 50257-word LM head)
run over zero-padded weight panels; constant small powers become multiplications; tanh / erf vectorize."""
import json
import math

import numpy as np
import pytest

import kiln as tvm
from kiln import relay, te, topi
from kiln.contrib import graph_executor
from kiln.error import KilnError, TypeInferenceError
from kiln.topi.x86 import batch_matmul, dense_pack, schedule_batch_matmul, schedule_dense_pack
from kiln.topi.x86.conv2d_alter_op import dense_pack_block, dense_pack_width
from kiln.topi.testing import dense_pack_weight_python

TARGET = "llvm -mcpu=core-avx2"


def _build(sched_fn, tensors):
    with tvm.target.Target(TARGET):
        s = sched_fn([tensors[-1]])
        return tvm.build(s, tensors, target=TARGET, name="kernel")


def test_pack_block_pads_non_dividing_units():
    assert dense_pack_block(768, 8) == 16 and dense_pack_block(24, 8) == 8
    assert dense_pack_block(50257, 8) == 16 and dense_pack_block(37, 8) == 16 and dense_pack_block(11, 8) == 8
    assert dense_pack_block(5, 8) == 0          # fewer rows than a vector: packed per call
    assert dense_pack_width(50257, 8) == 0      # the dividing-only width is unchanged


@pytest.mark.parametrize("m,n,k,bias", [(13, 37, 29, False), (5, 101, 64, True), (1, 9, 8, False),
                                         (7, 17, 3, True)])
def test_dense_pack_padded_weight(m, n, k, bias):
    rng = np.random.default_rng(n)
    a = rng.standard_normal((m, k)).astype("float32")
    w = rng.standard_normal((n, k)).astype("float32")
    b = rng.standard_normal(n).astype("float32")
    wp = dense_pack_weight_python(w, 16)
    with tvm.target.Target(TARGET):
        A = te.placeholder((m, k), name="data")
        W = te.placeholder(wp.shape, name="weight")
        B = te.placeholder((n,), name="bias") if bias else None
        out = dense_pack(A, W, B, "float32", n)
    assert tuple(int(d) for d in out.shape) == (m, n)
    mod = _build(schedule_dense_pack, [A, W] + ([B] if bias else []) + [out])
    res = tvm.nd.empty((m, n), "float32")
    mod(*[tvm.nd.array(v) for v in ([a, wp] + ([b] if bias else []))], res)
    ref = a @ w.T + (b if bias else 0)
    np.testing.assert_allclose(res.numpy(), ref, rtol=1e-5, atol=1e-5)


def test_dense_pack_padded_gemm_is_vectorized():
    """The micro-kernel of a padded GEMM keeps its accumulators in vector registers and stores them whole: the
    write-back of the 37 real columns of each 16-wide panel is two masked vector stores (VectorizeLoop's masked
    last vector; before session 17 a guarded scalar loop per row, which also kept the accumulators on the
    stack)."""
    with tvm.target.Target(TARGET):
        A = te.placeholder((12, 32), name="data")
        W = te.placeholder((3, 32, 16), name="weight")
        out = dense_pack(A, W, None, "float32", 37)
    src = _build(schedule_dense_pack, [A, W, out]).get_source()
    assert "_global_r0" in src               # register accumulators (not a stack array)
    assert "kiln_mstoren_f32x8(T_dense_unpad" in src and "T_dense_pack[" not in src
    assert "_mm256_maskstore_ps" in src       # one vmaskmovps per 8 columns on AVX2


def test_dense_pack_rejects_bad_units():
    with tvm.target.Target(TARGET):
        A = te.placeholder((4, 8), name="data")
        W = te.placeholder((3, 8, 16), name="weight")
        with pytest.raises(KilnError, match="units=20"):
            dense_pack(A, W, None, "float32", 20)


@pytest.mark.parametrize("n", [37, 6])
def test_dense_pack_unpacked_weight_odd_units(n):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((9, 21)).astype("float32")
    w = rng.standard_normal((n, 21)).astype("float32")
    with tvm.target.Target(TARGET):
        A = te.placeholder(a.shape, name="data")
        W = te.placeholder(w.shape, name="weight")
        out = dense_pack(A, W, None, "float32")
    mod = _build(schedule_dense_pack, [A, W, out])
    res = tvm.nd.empty((9, n), "float32")
    mod(tvm.nd.array(a), tvm.nd.array(w), res)
    np.testing.assert_allclose(res.numpy(), a @ w.T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("b,m,n,k,trans_b", [(3, 13, 37, 29, True), (2, 5, 101, 16, False), (1, 7, 17, 9, True)])
def test_batch_matmul_odd_columns(b, m, n, k, trans_b):
    rng = np.random.default_rng(k)
    x = rng.standard_normal((b, m, k)).astype("float32")
    y = rng.standard_normal((b, n, k) if trans_b else (b, k, n)).astype("float32")
    with tvm.target.Target(TARGET):
        X = te.placeholder(x.shape, name="x")
        Y = te.placeholder(y.shape, name="y")
        out = batch_matmul(X, Y, None, "float32", False, trans_b)
    mod = _build(schedule_batch_matmul, [X, Y, out])
    res = tvm.nd.empty((b, m, n), "float32")
    mod(tvm.nd.array(x), tvm.nd.array(y), res)
    ref = x @ (y.transpose(0, 2, 1) if trans_b else y)
    np.testing.assert_allclose(res.numpy(), ref, rtol=1e-5, atol=1e-5)


def _run(mod, inputs, params=None):
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target=TARGET, params=params)
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    for name, value in inputs.items():
        m.set_input(name, value)
    m.run()
    return lib, m.get_output(0).numpy()


@pytest.mark.parametrize("m,n,k", [(5, 37, 19), (16, 101, 64)])
def test_relay_dense_odd_units_prepacks_padded_weight(m, n, k):
    rng = np.random.default_rng(m)
    w = rng.standard_normal((n, k)).astype("float32")
    bias = rng.standard_normal(n).astype("float32")
    x = relay.var("x", shape=(m, k))
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, relay.const(w)), relay.const(bias)))
    a = rng.standard_normal((m, k)).astype("float32")
    lib, out = _run(tvm.IRModule.from_expr(relay.Function([x], y)), {"x": a})
    np.testing.assert_allclose(out, np.maximum(a @ w.T + bias, 0), rtol=1e-5, atol=1e-5)
    ops = [n_["name"] for n_ in json.loads(lib.get_graph_json())["nodes"] if n_["op"] == "tvm_op"]
    assert any("contrib_dense_pack" in o for o in ops), ops
    # the weight was padded and packed at compile time: one [ceil(n / 16), k, 16] parameter
    shapes = [tuple(v.shape) for v in lib.get_params().values()]
    assert (-(-n // 16), k, 16) in shapes


def test_contrib_dense_pack_units_type():
    x = relay.var("x", shape=(4, 8))
    w = relay.var("w", shape=(3, 8, 16))
    from kiln.relay.op.nn import contrib_dense_pack
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x, w], contrib_dense_pack(x, w, 37))))
    assert tuple(int(d) for d in mod["main"].body.checked_type.shape) == (4, 37)
    bad = tvm.IRModule.from_expr(relay.Function([x, w], contrib_dense_pack(x, w, 20)))
    with pytest.raises(TypeInferenceError, match="units=20"):
        relay.transform.InferType()(bad)


@pytest.mark.parametrize("exponent", [2.0, 3.0, 2.5])
def test_power_small_constant_exponent(exponent):
    x = relay.var("x", shape=(3, 37))
    y = relay.power(x, relay.const(exponent))
    a = np.abs(np.random.default_rng(0).standard_normal((3, 37))).astype("float32") + 0.1
    lib, out = _run(tvm.IRModule.from_expr(relay.Function([x], y)), {"x": a})
    np.testing.assert_allclose(out, a ** exponent, rtol=1e-5)
    assert ("powf" in lib.get_lib().get_source()) == (exponent == 2.5)


def test_topi_power_integer_exponent_is_multiplication():
    A = te.placeholder((5, 7), name="a")
    out = topi.power(A, 3)
    assert "pow" not in str(out.op.body[0])
    s = te.create_schedule(out.op)
    f = tvm.build(s, [A, out], target=TARGET)
    a = np.random.default_rng(0).standard_normal((5, 7)).astype("float32")
    res = tvm.nd.empty((5, 7), "float32")
    f(tvm.nd.array(a), res)
    np.testing.assert_allclose(res.numpy(), a ** 3, rtol=1e-5, atol=1e-6)


def _grid():
    g = np.linspace(-12, 12, 20001).astype("float32")
    tiny = np.logspace(-20, 1, 2001).astype("float32")
    return np.concatenate([g, tiny, -tiny, [0.0, 30.0, -30.0, np.inf, -np.inf, np.nan, -0.0]]).astype("float32")


@pytest.mark.parametrize("name,ref,tol", [("fast_tanh", np.tanh, 5e-7),
                                          ("fast_erf", np.vectorize(math.erf), 6e-7)])
def test_fast_tanh_erf_accuracy(name, ref, tol):
    v = _grid()
    A = te.placeholder(v.shape, name="a")
    out = getattr(topi, name)(A)
    s = te.create_schedule(out.op)
    xo, xi = s[out].split(out.op.axis[0], factor=8)
    s[out].vectorize(xi)
    f = tvm.build(s, [A, out], target=TARGET)
    res = tvm.nd.empty(v.shape, "float32")
    f(tvm.nd.array(v), res)
    got, want = res.numpy(), ref(v.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))  # NaN stays NaN, as libm gives
    ok = ~np.isnan(want)
    err = np.abs(got[ok].astype(np.float64) - want[ok])
    assert err.max() <= tol
    assert np.all(np.abs(got[ok]) <= 1.0)
    assert np.signbit(got[v == 0]).tolist() == np.signbit(v[v == 0]).tolist()


@pytest.mark.parametrize("form", ["tanh", "erf"])
def test_gelu_vectorizes_without_libm(form):
    """GPT-2's tanh GELU (with x ** 3) and BERT's erf GELU compile to vector code with no libm call."""
    x = relay.var("x", shape=(4, 40))
    if form == "tanh":
        inner = relay.const(0.7978845608) * (x + relay.const(0.044715) * relay.power(x, relay.const(3.0)))
        y = relay.const(0.5) * x * (relay.const(1.0) + relay.tanh(inner))

        def ref(a):
            return 0.5 * a * (1 + np.tanh(0.7978845608 * (a + 0.044715 * a ** 3)))
    else:
        y = x * relay.const(0.5) * (relay.const(1.0) + relay.erf(x * relay.const(0.7071067811865476)))
        erf = np.vectorize(math.erf)

        def ref(a):
            return a * 0.5 * (1 + erf(a * 0.7071067811865476))
    a = (3 * np.random.default_rng(2).standard_normal((4, 40))).astype("float32")
    lib, out = _run(tvm.IRModule.from_expr(relay.Function([x], y)), {"x": a})
    np.testing.assert_allclose(out, ref(a.astype(np.float64)), rtol=1e-5, atol=2e-6)
    src = lib.get_lib().get_source()
    for fn in ("tanhf(", "erff(", "powf("):
        assert fn not in src


# -- fast exp and the row-local softmax -------------------------------------------------------------------------
def test_fast_exp_accuracy_and_special_values():
    v = np.concatenate([np.linspace(-87, 88, 100003), np.logspace(-30, 1, 301), -np.logspace(-30, 1, 301),
                        [0.0, -0.0, np.nan, np.inf, -np.inf, -87.5, -100.0, 88.5, 100.0]]).astype("float32")
    A = te.placeholder(v.shape, name="a")
    out = topi.fast_exp(A)
    s = te.create_schedule(out.op)
    _, xi = s[out].split(out.op.axis[0], factor=8)
    s[out].vectorize(xi)
    f = tvm.build(s, [A, out], target=TARGET)
    assert "expf" not in f.get_source()
    res = tvm.nd.empty(v.shape, "float32")
    f(tvm.nd.array(v), res)
    got, want = res.numpy(), np.exp(v.astype(np.float64))
    normal = np.abs(v) <= 87
    assert (np.abs(got[normal] - want[normal]) / want[normal]).max() < 2.5 * 2.0 ** -24  # within ~2 ulp
    assert np.isnan(got[np.isnan(v)]).all()
    assert (got[v < -87.3] == 0).all() and np.isinf(got[v > 88.8]).all()


@pytest.mark.parametrize("shape,axis", [((12, 128, 128), -1), ((3, 37), -1), ((2, 5, 7), 1), ((4, 16), 0),
                                        ((37,), 0), ((2, 3, 24), 2)])
def test_relay_softmax_on_cpu_is_fast_and_row_local(shape, axis):
    x = relay.var("x", shape=shape)
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.nn.softmax(x, axis=axis)))
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target=TARGET)
    a = (np.random.default_rng(3).standard_normal(shape) * 6).astype("float32")
    a.reshape(-1)[::7] = -np.inf  # masked scores
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    m.set_input("x", a)
    m.run()
    e = np.exp(a.astype(np.float64) - a.max(axis=axis, keepdims=True))
    np.testing.assert_allclose(m.get_output(0).numpy(), e / e.sum(axis=axis, keepdims=True), rtol=1e-5, atol=1e-7)
    (kernel,) = lib.lowered
    text = str(kernel.prim_func)
    assert "expf" not in lib.get_lib().get_source() and "tir.exp" not in text
    if axis % len(shape) == len(shape) - 1 and len(shape) > 1:
        # the exponentials are realized one row at a time inside the loop over rows, not as a whole tensor
        import re
        region = re.search(r"T\.realize\(T_softmax_exp\[([^\]]*)\]", text).group(1)
        assert region.count("+ 1") == len(shape) - 1 and region.endswith(f"0:{shape[-1]}"), region
