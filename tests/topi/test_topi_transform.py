"""Injective transforms: TE compute + generic schedule vs numpy."""
import numpy as np
import pytest

from kiln import te, topi
from kiln.error import KilnError
import kiln.topi.testing as tt
from kiln.topi.testing import run_te

rng = np.random.default_rng(2)


def rand(*shape):
    return rng.standard_normal(shape).astype("float32")


def run1(inputs, out, arrays, backend=None):
    return run_te(inputs, out, arrays, target=backend)[0]


@pytest.mark.parametrize("newshape,expect", [
    ((6, -1), (6, 5)), ((0, -1), (2, 15)), ((-1,), (30,)), ((-2,), (2, 3, 5)), ((-3, 5), (6, 5)),
    ((2, -4, 1, 3, 5), (2, 1, 3, 5)), ((0, 0, 0), (2, 3, 5))])
def test_reshape_codes(newshape, expect, backend):
    x = rand(2, 3, 5)
    A = te.placeholder(x.shape, name="A")
    out = run1([A], topi.reshape(A, newshape), [x], backend)
    np.testing.assert_array_equal(out, x.reshape(expect))


def test_reshape_errors():
    A = te.placeholder((2, 3, 5), name="A")
    for bad in [(7, -1), (-1, -1), (4, 4)]:
        with pytest.raises(KilnError, match="reshape"):
            topi.reshape(A, bad)


def test_transpose_squeeze_expand_dims(backend):
    x = rand(2, 1, 3, 1)
    A = te.placeholder(x.shape, name="A")
    t1, t2, s1, s2, e1 = run_te([A], [topi.transpose(A, (2, 0, 3, 1)), topi.transpose(A), topi.squeeze(A),
                                      topi.squeeze(A, [3]), topi.expand_dims(A, -1, 2)], [x], target=backend)
    np.testing.assert_array_equal(t1, x.transpose(2, 0, 3, 1))
    np.testing.assert_array_equal(t2, x.T)
    np.testing.assert_array_equal(s1, x.squeeze())
    np.testing.assert_array_equal(s2, x.squeeze(3))
    np.testing.assert_array_equal(e1, x[..., None, None])
    with pytest.raises(KilnError):
        topi.squeeze(A, [0])
    with pytest.raises(KilnError):
        topi.transpose(A, (0, 0, 1, 2))


def test_concatenate_split_stack(backend):
    a, b, c = rand(2, 3), rand(2, 1), rand(2, 4)
    A, B, C = (te.placeholder(v.shape, name=n) for v, n in ((a, "A"), (b, "B"), (c, "C")))
    out = run1([A, B, C], topi.concatenate([A, B, C], axis=1), [a, b, c], backend)
    np.testing.assert_array_equal(out, np.concatenate([a, b, c], 1))
    x = rand(6, 4)
    X = te.placeholder(x.shape, name="X")
    parts = run_te([X], topi.split(X, 3, 0), [x], target=backend)
    for got, ref in zip(parts, np.split(x, 3, 0)):
        np.testing.assert_array_equal(got, ref)
    parts = run_te([X], topi.split(X, [1, 3], 1), [x])
    for got, ref in zip(parts, np.split(x, [1, 3], 1)):
        np.testing.assert_array_equal(got, ref)
    st = run1([A], topi.stack([A, A], 0), [a])
    np.testing.assert_array_equal(st, np.stack([a, a]))
    with pytest.raises(KilnError, match="sections"):
        topi.split(X, 4, 0)
    with pytest.raises(KilnError, match="differ"):
        topi.concatenate([A, X])


@pytest.mark.parametrize("begin,end,strides,axes", [
    ([1, 0], [3, 4], None, None), ([-1, 3], [0, 0], [-1, -2], None), ([0, 1, 1], [5, 4, 7], [2, 1, 3], None),
    ([2], [5], [1], [2]), ([1], [100], None, [0])])
def test_strided_slice(begin, end, strides, axes, backend):
    x = rand(4, 5, 6)
    A = te.placeholder(x.shape, name="A")
    out = run1([A], topi.strided_slice(A, begin, end, strides, axes=axes), [x], backend)
    np.testing.assert_array_equal(out, tt.strided_slice_python(x, begin, end, strides, axes=axes))


