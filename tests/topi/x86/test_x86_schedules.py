"""Numerics of the x86 schedules through kiln.build on odd shapes (sizes that do not divide the tiles / SIMD width)."""
import numpy as np
import pytest

import kiln as tvm
from kiln import te, topi
from kiln.topi import x86
from kiln.topi.testing import conv2d_nchw_python, depthwise_conv2d_python_nchw

TARGET = "llvm"


def _run(sched_fn, make, args_np, out_shape):
    with tvm.target.Target(TARGET):
        tensors, out = make()
        s = sched_fn([out])
    f = tvm.build(s, tensors + [out], target=TARGET)
    out_nd = tvm.nd.array(np.zeros(out_shape, "float32"))
    f(*[tvm.nd.array(a) for a in args_np], out_nd)
    return out_nd.numpy()


def _rand(rng, *shape):
    return rng.standard_normal(shape).astype("float32")


@pytest.mark.parametrize("m,n,k", [(1, 10, 33), (5, 37, 19), (7, 24, 16), (3, 17, 1)])
def test_dense_pack_with_bias_relu(m, n, k):
    rng = np.random.default_rng(m * 100 + n)
    a, w, b = _rand(rng, m, k), _rand(rng, n, k), _rand(rng, n)

    def make():
        A, W, B = te.placeholder((m, k), name="A"), te.placeholder((n, k), name="W"), te.placeholder((n,), name="B")
        return [A, W, B], topi.nn.relu(x86.dense_pack(A, W, B, "float32"))
    out = _run(x86.schedule_dense_pack, make, [a, w, b], (m, n))
    np.testing.assert_allclose(out, np.maximum(a @ w.T + b, 0), rtol=1e-4, atol=1e-4)


