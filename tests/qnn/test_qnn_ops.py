"""Each QNN op against a numpy reference written from the ONNX/TVM definition, through the debug interpreter
(the op's FReference) and compiled by relay.build (the op canonicalized to integer Relay ops)."""
import math

import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.contrib import graph_executor
from kiln.error import KilnError
from kiln.relay import qnn

RNG = np.random.default_rng(7)


def _rand_q(shape, dtype):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, size=shape).astype(dtype)


def run_both(body, inputs: dict):
    """(interpreter result, compiled result) of ``body`` over the named numpy inputs."""
    params = [relay.var(n, shape=v.shape, dtype=str(v.dtype)) for n, v in inputs.items()]
    mod = kiln.IRModule.from_expr(relay.Function(params, body(*params)))
    interp = relay.create_executor("debug", mod=mod).evaluate()(*inputs.values()).numpy()
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm")
    m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    m.set_input(**inputs)
    m.run()
    return interp, m.get_output(0).numpy()


# -- independent references (float64 arithmetic from the definitions) -----------------------------------------
def ref_requantize(x, s_in, zp_in, s_out, zp_out, dtype, rounding, axis=-1):
    shape = [1] * x.ndim
    shape[axis] = -1
    bc = (lambda v: np.asarray(v).reshape(shape) if np.ndim(v) else v)
    v = (x.astype(np.float64) - bc(zp_in)) * (bc(np.float32(s_in).astype(np.float64) if np.ndim(s_in) == 0 else
                                              np.asarray(s_in, np.float32).astype(np.float64))
                                              / bc(np.asarray(s_out, np.float32).astype(np.float64)))
    r = np.floor(v + 0.5) if rounding == "UPWARD" else np.sign(v) * np.floor(np.abs(v) + 0.5)
    info = np.iinfo(dtype)
    return np.clip(r + bc(zp_out), info.min, info.max).astype(dtype), v


def assert_exact_but_ties(got, want, v):
    """Equal everywhere except where ``v`` sits within 1e-6 of a rounding tie (31-bit fixed-point multiplier)."""
    diff = got.astype(np.int64) - want.astype(np.int64)
    near_tie = np.abs(np.abs(v - np.floor(v)) - 0.5) < 1e-6
    assert np.all(np.abs(diff) <= 1)
    assert np.all((diff == 0) | near_tie), f"{np.count_nonzero(diff)} mismatches away from ties"


def ref_quantize(x, scale, zp, dtype, axis=-1):
    shape = [1] * x.ndim
    shape[axis] = -1
    s = np.asarray(scale, np.float32).reshape(shape) if np.ndim(scale) else np.float32(scale)
    z = np.asarray(zp).reshape(shape) if np.ndim(zp) else zp
    info = np.iinfo(dtype)
    return np.clip(np.rint(x / s) + z, info.min, info.max).astype(dtype)  # rint: ties to even (ONNX)


# -- quantize / dequantize / requantize ----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32"])
def test_quantize_per_tensor(dtype):
    x = (RNG.standard_normal((3, 7, 5)) * 8).astype("float32")
    x.flat[:4] = [0.25, 0.75, -0.25, -1.25]  # exact ties at scale 0.5: round half to even
    x.flat[4:6] = [1e6, -1e6]  # saturation
    zp = 0 if dtype == "int32" else (3 if dtype == "int8" else 128)
    interp, comp = run_both(lambda a: qnn.op.quantize(a, 0.5, zp, out_dtype=dtype), {"x": x})
    want = ref_quantize(x, 0.5, zp, dtype)
    np.testing.assert_array_equal(interp, want)
    np.testing.assert_array_equal(comp, want)


