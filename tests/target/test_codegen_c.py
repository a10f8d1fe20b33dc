"""C codegen of hand-built lowered TIR, compiled and run against numpy."""
import numpy as np
import pytest

import kiln
from kiln import tir
from kiln.tir import expr as E, stmt as S
from kiln.target.codegen_c import CodegenError, codegen_c, parallel_loop_marker
from kiln.runtime.dtype import parse_dtype as DataType_of

from target_tir_helpers import buf, prim, build, vector_loop

rng = np.random.default_rng(0)


def nd(x):
    return kiln.nd.array(x)


@pytest.mark.parametrize("n,lanes", [(1037, 8), (64, 8), (5, 8), (37, 4), (29, 7), (13, 1)])
def test_vector_add_parallel(n, lanes):
    A, B, C = buf("A", [n]), buf("B", [n]), buf("C", [n])
    body = vector_loop(n, lanes, lambda i: S.BufferStore(C[1], A[1][i] + B[1][i], [i]), S.ForKind.PARALLEL)
    mod = build(prim("vadd", [A, B, C], body))
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    c = nd(np.zeros(n, np.float32))
    mod["vadd"](nd(a), nd(b), c)
    np.testing.assert_allclose(c.numpy(), a + b, rtol=1e-6)
    src = mod.get_source()
    if n >= lanes:
        assert parallel_loop_marker() in src
    assert "float* restrict A = (float*)args[0].v_handle;" in src
    if lanes > 1 and n >= lanes:
        assert f"kiln_f32x{lanes}" in src


def test_symbolic_length_and_shape_expr():
    n = tir.SizeVar("n", "int32")
    A, C = buf("A", [n]), buf("C", [n * 2])
    i = tir.Var("i", "int32")
    body = S.For(i, 0, n * 2, S.ForKind.SERIAL, S.BufferStore(C[1], A[1][E.FloorDiv(i, tir.const(2))] * 3.0, [i]))
    f = prim("scale", [A, C], body)
    _, meta = codegen_c([("scale", f)])
    assert meta[0]["shape_vars"] == ["n"]
    assert meta[0]["args"][1]["shape"] == [{"expr": "(n * 2)"}]
    assert meta[0]["args"][1]["output"] is True and "output" not in meta[0]["args"][0]
    mod = build(f)
    a = rng.random(7, dtype=np.float32)
    c = nd(np.zeros(14, np.float32))
    mod["scale"](nd(a), c)
    np.testing.assert_allclose(c.numpy(), np.repeat(a, 2) * 3, rtol=1e-6)
    with pytest.raises(kiln.KilnError):
        mod["scale"](nd(a), nd(np.zeros(13, np.float32)))


