"""Lowered schedules computed by the TIR interpreter match numpy."""
import numpy as np
import pytest

from kiln import te, tir
from kiln.tir.interpreter import run_primfunc



def run(s, args, arrays, name="main"):
    """Lower ``s`` with ``args`` and run it on ``arrays`` (outputs are written in place)."""
    func = te.schedule_to_primfunc(s, args, name=name)
    run_primfunc(func, arrays)
    return func


def _rand(rng, *shape, dtype="float32"):
    return rng.standard_normal(shape).astype(dtype)


def test_vector_add_symbolic_split(rng):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    s[C].split(C.op.axis[0], factor=64)
    a, b = _rand(rng, 1037), _rand(rng, 1037)
    c = np.zeros(1037, "float32")
    run(s, [A, B, C], [a, b, c])
    np.testing.assert_allclose(c, a + b, rtol=1e-6)


def test_elementwise_intrinsics(rng):
    m, n = 7, 9
    A = te.placeholder((m, n), name="A")
    B = te.compute((m, n), lambda i, j: te.exp(A[i, j]) + te.sqrt(te.abs(A[i, j])) * te.tanh(A[i, j])
                   - te.sigmoid(A[i, j]) + te.log(te.abs(A[i, j]) + 1.0), name="B")
    C = te.compute((m, n), lambda i, j: te.if_then_else(B[i, j] > 1.0, te.floor(B[i, j]), te.erf(B[i, j])),
                   name="C")
    s = te.create_schedule(C.op)
    a = _rand(rng, m, n)
    c = np.zeros((m, n), "float32")
    run(s, [A, C], [a, c])
    b = np.exp(a) + np.sqrt(np.abs(a)) * np.tanh(a) - 1 / (1 + np.exp(-a)) + np.log(np.abs(a) + 1)
    from math import erf
    ref = np.where(b > 1, np.floor(b), np.vectorize(erf)(b))
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-5)


def test_sum_over_two_axes(rng):
    A = te.placeholder((5, 6, 7), name="A")
    j = te.reduce_axis((0, 6), "j")
    k = te.reduce_axis((0, 7), "k")
    B = te.compute((5,), lambda i: te.sum(A[i, j, k], axis=[j, k]), name="B")
    s = te.create_schedule(B.op)
    s[B].reorder(j, B.op.axis[0], k)
    a = _rand(rng, 5, 6, 7)
    b = np.zeros(5, "float32")
    run(s, [A, B], [a, b])
    np.testing.assert_allclose(b, a.sum(axis=(1, 2)), rtol=1e-5)


def test_max_with_split_reduction_and_where(rng):
    n = 29
    A = te.placeholder((3, n), name="A")
    k = te.reduce_axis((0, n), "k")
    B = te.compute((3,), lambda i: te.max(A[i, k], axis=k, where=k % 3 != 1), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=4)
    s[B].reorder(ko, B.op.axis[0], ki)
    a = _rand(rng, 3, n)
    b = np.zeros(3, "float32")
    run(s, [A, B], [a, b])
    mask = (np.arange(n) % 3) != 1
    np.testing.assert_allclose(b, a[:, mask].max(axis=1))


def test_argmax_comm_reducer(rng):
    def fcombine(x, y):
        lhs = tir.Select(x[1] >= y[1], x[0], y[0])
        rhs = tir.Select(x[1] >= y[1], x[1], y[1])
        return lhs, rhs

    def fidentity(t0, t1):
        return tir.const(-1, t0), te.min_value(t1)

    argmax = te.comm_reducer(fcombine, fidentity, name="argmax")
    m, n = te.var("m"), te.var("n")
    val = te.placeholder((m, n), name="val", dtype="float32")
    k = te.reduce_axis((0, n), "k")
    T0, T1 = te.compute((m,), lambda i: argmax((k.var, val[i, k]), axis=k), name="T")
    s = te.create_schedule(T0.op)
    s[T0].split(k, factor=5)
    v = _rand(rng, 6, 13)
    idx = np.zeros(6, "int32")
    mx = np.zeros(6, "float32")
    run(s, [val, T0, T1], [v, idx, mx])
    np.testing.assert_array_equal(idx, v.argmax(axis=1))
    np.testing.assert_allclose(mx, v.max(axis=1))