def test_quantize_per_channel():
    x = (RNG.standard_normal((2, 5, 3, 3)) * 4).astype("float32")
    scale = np.array([0.02, 0.05, 0.1, 0.3, 0.01], "float32")
    zp = np.array([0, -3, 5, 1, 2], "int32")
    interp, comp = run_both(lambda a: qnn.op.quantize(a, scale, zp, axis=1, out_dtype="int8"), {"x": x})
    want = ref_quantize(x, scale, zp, "int8", axis=1)
    np.testing.assert_array_equal(interp, want)
    np.testing.assert_array_equal(comp, want)


def test_dequantize_per_tensor_and_channel():
    x = _rand_q((4, 3, 5), "uint8")
    interp, comp = run_both(lambda a: qnn.op.dequantize(a, 0.125, 130), {"x": x})
    want = ((x.astype(np.float64) - 130) * 0.125).astype("float32")
    np.testing.assert_array_equal(interp, want)
    np.testing.assert_array_equal(comp, want)
    xs = _rand_q((4, 3, 5), "int8")
    sc = np.array([0.1, 0.2, 0.3], "float32")
    interp, comp = run_both(lambda a: qnn.op.dequantize(a, sc, np.array([1, 0, -2], "int32"), axis=1), {"x": xs})
    want = ((xs.astype(np.float32) - np.array([1, 0, -2]).reshape(1, 3, 1)) * sc.reshape(1, 3, 1)).astype("float32")
    np.testing.assert_allclose(interp, want, rtol=1e-7)
    np.testing.assert_array_equal(comp, interp)


@pytest.mark.parametrize("rounding", ["UPWARD", "TONEAREST"])
@pytest.mark.parametrize("out_dtype", ["int8", "uint8", "int32"])
def test_requantize_per_tensor(rounding, out_dtype):
    x = RNG.integers(-3000, 3000, size=(5, 9)).astype("int32")
    x.flat[:6] = [1, -1, 3, -3, 5, -5]  # with s_in/s_out = 0.5: ties, where UPWARD and TONEAREST differ
    for s_in, s_out in ((0.5, 1.0), (0.0371, 0.2113), (0.75, 0.03)):
        zp_out = 0 if out_dtype != "uint8" else 120
        interp, comp = run_both(lambda a: qnn.op.requantize(a, s_in, 2 if s_in != 0.5 else 0, s_out, zp_out,
                                                            rounding=rounding, out_dtype=out_dtype), {"x": x})
        want, v = ref_requantize(x, s_in, 2 if s_in != 0.5 else 0, s_out, zp_out, out_dtype, rounding)
        assert_exact_but_ties(interp, want, v)
        np.testing.assert_array_equal(comp, interp)
        if s_in == 0.5:
            first = comp
    if rounding == "UPWARD" and out_dtype == "int8":
        assert list(first.flat[:6]) == [1, 0, 2, -1, 3, -2]  # ties toward +inf
    if rounding == "TONEAREST" and out_dtype == "int8":
        assert list(first.flat[:6]) == [1, -1, 2, -2, 3, -3]  # ties away from zero


def test_requantize_per_channel_int8_to_uint8():
    x = _rand_q((2, 4, 3, 5), "int8")
    s_in = np.array([0.01, 0.02, 0.005, 0.3], "float32")
    interp, comp = run_both(lambda a: qnn.op.requantize(a, s_in, 0, 0.04, 128, axis=1, rounding="TONEAREST",
                                                        out_dtype="uint8"), {"x": x})
    want, v = ref_requantize(x, s_in, 0, np.float32(0.04), 128, "uint8", "TONEAREST", axis=1)
    assert_exact_but_ties(interp, want, v)
    np.testing.assert_array_equal(comp, interp)


def test_requantize_default_rounding_from_pass_context():
    x = np.array([1, -1, 3, -3], "int32")
    with kiln.transform.PassContext(config={"relay.qnn.default_rounding": "TONEAREST"}):
        interp, _ = run_both(lambda a: qnn.op.requantize(a, 0.5, 0, 1.0, 0, out_dtype="int8"), {"x": x})
    assert list(interp) == [1, -1, 2, -2]


