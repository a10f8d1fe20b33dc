"""TE schedules compiled through kiln.build and checked against numpy on odd sizes."""
import math

import numpy as np
import pytest

import kiln as tvm
from kiln import te, tir

rng = np.random.default_rng(1)


def nd(x):
    return tvm.nd.array(x)


def test_vector_add_symbolic_length():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=16)
    s[C].parallel(xo)
    s[C].vectorize(xi)
    f = tvm.build(s, [A, B, C], name="vadd")
    for size in (1, 15, 16, 1037):
        a, b = rng.random(size, dtype=np.float32), rng.random(size, dtype=np.float32)
        c = nd(np.zeros(size, np.float32))
        f(nd(a), nd(b), c)
        np.testing.assert_allclose(c.numpy(), a + b, rtol=1e-6)


INTRINSICS = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
    "expm1": np.expm1, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "sin": np.sin, "cos": np.cos,
    "tan": np.tan, "tanh": np.tanh, "sinh": np.sinh, "cosh": np.cosh, "atan": np.arctan,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "erf": np.vectorize(math.erf), "floor": np.floor,
    "ceil": np.ceil, "trunc": np.trunc, "round": np.round, "abs": np.abs,
}


@pytest.mark.parametrize("vectorize", [False, True])
def test_elementwise_every_intrinsic(vectorize):
    n, m = 7, 37
    A = te.placeholder((n, m), name="A")
    outs = [te.compute((n, m), lambda i, j, k=k: getattr(te, k)(A[i, j]), name=f"out_{k}") for k in INTRINSICS]
    s = te.create_schedule([o.op for o in outs])
    if vectorize:
        for o in outs:
            jo, ji = s[o].split(o.op.axis[1], factor=8)
            s[o].vectorize(ji)
            s[o].parallel(o.op.axis[0])
    f = tvm.build(s, [A] + outs, name="intrin")
    a = rng.uniform(0.1, 2.5, (n, m)).astype("float32")
    a[0, :4] = [0.5, 1.5, 2.5, 0.25]
    arrays = [nd(np.zeros((n, m), np.float32)) for _ in outs]
    f(nd(a), *arrays)
    for k, arr in zip(INTRINSICS, arrays):
        np.testing.assert_allclose(arr.numpy(), INTRINSICS[k](a.astype("float64")).astype("float32"),
                                   rtol=2e-5, atol=2e-6, err_msg=k)


def test_reductions_sum_max_argmax():
    n, m, p = 5, 13, 9
    A = te.placeholder((n, m, p), name="A")
    r1 = te.reduce_axis((0, m), "r1")
    r2 = te.reduce_axis((0, p), "r2")
    S = te.compute((n,), lambda i: te.sum(A[i, r1, r2], axis=[r1, r2]), name="S")
    k = te.reduce_axis((0, m), "k")
    M = te.compute((n, p), lambda i, j: te.max(A[i, k, j], axis=k), name="M")

    def fcombine(x, y):
        lhs = tir.Select(x[1] >= y[1], x[0], y[0])
        rhs = tir.Select(x[1] >= y[1], x[1], y[1])
        return lhs, rhs

    def fidentity(t0, t1):
        return tir.const(-1, t0), te.min_value(t1)

    argmax = te.comm_reducer(fcombine, fidentity, name="argmax")
    q = te.reduce_axis((0, p), "q")
    AM_idx, AM_val = te.compute((n, m), lambda i, j: argmax((q, A[i, j, q]), axis=q), name="AM")
    s = te.create_schedule([S.op, M.op, AM_idx.op])
    s[S].parallel(S.op.axis[0])
    jo, ji = s[M].split(M.op.axis[1], factor=4)
    s[M].vectorize(ji)
    f = tvm.build(s, [A, S, M, AM_idx, AM_val], name="red")
    a = rng.standard_normal((n, m, p)).astype("float32")
    outs = [nd(np.zeros((n,), np.float32)), nd(np.zeros((n, p), np.float32)),
            nd(np.zeros((n, m), np.int32)), nd(np.zeros((n, m), np.float32))]
    f(nd(a), *outs)
    np.testing.assert_allclose(outs[0].numpy(), a.sum(axis=(1, 2)), rtol=1e-5)
    np.testing.assert_array_equal(outs[1].numpy(), a.max(axis=1))
    np.testing.assert_array_equal(outs[2].numpy(), a.argmax(axis=2))
    np.testing.assert_array_equal(outs[3].numpy(), a.max(axis=2))


