"""Index-driven ops (TVM's ``one_hot``, ``gather_nd``, ``sequence_mask``)."""
from __future__ import annotations

import numpy as np

from ...error import TypeInferenceError
from ...ir.attrs import Attrs, Field
from ...ir.op import Op, OpPattern
from ...ir.type import TensorType
from ...runtime.dtype import dtype_str
from ..expr import Call
from ._define import define_op, topi_compute
from .type_relations import is_any, shape_text, tensor_arg

__all__ = ["one_hot", "gather_nd", "sequence_mask"]


class OneHotAttrs(Attrs):
    type_key = "relay.attrs.OneHotAttrs"
    fields = {"depth": Field(1, int), "axis": Field(-1, int), "dtype": Field("float32", dtype_str)}


class GatherNDAttrs(Attrs):
    type_key = "relay.attrs.GatherNDAttrs"
    fields = {"batch_dims": Field(0, int), "index_rank": Field(None, int)}


class SequenceMaskAttrs(Attrs):
    type_key = "relay.attrs.SequenceMaskAttrs"
    fields = {"mask_value": Field(0.0, float), "axis": Field(0, int)}


def _one_hot_rel(arg_types, attrs):
    idx = tensor_arg(arg_types, 0, "indices")
    for k, name in ((1, "on_value"), (2, "off_value")):
        if tensor_arg(arg_types, k, name).shape != ():
            raise TypeInferenceError(f"one_hot: {name} must be a scalar")
    ndim = len(idx.shape)
    axis = attrs.axis if attrs.axis >= 0 else ndim + 1 + attrs.axis
    if not 0 <= axis <= ndim:
        raise TypeInferenceError(f"one_hot: axis {attrs.axis} is out of range for indices {shape_text(idx.shape)}")
    return TensorType(idx.shape[:axis] + (attrs.depth,) + idx.shape[axis:], attrs.dtype)


def _one_hot_ref(attrs, inputs, out_type):
    idx, on, off = inputs
    hot = idx[..., None] == np.arange(attrs.depth)
    out = np.where(hot, on, off)
    axis = attrs.axis if attrs.axis >= 0 else idx.ndim + 1 + attrs.axis
    return np.moveaxis(out, -1, axis)


define_op("one_hot", num_inputs=3, args=("indices", "on_value", "off_value"), attrs=OneHotAttrs, rel=_one_hot_rel,
          rel_name="OneHot", pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=_one_hot_ref,
          compute=topi_compute("one_hot", "one_hot",
                               lambda a, i, t: [i[0], i[1](), i[2](), a.depth, a.axis, a.dtype]), level=10)


def _gather_nd_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    idx = tensor_arg(arg_types, 1, "indices")
    if not idx.dtype.startswith(("int", "uint")):
        raise TypeInferenceError(f"gather_nd: indices must be integers, got {idx.dtype}")
    if attrs.batch_dims:
        raise TypeInferenceError("gather_nd: batch_dims other than 0 is not implemented in kiln")
    if len(idx.shape) >= 1 and is_any(idx.shape[0]):  # an unknown first dimension: index_rank tells it
        if attrs.index_rank is None:
            raise TypeInferenceError(f"gather_nd: the first dimension of indices {shape_text(idx.shape)} (how many "
                                     "data axes it indexes) is unknown (relay.Any); give index_rank")
        m = int(attrs.index_rank)
        if m > len(data.shape):
            raise TypeInferenceError(f"gather_nd: index_rank {m} is larger than the rank of data "
                                     f"{shape_text(data.shape)}")
        return TensorType(idx.shape[1:] + data.shape[m:], data.dtype)
    if len(idx.shape) < 1 or idx.shape[0] > len(data.shape):
        raise TypeInferenceError(f"gather_nd: indices {shape_text(idx.shape)} must index at most the "
                                 f"{len(data.shape)} axes of data {shape_text(data.shape)} (first dimension)")
    m = idx.shape[0]
    return TensorType(idx.shape[1:] + data.shape[m:], data.dtype)


define_op("gather_nd", num_inputs=2, args=("data", "indices"), attrs=GatherNDAttrs, rel=_gather_nd_rel,
          rel_name="GatherND", pattern=OpPattern.INJECTIVE,
          reference=lambda a, i, t: i[0][tuple(i[1].astype(np.int64))],
          compute=topi_compute("gather_nd", "gather_nd", lambda a, i, t: [i[0], i[1], 0, a.index_rank]), level=3)


def _sequence_mask_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    length = tensor_arg(arg_types, 1, "valid_length")
    if attrs.axis not in (0, 1) or len(data.shape) < 2:
        raise TypeInferenceError(f"sequence_mask: axis must be 0 or 1 on data of rank >= 2, got axis {attrs.axis} "
                                 f"and {shape_text(data.shape)}")
    batch = data.shape[1 - attrs.axis]
    if length.shape != (batch,):
        raise TypeInferenceError(f"sequence_mask: valid_length must have shape ({batch},), got "
                                 f"{shape_text(length.shape)}")
    return TensorType(data.shape, data.dtype)


def _sequence_mask_ref(attrs, inputs, out_type):
    data, length = inputs
    t = np.arange(data.shape[attrs.axis])
    keep = t[:, None] < length[None, :] if attrs.axis == 0 else (t[:, None] < length[None, :]).T
    keep = keep.reshape(keep.shape + (1,) * (data.ndim - 2))
    return np.where(keep, data, attrs.mask_value)


define_op("sequence_mask", num_inputs=2, args=("data", "valid_length"), attrs=SequenceMaskAttrs,
          rel=_sequence_mask_rel, rel_name="SequenceMask", pattern=OpPattern.INJECTIVE, reference=_sequence_mask_ref,
          compute=topi_compute("sequence_mask", "sequence_mask", lambda a, i, t: [i[0], i[1], a.mask_value, a.axis]),
          level=10)


def one_hot(indices, on_value, off_value, depth, axis, dtype):
    """One-hot encode ``indices`` (``on_value``/``off_value`` are scalar expressions)."""
    op = Op.get("one_hot")
    return Call(op, [indices, on_value, off_value], op.make_attrs(depth=int(depth), axis=axis, dtype=dtype))


def gather_nd(data, indices, batch_dims=0, index_rank=None):
    """``out[i..] = data[indices[0, i..], indices[1, i..], ...]``."""
    op = Op.get("gather_nd")
    return Call(op, [data, indices], op.make_attrs(batch_dims=batch_dims, index_rank=index_rank))


def sequence_mask(data, valid_length, mask_value=0, axis=0):
    op = Op.get("sequence_mask")
    return Call(op, [data, valid_length], op.make_attrs(mask_value=mask_value, axis=axis))