@pytest.mark.parametrize("dtype", ["int32", "int64", "int8", "int16"])
@pytest.mark.parametrize("lanes", [1, 4, 7])
def test_floordiv_floormod_negative(dtype, lanes):
    n = 61
    A, B, Q, R, T, M = (buf(x, [n], dtype) for x in "ABQRTM")

    def store(i):
        a, b = A[1][i], B[1][i]
        return S.SeqStmt([S.BufferStore(Q[1], E.FloorDiv(a, b), [i]), S.BufferStore(R[1], E.FloorMod(a, b), [i]),
                          S.BufferStore(T[1], E.Div(a, b), [i]), S.BufferStore(M[1], E.Mod(a, b), [i])])
    mod = build(prim("divmod", [A, B, Q, R, T, M], vector_loop(n, lanes, store)))
    a = rng.integers(-100, 100, n).astype(dtype)
    b = rng.integers(1, 9, n).astype(dtype) * rng.choice([-1, 1], n).astype(dtype)
    outs = [nd(np.zeros(n, dtype)) for _ in range(4)]
    mod["divmod"](nd(a), nd(b), *outs)
    np.testing.assert_array_equal(outs[0].numpy(), a // b)
    np.testing.assert_array_equal(outs[1].numpy(), a % b)
    np.testing.assert_array_equal(outs[2].numpy(), np.fix(a / b).astype(dtype))
    np.testing.assert_array_equal(outs[3].numpy(), np.fmod(a, b))


def test_floordiv_simplified_for_nonnegative_index():
    n = 16
    A, C = buf("A", [n]), buf("C", [n])
    i = tir.Var("i", "int32")
    body = S.For(i, 0, n, S.ForKind.SERIAL, S.BufferStore(C[1], A[1][E.FloorMod(i + 3, tir.const(16))], [i]))
    src, _ = codegen_c([("f", prim("f", [A, C], body))])
    assert "kiln_floormod" not in src and "% 16" in src
    mod = build(prim("f", [A, C], body))
    a = rng.random(n, dtype=np.float32)
    c = nd(np.zeros(n, np.float32))
    mod["f"](nd(a), c)
    np.testing.assert_array_equal(c.numpy(), a[(np.arange(n) + 3) % 16])


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


UNARY = {
    "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: 10.0 ** x, "log": np.log, "log2": np.log2,
    "log10": np.log10, "log1p": np.log1p, "expm1": np.expm1, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "asinh": np.arcsinh, "acosh": np.arccosh,
    "atanh": np.arctanh, "erf": None, "sigmoid": _sigmoid, "floor": np.floor, "ceil": np.ceil,
    "trunc": np.trunc, "round": np.round, "nearbyint": np.round, "abs": np.abs,
}
DOMAIN = {"log": (0.1, 4), "log2": (0.1, 4), "log10": (0.1, 4), "sqrt": (0.1, 4), "rsqrt": (0.1, 4),
          "asin": (-0.9, 0.9), "acos": (-0.9, 0.9), "atanh": (-0.9, 0.9), "acosh": (1.1, 4), "log1p": (-0.5, 4)}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("lanes", [1, 8])
def test_every_intrinsic(dtype, lanes):
    import math
    n = 43
    names = list(UNARY)
    A = buf("A", [n], dtype)
    outs = [buf(f"O_{k}", [n], dtype) for k in names]

    def store(i):
        x = A[1][i]
        return S.SeqStmt([S.BufferStore(o[1], getattr(tir, k)(x), [i]) for k, o in zip(names, outs)])
    mod = build(prim("intrin", [A] + outs, vector_loop(n, lanes, store)))
    a = rng.uniform(-3, 3, n).astype(dtype)
    a[:4] = [0.5, 1.5, 2.5, -2.5]  # half-way cases: round is half-to-even like numpy
    arrays = [nd(np.zeros(n, dtype)) for _ in names]
    mod["intrin"](nd(a), *arrays)
    tol = 2e-5 if dtype == "float32" else 1e-12
    for k, arr in zip(names, arrays):
        lo, hi = DOMAIN.get(k, (-np.inf, np.inf))
        mask = (a >= lo) & (a <= hi)
        with np.errstate(all="ignore"):
            ref = np.vectorize(math.erf)(a) if k == "erf" else UNARY[k](a.astype("float64"))
        np.testing.assert_allclose(arr.numpy()[mask], ref[mask].astype(dtype), rtol=tol, atol=tol, err_msg=k)


@pytest.mark.parametrize("lanes", [1, 8])
def test_predicates_pow_and_select(lanes):
    n = 21
    A, B = buf("A", [n]), buf("B", [n])
    N, I, F, P, Sel, Mx = buf("N", [n], "bool"), buf("I", [n], "bool"), buf("F", [n], "bool"), \
        buf("P", [n]), buf("Sel", [n]), buf("Mx", [n])

    def store(i):
        a, b = A[1][i], B[1][i]
        return S.SeqStmt([
            S.BufferStore(N[1], tir.isnan(a), [i]), S.BufferStore(I[1], tir.isinf(a), [i]),
            S.BufferStore(F[1], tir.isfinite(a), [i]), S.BufferStore(P[1], tir.power(tir.abs(a), b), [i]),
            S.BufferStore(Sel[1], tir.Select(tir.all(a > b, a > 0.0), a, b), [i]),
            S.BufferStore(Mx[1], tir.max(a, b) - tir.min(a, b), [i])])
    mod = build(prim("pred", [A, B, N, I, F, P, Sel, Mx], vector_loop(n, lanes, store)))
    a = rng.uniform(-2, 2, n).astype("float32")
    a[1], a[2], a[3] = np.nan, np.inf, -np.inf
    b = rng.uniform(-2, 2, n).astype("float32")
    outs = [nd(np.zeros(n, "bool")) for _ in range(3)] + [nd(np.zeros(n, "float32")) for _ in range(3)]
    mod["pred"](nd(a), nd(b), *outs)
    np.testing.assert_array_equal(outs[0].numpy(), np.isnan(a))
    np.testing.assert_array_equal(outs[1].numpy(), np.isinf(a))
    np.testing.assert_array_equal(outs[2].numpy(), np.isfinite(a))
    ok = np.isfinite(a)
    np.testing.assert_allclose(outs[3].numpy()[ok], (np.abs(a) ** b)[ok], rtol=1e-5)
    with np.errstate(invalid="ignore"):
        sel = np.where((a > b) & (a > 0), a, b)
    np.testing.assert_array_equal(outs[4].numpy()[ok], sel[ok])
    np.testing.assert_allclose(outs[5].numpy()[ok], np.abs(a - b)[ok], rtol=1e-6)


def _with_lanes(dtype, like):
    lanes = DataType_of(like.dtype).lanes
    return dtype if lanes == 1 else f"{dtype}x{lanes}"


DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lanes", [1, 4])
def test_every_dtype_arith_and_casts(dtype, lanes):
    n = 23
    A, B, C = buf("A", [n], dtype), buf("B", [n], dtype), buf("C", [n], dtype)
    F, G = buf("F", [n], "float32"), buf("G", [n], "bool")

    def store(i):
        a, b = A[1][i], B[1][i]
        return S.SeqStmt([S.BufferStore(C[1], a * b + a - b, [i]),
                          S.BufferStore(F[1], tir.Cast(_with_lanes("float32", a), a), [i]),
                          S.BufferStore(G[1], a < b, [i])])
    mod = build(prim("dt", [A, B, C, F, G], vector_loop(n, lanes, store)))
    if dtype.startswith("float"):
        a, b = rng.uniform(-4, 4, n).astype(dtype), rng.uniform(-4, 4, n).astype(dtype)
    elif dtype.startswith("uint"):
        a, b = rng.integers(0, 11, n).astype(dtype), rng.integers(0, 11, n).astype(dtype)
    else:
        a, b = rng.integers(-10, 11, n).astype(dtype), rng.integers(-10, 11, n).astype(dtype)
    c, f, g = nd(np.zeros(n, dtype)), nd(np.zeros(n, "float32")), nd(np.zeros(n, "bool"))
    mod["dt"](nd(a), nd(b), c, f, g)
    with np.errstate(over="ignore"):
        ref = (a * b + a - b).astype(dtype)
    if dtype == "float16":
        np.testing.assert_allclose(c.numpy(), ref, rtol=2e-2, atol=2e-2)
    elif dtype.startswith("float"):  # a*b+a may contract to an FMA
        np.testing.assert_allclose(c.numpy(), ref, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(c.numpy(), ref)
    np.testing.assert_array_equal(f.numpy(), a.astype("float32"))
    np.testing.assert_array_equal(g.numpy(), a < b)


def test_bool_logic_and_int_bitwise():
    n = 19
    A, B, O, X = buf("A", [n], "bool"), buf("B", [n], "bool"), buf("O", [n], "bool"), buf("X", [n], "int32")
    i = tir.Var("i", "int32")
    body = S.For(i, 0, n, S.ForKind.SERIAL, S.SeqStmt([
        S.BufferStore(O[1], tir.any(tir.all(A[1][i], tir.logical_not(B[1][i])), tir.all(B[1][i], A[1][i])), [i]),
        S.BufferStore(X[1], ((i << 2) | 1) ^ (i & 6) + tir.Cast("int32", A[1][i]), [i])]))
    mod = build(prim("logic", [A, B, O, X], body))
    a, b = rng.random(n) > 0.5, rng.random(n) > 0.5
    o, x = nd(np.zeros(n, "bool")), nd(np.zeros(n, "int32"))
    mod["logic"](nd(a), nd(b), o, x)
    np.testing.assert_array_equal(o.numpy(), (a & ~b) | (b & a))
    idx = np.arange(n, dtype="int32")
    np.testing.assert_array_equal(x.numpy(), ((idx << 2) | 1) ^ ((idx & 6) + a.astype("int32")))


@pytest.mark.parametrize("size", [64, 100000])
def test_allocate_stack_and_heap(size):
    A, C = buf("A", [size]), buf("C", [size])
    tmp = tir.Var("tmp", "handle")
    T = tir.decl_buffer([size], "float32", "tmp", data=tmp)
    i, j = tir.Var("i", "int32"), tir.Var("j", "int32")
    body = S.Allocate(tmp, "float32", [size], tir.const(True), S.SeqStmt([
        S.For(i, 0, size, S.ForKind.SERIAL, S.BufferStore(T, A[1][i] * 2.0, [i])),
        S.For(j, 0, size, S.ForKind.SERIAL, S.BufferStore(C[1], T[size - 1 - j] + 1.0, [j]))]))
    f = prim("alloc", [A, C], body)
    src, _ = codegen_c([("alloc", f)])
    if size * 4 <= 32 * 1024:
        assert "__attribute__((aligned(64)))" in src and "kiln_alloc(" not in src
    else:
        assert "kiln_alloc(" in src and "free(tmp);" in src
    mod = build(f)
    a = rng.random(size, dtype=np.float32)
    c = nd(np.zeros(size, np.float32))
    mod["alloc"](nd(a), c)
    np.testing.assert_allclose(c.numpy(), a[::-1] * 2 + 1, rtol=1e-6)


def test_symbolic_allocate_in_parallel_with_assert():
    n = tir.SizeVar("n", "int32")
    m = tir.SizeVar("m", "int32")
    A, C = buf("A", [n, m]), buf("C", [n, m])
    tmp = tir.Var("row", "handle")
    T = tir.decl_buffer([m], "float32", "row", data=tmp)
    i, j, k = tir.Var("i", "int32"), tir.Var("j", "int32"), tir.Var("k", "int32")
    inner = S.Allocate(tmp, "float32", [m], tir.const(True), S.SeqStmt([
        S.For(j, 0, m, S.ForKind.SERIAL, S.BufferStore(T, A[1][i * m + j], [j])),
        S.AssertStmt(T[0] >= 0.0, "row must start non-negative",
                     S.For(k, 0, m, S.ForKind.PARALLEL, S.BufferStore(C[1], T[m - 1 - k], [i * m + k])))]))
    body = S.For(i, 0, n, S.ForKind.PARALLEL, inner)
    f = prim("rev", [A, C], body)
    src, _ = codegen_c([("rev", f)])
    assert src.count(parallel_loop_marker()) == 1 and "nested parallel loop" in src
    assert "goto kiln_par_end_" in src and "free(row);" in src
    mod = build(f)
    a = rng.random((9, 7), dtype=np.float32)
    c = nd(np.zeros((9, 7), np.float32))
    mod["rev"](nd(a), c)
    np.testing.assert_array_equal(c.numpy(), a[:, ::-1])
    for row in (3, 7, 8):  # rows of the calling thread and of the other OpenMP thread
        bad = a.copy()
        bad[row, 0] = -1
        with pytest.raises(kiln.KilnError, match="row must start non-negative"):
            mod["rev"](nd(bad), c)
    mod["rev"](nd(a), c)
    np.testing.assert_array_equal(c.numpy(), a[:, ::-1])


def test_assert_let_and_lazy_if_then_else():
    n = 50
    A, C = buf("A", [n]), buf("C", [n])
    i = tir.Var("i", "int32")
    x = tir.Var("x", "float32")
    nb = tir.Var("nb", "int32")
    # C[i] = i > 0 ? A[i-1] : 0, written with if_then_else so i = 0 never reads A[-1]
    val = tir.if_then_else(i > 0, A[1][i - 1], tir.const(0.0))
    body = S.LetStmt(nb, tir.const(n), S.AssertStmt(nb == n if False else tir.const(True), "unused", S.For(
        i, 0, nb, S.ForKind.SERIAL, S.BufferStore(C[1], E.Let(x, val, x * x + 1.0), [i]))))
    mod = build(prim("shift", [A, C], body))
    a = rng.random(n, dtype=np.float32)
    c = nd(np.zeros(n, np.float32))
    mod["shift"](nd(a), c)
    ref = np.concatenate([[0.0], a[:-1]]).astype("float32")
    np.testing.assert_allclose(c.numpy(), ref * ref + 1, rtol=1e-6)


def test_vector_if_then_else_and_strided_ramps():
    n = 16
    A, C, D = buf("A", [2 * n]), buf("C", [n]), buf("D", [2 * n])
    io = tir.Var("io", "int32")
    ramp = E.Ramp(io * 8, tir.const(1), 8)
    even = E.Ramp(io * 16, tir.const(2), 8)   # stride-2 gather / scatter
    cond = ramp > E.Broadcast(tir.const(3), 8)
    val = tir.if_then_else(cond, A[1][even], E.Broadcast(tir.const(-1.0), 8))
    body = S.For(io, 0, n // 8, S.ForKind.SERIAL, S.SeqStmt([
        S.BufferStore(C[1], val, [ramp]), S.BufferStore(D[1], A[1][even] * 2.0, [even + 1]),
        S.BufferStore(D[1], E.Broadcast(tir.const(7.0), 8), [even])]))
    mod = build(prim("gs", [A, C, D], body))
    a = rng.random(2 * n, dtype=np.float32)
    c, d = nd(np.zeros(n, np.float32)), nd(np.zeros(2 * n, np.float32))
    mod["gs"](nd(a), c, d)
    ref = np.where(np.arange(n) > 3, a[::2], -1)
    np.testing.assert_allclose(c.numpy(), ref, rtol=1e-6)
    rd = np.zeros(2 * n, np.float32)
    rd[1::2] = a[::2] * 2
    rd[::2] = 7
    np.testing.assert_allclose(d.numpy(), rd, rtol=1e-6)