@pytest.mark.parametrize("M,N,K", [(37, 45, 29), (64, 64, 64)])
def test_matmul_tiled_cache_write(M, N, K):
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), "k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "global")
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 16)
    fused = s[C].fuse(io, jo)
    s[C].parallel(fused)
    s[C].vectorize(ji)
    s[CC].compute_at(s[C], fused)
    ic, jc = s[CC].op.axis
    (kk,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(kk, factor=4)
    s[CC].reorder(ko, ki, ic, jc)
    s[CC].unroll(ki)
    s[CC].vectorize(jc)
    f = tvm.build(s, [A, B, C], name="mm")
    a, b = rng.random((M, K), dtype=np.float32), rng.random((K, N), dtype=np.float32)
    c = nd(np.zeros((M, N), np.float32))
    f(nd(a), nd(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5)


def test_benchmark_gemm_schedule_small():
    from benchmarks.matmul import gemm_schedule
    s, args = gemm_schedule(64, 48, 40, 4, 16, 4)
    f = tvm.build(s, args, name="gemm")
    a, b = rng.random((64, 40), dtype=np.float32), rng.random((40, 48), dtype=np.float32)
    c = nd(np.zeros((64, 48), np.float32))
    f(nd(a), nd(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5)


def test_conv2d_with_inlined_padding():
    N, CI, H, W, CO, KH, KW, pad = 1, 3, 11, 9, 5, 3, 3, 1
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
    out = te.compute((N, CO, H, W), lambda n, f, y, x: te.sum(
        padded[n, rc, y + ry, x + rx] * weight[f, rc, ry, rx], axis=[rc, ry, rx]), name="conv")
    s = te.create_schedule(out.op)
    s[padded].compute_inline()
    s[out].parallel(out.op.axis[1])
    xo, xi = s[out].split(out.op.axis[3], factor=4)
    s[out].vectorize(xi)
    f = tvm.build(s, [data, weight, out], name="conv")
    d = rng.standard_normal((N, CI, H, W)).astype("float32")
    w = rng.standard_normal((CO, CI, KH, KW)).astype("float32")
    o = nd(np.zeros((N, CO, H, W), np.float32))
    f(nd(d), nd(w), o)
    dp = np.pad(d, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ref = np.zeros((N, CO, H, W), np.float64)
    for y in range(KH):
        for x in range(KW):
            ref += np.einsum("nchw,fc->nfhw", dp[:, :, y:y + H, x:x + W], w[:, :, y, x])
    np.testing.assert_allclose(o.numpy(), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("factor", [3, 5, 8])
def test_non_dividing_splits(factor):
    n, m = 17, 23
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] * 2.0 + tir.Cast("float32", i - j), name="B")
    s = te.create_schedule(B.op)
    io, ii = s[B].split(B.op.axis[0], factor=factor)
    jo, ji = s[B].split(B.op.axis[1], nparts=factor)
    s[B].reorder(io, jo, ii, ji)
    s[B].unroll(ii)
    s[B].vectorize(ji)
    f = tvm.build(s, [A, B], name="split")
    a = rng.random((n, m), dtype=np.float32)
    b = nd(np.zeros((n, m), np.float32))
    f(nd(a), b)
    i, j = np.meshgrid(np.arange(n), np.arange(m), indexing="ij")
    np.testing.assert_allclose(b.numpy(), a * 2 + (i - j), rtol=1e-6)