def test_matmul_tiled_cache_write(rng):
    M, N, K = 19, 23, 13
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 8)
    s[C].parallel(xo)
    s[C].vectorize(yi)
    s[CC].compute_at(s[C], yo)
    xc, yc = s[CC].op.axis
    ko, ki = s[CC].split(s[CC].op.reduce_axis[0], factor=4)
    s[CC].reorder(ko, xc, ki, yc)
    s[CC].vectorize(yc)
    s[CC].unroll(ki)
    a, b = _rand(rng, M, K), _rand(rng, K, N)
    c = np.zeros((M, N), "float32")
    f = run(s, [A, B, C], [a, b, c])
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-5)
    # the cache is realized over one 8x8 tile only
    from kiln.tir import stmt_functor
    realizes = []
    stmt_functor.post_order_visit(f.body, lambda n: realizes.append(n) if type(n).__name__ == "BufferRealize" else None)
    assert len(realizes) == 1
    assert [int(r.extent) for r in realizes[0].bounds] == [8, 8]


def test_conv2d_with_inlined_padding(rng):
    N, CI, H, W, CO, KH, KW, pad = 1, 3, 7, 6, 4, 3, 3, 1
    data = te.placeholder((N, CI, H, W), name="data")
    weight = te.placeholder((CO, CI, KH, KW), name="weight")
    padded = te.compute(
        (N, CI, H + 2 * pad, W + 2 * pad),
        lambda n, c, y, x: te.if_then_else(
            te.all(y >= pad, y < H + pad, x >= pad, x < W + pad), data[n, c, y - pad, x - pad], 0.0),
        name="pad")
    rc = te.reduce_axis((0, CI), "rc")
    ry = te.reduce_axis((0, KH), "ry")
    rx = te.reduce_axis((0, KW), "rx")
    conv = te.compute((N, CO, H, W), lambda n, f, y, x: te.sum(
        padded[n, rc, y + ry, x + rx] * weight[f, rc, ry, rx], axis=[rc, ry, rx]), name="conv")
    s = te.create_schedule(conv.op)
    s[padded].compute_inline()
    n, f, y, x = s[conv].op.axis
    xo, xi = s[conv].split(x, factor=4)
    s[conv].reorder(n, f, y, xo, rc, ry, rx, xi)
    s[conv].vectorize(xi)
    d, w = _rand(rng, N, CI, H, W), _rand(rng, CO, CI, KH, KW)
    out = np.zeros((N, CO, H, W), "float32")
    func = run(s, [data, weight, conv], [d, w, out])
    p = np.pad(d, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ref = np.zeros((N, CO, H, W), "float32")
    for dy in range(KH):
        for dx in range(KW):
            ref += np.einsum("ncyx,fc->nfyx", p[:, :, dy:dy + H, dx:dx + W], w[:, :, dy, dx])
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)
    assert "pad" not in str(func.body).replace("padd", "")  # the padding stage was inlined


def test_non_dividing_split(rng):
    A = te.placeholder((30,), name="A")
    B = te.compute((30,), lambda i: A[i] * 3.0, name="B")
    s = te.create_schedule(B.op)
    s[B].split(B.op.axis[0], factor=7)
    a = _rand(rng, 30)
    b = np.zeros(30, "float32")
    run(s, [A, B], [a, b])
    np.testing.assert_allclose(b, a * 3, rtol=1e-6)


