"""NN computes (conv, dense, pooling, norms, softmax, resize ...) vs the numpy references."""
import numpy as np
import pytest

from kiln import te, topi
from kiln.error import KilnError
import kiln.topi.testing as tt
from kiln.topi.testing import run_te

rng = np.random.default_rng(3)


def rand(*shape):
    return rng.standard_normal(shape).astype("float32")


def close(a, b, tol=1e-4):
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def ph(x, name):
    return te.placeholder(x.shape, str(x.dtype), name)


@pytest.mark.parametrize("stride,pad,dil,groups", [(1, 1, 1, 1), (2, 0, 1, 1), (1, (1, 0, 2, 1), 2, 1),
                                                    (2, 1, 1, 2), (1, "SAME", 1, 1)])
def test_conv2d_nchw_nhwc(stride, pad, dil, groups, backend):
    a, w = rand(1, 4, 7, 6), rand(3 * groups, 4 // groups, 3, 3)
    ref = tt.conv2d_nchw_python(a, w, stride, pad, groups, dilation=dil)
    A, W = ph(a, "A"), ph(w, "W")
    close(run_te([A, W], topi.nn.conv2d(A, W, stride, pad, dil, "NCHW", groups=groups), [a, w], target=backend)[0], ref)
    an, wn = a.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0)
    An, Wn = ph(an, "A"), ph(wn, "W")
    out = run_te([An, Wn], topi.nn.conv2d(An, Wn, stride, pad, dil, "NHWC", groups=groups), [an, wn])[0]
    close(out, ref.transpose(0, 2, 3, 1))


def test_conv2d_errors():
    A, W = te.placeholder((1, 4, 5, 5), name="A"), te.placeholder((2, 3, 3, 3), name="W")
    with pytest.raises(KilnError, match="channels"):
        topi.nn.conv2d_nchw(A, W, 1, 0, 1)
    with pytest.raises(KilnError, match="kernel"):
        topi.nn.conv2d_nchw(A, te.placeholder((2, 4, 7, 7), name="W"), 1, 0, 1)


@pytest.mark.parametrize("mult,stride,pad", [(1, 1, 1), (2, 2, 0)])
def test_depthwise(mult, stride, pad, backend):
    a, w = rand(1, 3, 6, 5), rand(3, mult, 3, 3)
    A, W = ph(a, "A"), ph(w, "W")
    out = run_te([A, W], topi.nn.depthwise_conv2d_nchw(A, W, stride, pad, 1), [a, w], target=backend)[0]
    close(out, tt.depthwise_conv2d_python_nchw(a, w, stride, pad))
    an, wn = a.transpose(0, 2, 3, 1), w.transpose(2, 3, 0, 1)
    An, Wn = ph(an, "A"), ph(wn, "W")
    out = run_te([An, Wn], topi.nn.depthwise_conv2d_nhwc(An, Wn, stride, pad, 1), [an, wn])[0]
    close(out, tt.depthwise_conv2d_python_nhwc(an, wn, stride, pad))


@pytest.mark.parametrize("stride,pad,opad,groups", [(1, 0, 0, 1), (2, 1, 1, 1), (2, 0, 0, 2)])
def test_conv2d_transpose(stride, pad, opad, groups, backend):
    a, w = rand(1, 4, 4, 3), rand(4, 2, 3, 3)
    A, W = ph(a, "A"), ph(w, "W")
    out = run_te([A, W], topi.nn.group_conv2d_transpose_nchw(A, W, stride, pad, "float32", (opad, opad), groups),
                 [a, w], target=backend)[0]
    close(out, tt.conv2d_transpose_nchw_python(a, w, stride, pad, (opad, opad), groups))