def test_fixed_point_multiplier_matches_frexp():
    from kiln.relay.qnn.op.arith import fixed_point_multiplier_shift
    for m in (0.5, 0.999999999, 1.0, 1.7, 3.1e-5, 2.0 ** -31 * 1.5):
        q, shift = fixed_point_multiplier_shift(m)
        assert 2 ** 30 <= q <= 2 ** 31 - 1
        assert math.isclose(q * 2.0 ** (shift - 31), m, rel_tol=2 ** -30)


def test_simulated_quantize_dequantize():
    x = (RNG.standard_normal((3, 8)) * 3).astype("float32")
    interp, comp = run_both(lambda a: qnn.op.simulated_quantize(a, 0.05, 4, out_dtype="int8"), {"x": x})
    want = ref_quantize(x, 0.05, 4, "int8").astype("float32")
    np.testing.assert_array_equal(interp, want)
    np.testing.assert_array_equal(comp, want)
    interp, comp = run_both(lambda a: qnn.op.simulated_dequantize(a, 0.05, 4, in_dtype="int8"), {"x": want})
    np.testing.assert_array_equal(interp, ((want - 4) * np.float32(0.05)).astype("float32"))
    np.testing.assert_array_equal(comp, interp)


# -- integer accumulations -----------------------------------------------------------------------------------
def _conv_ref(d, k, zp_d, zp_k, stride, pad, groups=1):
    import torch
    kk = k.astype(np.float64) - (np.asarray(zp_k).reshape(-1, 1, 1, 1) if np.ndim(zp_k) else zp_k)
    out = torch.nn.functional.conv2d(torch.tensor(d.astype(np.float64) - zp_d), torch.tensor(kk),
                                     stride=stride, padding=pad, groups=groups)
    return out.numpy().astype(np.int64)