@pytest.mark.parametrize("mode", ["clip", "wrap", "fast"])
def test_take(mode, backend):
    x = rand(3, 5)
    idx = np.array([[0, 4], [2, 1]], "int32") if mode == "fast" else np.array([[0, 7], [-1, 2]], "int32")
    A, I = te.placeholder(x.shape, name="A"), te.placeholder(idx.shape, "int32", "I")
    o1, o2 = run_te([A, I], [topi.take(A, I, axis=1, mode=mode), topi.take(A, I, mode=mode)], [x, idx],
                    target=backend)
    np.testing.assert_array_equal(o1, tt.take_python(x, idx, 1, mode))
    np.testing.assert_array_equal(o2, tt.take_python(x, idx, None, mode))


def test_gather_gather_nd_where(backend):
    x = rand(3, 4)
    idx = rng.integers(0, 4, (3, 2)).astype("int32")
    A, I = te.placeholder(x.shape, name="A"), te.placeholder(idx.shape, "int32", "I")
    np.testing.assert_array_equal(run1([A, I], topi.gather(A, 1, I), [x, idx], backend),
                                  tt.gather_python(x, 1, idx))
    nd = np.array([[0, 2], [1, 3]], "int32")
    N = te.placeholder(nd.shape, "int32", "N")
    np.testing.assert_array_equal(run1([A, N], topi.gather_nd(A, N), [x, nd]), tt.gather_nd_python(x, nd))
    c = rng.random((3, 1)) > 0.5
    y = rand(4)
    Cd, Y = te.placeholder(c.shape, "bool", "C"), te.placeholder(y.shape, name="Y")
    np.testing.assert_array_equal(run1([Cd, A, Y], topi.where(Cd, A, Y), [c, x, y], backend), np.where(c, x, y))


def test_full_arange_tile_repeat_flip_broadcast_to(backend):
    x = rand(2, 3)
    A = te.placeholder(x.shape, name="A")
    outs = run_te([A], [topi.full_like(A, 2.5), topi.tile(A, (2, 1, 2)), topi.repeat(A, 3, 1), topi.flip(A, 1),
                        topi.broadcast_to(A, (4, 2, 3)), topi.full((2, 2), "int32", 7)], [x], target=backend)
    np.testing.assert_array_equal(outs[0], np.full_like(x, 2.5))
    np.testing.assert_array_equal(outs[1], np.tile(x, (2, 1, 2)))
    np.testing.assert_array_equal(outs[2], np.repeat(x, 3, 1))
    np.testing.assert_array_equal(outs[3], x[:, ::-1])
    np.testing.assert_array_equal(outs[4], np.broadcast_to(x, (4, 2, 3)))
    np.testing.assert_array_equal(outs[5], np.full((2, 2), 7))
    X = te.placeholder((1,), name="X")
    (ar,) = run_te([X], [topi.arange(1.0, 4.0, 0.5)], [np.zeros(1, "float32")])
    np.testing.assert_allclose(ar, np.arange(1.0, 4.0, 0.5))
    with pytest.raises(KilnError):
        topi.broadcast_to(A, (4, 3, 3))


def test_one_hot(backend):
    ind = rng.integers(0, 4, (2, 3)).astype("int32")
    I = te.placeholder(ind.shape, "int32", "I")
    out = run1([I], topi.one_hot(I, 1.0, 0.0, 4, -1, "float32"), [ind], backend)
    np.testing.assert_array_equal(out, tt.one_hot(ind, 1.0, 0.0, 4, -1, "float32"))


@pytest.mark.parametrize("src,dst,shape", [
    ("NCHW", "NCHW4c", (1, 8, 3, 2)), ("NCHW4c", "NCHW", (1, 2, 3, 2, 4)), ("NCHW", "NHWC", (2, 3, 4, 5)),
    ("NHWC", "NCHW", (2, 4, 5, 3)), ("NCHW4c", "NCHW2c", (1, 2, 2, 3, 4)), ("OIHW", "OIHW2i4o", (8, 4, 1, 3))])
def test_layout_transform(src, dst, shape, backend):
    x = rand(*shape)
    A = te.placeholder(shape, name="A")
    out = run1([A], topi.layout_transform(A, src, dst), [x], backend)
    np.testing.assert_array_equal(out, tt.layout_transform_python(x, src, dst))