def test_dense_matmul_batch_matmul(backend):
    x, w, b = rand(3, 5), rand(4, 5), rand(4)
    X, Wt, B = ph(x, "X"), ph(w, "W"), ph(b, "B")
    d, db = run_te([X, Wt, B], [topi.nn.dense(X, Wt), topi.nn.dense(X, Wt, B)], [x, w, b], target=backend)
    close(d, x @ w.T)
    close(db, x @ w.T + b)
    y = rand(5, 4)
    Y = ph(y, "Y")
    m1, m2 = run_te([X, Y], [topi.nn.matmul(X, Y), topi.nn.matmul(Y, X, transpose_a=True, transpose_b=True)],
                    [x, y])
    close(m1, x @ y)
    close(m2, y.T @ x.T)
    p, q = rand(2, 3, 5), rand(1, 4, 5)
    P, Q = ph(p, "P"), ph(q, "Q")
    close(run_te([P, Q], topi.nn.batch_matmul(P, Q), [p, q], target=backend)[0], tt.batch_matmul(p, q))
    q2 = rand(2, 5, 4)
    Q2 = ph(q2, "Q2")
    close(run_te([P, Q2], topi.nn.batch_matmul(P, Q2, transpose_b=False), [p, q2])[0],
          tt.batch_matmul(p, q2, trans_y=False))
    with pytest.raises(KilnError, match="do not fit"):
        topi.nn.dense(X, Y)


def test_activations_softmax(backend):
    x = rand(2, 3, 4)
    s = rand(3)
    X, S = ph(x, "X"), ph(s, "S")
    outs = run_te([X, S], [topi.nn.relu(X), topi.nn.leaky_relu(X, 0.1), topi.nn.prelu(X, S, 1),
                           topi.nn.softmax(X, 1), topi.nn.log_softmax(X, -1)], [x, s], target=backend)
    close(outs[0], np.maximum(x, 0))
    close(outs[1], np.where(x > 0, x, 0.1 * x))
    close(outs[2], np.where(x > 0, x, x * s[None, :, None]))
    close(outs[3], tt.softmax_python(x, 1))
    close(outs[4], tt.log_softmax_python(x, -1))


def test_norms(backend):
    x = rand(2, 4, 3, 5)
    g, b = rand(3, 5), rand(3, 5)
    X, G, B = ph(x, "X"), ph(g, "G"), ph(b, "B")
    close(run_te([X, G, B], topi.nn.layer_norm(X, G, B, (2, 3), 1e-5), [x, g, b], target=backend)[0],
          tt.layer_norm_python(x, g, b, (2, 3)))
    gc, bc = rand(4), rand(4)
    GC, BC = ph(gc, "GC"), ph(bc, "BC")
    close(run_te([X, GC, BC], topi.nn.group_norm(X, GC, BC, 2, 1, (2, 3)), [x, gc, bc], target=backend)[0],
          tt.group_norm_python(x, gc, bc, 2, 1, (2, 3)))
    m, v = rand(4), np.abs(rand(4)) + 0.5
    M, V = ph(m, "M"), ph(v, "V")
    out = topi.nn.batch_norm(X, GC, BC, M, V, axis=1, epsilon=1e-3)
    close(run_te([X, GC, BC, M, V], out[0], [x, gc, bc, m, v], target=backend)[0],
          tt.batch_norm(x, gc, bc, m, v, 1, 1e-3, True, True, False, 0.1)[0])
    tr = topi.nn.batch_norm(X, GC, BC, M, V, axis=1, training=True, momentum=0.2)
    got = run_te([X, GC, BC, M, V], tr, [x, gc, bc, m, v])
    for g_, r_ in zip(got, tt.batch_norm(x, gc, bc, m, v, 1, 1e-5, True, True, True, 0.2)):
        close(g_, r_)


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
def test_pad(mode, backend):
    x = rand(3, 4)
    X = ph(x, "X")
    if mode == "constant":
        t = topi.nn.pad(X, [1, 0], [2, 3], 1.5)
        ref = np.pad(x, ((1, 2), (0, 3)), constant_values=1.5)
    elif mode == "edge":
        t = topi.nn.edge_pad(X, [1, 0], [2, 3])
        ref = np.pad(x, ((1, 2), (0, 3)), mode="edge")
    else:
        t = topi.nn.mirror_pad(X, [1, 0], [2, 3], "REFLECT")
        ref = np.pad(x, ((1, 2), (0, 3)), mode="reflect")
    close(run_te([X], t, [x], target=backend)[0], ref)