def test_split_nparts_and_compute_at_producer(rng):
    A = te.placeholder((30,), name="A")
    B = te.compute((30,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((30,), lambda i: B[i] * 2.0, name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], nparts=4)
    s[B].compute_at(s[C], xo)
    a = _rand(rng, 30)
    c = np.zeros(30, "float32")
    run(s, [A, C], [a, c])
    np.testing.assert_allclose(c, (a + 1) * 2, rtol=1e-6)


def test_rfactor(rng):
    n = 37
    A = te.placeholder((n,), name="A")
    k = te.reduce_axis((0, n), "k")
    B = te.compute((1,), lambda i: te.sum(A[k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=8)
    BF = s.rfactor(B, ki)
    s[BF].vectorize(BF.op.axis[0]) if False else None
    s[BF].parallel(BF.op.axis[0])
    a = _rand(rng, n)
    b = np.zeros(1, "float32")
    run(s, [A, B], [a, b])
    np.testing.assert_allclose(b, [a.sum()], rtol=1e-5)


def test_rfactor_2d_factor_axis_last(rng):
    A = te.placeholder((5, 22), name="A")
    k = te.reduce_axis((0, 22), "k")
    B = te.compute((5,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, nparts=3)
    BF = s.rfactor(B, ko, factor_axis=1)
    assert [int(x) for x in BF.shape] == [5, 3]
    s[BF].compute_at(s[B], s[B].op.axis[0])
    a = _rand(rng, 5, 22)
    b = np.zeros(5, "float32")
    run(s, [A, B], [a, b])
    np.testing.assert_allclose(b, a.sum(axis=1), rtol=1e-5)


def test_cache_read(rng):
    A = te.placeholder((10, 12), name="A")
    B = te.compute((10, 12), lambda i, j: A[i, j] * 2.0 + A[i, (j + 1) % 12], name="B")
    s = te.create_schedule(B.op)
    AA = s.cache_read(A, "local", [B])
    xo, xi = s[B].split(B.op.axis[0], factor=3)
    s[AA].compute_at(s[B], xo)
    a = _rand(rng, 10, 12)
    b = np.zeros((10, 12), "float32")
    run(s, [A, B], [a, b])
    np.testing.assert_allclose(b, a * 2 + np.roll(a, -1, axis=1), rtol=1e-6)


def test_multi_output_compute(rng):
    A = te.placeholder((4, 5), name="A")
    B0, B1 = te.compute((4, 5), lambda i, j: (A[i, j] + 1.0, A[i, j] * A[i, j]), name="B")
    C = te.compute((4, 5), lambda i, j: B0[i, j] - B1[i, j], name="C")
    s = te.create_schedule(C.op)
    s[B0].compute_at(s[C], C.op.axis[0])
    a = _rand(rng, 4, 5)
    c = np.zeros((4, 5), "float32")
    run(s, [A, C], [a, c])
    np.testing.assert_allclose(c, (a + 1) - a * a, rtol=1e-5)


def test_compute_at_chain_with_stencil(rng):
    n = 17
    A = te.placeholder((n + 4,), name="A")
    B = te.compute((n + 2,), lambda i: A[i] + A[i + 2], name="B")
    C = te.compute((n + 1,), lambda i: B[i] * B[i + 1], name="C")
    D = te.compute((n,), lambda i: C[i] - C[i + 1], name="D")
    s = te.create_schedule(D.op)
    xo, xi = s[D].split(D.op.axis[0], factor=4)
    s[C].compute_at(s[D], xo)
    s[B].compute_at(s[C], s[C].op.axis[0])
    a = _rand(rng, n + 4)
    d = np.zeros(n, "float32")
    f = run(s, [A, D], [a, d])
    b = a[:-2] + a[2:]
    c = b[:-1] * b[1:]
    np.testing.assert_allclose(d, c[:-1] - c[1:], rtol=1e-5, atol=1e-6)
    assert "C[" in str(f.body)


def test_fuse_then_split(rng):
    A = te.placeholder((6, 7), name="A")
    B = te.compute((6, 7), lambda i, j: A[i, j] + i * 7 + j, name="B")
    s = te.create_schedule(B.op)
    fused = s[B].fuse(*B.op.axis)
    fo, fi = s[B].split(fused, factor=8)
    s[B].parallel(fo)
    a = _rand(rng, 6, 7)
    b = np.zeros((6, 7), "float32")
    run(s, [A, B], [a, b])
    ref = a + np.arange(42, dtype="float32").reshape(6, 7)
    np.testing.assert_allclose(b, ref, rtol=1e-6)


def test_scalar_var_argument_and_symbolic_2d(rng):
    m, n = te.var("m"), te.var("n")
    alpha = te.var("alpha", "float32")
    A = te.placeholder((m, n), name="A")
    B = te.compute((m, n), lambda i, j: A[i, j] * alpha, name="B")
    s = te.create_schedule(B.op)
    xo, yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], 4, 3)
    a = _rand(rng, 9, 11)
    b = np.zeros((9, 11), "float32")
    run(s, [A, B, alpha], [a, b, 1.5])
    np.testing.assert_allclose(b, a * 1.5, rtol=1e-6)


def test_reduction_init_value(rng):
    A = te.placeholder((3, 4), name="A")
    k = te.reduce_axis((0, 4), "k")
    B = te.compute((3,), lambda i: te.sum(A[i, k], axis=k, init=10.0), name="B")
    s = te.create_schedule(B.op)
    a = _rand(rng, 3, 4)
    b = np.zeros(3, "float32")
    run(s, [A, B], [a, b])
    np.testing.assert_allclose(b, a.sum(axis=1) + 10, rtol=1e-5)


def test_extern_op(rng):
    A = te.placeholder((8,), name="A")

    def fcompute(ins, outs):
        i = te.var("i")
        return tir.For(i, 0, 8, tir.ForKind.SERIAL,
                       tir.BufferStore(outs[0], ins[0][i] * 2.0 + 1.0, [i]))

    B = te.extern((8,), [A], fcompute, name="ext", dtype="float32")
    C = te.compute((8,), lambda i: B[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    a = _rand(rng, 8)
    c = np.zeros(8, "float32")
    run(s, [A, C], [a, c])
    np.testing.assert_allclose(c, a * 2 + 2, rtol=1e-6)