def test_dense_pack_prepacked_weight():
    rng = np.random.default_rng(1)
    m, n, k, bn = 3, 32, 21, 16
    a, w = _rand(rng, m, k), _rand(rng, n, k)
    packed = w.reshape(n // bn, bn, k).transpose(0, 2, 1).copy()

    def make():
        A, W = te.placeholder((m, k), name="A"), te.placeholder((n // bn, k, bn), name="W")
        return [A, W], x86.dense_pack(A, W, None, "float32")
    out = _run(x86.schedule_dense_pack, make, [a, packed], (m, n))
    np.testing.assert_allclose(out, a @ w.T, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("ba,bb,m,n,k,ta,tb", [(3, 3, 5, 37, 19, False, True), (2, 1, 9, 13, 7, False, False),
                                                (1, 4, 3, 9, 7, True, True)])
def test_batch_matmul(ba, bb, m, n, k, ta, tb):
    rng = np.random.default_rng(n)
    ash = (ba, k, m) if ta else (ba, m, k)
    bsh = (bb, n, k) if tb else (bb, k, n)
    a, b = _rand(rng, *ash), _rand(rng, *bsh)

    def make():
        A, B = te.placeholder(ash, name="A"), te.placeholder(bsh, name="B")
        return [A, B], x86.batch_matmul(A, B, None, "float32", ta, tb)
    out = _run(x86.schedule_batch_matmul, make, [a, b], (max(ba, bb), m, n))
    aa = a.transpose(0, 2, 1) if ta else a
    bm = b.transpose(0, 2, 1) if tb else b
    np.testing.assert_allclose(out, aa @ bm, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n,ic,h,w,oc,kk,st,pad", [(1, 3, 13, 11, 10, 3, 2, 1), (2, 12, 9, 9, 20, 3, 1, 1),
                                                  (1, 5, 7, 7, 7, 1, 1, 0)])
def test_conv2d_nchw_via_nchwc(n, ic, h, w, oc, kk, st, pad):
    rng = np.random.default_rng(ic * oc)
    a, wt = _rand(rng, n, ic, h, w), _rand(rng, oc, ic, kk, kk)
    ref = np.maximum(conv2d_nchw_python(a, wt, (st, st), (pad,) * 4), 0)

    def make():
        A, W = te.placeholder(a.shape, name="A"), te.placeholder(wt.shape, name="W")
        return [A, W], topi.nn.relu(x86.conv2d_nchw(A, W, (st, st), (pad,) * 4, (1, 1), "float32"))
    out = _run(x86.schedule_conv2d_nchw, make, [a, wt], ref.shape)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_conv2d_NCHWc_packed_layout_round_trip():
    """NCHW -> NCHW8c -> conv -> NCHW matches the NCHW reference (the layouts AlterOpLayout produces)."""
    from kiln.topi.testing import layout_transform_python as lt
    rng = np.random.default_rng(5)
    a, wt = _rand(rng, 1, 16, 10, 9), _rand(rng, 24, 16, 3, 3)
    ref = conv2d_nchw_python(a, wt, (1, 1), (1, 1, 1, 1))
    a5, w6 = lt(a, "NCHW", "NCHW8c"), lt(wt, "OIHW", "OIHW8i8o")
    np.testing.assert_array_equal(lt(a5, "NCHW8c", "NCHW"), a)

    def make():
        A, W = te.placeholder(a5.shape, name="A"), te.placeholder(w6.shape, name="W")
        return [A, W], x86.conv2d_NCHWc(A, W, (1, 1), (1, 1, 1, 1), (1, 1), "NCHW8c", "NCHW8c", "float32")
    out = _run(x86.schedule_conv2d_NCHWc, make, [a5, w6], (1, 3, 10, 9, 8))
    np.testing.assert_allclose(lt(out, "NCHW8c", "NCHW"), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("c,h,w,st", [(24, 11, 9, 1), (6, 8, 13, 2)])
def test_depthwise_conv2d(c, h, w, st):
    rng = np.random.default_rng(c)
    a, wt = _rand(rng, 1, c, h, w), _rand(rng, c, 1, 3, 3)
    ref = depthwise_conv2d_python_nchw(a, wt, (st, st), "SAME" if st == 1 else [1, 1, 1, 1])

    def make():
        A, W = te.placeholder(a.shape, name="A"), te.placeholder(wt.shape, name="W")
        return [A, W], x86.depthwise_conv2d_nchw(A, W, (st, st), (1, 1, 1, 1), (1, 1), "float32")
    out = _run(x86.schedule_depthwise_conv2d_nchw, make, [a, wt], ref.shape)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_injective_and_reductions_vectorized():
    rng = np.random.default_rng(7)
    x = _rand(rng, 3, 5, 20)
    with tvm.target.Target(TARGET):
        X = te.placeholder(x.shape, name="X")
        outs = {"inj": (topi.nn.relu(topi.add(X, 1.0)), np.maximum(x + 1, 0), x86.schedule_injective),
                "softmax": (topi.nn.softmax(X, -1), None, x86.schedule_softmax),
                "sum": (topi.sum(X, axis=1), x.sum(axis=1), x86.schedule_reduce)}
        e = np.exp(x - x.max(-1, keepdims=True))
        outs["softmax"] = (outs["softmax"][0], e / e.sum(-1, keepdims=True), x86.schedule_softmax)
        built = {k: (tvm.build(sch([o]), [X, o], target=TARGET), ref) for k, (o, ref, sch) in outs.items()}
    for name, (f, ref) in built.items():
        out = tvm.nd.array(np.zeros(ref.shape, "float32"))
        f(tvm.nd.array(x), out)
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-5, err_msg=name)


def test_pool_nchw8c():
    rng = np.random.default_rng(8)
    x = _rand(rng, 1, 2, 9, 7, 8)
    with tvm.target.Target(TARGET):
        X = te.placeholder(x.shape, name="X")
        o = topi.nn.pool2d(X, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), "max", False, "NCHW8c")
        f = tvm.build(x86.schedule_pool([o]), [X, o], target=TARGET)
    out = tvm.nd.array(np.zeros([int(d) for d in o.shape], "float32"))
    f(tvm.nd.array(x), out)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1), (0, 0)), constant_values=-np.inf)
    ref = np.stack([[xp[:, :, i * 2:i * 2 + 3, j * 2:j * 2 + 3].max(axis=(2, 3)) for j in range(4)]
                    for i in range(5)]).transpose(2, 3, 0, 1, 4)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6)