@pytest.mark.parametrize("k,s,p,ceil,cip,layout", [
    (3, 2, 1, False, True, "NCHW"), (3, 2, 1, True, False, "NCHW"), (2, 3, 1, True, True, "NHWC"),
    (3, 1, 1, False, False, "NHWC")])
def test_pool2d(k, s, p, ceil, cip, layout, backend):
    x = rand(1, 2, 7, 8)
    xl = x if layout == "NCHW" else x.transpose(0, 2, 3, 1)
    X = ph(xl, "X")
    for ptype in ("max", "avg"):
        t = topi.nn.pool2d(X, (k, k), (s, s), (1, 1), (p, p, p, p), ptype, ceil, layout, cip)
        ref = tt.pool2d_python(xl, (k, k), (s, s), (p, p), ptype, ceil, cip, layout=layout)
        close(run_te([X], t, [xl], target=backend)[0], ref)


def test_pool_dilation_global_adaptive(backend):
    x = rand(1, 3, 9, 7)
    X = ph(x, "X")
    t = topi.nn.pool2d(X, (2, 3), (1, 2), (2, 1), (1, 0, 0, 1), "max", False, "NCHW", True)
    close(run_te([X], t, [x])[0], tt.poolnd_python(x, (2, 3), (1, 2), (2, 1), (1, 0), (0, 1), "max"))
    g1, g2 = run_te([X], [topi.nn.global_pool(X, "avg"), topi.nn.global_pool(X, "max")], [x], target=backend)
    close(g1, x.mean(axis=(2, 3), keepdims=True))
    close(g2, x.max(axis=(2, 3), keepdims=True))
    for out in [(1, 1), (4, 3), (5, 7)]:
        a1, a2 = run_te([X], [topi.nn.adaptive_pool(X, out, "avg"), topi.nn.adaptive_pool(X, out, "max")], [x],
                        target=backend)
        close(a1, tt.adaptive_pool(x, out, "avg", "NCHW"))
        close(a2, tt.adaptive_pool(x, out, "max", "NCHW"))


@pytest.mark.parametrize("method,mode", [("nearest_neighbor", "asymmetric"), ("nearest_neighbor", "align_corners"),
                                         ("linear", "half_pixel"), ("linear", "align_corners"),
                                         ("cubic", "half_pixel")])
def test_resize2d(method, mode, backend):
    x = rand(1, 2, 4, 5)
    X = ph(x, "X")
    t = topi.image.resize2d(X, None, (7, 3), "NCHW", method, mode)
    ref = tt.resize2d_python(x, (7 / 4, 3 / 5), "NCHW", method, mode)
    close(run_te([X], t, [x], target=backend)[0], ref)
    xn = x.transpose(0, 2, 3, 1)
    Xn = ph(xn, "Xn")
    t = topi.image.resize2d(Xn, None, (7, 3), "NHWC", method, mode)
    close(run_te([Xn], t, [xn])[0], ref.transpose(0, 2, 3, 1))


def test_upsampling_dilate(backend):
    x = rand(1, 2, 3, 4)
    X = ph(x, "X")
    u, b, d = run_te([X], [topi.nn.upsampling(X, 2, 3), topi.nn.upsampling(X, 2, 2, method="bilinear",
                                                                            align_corners=True),
                           topi.nn.dilate(X, (1, 1, 2, 3), 0.5)], [x], target=backend)
    close(u, tt.upsampling_python(x, (2, 3)))
    close(b, tt.bilinear_resize_python(x, (6, 8), "NCHW"))
    close(d, tt.dilate_python(x, (1, 1, 2, 3), 0.5))