def test_unrolled_loop_and_call_extern_and_comment():
    n = 8
    A, C = buf("A", [n]), buf("C", [n])
    i = tir.Var("i", "int32")
    body = S.For(i, 0, n, S.ForKind.UNROLLED, S.BufferStore(C[1], tir.call_extern("float32", "fabsf", A[1][i]), [i]))
    f = prim("unr", [A, C], body, attrs={"relay_op": "abs"})
    src, _ = codegen_c([("unr", f)])
    assert "#pragma GCC unroll 8" in src and "relay_op: abs" in src
    assert "  for (int32_t i = 0; i < 8; ++i) {" in src
    mod = build(f)
    a = rng.uniform(-1, 1, n).astype("float32")
    c = nd(np.zeros(n, np.float32))
    mod["unr"](nd(a), c)
    np.testing.assert_array_equal(c.numpy(), np.abs(a))


def test_thread_binding_is_rejected():
    A = buf("A", [4])
    i = tir.Var("threadIdx_x", "int32")
    iv = E.IterVar((0, 4), i, E.IterVar.ThreadIndex, "threadIdx.x")
    body = S.For(i, 0, 4, S.ForKind.THREAD_BINDING, S.BufferStore(A[1], tir.const(1.0), [i]), thread_binding=iv)
    with pytest.raises(CodegenError, match="GPU thread axis 'threadIdx.x'"):
        codegen_c([("g", prim("g", [A], body))])


