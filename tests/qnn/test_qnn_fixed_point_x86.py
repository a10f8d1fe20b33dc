"""qnn.requantize on C-backend CPU targets lowers to ``fixed_point_multiply_broadcast`` (one vpmuldq-based C
helper per 8 int32 lanes): bit for bit TVM's int64 definition, checked against ``arith.requantize`` (written from
the definition) on the full int32 range, multipliers above 1 (left shifts), tiny ones, per-channel scales, both
roundings, and shapes whose lanes are not a multiple of 8; plus the op's own type errors and numpy reference."""
import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.contrib import graph_executor
from kiln.error import KilnError
from kiln.relay import qnn
from kiln.relay.qnn.op import arith
from kiln.relay.qnn.op._fixed_point import reference as fpm_reference

TARGET = "llvm"  # the host; the helper's AVX2 path or its scalar loop (same results) is compiled for it
RNG = np.random.default_rng(23)


def _ops(mod):
    names = []
    relay.analysis.post_order_visit(mod["main"], lambda e: names.append(e.op.name) if isinstance(e, relay.Call)
                                    and hasattr(e.op, "name") else None)
    return names


def _run(body, x):
    p = relay.var("x", shape=x.shape, dtype=str(x.dtype))
    mod = kiln.IRModule.from_expr(relay.Function([p], body(p)))
    with kiln.transform.PassContext(opt_level=3):
        opt, _ = relay.optimize(mod, TARGET)
        lib = relay.build(mod, TARGET)
    m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    m.set_input(x=x)
    m.run()
    return opt, m.get_output(0).numpy()


def _extreme_ints(shape):
    x = RNG.integers(-2 ** 31, 2 ** 31, shape, dtype=np.int64)
    flat = x.reshape(-1)
    flat[:6] = [-2 ** 31, 2 ** 31 - 1, 0, -1, 1, -(2 ** 20) - 1][:flat.size]
    return x.astype("int32")


