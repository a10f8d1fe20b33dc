"""``dyn.reshape``, ``dyn.broadcast_to``, ``dyn.tile``, ``dyn.strided_slice``, ``dyn.expand_dims``,
``dyn.squeeze``: the shape operand is a tensor whose values are known only at run time."""
from __future__ import annotations

import numpy as np

from ....error import TypeInferenceError
from ....ir.type import TensorType
from .. import op_attrs as A
from ..type_relations import tensor_arg
from ._common import any_shape, call, define_dyn_op, index_like, operand_length
from .... import te, tir
from ....topi.transform import reshape as topi_reshape
from ...expr import const
from ....runtime.vm_shape_funcs import reshape_dims, slice_dims, DYN_SHAPE_FUNCS

__all__ = ["reshape", "broadcast_to", "tile", "strided_slice", "expand_dims", "squeeze"]


def _ints(v):
    return [int(x) for x in np.asarray(v).reshape(-1)]


def _te():
    return te, tir


# -- reshape ---------------------------------------------------------------------------------------------------
def _reshape_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    return TensorType(any_shape(operand_length(arg_types, 1, "newshape", "dyn.reshape")), t.dtype)


def _reshape_compute(attrs, inputs, out_type):
    return [topi_reshape(inputs[0], list(out_type.shape))]


define_dyn_op("dyn.reshape", args=("data", "newshape"), attrs=A.ReshapeAttrs, rel=_reshape_rel,
              reference=lambda a, i, t: np.reshape(i[0], reshape_dims(i[0].shape, _ints(i[1]), a.allowzero)),
              compute=_reshape_compute)


def reshape(data, newshape, allowzero=False):
    """Reshape ``data`` to the run-time shape tensor ``newshape`` (0 copies a dim, one -1 is inferred)."""
    return call("dyn.reshape", [data, newshape], allowzero=allowzero)


# -- broadcast_to / tile ---------------------------------------------------------------------------------------
def _wrap_index(i, dim):
    """Index ``i`` of a broadcast output into an input axis of size ``dim`` (1 -> 0; ``i % dim`` when unknown)."""
    _, tir = _te()
    if isinstance(dim, int):
        return 0 if dim == 1 else i
    return tir.floormod(i, tir.max(index_like(i, dim), 1))


def _broadcast_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    n = operand_length(arg_types, 1, "shape", "dyn.broadcast_to")
    if n < len(t.shape):
        raise TypeInferenceError(f"dyn.broadcast_to: target rank {n} is below the input rank {len(t.shape)}")
    return TensorType(any_shape(n), t.dtype)


def _broadcast_compute(attrs, inputs, out_type):
    te, _ = _te()
    data = inputs[0]
    dims = [d if not isinstance(getattr(d, "value", d), int) else int(getattr(d, "value", d)) for d in data.shape]
    off = len(out_type.shape) - len(dims)
    return [te.compute(list(out_type.shape),
                       lambda *i: data(*[_wrap_index(i[off + k], d) for k, d in enumerate(dims)]),
                       name="T_dyn_broadcast_to")]


define_dyn_op("dyn.broadcast_to", args=("data", "shape"), attrs=A.InitOpAttrs, rel=_broadcast_rel,
              reference=lambda a, i, t: np.broadcast_to(i[0], _ints(i[1])).copy(), compute=_broadcast_compute)


def broadcast_to(data, shape):
    return call("dyn.broadcast_to", [data, shape])


def _tile_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    n = operand_length(arg_types, 1, "reps", "dyn.tile")
    return TensorType(any_shape(max(n, len(t.shape))), t.dtype)


def _tile_compute(attrs, inputs, out_type):
    te, tir = _te()
    data = inputs[0]
    dims = [int(getattr(d, "value", d)) if isinstance(getattr(d, "value", d), int) else d for d in data.shape]
    off = len(out_type.shape) - len(dims)

    def index(i, d):
        if isinstance(d, int):
            return 0 if d == 1 else tir.floormod(i, d)
        return tir.floormod(i, tir.max(index_like(i, d), 1))
    return [te.compute(list(out_type.shape), lambda *i: data(*[index(i[off + k], d) for k, d in enumerate(dims)]),
                       name="T_dyn_tile")]


define_dyn_op("dyn.tile", args=("data", "reps"), attrs=A.TileAttrs, rel=_tile_rel,
              reference=lambda a, i, t: np.tile(i[0], _ints(i[1])), compute=_tile_compute)