def test_undefined_variable_is_reported():
    A = buf("A", [4])
    ghost = tir.Var("ghost", "int32")
    body = S.BufferStore(A[1], tir.Cast("float32", ghost), [tir.const(0)])
    with pytest.raises(CodegenError, match="ghost"):
        codegen_c([("g", prim("g", [A], body))])


def test_scalar_params_and_several_functions():
    n = 10
    A, C = buf("A", [n]), buf("C", [n])
    alpha, k = tir.Var("alpha", "float32"), tir.Var("k", "int64")
    i = tir.Var("i", "int32")
    f1 = prim("axpb", [A, C, alpha, k], S.For(i, 0, n, S.ForKind.SERIAL, S.BufferStore(
        C[1], A[1][i] * alpha + tir.Cast("float32", k), [i])))
    j = tir.Var("j", "int32")
    f2 = prim("neg", [A, C], S.For(j, 0, n, S.ForKind.SERIAL, S.BufferStore(C[1], -A[1][j], [j])))
    mod = build(f1, f2)
    a = rng.random(n, dtype=np.float32)
    c = nd(np.zeros(n, np.float32))
    mod["axpb"](nd(a), c, 2.5, 3)
    np.testing.assert_allclose(c.numpy(), a * 2.5 + 3, rtol=1e-6)
    mod["neg"](nd(a), c)
    np.testing.assert_array_equal(c.numpy(), -a)


