"""Shape queries and shape-following ops (TVM's ``shape_of``, ``ndarray_size``, ``broadcast_to_like``,
``collapse_sum_like``, ``slice_like``)."""
from __future__ import annotations

import numpy as np

from ...error import TypeInferenceError
from ...ir.attrs import Attrs, Field
from ...ir.op import Op, OpPattern, register_op_attr
from ...ir.type import TensorType
from ...runtime.dtype import dtype_str
from ..expr import Call
from .type_relations import broadcast_shape, normalize_axis, shape_text, tensor_arg
from ._define import define_op, topi_compute, topi_fn
from ...topi.shape_ops import collapse_axes

__all__ = ["shape_of", "ndarray_size", "broadcast_to_like", "collapse_sum_like", "slice_like"]


class ShapeOfAttrs(Attrs):
    type_key = "relay.attrs.ShapeOfAttrs"
    fields = {"dtype": Field("int32", dtype_str)}


class NdarraySizeAttrs(Attrs):
    type_key = "relay.attrs.NdarraySizeAttrs"
    fields = {"dtype": Field("int32", dtype_str)}


class SliceLikeAttrs(Attrs):
    type_key = "relay.attrs.SliceLikeAttrs"
    fields = {"axes": Field(None, lambda v: None if v is None else tuple(int(a) for a in v))}


def _static(t):
    for d in t.shape:
        if not isinstance(d, int):
            raise TypeInferenceError(f"shape {shape_text(t.shape)} has a symbolic dimension; kiln needs static shapes")
    return tuple(t.shape)


def _shape_of_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    return TensorType((len(t.shape),), attrs.dtype)


def _shape_of_compute(attrs, inputs, out_type):
    shape = [int(d) for d in inputs[0].shape]
    return [topi_fn("const_vector", "shape_of")(np.array(shape, dtype=attrs.dtype))]


define_op("shape_of", num_inputs=1, attrs=ShapeOfAttrs, rel=_shape_of_rel, rel_name="ShapeOf", pattern=OpPattern.OPAQUE,
          reference=lambda a, i, t: np.array(i[0].shape, dtype=a.dtype), compute=_shape_of_compute, level=10)
register_op_attr("shape_of", "TNonComputational", True)


def _ndarray_size_rel(arg_types, attrs):
    tensor_arg(arg_types, 0, "data")
    return TensorType((), attrs.dtype)


define_op("ndarray_size", num_inputs=1, attrs=NdarraySizeAttrs, rel=_ndarray_size_rel, rel_name="NdarraySize",
          pattern=OpPattern.OPAQUE, reference=lambda a, i, t: np.array(i[0].size, dtype=a.dtype), level=10)
register_op_attr("ndarray_size", "TNonComputational", True)


def _broadcast_to_like_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    like = tensor_arg(arg_types, 1, "broadcast_type")
    if broadcast_shape(t.shape, like.shape) != tuple(like.shape):
        raise TypeInferenceError(f"broadcast_to_like: cannot broadcast {shape_text(t.shape)} to "
                                 f"{shape_text(like.shape)}")
    return TensorType(like.shape, t.dtype)


define_op("broadcast_to_like", num_inputs=2, args=("data", "broadcast_type"), rel=_broadcast_to_like_rel,
          rel_name="BroadCastToLike", pattern=OpPattern.BROADCAST,
          reference=lambda a, i, t: np.broadcast_to(i[0], t.shape).copy(),
          compute=topi_compute("broadcast_to", "broadcast_to_like", lambda a, i, t: [i[0], list(t.shape)]), level=10)


def _collapse_axes(shape, target):
    """Axes of ``shape`` summed away to give ``target`` (numpy broadcasting run backwards)."""
    return collapse_axes(shape, target, "collapse_sum_like", TypeInferenceError)


def _collapse_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    like = tensor_arg(arg_types, 1, "collapse_type")
    _collapse_axes(_static(t), _static(like))
    return TensorType(like.shape, t.dtype)


def _collapse_ref(attrs, inputs, out_type):
    x, like = inputs  # the target shape from the value, so run-time (Any) shapes work in the interpreter
    axes = _collapse_axes(x.shape, tuple(like.shape))
    return np.sum(x, axis=tuple(axes)).reshape(like.shape) if axes else x.copy()


define_op("collapse_sum_like", num_inputs=2, args=("data", "collapse_type"), rel=_collapse_rel,
          rel_name="CollapseSumLike", pattern=OpPattern.COMM_REDUCE, reference=_collapse_ref, level=10)


def _slice_like_axes(attrs, ndim, like_ndim):
    if attrs.axes is None or len(attrs.axes) == 0:
        return list(range(min(ndim, like_ndim)))
    return [normalize_axis(a, ndim, "slice_like axis") for a in attrs.axes]


def _slice_like_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    like = tensor_arg(arg_types, 1, "shape_like")
    shape = list(t.shape)
    for a in _slice_like_axes(attrs, len(t.shape), len(like.shape)):
        if a >= len(like.shape):
            raise TypeInferenceError(f"slice_like: axis {a} is beyond the rank of shape_like {shape_text(like.shape)}")
        if like.shape[a] > t.shape[a]:
            raise TypeInferenceError(f"slice_like: shape_like {shape_text(like.shape)} is larger than the data "
                                     f"{shape_text(t.shape)} on axis {a}")
        shape[a] = like.shape[a]
    return TensorType(shape, t.dtype)


define_op("slice_like", num_inputs=2, args=("data", "shape_like"), attrs=SliceLikeAttrs, rel=_slice_like_rel,
          rel_name="SliceLike", pattern=OpPattern.INJECTIVE,
          reference=lambda a, i, t: i[0][tuple(slice(0, n) for n in t.shape)], level=10)


def shape_of(data, dtype="int32"):
    """The shape of ``data`` as a 1-D tensor."""
    op = Op.get("shape_of")
    return Call(op, [data], op.make_attrs(dtype=dtype))


def ndarray_size(data, dtype="int32"):
    """The number of elements of ``data`` (a scalar)."""
    op = Op.get("ndarray_size")
    return Call(op, [data], op.make_attrs(dtype=dtype))


def broadcast_to_like(data, broadcast_type):
    return Call(Op.get("broadcast_to_like"), [data, broadcast_type])


def collapse_sum_like(data, collapse_type):
    """Sum ``data`` down to the shape of ``collapse_type`` (the inverse of broadcasting)."""
    return Call(Op.get("collapse_sum_like"), [data, collapse_type])


def slice_like(data, shape_like, axes=None):
    op = Op.get("slice_like")
    return Call(op, [data, shape_like], op.make_attrs(axes=axes))



