"""Tutorial flow: "Reduction".

Row sum with a symbolic shape, splitting the reduce axis, rfactor (plain and with factor_axis),
2-D convolution described as a reduction over two axes with te.if_then_else padding, a
user-defined commutative reducer (te.comm_reducer) and a tuple-valued argmax reducer.
"""
import numpy as np
import pytest

import kiln as tvm
import kiln.testing
from kiln import te


def _row_sum():
    n = te.var("n")
    m = te.var("m")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    return A, B


def _check_row_sum(f, shapes=((1, 1), (7, 33), (20, 64))):
    dev = tvm.cpu(0)
    rng = np.random.default_rng(0)
    for shape in shapes:
        a_np = rng.uniform(size=shape).astype("float32")
        a = tvm.nd.array(a_np, dev)
        b = tvm.nd.array(np.zeros(shape[0], dtype="float32"), dev)
        f(a, b)
        tvm.testing.assert_allclose(b.numpy(), a_np.sum(axis=1), rtol=1e-5)


def test_row_sum_default_and_split():
    A, B = _row_sum()
    s = te.create_schedule(B.op)
    text = str(tvm.lower(s, [A, B], simple_mode=True))
    assert "B[i] = T.float32(0" in text and "B[i] + A" in text
    _check_row_sum(tvm.build(s, [A, B], "llvm"))

    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    xo, xi = s[B].split(B.op.axis[0], factor=32)
    s[B].reorder(xo, ko, xi, ki)
    _check_row_sum(tvm.build(s, [A, B], "llvm"))


def test_rfactor():
    A, B = _row_sum()
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    BF = s.rfactor(B, ki)
    # the factored stage keeps ki as a data-parallel axis
    assert len(BF.shape) == 2
    assert str(tvm.lower(s, [A, B], simple_mode=True)).count("for") >= 3
    _check_row_sum(tvm.build(s, [A, B], "llvm"))

    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    BF = s.rfactor(B, ki, factor_axis=1)
    assert len(BF.shape) == 2
    s[BF].compute_at(s[B], s[B].op.axis[0])
    _check_row_sum(tvm.build(s, [A, B], "llvm"))


def test_conv_as_2d_reduction():
    n = te.var("n")
    Input = te.placeholder((n, n), name="Input")
    Filter = te.placeholder((3, 3), name="Filter")
    di = te.reduce_axis((0, 3), name="di")
    dj = te.reduce_axis((0, 3), name="dj")
    Output = te.compute(
        (n - 2, n - 2),
        lambda i, j: te.sum(Input[i + di, j + dj] * Filter[di, dj], axis=[di, dj]),
        name="Output")
    s = te.create_schedule(Output.op)
    f = tvm.build(s, [Input, Filter, Output], "llvm")
    dev = tvm.cpu(0)
    rng = np.random.default_rng(1)
    for size in (3, 9, 16):
        x = rng.standard_normal((size, size)).astype("float32")
        w = rng.standard_normal((3, 3)).astype("float32")
        out = tvm.nd.empty((size - 2, size - 2), "float32", dev)
        f(tvm.nd.array(x, dev), tvm.nd.array(w, dev), out)
        want = np.zeros((size - 2, size - 2), "float32")
        for di_ in range(3):
            for dj_ in range(3):
                want += x[di_:di_ + size - 2, dj_:dj_ + size - 2] * w[di_, dj_]
        tvm.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5)


def test_padded_conv_with_if_then_else():
    N = 10
    Input = te.placeholder((N, N), name="Input")
    Filter = te.placeholder((3, 3), name="Filter")
    Padded = te.compute(
        (N + 2, N + 2),
        lambda i, j: te.if_then_else(
            te.all(i >= 1, i < N + 1, j >= 1, j < N + 1), Input[i - 1, j - 1], tvm.tir.const(0.0, "float32")),
        name="Padded")
    di = te.reduce_axis((0, 3), name="di")
    dj = te.reduce_axis((0, 3), name="dj")
    Output = te.compute((N, N), lambda i, j: te.sum(Padded[i + di, j + dj] * Filter[di, dj], axis=[di, dj]),
                        name="Output")
    s = te.create_schedule(Output.op)
    s[Padded].compute_inline()
    f = tvm.build(s, [Input, Filter, Output], "llvm")
    rng = np.random.default_rng(2)
    x = rng.standard_normal((N, N)).astype("float32")
    w = rng.standard_normal((3, 3)).astype("float32")
    out = tvm.nd.empty((N, N), "float32")
    f(tvm.nd.array(x), tvm.nd.array(w), out)
    xp = np.pad(x, 1)
    want = sum(xp[a:a + N, b:b + N] * w[a, b] for a in range(3) for b in range(3))
    tvm.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5)


def test_comm_reducer_sum_and_product():
    n = te.var("n")
    m = te.var("m")
    mysum = te.comm_reducer(lambda x, y: x + y, lambda t: tvm.tir.const(0, dtype=t), name="mysum")
    myprod = te.comm_reducer(lambda x, y: x * y, lambda t: tvm.tir.const(1, dtype=t), name="myprod")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    B = te.compute((n,), lambda i: mysum(A[i, k], axis=k), name="B")
    k2 = te.reduce_axis((0, m), name="k2")
    P = te.compute((n,), lambda i: myprod(A[i, k2], axis=k2), name="P")
    s = te.create_schedule([B.op, P.op])
    f = tvm.build(s, [A, B, P], "llvm")
    rng = np.random.default_rng(3)
    a_np = rng.uniform(0.5, 1.5, size=(5, 13)).astype("float32")
    b = tvm.nd.empty((5,), "float32")
    p = tvm.nd.empty((5,), "float32")
    f(tvm.nd.array(a_np), b, p)
    tvm.testing.assert_allclose(b.numpy(), a_np.sum(axis=1), rtol=1e-5)
    tvm.testing.assert_allclose(p.numpy(), a_np.prod(axis=1), rtol=1e-4)


def test_argmax_tuple_reducer():
    def fcombine(x, y):
        lhs = tvm.tir.Select((x[1] >= y[1]), x[0], y[0])
        rhs = tvm.tir.Select((x[1] >= y[1]), x[1], y[1])
        return lhs, rhs

    def fidentity(t0, t1):
        return tvm.tir.const(-1, t0), te.min_value(t1)

    argmax = te.comm_reducer(fcombine, fidentity, name="argmax")
    m = te.var("m")
    n = te.var("n")
    idx = te.placeholder((m, n), name="idx", dtype="int32")
    val = te.placeholder((m, n), name="val", dtype="float32")
    k = te.reduce_axis((0, n), "k")
    T0, T1 = te.compute((m,), lambda i: argmax((idx[i, k], val[i, k]), axis=k), name="T")
    s = te.create_schedule(T0.op)
    f = tvm.build(s, [idx, val, T0, T1], "llvm")
    rng = np.random.default_rng(4)
    rows, cols = 6, 11
    val_np = rng.standard_normal((rows, cols)).astype("float32")
    idx_np = np.tile(np.arange(cols, dtype="int32"), (rows, 1))
    t0 = tvm.nd.empty((rows,), "int32")
    t1 = tvm.nd.empty((rows,), "float32")
    f(tvm.nd.array(idx_np), tvm.nd.array(val_np), t0, t1)
    np.testing.assert_array_equal(t0.numpy(), val_np.argmax(axis=1))
    tvm.testing.assert_allclose(t1.numpy(), val_np.max(axis=1))
