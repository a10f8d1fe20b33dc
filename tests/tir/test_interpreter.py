"""The reference interpreter against numpy."""
import numpy as np
import pytest

from kiln import tir
from kiln.tir import ForKind as K
from kiln.tir.interpreter import run_primfunc, eval_expr, InterpreterError

from tir_helpers import make_func, loop


def test_symbolic_shape_vector_add():
    n = tir.Var("n")
    A, B, C = (tir.decl_buffer((n,), "float32", x) for x in "ABC")
    i = tir.Var("i")
    f = make_func([A, B, C], loop(i, n, tir.BufferStore(C, A[i] + B[i], [i])))
    for size in (1, 7, 33):
        a, b = np.random.rand(size).astype("float32"), np.random.rand(size).astype("float32")
        c = np.zeros(size, "float32")
        run_primfunc(f, [a, b, c])
        np.testing.assert_allclose(c, a + b, rtol=1e-6)


def test_matmul_with_realize_and_reduction():
    n, m, k = 5, 7, 3
    A = tir.decl_buffer((n, k), "float32", "A")
    B = tir.decl_buffer((k, m), "float32", "B")
    C = tir.decl_buffer((n, m), "float32", "C")
    T = tir.decl_buffer((n, m), "float32", "T")   # intermediate, realized
    i, j, r = tir.Var("i"), tir.Var("j"), tir.Var("r")
    init = tir.BufferStore(T, tir.const(0.0), [i, j])
    upd = loop(r, k, tir.BufferStore(T, T[i, j] + A[i, r] * B[r, j], [i, j]))
    comp = loop(i, n, loop(j, m, tir.SeqStmt([init, upd])))
    copy = loop(i, n, loop(j, m, tir.BufferStore(C, T[i, j] * 2.0, [i, j])))
    body = tir.BufferRealize(T, [tir.Range(0, n), tir.Range(0, m)], tir.const(True), tir.SeqStmt([comp, copy]))
    f = make_func([A, B, C], body)
    a, b = np.random.rand(n, k).astype("float32"), np.random.rand(k, m).astype("float32")
    c = np.zeros((n, m), "float32")
    run_primfunc(f, [a, b, c])
    np.testing.assert_allclose(c, 2 * a @ b, rtol=1e-5)


def test_flat_allocate_ramp_broadcast_and_let():
    A = tir.decl_buffer((16,), "float32", "A")
    B = tir.decl_buffer((16,), "float32", "B")
    data = tir.Var("tmp", "handle")
    tmp = tir.decl_buffer((16,), "float32", "tmp", data=data)
    io = tir.Var("io")
    x = tir.Var("x", "float32x4")
    ramp = tir.Ramp(io * 4, 1, 4)
    s1 = tir.BufferStore(tmp, A[ramp] * tir.Broadcast(tir.const(3.0), 4), [ramp])
    s2 = tir.LetStmt(x, tmp[ramp], tir.BufferStore(B, x + tir.Broadcast(tir.const(1.0), 4), [ramp]))
    body = tir.Allocate(data, "float32", [16], tir.const(True),
                        tir.DeclBuffer(tmp, loop(io, 4, tir.SeqStmt([s1, s2]))))
    f = make_func([A, B], body)
    a, b = np.random.rand(16).astype("float32"), np.zeros(16, "float32")
    run_primfunc(f, [a, b])
    np.testing.assert_allclose(b, a * 3 + 1, rtol=1e-6)


def test_out_of_bounds_raises_not_wraps():
    A = tir.decl_buffer((8,), "float32", "A")
    B = tir.decl_buffer((8,), "float32", "B")
    i = tir.Var("i")
    f = make_func([A, B], loop(i, 8, tir.BufferStore(B, A[i + 1], [i])))
    with pytest.raises(InterpreterError, match="out-of-bounds"):
        run_primfunc(f, [np.zeros(8, "float32"), np.zeros(8, "float32")])
    g = make_func([A, B], loop(i, 8, tir.BufferStore(B, A[i - 1], [i])))
    with pytest.raises(InterpreterError, match="out-of-bounds"):
        run_primfunc(g, [np.zeros(8, "float32"), np.zeros(8, "float32")])
    v = make_func([A, B], tir.BufferStore(B, A[tir.Ramp(6, 1, 4)], [tir.Ramp(0, 1, 4)]))
    with pytest.raises(InterpreterError, match="out-of-bounds"):
        run_primfunc(v, [np.zeros(8, "float32"), np.zeros(8, "float32")])


