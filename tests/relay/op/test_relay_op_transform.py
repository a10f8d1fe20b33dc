import numpy as np
import pytest

from kiln import relay
from kiln.error import TypeInferenceError
from kiln.ir import Op, OpPattern, TensorType, TupleType

from op_helpers import out_type, rnd, run


@pytest.mark.parametrize("shape,newshape,expect", [
    ((2, 3, 4), (-1,), (24,)), ((2, 3, 4), (0, -1), (2, 12)), ((2, 3, 4), (-2,), (2, 3, 4)),
    ((2, 3, 4), (6, 1, -2), (6, 1, 4)), ((2, 3, 4), (-3, 4), (6, 4)), ((2, 3, 4), (-4, 1, 2, -2), (1, 2, 3, 4)),
    ((2, 3, 4), (2, -4, -1, 3, 4), (2, 1, 3, 4)), ((6, 5), (3, 2, 5), (3, 2, 5)), ((2, 3, 4), (0, 0, -1), (2, 3, 4)),
])
def test_reshape_codes(shape, newshape, expect):
    x = rnd(*shape)
    got = run(lambda v: relay.reshape(v, newshape), x)
    assert got.shape == expect
    np.testing.assert_array_equal(got.reshape(-1), x.reshape(-1))


def test_reshape_error_names_shapes():
    with pytest.raises(TypeInferenceError, match=r"reshape.*\(2, 3\).*6 elements.*\(4,\)"):
        out_type(lambda v: relay.reshape(v, (4,)), np.zeros((2, 3), "float32"))


def test_transpose_squeeze_expand():
    x = rnd(2, 1, 3, 1)
    np.testing.assert_array_equal(run(lambda v: relay.transpose(v, (2, 0, 3, 1)), x), x.transpose(2, 0, 3, 1))
    np.testing.assert_array_equal(run(relay.transpose, x), x.transpose())
    assert run(relay.squeeze, x).shape == (2, 3)
    assert run(lambda v: relay.squeeze(v, [1]), x).shape == (2, 3, 1)
    assert run(lambda v: relay.expand_dims(v, -1, 2), x).shape == (2, 1, 3, 1, 1, 1)
    with pytest.raises(TypeInferenceError, match="squeeze: axis 0 .* has size 2"):
        out_type(lambda v: relay.squeeze(v, [0]), x)
    with pytest.raises(TypeInferenceError, match="not a permutation"):
        out_type(lambda v: relay.transpose(v, (0, 0, 1, 2)), x)


def test_concatenate_stack_split():
    a, b = rnd(2, 3), rnd(2, 5, seed=1)
    np.testing.assert_array_equal(run(lambda x, y: relay.concatenate([x, y], axis=1), a, b),
                                  np.concatenate([a, b], 1))
    with pytest.raises(TypeInferenceError, match=r"input 1 has shape \(2, 5\), input 0 has \(2, 3\)"):
        out_type(lambda x, y: relay.concatenate([x, y], axis=0), a, b)
    c = rnd(2, 3, seed=2)
    np.testing.assert_array_equal(run(lambda x, y: relay.stack([x, y], axis=1), a, c), np.stack([a, c], 1))
    x = rnd(6, 4)
    parts = run(lambda v: relay.split(v, 3, axis=0), x)
    for p, q in zip(parts, np.split(x, 3, 0)):
        np.testing.assert_array_equal(p, q)
    parts = run(lambda v: relay.split(v, [1, 3], axis=1), x)
    assert [p.shape for p in parts] == [(6, 1), (6, 2), (6, 1)]
    wrapped = relay.split(relay.var("x", shape=(6, 4)), 2)
    assert isinstance(wrapped, relay.TupleWrapper) and len(wrapped) == 2
    assert out_type(lambda v: relay.split(v, 2).astuple(), x) == TupleType([TensorType((3, 4))] * 2)
    with pytest.raises(TypeInferenceError, match="cannot be split into 4 equal sections"):
        out_type(lambda v: relay.split(v, 4).astuple(), x)


@pytest.mark.parametrize("begin,end,strides,axes,mode", [
    ([0, 1], [2, 3], None, None, "end"), ([1], [-1], None, None, "end"), ([3, 0], [0, 4], [-1, 2], None, "end"),
    ([1], [2], None, [1], "end"), ([0, 1], [-1, 2], None, None, "size"), ([-3, -2], [100, 100], [1, 1], None, "end"),
])
def test_strided_slice(begin, end, strides, axes, mode):
    x = rnd(4, 5, 3)
    got = run(lambda v: relay.strided_slice(v, begin, end, strides, axes=axes, slice_mode=mode), x)
    import kiln.topi.testing as tt
    expect = tt.strided_slice_python(x, begin, end, strides or [1] * len(begin), mode, axes)
    np.testing.assert_array_equal(got, expect)


def test_take_gather():
    x = rnd(4, 5)
    idx = np.array([[0, 3], [4, 1]], "int32")
    np.testing.assert_array_equal(run(lambda v, i: relay.take(v, i, axis=1), x, idx), np.take(x, idx, axis=1))
    np.testing.assert_array_equal(run(lambda v, i: relay.take(v, i), x, idx), np.take(x.reshape(-1), idx))
    big = np.array([7, -1], "int32")
    np.testing.assert_array_equal(run(lambda v, i: relay.take(v, i, axis=0), x, big), x[[3, 0]])
    np.testing.assert_array_equal(run(lambda v, i: relay.take(v, i, axis=0, mode="wrap"), x, big), x[[3, 3]])
    g = np.array([[0, 1, 3, 2, 0], [3, 3, 2, 1, 0]], "int64")
    np.testing.assert_array_equal(run(lambda v, i: relay.gather(v, 0, i), x, g), np.take_along_axis(x, g, 0))
    with pytest.raises(TypeInferenceError, match="indices must be integers"):
        out_type(lambda v, i: relay.take(v, i), x, x)