@pytest.mark.parametrize("rounding", ["UPWARD", "TONEAREST"])
@pytest.mark.parametrize("in_scale,out_scale", [(0.001, 0.37), (0.5, 0.6), (3.0, 0.7), (1e-12, 1.0), (0.25, 1.0)])
def test_requantize_per_tensor_matches_definition(rounding, in_scale, out_scale):
    x = _extreme_ints((2, 5, 7, 3))
    if in_scale / out_scale > 1:  # keep x * m within int32 (beyond it TVM's lowering wraps where numpy clips)
        x = (x // 8).astype("int32")
    body = lambda v: qnn.op.requantize(v, in_scale, 3, out_scale, -4, rounding=rounding,  # noqa: E731
                                       out_dtype="int32")
    opt, out = _run(body, x)
    assert "fixed_point_multiply_broadcast" in _ops(opt)
    want = arith.requantize(x, in_scale, 3, out_scale, -4, "int32", rounding)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("rounding", ["UPWARD", "TONEAREST"])
@pytest.mark.parametrize("c", [5, 16, 19])
def test_requantize_per_channel_matches_definition(rounding, c):
    """Per-channel multipliers from tiny to above 1 (mixed left and right shifts, the general helper) and
    all below 1/4 (the high-word form under UPWARD); small accumulators near rounding ties."""
    x = RNG.integers(-5000, 5000, (1, c, 6, 9)).astype("int32")
    for s_in in (np.geomspace(1e-5, 3.0, c).astype("float32"), np.geomspace(1e-5, 0.2, c).astype("float32")):
        body = lambda v: qnn.op.requantize(v, s_in, 0, 1.0, 7, axis=1, rounding=rounding,  # noqa: E731
                                           out_dtype="int8")
        _, out = _run(body, x)
        np.testing.assert_array_equal(out, arith.requantize(x, s_in, 0, 1.0, 7, "int8", rounding, axis=1))


def test_ties_round_as_defined():
    """x * 0.5 at odd x: exact ties, UPWARD toward +inf, TONEAREST away from zero."""
    x = np.arange(-9, 10, dtype="int32").reshape(1, 19)
    for rounding, want in (("UPWARD", np.floor(x / 2 + 0.5)), ("TONEAREST", np.sign(x) * np.floor(np.abs(x) / 2 + 0.5))):
        body = lambda v: qnn.op.requantize(v, 0.5, 0, 1.0, 0, rounding=rounding, out_dtype="int32")  # noqa: E731
        _, out = _run(body, x)
        np.testing.assert_array_equal(out, want.astype("int32"))


def test_op_reference_and_type_errors():
    x = np.array([[-7, 7, 2 ** 31 - 1, -2 ** 31]], "int32")
    m, left, right = (np.array([[1 << 30]], "int32"), np.array([[1]], "int32"), np.array([[33]], "int32"))
    # ((x << 1) * 2**30 + 2**32) >> 33 = round_half_up(x / 4)
    np.testing.assert_array_equal(fpm_reference(x, m, left, right, "UPWARD"), np.floor(x / 4 + 0.5).astype("int32"))
    v = relay.var("v", shape=(2, 3), dtype="int32")
    bad = relay.op.op.get("fixed_point_multiply_broadcast")
    call = relay.Call(bad, [v, relay.const(np.ones((4,), "int32")), relay.const(np.int32(0)),
                            relay.const(np.int32(31))], bad.make_attrs(rounding="UPWARD"))
    with pytest.raises(KilnError, match="does not broadcast"):
        relay.transform.InferType()(kiln.IRModule.from_expr(relay.Function([v], call)))
    call = relay.Call(bad, [v, relay.const(np.int32(1)), relay.const(np.int32(0)), relay.const(np.int32(31))],
                      bad.make_attrs(rounding="TONEAREST", high_word=True))
    with pytest.raises(KilnError, match="high_word"):
        relay.transform.InferType()(kiln.IRModule.from_expr(relay.Function([v], call)))


def test_topi_rejects_wrong_dtypes():
    from kiln import te
    from kiln.topi.x86.fixed_point_int8 import fixed_point_multiply
    x = te.placeholder((4,), "int64", name="x")
    p = te.placeholder((1,), "int32", name="p")
    with pytest.raises(KilnError, match="data must be int32"):
        fixed_point_multiply(x, p, p, p)


def _high_word_flags(mod):
    flags = []
    relay.analysis.post_order_visit(mod["main"], lambda e: flags.append(bool(e.attrs.high_word))
                                    if isinstance(e, relay.Call) and getattr(e.op, "name", "")
                                    == "fixed_point_multiply_broadcast" else None)
    return flags


@pytest.mark.parametrize("dtype,zp_in", [("uint8", 0), ("uint8", 255), ("uint8", 131), ("int8", -128),
                                         ("int8", 127), ("int8", 5)])
@pytest.mark.parametrize("in_scale,out_scale", [(0.5, 0.6), (3.0, 0.7), (0.26, 1.0), (0.25, 1.0), (1e-12, 1.0),
                                                (1.0, 1.0001), (200.0, 0.9)])
def test_requantize_of_8bit_input_takes_the_high_word_form_exactly(dtype, zp_in, in_scale, out_scale):
    """An 8-bit input less a constant zero point is within 255: the lowering pre-shifts it left so that every
    right shift reaches 33 (the int32-lane high-word form, also for multipliers >= 1/4 and left shifts), with
    UPWARD rounding bit for bit the definition on every input value (ties included)."""
    lo, hi = arith.qrange(dtype)
    x = np.arange(lo, hi + 1).astype(dtype).reshape(1, 16, 4, 4)
    body = lambda v: qnn.op.requantize(v, in_scale, zp_in, out_scale, 7, rounding="UPWARD",  # noqa: E731
                                       out_dtype="int32")
    opt, out = _run(body, x)
    assert _high_word_flags(opt) == [True]  # every multiplier above fits the pre-shift (255 << 10 at most)
    want = arith.requantize(x, in_scale, zp_in, out_scale, 7, "int32", "UPWARD")
    np.testing.assert_array_equal(out, want)


def test_requantize_of_8bit_input_per_channel_and_fallbacks():
    """Per-channel multipliers on an 8-bit input (each channel its own pre-shift); TONEAREST keeps the general
    form; an int32 input has no bound and keeps it too; a huge multiplier (the pre-shift would overflow) too."""
    x = RNG.integers(0, 256, (1, 5, 3, 7)).astype("uint8")
    x.reshape(-1)[:2] = [0, 255]
    scales = np.array([0.01, 0.3, 1.7, 0.249, 0.26], "float32")
    body = lambda v: qnn.op.requantize(v, scales, 100, 0.3, 3, axis=1, rounding="UPWARD",  # noqa: E731
                                       out_dtype="uint8")
    opt, out = _run(body, x)
    assert _high_word_flags(opt) == [True]
    np.testing.assert_array_equal(out, arith.requantize(x, scales, 100, 0.3, 3, "uint8", "UPWARD", axis=1))
    body = lambda v: qnn.op.requantize(v, 0.5, 100, 0.6, 3, rounding="TONEAREST", out_dtype="int32")  # noqa: E731
    opt, out = _run(body, x)
    assert _high_word_flags(opt) == [False]
    np.testing.assert_array_equal(out, arith.requantize(x, 0.5, 100, 0.6, 3, "int32", "TONEAREST"))
    body = lambda v: qnn.op.requantize(v, 2.0 ** 22, 100, 1.0, 0, rounding="UPWARD", out_dtype="int32")  # noqa: E731
    opt, out = _run(body, x)
    assert _high_word_flags(opt) == [False]
    np.testing.assert_array_equal(out, arith.requantize(x, 2.0 ** 22, 100, 1.0, 0, "int32", "UPWARD"))
    xi = (x.astype("int32") - 100)
    opt, out = _run(lambda v: qnn.op.requantize(v, 0.5, 0, 0.6, 0, rounding="UPWARD", out_dtype="int32"), xi)
    assert _high_word_flags(opt) == [False]
    np.testing.assert_array_equal(out, arith.requantize(xi, 0.5, 0, 0.6, 0, "int32", "UPWARD"))


def _fpm_16_lanes(rounding, high_word, target):
    """fixed_point_multiply over (5, 64) int32 with per-element parameters, vectorized 16 lanes wide (one zmm on
    AVX-512: the helper's 16-lane form)."""
    from kiln import te
    from kiln.topi.x86.fixed_point_int8 import fixed_point_multiply
    shape = (5, 64)
    x, m, l, r = (te.placeholder(shape, "int32", name=n) for n in "xmlr")
    out = fixed_point_multiply(x, m, l, r, rounding=rounding, high_word=high_word)
    s = te.create_schedule(out.op)
    _, inner = s[out].split(out.op.axis[1], factor=16)
    s[out].vectorize(inner)
    return kiln.build(s, [x, m, l, r, out], target=target), shape


@pytest.mark.parametrize("rounding,high_word", [("UPWARD", False), ("TONEAREST", False), ("UPWARD", True)])
def test_sixteen_lane_form_on_the_host_matches_the_definition(rounding, high_word):
    """The helper's 16-lane form (native zmm on an AVX-512 host, two AVX2 halves or the scalar loop elsewhere)
    against the int64 definition: the full int32 range with ties, normalized multipliers as the lowering makes
    them, left shifts 0-3 with x bounded so x << l stays in int32, right shifts 31-62 (33-62, l = 0 for the
    high-word form)."""
    f, shape = _fpm_16_lanes(rounding, high_word, TARGET)
    for trial in range(3):
        m = RNG.integers(2 ** 30, 2 ** 31, shape).astype("int32")
        if high_word:
            l = np.zeros(shape, "int32")
            r = RNG.integers(33, 63, shape).astype("int32")
        else:
            l = RNG.integers(0, 4, shape).astype("int32")
            r = RNG.integers(31, 63, shape).astype("int32")
        x = (_extreme_ints(shape).astype(np.int64) >> l).astype("int32")
        if trial == 2:  # exact ties: x * m a multiple of 2 ** (r - 1) with an odd quotient
            r = np.full(shape, 40 if high_word else 35, "int32")
            m = np.full(shape, 2 ** 30, "int32")
            l = np.zeros(shape, "int32")
            x = (RNG.integers(-2 ** 12, 2 ** 12, shape) * 2 + 1).astype("int32") * 2 ** (int(r[0, 0]) - 1 - 30)
        out = kiln.nd.empty(shape, "int32")
        f(*(kiln.nd.array(a) for a in (x, m, l, r)), out)
        np.testing.assert_array_equal(out.numpy(), fpm_reference(x, m, l, r, rounding))


@pytest.mark.parametrize("high_word", [False, True])
def test_sixteen_lane_form_is_native_zmm_for_avx512(high_word):
    """Compiled, not run: for skylake-avx512 the 16-lane form is one zmm core (vpmuldq, vpsravq or vpsravd, a
    mask blend), not two AVX2 halves extracted and reinserted."""
    f, _ = _fpm_16_lanes("UPWARD", high_word, "llvm -mcpu=skylake-avx512")
    src = f.get_source()
    assert "kiln_qms16_" in src and "_mm512_extracti64x4_epi64" not in src
    assert ("_mm512_srav_epi32" if high_word else "_mm512_srav_epi64") in src