def test_keyword_and_library_function_names():
    A = buf("A", [3])
    body = S.BufferStore(A[1], tir.const(2.0), [tir.const(0)])
    mod = build(prim("double", [A], body))
    assert '__asm__("double")' in mod.get_source()
    a = nd(np.zeros(3, np.float32))
    mod["double"](a)
    assert a.numpy()[0] == 2.0
    with pytest.raises(CodegenError, match="clashes with a C library"):
        codegen_c([("expf", prim("expf", [A], body))])


def test_floordiv_of_loop_offset_uses_analyzer():
    # (i - 2) // 4 with i in [2, 10): non-negative only with the loop range known
    n = 8
    A, C = buf("A", [n]), buf("C", [n])
    i = tir.Var("i", "int32")
    body = S.For(i, 2, n, S.ForKind.SERIAL, S.BufferStore(C[1], A[1][E.FloorDiv(i - 2, tir.const(4))], [i - 2]))
    src, _ = codegen_c([("fd", prim("fd", [A, C], body))])
    assert "kiln_floordiv" not in src


def test_lower_intrin_runs_once_in_the_driver_and_the_printer_names_it(monkeypatch):
    """kiln.build runs LowerIntrin once, before the backend; codegen_c only prints, so an unlowered
    intrinsic handed to it directly is an error that names the missing pass."""
    from kiln import te
    from kiln.tir.transform import lower_intrin
    calls = []

    class Counting(lower_intrin._IntrinLowerer):
        def __init__(self, *args, **kwargs):
            calls.append(args)
            super().__init__(*args, **kwargs)
    monkeypatch.setattr(lower_intrin, "_IntrinLowerer", Counting)
    A = te.placeholder((7,), name="A")
    B = te.compute((7,), lambda i: te.exp(A[i]) + tir.floormod(A[i], tir.const(2.0)), name="B")
    f = kiln.build(te.create_schedule(B.op), [A, B], target="llvm -mcpu=core-avx2", name="ef")
    assert len(calls) == 1
    a = rng.standard_normal(7).astype("float32")
    b = nd(np.zeros(7, np.float32))
    f(nd(a), b)
    np.testing.assert_allclose(b.numpy(), np.exp(a) + np.mod(a, 2.0), rtol=1e-5, atol=1e-6)
    unlowered = kiln.lower(te.create_schedule(B.op), [A, B], name="ef")["ef"]
    with pytest.raises(CodegenError, match="LowerIntrin"):
        codegen_c([("ef", unlowered)])