def tile(data, reps):
    return call("dyn.tile", [data, reps])


# -- strided_slice ---------------------------------------------------------------------------------------------
def _slice_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    for k, name in ((1, "begin"), (2, "end"), (3, "strides")):
        if operand_length(arg_types, k, name, "dyn.strided_slice") > len(t.shape):
            raise TypeInferenceError(f"dyn.strided_slice: {name} is longer than the rank {len(t.shape)} of data")
    return TensorType(any_shape(len(t.shape)), t.dtype)


def _slice_ref(attrs, inputs, out_type):
    plan = slice_dims(inputs[0].shape, inputs[1], inputs[2], inputs[3], attrs.slice_mode)
    return inputs[0][tuple(slice(*p) if p[1] >= 0 else slice(p[0], None, p[2]) for p in plan)]


def _slice_compute(attrs, inputs, out_type):
    """out[i] = data[b + i*s] per axis, with b normalized at run time (negative -> from the end, clamped)."""
    te, tir = _te()
    data, begin, end, strides = inputs
    nb = int(begin.shape[0]) if begin.shape else 1
    ns = int(strides.shape[0]) if strides.shape else 1
    size_mode = attrs.slice_mode == "size"

    def start(k, i, dim):
        if k >= nb:
            return 0
        b = index_like(i, begin[k])
        s = 1 if size_mode else index_like(i, strides[min(k, ns - 1)])
        dim = index_like(i, dim)
        b = tir.Select(b < 0, b + dim, b)
        lo = tir.Select(s > 0, tir.const(0, i.dtype), tir.const(-1, i.dtype))
        hi = tir.Select(s > 0, dim, dim - 1)
        return tir.min(tir.max(b, lo), hi), s

    def f(*i):
        idx = []
        for k, dim in enumerate(data.shape):
            if k >= nb:
                idx.append(i[k])
                continue
            b, s = start(k, i[k], dim)
            idx.append(b + i[k] * s)
        return data(*idx)
    return [te.compute(list(out_type.shape), f, name="T_dyn_strided_slice")]


define_dyn_op("dyn.strided_slice", args=("data", "begin", "end", "strides"), attrs=A.StridedSliceAttrs,
              rel=_slice_rel, reference=_slice_ref, compute=_slice_compute)


def strided_slice(data, begin, end, strides=None, slice_mode="end"):
    """``data[begin:end:strides]`` with run-time bounds (1-D integer tensors; stride 1 when omitted)."""
    if strides is None:
        strides = const(np.ones(1, "int64"))
    return call("dyn.strided_slice", [data, begin, end, strides], slice_mode=slice_mode)


# -- expand_dims / squeeze -------------------------------------------------------------------------------------
class DynExpandDimsAttrs(A.Attrs):
    type_key = "relay.attrs.DynExpandDimsAttrs"
    fields = {"num_newaxis": A.Field(1, int)}


def _expand_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    operand_length(arg_types, 1, "axis", "dyn.expand_dims")
    return TensorType(any_shape(len(t.shape) + attrs.num_newaxis), t.dtype)


def _reshape_to_out(attrs, inputs, out_type):
    return [topi_reshape(inputs[0], list(out_type.shape))]


def _expand_ref(attrs, inputs, out_type):
    shape = DYN_SHAPE_FUNCS["dyn.expand_dims"]({"num_newaxis": attrs.num_newaxis}, inputs)[0]
    return inputs[0].reshape(shape)


define_dyn_op("dyn.expand_dims", args=("data", "axis"), attrs=DynExpandDimsAttrs, rel=_expand_rel,
              reference=_expand_ref, compute=_reshape_to_out)


def expand_dims(data, axis, num_newaxis=1):
    return call("dyn.expand_dims", [data, axis], num_newaxis=num_newaxis)


def _squeeze_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    n = operand_length(arg_types, 1, "axis", "dyn.squeeze")
    if n > len(t.shape):
        raise TypeInferenceError(f"dyn.squeeze: {n} axes for a rank-{len(t.shape)} input")
    return TensorType(any_shape(len(t.shape) - n), t.dtype)


def _squeeze_ref(attrs, inputs, out_type):
    return inputs[0].reshape(DYN_SHAPE_FUNCS["dyn.squeeze"]({}, inputs)[0])


define_dyn_op("dyn.squeeze", args=("data", "axis"), rel=_squeeze_rel, reference=_squeeze_ref,
              compute=_reshape_to_out)


def squeeze(data, axis):
    return call("dyn.squeeze", [data, axis])