def test_if_then_else_only_evaluates_taken_branch():
    n = tir.Var("n")
    A = tir.decl_buffer((n,), "float32", "A")
    B = tir.decl_buffer((n + 2,), "float32", "B")
    i = tir.Var("i")
    val = tir.if_then_else(tir.all(i >= 1, i <= n), A[i - 1], tir.const(0.0))
    f = make_func([A, B], loop(i, n + 2, tir.BufferStore(B, val, [i])))
    a = np.random.rand(5).astype("float32")
    b = np.zeros(7, "float32")
    run_primfunc(f, [a, b])
    np.testing.assert_allclose(b, np.pad(a, 1))
    # the vector form masks lanes
    A8 = tir.decl_buffer((4,), "float32", "A")
    B8 = tir.decl_buffer((8,), "float32", "B")
    r = tir.Ramp(0, 1, 8)
    cond = tir.LT(r, tir.Broadcast(tir.const(4), 8))
    vval = tir.call_intrin("float32x8", "tir.if_then_else", cond, A8[r], tir.Broadcast(tir.const(-1.0), 8))
    g = make_func([A8, B8], tir.BufferStore(B8, vval, [r]))
    a4, b8 = np.arange(4, dtype="float32"), np.zeros(8, "float32")
    run_primfunc(g, [a4, b8])
    np.testing.assert_allclose(b8, [0, 1, 2, 3, -1, -1, -1, -1])


@pytest.mark.parametrize("a,b", [(7, 2), (-7, 2), (7, -2), (-7, -2), (0, 3), (-1, 64)])
def test_division_semantics(a, b):
    x, y = tir.Var("x"), tir.Var("y")
    env = {x: a, y: b}
    assert eval_expr(tir.floordiv(x, y), env) == a // b
    assert eval_expr(tir.floormod(x, y), env) == a % b
    q = int(a / b)
    assert eval_expr(tir.truncdiv(x, y), env) == q
    assert eval_expr(tir.truncmod(x, y), env) == a - q * b
    with pytest.raises(InterpreterError, match="division by zero"):
        eval_expr(tir.floordiv(x, y), {x: a, y: 0})


def test_int_wraparound_and_casts():
    x = tir.Var("x", "int32")
    assert eval_expr(x + 1, {x: 2 ** 31 - 1}) == -(2 ** 31)
    u = tir.Var("u", "uint8")
    assert eval_expr(u + tir.const(10, "uint8"), {u: 250}) == 4
    assert eval_expr(tir.Cast("int32", tir.const(-2.7, "float32")), {}) == -2
    assert eval_expr(tir.Cast("int8", tir.const(300)), {}) == 44
    f = tir.Var("f", "float32")
    r = eval_expr(f * 3.0, {f: 0.1})
    assert r == np.float32(0.1) * np.float32(3.0) and isinstance(r, np.float32)


def test_math_intrinsics_match_numpy():
    n = 9
    A = tir.decl_buffer((n,), "float32", "A")
    outs = {}
    fns = {"exp": (tir.exp, np.exp), "log": (tir.log, np.log), "sqrt": (tir.sqrt, np.sqrt),
           "tanh": (tir.tanh, np.tanh), "sigmoid": (tir.sigmoid, lambda v: 1 / (1 + np.exp(-v))),
           "floor": (tir.floor, np.floor), "erf": (tir.erf, None), "abs": (tir.abs, np.abs),
           "pow": (lambda v: tir.power(v, 2.5), lambda v: v ** 2.5)}
    a = (np.random.rand(n) + 0.1).astype("float32")
    i = tir.Var("i")
    for name, (tf, nf) in fns.items():
        B = tir.decl_buffer((n,), "float32", "B")
        f = make_func([A, B], loop(i, n, tir.BufferStore(B, tf(A[i]), [i])))
        b = np.zeros(n, "float32")
        run_primfunc(f, [a, b])
        if nf is None:
            import math
            want = np.array([math.erf(v) for v in a], "float32")
        else:
            want = nf(a)
        np.testing.assert_allclose(b, want, rtol=1e-5, err_msg=name)


def test_assert_and_scalar_params_and_shape_checks():
    n = tir.Var("n")
    A = tir.decl_buffer((n,), "float32", "A")
    B = tir.decl_buffer((n,), "float32", "B")
    alpha = tir.Var("alpha", "float32")
    i = tir.Var("i")
    body = tir.AssertStmt(n > 2, "n must exceed 2",
                          loop(i, n, tir.BufferStore(B, A[i] * alpha, [i])))
    f = make_func([A, B], body, scalars=[alpha])
    a = np.random.rand(5).astype("float32")
    b = np.zeros(5, "float32")
    run_primfunc(f, [a, b, 2.0])
    np.testing.assert_allclose(b, a * 2)
    with pytest.raises(InterpreterError, match="n must exceed 2"):
        run_primfunc(f, [a[:2].copy(), b[:2].copy(), 2.0])
    with pytest.raises(InterpreterError, match="shape"):
        run_primfunc(f, [a, np.zeros(4, "float32"), 2.0])
    with pytest.raises(InterpreterError, match="dtype"):
        run_primfunc(f, [a.astype("float64"), b, 2.0])


def test_ifthenelse_while_select():
    A = tir.decl_buffer((10,), "int32", "A")
    i = tir.Var("i")
    body = loop(i, 10, tir.IfThenElse(tir.floormod(i, 2) == 0,
                                      tir.BufferStore(A, tir.Select(i > 4, i * 10, i), [i]),
                                      tir.BufferStore(A, tir.const(-1), [i])))
    f = make_func([A], body)
    a = np.zeros(10, "int32")
    run_primfunc(f, [a])
    want = [(k * 10 if k > 4 else k) if k % 2 == 0 else -1 for k in range(10)]
    assert a.tolist() == want
