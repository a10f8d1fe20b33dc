"""More schedule combinations checked numerically with the TIR interpreter."""
import numpy as np

from kiln import te, tir
from kiln.tir.interpreter import run_primfunc


def run(s, args, arrays):
    func = te.schedule_to_primfunc(s, args)
    run_primfunc(func, arrays)
    return func


def _rand(rng, *shape):
    return rng.standard_normal(shape).astype("float32")


def test_compute_at_fused_consumer_axis(rng):
    A = te.placeholder((5, 6), name="A")
    B = te.compute((5, 6), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((5, 6), lambda i, j: B[i, j] + 1.0, name="C")
    s = te.create_schedule(C.op)
    f = s[C].fuse(*C.op.axis)
    fo, fi = s[C].split(f, factor=4)
    s[B].compute_at(s[C], fo)
    a = _rand(rng, 5, 6)
    c = np.zeros((5, 6), "float32")
    run(s, [A, C], [a, c])
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


def test_producer_at_reduction_axis(rng):
    A = te.placeholder((4, 9), name="A")
    B = te.compute((4, 9), lambda i, k: A[i, k] * A[i, k], name="B")
    k = te.reduce_axis((0, 9), "k")
    C = te.compute((4,), lambda i: te.sum(B[i, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    ko, ki = s[C].split(k, factor=4)
    s[B].compute_at(s[C], ko)
    a = _rand(rng, 4, 9)
    c = np.zeros(4, "float32")
    run(s, [A, C], [a, c])
    np.testing.assert_allclose(c, (a * a).sum(axis=1), rtol=1e-5)


def test_conv_pad_stage_at_reduction_loop(rng):
    H, W, K = 6, 5, 3
    data = te.placeholder((H, W), name="data")
    w = te.placeholder((K, K), name="w")
    pad = te.compute((H + 2, W + 2), lambda y, x: te.if_then_else(
        te.all(y >= 1, y <= H, x >= 1, x <= W), data[y - 1, x - 1], 0.0), name="pad")
    ry, rx = te.reduce_axis((0, K), "ry"), te.reduce_axis((0, K), "rx")
    out = te.compute((H, W), lambda y, x: te.sum(pad[y + ry, x + rx] * w[ry, rx], axis=[ry, rx]), name="out")
    s = te.create_schedule(out.op)
    y, x = out.op.axis
    s[out].reorder(y, ry, x, rx)
    s[pad].compute_at(s[out], ry)
    d, ww = _rand(rng, H, W), _rand(rng, K, K)
    o = np.zeros((H, W), "float32")
    f = run(s, [data, w, out], [d, ww, o])
    p = np.pad(d, 1)
    ref = np.zeros((H, W), "float32")
    for dy in range(K):
        for dx in range(K):
            ref += p[dy:dy + H, dx:dx + W] * ww[dy, dx]
    np.testing.assert_allclose(o, ref, rtol=1e-4, atol=1e-5)
    realize = [n for n in [f.body] if False]
    del realize


def test_cache_write_after_split_relayout(rng):
    A = te.placeholder((10, 7), name="A")
    k = te.reduce_axis((0, 7), "k")
    B = te.compute((10,), lambda i: te.sum(A[i, k] * 2.0, axis=k), name="B")
    s = te.create_schedule(B.op)
    io, ii = s[B].split(B.op.axis[0], factor=4)
    BL = s.cache_write(B, "local")
    assert len(BL.shape) == 2  # the cache is laid out by the split loops
    a = _rand(rng, 10, 7)
    b = np.zeros(10, "float32")
    run(s, [A, B], [a, b])
    np.testing.assert_allclose(b, (a * 2).sum(axis=1), rtol=1e-5)


def test_rfactor_argmax(rng):
    def fcombine(x, y):
        return (tir.Select(x[1] >= y[1], x[0], y[0]), tir.Select(x[1] >= y[1], x[1], y[1]))

    argmax = te.comm_reducer(fcombine, lambda t0, t1: (tir.const(-1, t0), te.min_value(t1)), name="argmax")
    val = te.placeholder((3, 26), name="val")
    k = te.reduce_axis((0, 26), "k")
    T0, T1 = te.compute((3,), lambda i: argmax((k.var, val[i, k]), axis=k), name="T")
    s = te.create_schedule(T0.op)
    ko, ki = s[T0].split(k, factor=8)
    RF = s.rfactor(T0, ki)
    assert len(RF) == 2
    v = _rand(rng, 3, 26)
    idx = np.zeros(3, "int32")
    mx = np.zeros(3, "float32")
    run(s, [val, T0, T1], [v, idx, mx])
    np.testing.assert_array_equal(idx, v.argmax(axis=1))
    np.testing.assert_allclose(mx, v.max(axis=1))


def test_cache_read_local_in_tiled_matmul_gpu_style(rng):
    M, N, K = 16, 12, 8
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    AS = s.cache_read(A, "shared", [C])
    CL = s.cache_write(C, "local")
    bx, by, tx, ty = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 4)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(by, te.thread_axis("blockIdx.y"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    s[C].bind(ty, te.thread_axis("threadIdx.y"))
    s[CL].compute_at(s[C], ty)
    s[AS].compute_at(s[C], by)
    a, b = _rand(rng, M, K), _rand(rng, K, N)
    c = np.zeros((M, N), "float32")
    f = run(s, [A, B, C], [a, b, c])
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-5)
    text = str(f.body)
    assert "threadIdx" in text and "blockIdx" in text


def test_inline_chain_into_reduction(rng):
    A = te.placeholder((6, 5), name="A")
    B = te.compute((6, 5), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((6, 5), lambda i, j: B[i, j] * B[i, j], name="C")
    k = te.reduce_axis((0, 5), "k")
    D = te.compute((6,), lambda i: te.sum(C[i, k], axis=k), name="D")
    s = te.create_schedule(D.op)
    s[B].compute_inline()
    s[C].compute_inline()
    a = _rand(rng, 6, 5)
    d = np.zeros(6, "float32")
    run(s, [A, D], [a, d])
    np.testing.assert_allclose(d, ((a + 1) ** 2).sum(axis=1), rtol=1e-5)