@pytest.mark.parametrize("groups,per_channel", [(1, False), (1, True), (3, True)])
def test_conv2d(groups, per_channel):
    d = _rand_q((1, 6, 9, 7), "uint8")
    k = _rand_q((9, 6 // groups, 3, 3), "int8")
    zp_k = np.array(RNG.integers(-3, 4, 9), "int32") if per_channel else 2
    kscale = np.full(9, 0.02, "float32") if per_channel else 0.02
    interp, comp = run_both(
        lambda a, b: qnn.op.conv2d(a, b, 120, zp_k, 0.1, kscale, kernel_size=(3, 3), channels=9, strides=(2, 1),
                                   padding=(1, 1), groups=groups), {"d": d, "k": k})
    want = _conv_ref(d, k, 120, zp_k, (2, 1), 1, groups)
    np.testing.assert_array_equal(interp, want)
    np.testing.assert_array_equal(comp, want)
    assert comp.dtype == np.int32


def test_dense_and_batch_matmul():
    d = _rand_q((3, 19), "int8")
    w = _rand_q((5, 19), "int8")
    zp_w = np.array([0, 1, -1, 2, 0], "int32")
    interp, comp = run_both(lambda a, b: qnn.op.dense(a, b, -4, zp_w, 0.1, np.full(5, 0.2, "float32"), units=5),
                            {"d": d, "w": w})
    want = (d.astype(np.int64) + 4) @ (w.astype(np.int64) - zp_w[:, None]).T
    np.testing.assert_array_equal(interp, want)
    np.testing.assert_array_equal(comp, want)
    x = _rand_q((2, 3, 11), "uint8")
    y = _rand_q((2, 4, 11), "uint8")
    interp, comp = run_both(lambda a, b: qnn.op.batch_matmul(a, b, 128, 100, 0.1, 0.1), {"x": x, "y": y})
    want = np.matmul(x.astype(np.int64) - 128, (y.astype(np.int64) - 100).transpose(0, 2, 1))
    np.testing.assert_array_equal(interp, want)
    np.testing.assert_array_equal(comp, want)


def test_conv2d_transpose():
    import torch
    d = _rand_q((1, 4, 5, 5), "int8")
    w = _rand_q((4, 3, 3, 3), "int8")  # IOHW
    interp, comp = run_both(lambda a, b: qnn.op.conv2d_transpose(a, b, 1, 2, 0.1, 0.1, strides=(2, 2),
                                                                 padding=(1, 1), channels=3, kernel_size=(3, 3)),
                            {"d": d, "w": w})
    want = torch.nn.functional.conv_transpose2d(torch.tensor(d.astype(np.float64) - 1),
                                                torch.tensor(w.astype(np.float64) - 2), stride=2,
                                                padding=1).numpy().astype(np.int64)
    np.testing.assert_array_equal(interp, want)
    np.testing.assert_array_equal(comp, want)


# -- elementwise ----------------------------------------------------------------------------------------------
def _float_ref(x, s, zp):
    return (x.astype(np.float64) - zp) * np.float64(np.float32(s))


@pytest.mark.parametrize("name", ["add", "subtract", "mul"])
def test_binary(name):
    a = _rand_q((2, 3, 5), "uint8")
    b = _rand_q((3, 1), "uint8")
    params = (0.05, 120, 0.07, 130, 0.11 if name != "mul" else 0.5, 125)
    interp, comp = run_both(lambda x, y: getattr(qnn.op, name)(x, y, *params[:4], *params[4:]), {"a": a, "b": b})
    fa, fb = _float_ref(a, 0.05, 120), _float_ref(b, 0.07, 130)
    real = {"add": fa + fb, "subtract": fa - fb, "mul": fa * fb}[name]
    want = np.clip(np.round(real / np.float64(np.float32(params[4]))) + 125, 0, 255)
    np.testing.assert_array_equal(comp, interp)
    # two rounding steps (each operand requantized, then the sum): within one quantization step
    assert np.max(np.abs(interp.astype(np.int64) - want)) <= 1


def test_concatenate():
    a = _rand_q((2, 3), "int8")
    b = _rand_q((2, 4), "int8")
    interp, comp = run_both(lambda x, y: qnn.op.concatenate([x, y], [0.1, 0.2], [0, 3], 0.15, -1, axis=1),
                            {"a": a, "b": b})
    want_a, _ = ref_requantize(a, 0.1, 0, 0.15, -1, "int8", "UPWARD")
    want_b, _ = ref_requantize(b, 0.2, 3, 0.15, -1, "int8", "UPWARD")
    np.testing.assert_array_equal(interp, np.concatenate([want_a, want_b], axis=1))
    np.testing.assert_array_equal(comp, interp)


@pytest.mark.parametrize("name", ["sigmoid", "tanh", "hardswish", "leaky_relu"])
def test_float_path_unary(name):
    x = _rand_q((3, 17), "int8")
    fx = _float_ref(x, 0.05, 3)
    real = {"sigmoid": 1 / (1 + np.exp(-fx)), "tanh": np.tanh(fx), "hardswish": fx * np.clip(fx + 3, 0, 6) / 6,
            "leaky_relu": np.where(fx > 0, fx, 0.1 * fx)}[name]
    out_s, out_zp = (1 / 256, -128) if name == "sigmoid" else (1 / 128, 0) if name == "tanh" else (0.05, 3)
    if name == "leaky_relu":
        interp, comp = run_both(lambda a: qnn.op.leaky_relu(a, 0.1, 0.05, 3, out_s, out_zp), {"x": x})
    else:
        interp, comp = run_both(lambda a: getattr(qnn.op, name)(a, 0.05, 3, out_s, out_zp), {"x": x})
    want = np.clip(np.round(real / out_s) + out_zp, -128, 127)
    assert np.max(np.abs(interp.astype(np.int64) - want)) <= 1
    assert np.max(np.abs(comp.astype(np.int64) - interp)) <= 1


def test_avg_pool2d():
    x = _rand_q((1, 3, 7, 6), "uint8")
    interp, comp = run_both(lambda a: qnn.op.avg_pool2d(a, 0.1, 128, 0.05, 120, pool_size=(3, 3), strides=(2, 2),
                                                        padding=(1, 1), dilation=(1, 1), count_include_pad=False),
                            {"x": x})
    import torch
    real = torch.nn.functional.avg_pool2d(torch.tensor(_float_ref(x, 0.1, 128)), 3, 2, 1,
                                          count_include_pad=False).numpy()
    want = np.clip(np.round(real / 0.05) + 120, 0, 255)
    assert np.max(np.abs(interp.astype(np.int64) - want)) <= 1
    assert np.max(np.abs(comp.astype(np.int64) - interp)) <= 1


# -- errors -----------------------------------------------------------------------------------------------------
def _infer(expr):
    return relay.transform.InferType()(kiln.IRModule.from_expr(expr))


def test_type_errors_are_clear():
    x8 = relay.var("x", shape=(2, 3), dtype="int8")
    with pytest.raises(KilnError, match="per channel"):
        _infer(qnn.op.requantize(x8, np.ones(4, "float32"), 0, 1.0, 0, axis=1))
    with pytest.raises(KilnError, match="out_dtype"):
        _infer(qnn.op.requantize(x8, 1.0, 0, 1.0, 0, out_dtype="float32"))
    with pytest.raises(KilnError, match="rounding"):
        _infer(qnn.op.requantize(x8, 1.0, 0, 1.0, 0, rounding="DOWN"))
    with pytest.raises(KilnError, match="zero_point must be a int32"):
        _infer(qnn.op.dequantize(x8, 1.0, relay.const(0.5)))
    xf = relay.var("f", shape=(2, 3))
    with pytest.raises(KilnError, match="data must have dtype"):
        _infer(qnn.op.dequantize(xf, 1.0, 0))
    with pytest.raises(KilnError, match="lhs and rhs"):
        _infer(qnn.op.add(x8, relay.var("u", shape=(2, 3), dtype="uint8"), 1.0, 0, 1.0, 0, 1.0, 0))


@pytest.mark.parametrize("target", ["llvm -mcpu=x86-64", "llvm -mcpu=core-avx2", "llvm -mcpu=skylake-avx512"])
def test_build_canonicalizes_and_folds_constant_weights(target):
    """relay.optimize leaves no qnn op. Without an int8 kernel (plain x86-64) the generic canonicalization's
    weight zero-point shift is computed at compile time (int32 weights); with one (AVX2, AVX-512) the x86
    legalization keeps 8-bit weights whose correction terms are folded constants. The weights are drawn from
    a generator of this test's own: which form the legalization picks depends on their range."""
    rng = np.random.default_rng(7)
    d = relay.var("d", shape=(1, 4, 6, 6), dtype="uint8")
    w = relay.const(rng.integers(-128, 128, size=(5, 4, 3, 3)).astype("int8"))
    body = qnn.op.requantize(qnn.op.conv2d(d, w, 100, 3, 0.1, 0.02, kernel_size=(3, 3), channels=5), 0.002, 0,
                             0.05, 10, out_dtype="uint8")
    mod = kiln.IRModule.from_expr(relay.Function([d], body))
    with kiln.transform.PassContext(opt_level=3):
        opt, _ = relay.optimize(mod, target)
    seen = []
    relay.analysis.post_order_visit(opt["main"], lambda e: seen.append(e))
    names = {getattr(e.op, "name", "") for e in seen if isinstance(e, relay.Call)}
    assert not any(n.startswith("qnn.") for n in names), names
    consts = [e for e in seen if isinstance(e, relay.Constant) and e.data.numpy().ndim >= 4]
    assert consts
    if target.endswith("x86-64"):
        assert all(c.data.numpy().dtype != np.int8 for c in consts)  # folded: int32 weights minus zp


def test_canonicalize_ops_pass_equals_interpreter():
    x = relay.var("x", shape=(2, 6), dtype="float32")
    body = qnn.op.dequantize(qnn.op.add(qnn.op.quantize(x, 0.1, 2), qnn.op.quantize(x, 0.05, -1), 0.1, 2, 0.05, -1,
                                        0.2, 0), 0.2, 0)
    mod = relay.transform.InferType()(kiln.IRModule.from_expr(relay.Function([x], body)))
    low = qnn.transform.CanonicalizeOps()(mod)
    seen = []
    relay.analysis.post_order_visit(low["main"], lambda e: seen.append(getattr(getattr(e, "op", None), "name", "")))
    assert not any(n.startswith("qnn.") for n in seen)
    xv = (RNG.standard_normal((2, 6)) * 5).astype("float32")
    a = relay.create_executor("debug", mod=mod).evaluate()(xv).numpy()
    b = relay.create_executor("debug", mod=low).evaluate()(xv).numpy()
    np.testing.assert_array_equal(a, b)


def _lowered_conv_dtypes(body, inputs):
    params = [relay.var(n, shape=v.shape, dtype=str(v.dtype)) for n, v in inputs.items()]
    mod = relay.transform.InferType()(kiln.IRModule.from_expr(relay.Function(params, body(*params))))
    low = qnn.transform.CanonicalizeOps()(mod)
    found = []
    relay.analysis.post_order_visit(low["main"], lambda e: found.append(e.checked_type.dtype) if (
        isinstance(e, relay.Call) and getattr(e.op, "name", "") in ("nn.conv2d", "nn.dense")) else None)
    return found


@pytest.mark.parametrize("k,wmax,path", [(40, 127, "float32"), (3000, 127, "int32")])
def test_dense_float_path_only_when_provably_exact(k, wmax, path):
    """A constant kernel whose partial sums stay below 2**24 runs on the float32 kernels; else int32. Both exact."""
    d = _rand_q((3, k), "uint8")
    w = RNG.integers(-wmax, wmax + 1, (6, k)).astype("int8")
    body = lambda a: qnn.op.dense(a, relay.const(w), 128, 0, 0.1, 0.1, units=6)  # noqa: E731
    assert _lowered_conv_dtypes(body, {"d": d}) == [path]
    interp, comp = run_both(body, {"d": d})
    want = (d.astype(np.int64) - 128) @ w.astype(np.int64).T
    np.testing.assert_array_equal(interp, want)
    np.testing.assert_array_equal(comp, want)


def test_conv2d_constant_kernel_float_path_is_exact():
    d = _rand_q((1, 16, 11, 10), "uint8")
    w = _rand_q((12, 16, 3, 3), "int8")
    zp_k = np.array(RNG.integers(-2, 3, 12), "int32")
    body = lambda a: qnn.op.conv2d(a, relay.const(w), 77, zp_k, 0.1, np.full(12, 0.01, "float32"),  # noqa: E731
                                   kernel_size=(3, 3), channels=12, padding=(1, 1))
    assert _lowered_conv_dtypes(body, {"d": d}) == ["float32"]
    interp, comp = run_both(body, {"d": d})
    want = _conv_ref(d, w, 77, zp_k, 1, 1)
    np.testing.assert_array_equal(interp, want)
    np.testing.assert_array_equal(comp, want)


def test_executors_agree_and_text_round_trips():
    x = relay.var("x", shape=(2, 6), dtype="float32")
    body = qnn.op.dequantize(qnn.op.requantize(qnn.op.quantize(x, 0.1, 2), 0.1, 2, 0.3, -1, rounding="TONEAREST"),
                             0.3, -1)
    mod = relay.transform.InferType()(kiln.IRModule.from_expr(relay.Function([x], body)))
    xv = (RNG.standard_normal((2, 6)) * 4).astype("float32")
    results = [relay.create_executor(kind, mod=mod, target="llvm").evaluate()(xv).numpy()
               for kind in ("debug", "vm", "graph")]
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], results[2])
    again = relay.transform.InferType()(relay.fromtext(mod.astext()))
    assert kiln.ir.structural_equal(again["main"], mod["main"])