def test_broadcast_to_arange_tile_repeat_reverse():
    x = rnd(3, 1)
    np.testing.assert_array_equal(run(lambda v: relay.broadcast_to(v, (2, 3, 4)), x), np.broadcast_to(x, (2, 3, 4)))
    with pytest.raises(TypeInferenceError, match=r"\(3, 1\) and \(2, 4\) are not broadcastable"):
        out_type(lambda v: relay.broadcast_to(v, (2, 4)), x)
    np.testing.assert_allclose(run(lambda: relay.arange(relay.const(1.0), relay.const(4.0), relay.const(0.5))),
                               np.arange(1, 4, 0.5))
    got = run(lambda: relay.arange(5, dtype="int32"))
    assert got.dtype == np.int32 and list(got) == [0, 1, 2, 3, 4]
    np.testing.assert_array_equal(run(lambda v: relay.tile(v, (2, 3)), x), np.tile(x, (2, 3)))
    np.testing.assert_array_equal(run(lambda v: relay.tile(v, (2, 1, 2)), x), np.tile(x, (2, 1, 2)))
    np.testing.assert_array_equal(run(lambda v: relay.repeat(v, 3, 0), x), np.repeat(x, 3, 0))
    np.testing.assert_array_equal(run(lambda v: relay.reverse(v, 0), x), x[::-1])


def test_layout_transform():
    x = rnd(1, 16, 3, 5)
    got = run(lambda v: relay.layout_transform(v, "NCHW", "NCHW8c"), x)
    assert got.shape == (1, 2, 3, 5, 8)
    np.testing.assert_array_equal(got, x.reshape(1, 2, 8, 3, 5).transpose(0, 1, 3, 4, 2))
    back = run(lambda v: relay.layout_transform(relay.layout_transform(v, "NCHW", "NHWC"), "NHWC", "NCHW"), x)
    np.testing.assert_array_equal(back, x)
    with pytest.raises(TypeInferenceError, match="does not split by 5"):
        out_type(lambda v: relay.layout_transform(v, "NCHW", "NCHW5c"), x)


def test_reductions():
    x = rnd(3, 4, 5)
    for name, fn in (("sum", np.sum), ("mean", np.mean), ("max", np.max), ("min", np.min), ("prod", np.prod)):
        np.testing.assert_allclose(run(lambda v: getattr(relay, name)(v, axis=1), x), fn(x, axis=1), rtol=1e-5)
        np.testing.assert_allclose(run(lambda v: getattr(relay, name)(v, axis=(0, 2), keepdims=True), x),
                                   fn(x, axis=(0, 2), keepdims=True), rtol=1e-5)
        np.testing.assert_allclose(run(lambda v: getattr(relay, name)(v, axis=1, exclude=True), x),
                                   fn(x, axis=(0, 2)), rtol=1e-5)
        assert Op.get(name).get_attr("TOpPattern") == OpPattern.COMM_REDUCE
    np.testing.assert_allclose(run(relay.sum, x), x.sum(), rtol=1e-5)
    got = run(lambda v: relay.argmax(v, axis=2), x)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.argmax(x, 2))
    np.testing.assert_array_equal(run(lambda v: relay.argmin(v, axis=[0], keepdims=True), x),
                                  np.argmin(x, 0)[None])
    ties = np.array([[1, 3, 3, 0]], "float32")
    np.testing.assert_array_equal(run(lambda v: relay.argmax(v, axis=1, select_last_index=True), ties), [2])
    np.testing.assert_allclose(run(lambda v: relay.variance(v, axis=1), x), np.var(x, 1), rtol=1e-5)
    np.testing.assert_allclose(run(lambda v: relay.std(v, axis=(1, 2), unbiased=True), x),
                               np.std(x, (1, 2), ddof=1), rtol=1e-5)
    with pytest.raises(TypeInferenceError, match="reduction axis 3 is out of range"):
        out_type(lambda v: relay.sum(v, axis=3), x)


def test_transform_attrs():
    x = relay.var("x", shape=(2, 3))
    r = relay.reshape(x, 6)
    assert r.attrs.type_key == "relay.attrs.ReshapeAttrs" and r.attrs.newshape == (6,) and r.attrs.allowzero is False
    s = relay.strided_slice(x, [0], [1])
    assert s.attrs.type_key == "relay.attrs.StridedSliceAttrs" and s.attrs.strides == (1,) and s.attrs.slice_mode == "end"
    t = relay.take(x, relay.const(1), axis=1)
    assert (t.attrs.axis, t.attrs.mode, t.attrs.batch_dims) == (1, "clip", 0)
    assert relay.sum(x, 1).attrs.axis == (1,)
    assert relay.expand_dims(x, 0).attrs.num_newaxis == 1
    assert Op.get("expand_dims").get_attr("TOpPattern") == OpPattern.BROADCAST
    assert Op.get("reshape").get_attr("TOpPattern") == OpPattern.INJECTIVE
