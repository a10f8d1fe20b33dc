"""Shape and data-movement ops (TVM's ``relay.op.transform``) with their registrations."""
from __future__ import annotations

import math

import numpy as np

from ...error import KilnError, OpNotImplemented, TypeInferenceError
from ...ir.expr import RelayExpr
from ...ir.op import Op, OpPattern
from ...ir.type import TensorType, TupleType
from ...runtime.dtype import dtype_str
from ..expr import Call, Constant, Tuple, TupleWrapper, const as _const
from . import op_attrs as A
from ._define import define_op, topi_compute
from ._layout import transform_shape
from .type_relations import (broadcast_shape, dims_compatible, merge_dim, normalize_axis, shape_text, tensor_arg,
                             tuple_arg)
from .type_relations import _ANY_PROBES, is_any
from ...tir.expr import Any, Any as _Any, Any as _AnyDim
from ...topi.transform import infer_reshape_shape, strided_slice_plan, plan_slices, arange as topi_arange
from ...topi.testing import layout_transform_python
from .dyn import reshape as dyn_reshape, strided_slice as dyn_slice, broadcast_to as dyn_broadcast_to, tile as dyn_tile
from ... import te, tir

__all__: list = []
_P = OpPattern


def _export(fn):
    globals()[fn.__name__] = fn
    __all__.append(fn.__name__)
    return fn


def _is_dyn(v) -> bool:
    """A shape operand given as a (non-constant) Relay expression: the op dispatches to its dyn.* variant."""
    return isinstance(v, RelayExpr) and not isinstance(v, Constant)


def _call(name, args, **attrs):
    op = Op.get(name)
    return Call(op, list(args), op.make_attrs(**attrs) if op.attrs_type is not None else None)


def _static(shape, what="shape"):
    for d in shape:
        if not isinstance(d, int):
            raise TypeInferenceError(f"{what} {shape_text(shape)} has a symbolic dimension; kiln needs static shapes here")
    return tuple(shape)


# -- reshape ------------------------------------------------------------------------------------------------
def infer_reshape(ishape, newshape, allowzero=False, reverse=False) -> tuple:
    """Relay's reshape rule on a static shape; the codes (0, -1, -2, -3, -4) live in ``topi.infer_reshape_shape``."""
    ishape = _static(ishape, "input shape")
    try:
        return tuple(infer_reshape_shape(ishape, newshape, reverse=reverse, allowzero=allowzero))
    except KilnError as e:
        raise TypeInferenceError(str(e)) from None


def _reshape_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    return TensorType(infer_reshape(t.shape, attrs.newshape, attrs.allowzero), t.dtype)


define_op("reshape", num_inputs=1, attrs=A.ReshapeAttrs, rel=_reshape_rel, rel_name="Reshape",
          pattern=_P.INJECTIVE, reference=lambda a, i, t: np.reshape(i[0], t.shape),
          compute=topi_compute("reshape", "reshape", lambda a, i, t: [i[0], list(t.shape)]), level=3)


@_export
def reshape(data, newshape, allowzero=False):
    """Reshape ``data``; ``newshape`` may use TVM's codes 0, -1, -2, -3, -4 (a Relay expression: dyn.reshape)."""
    if _is_dyn(newshape):
        return dyn_reshape(data, newshape, allowzero)
    if isinstance(newshape, Constant):
        newshape = newshape.numpy().tolist()
    if isinstance(newshape, int):
        newshape = [newshape]
    return _call("reshape", [data], newshape=list(newshape), allowzero=allowzero)


def _reverse_reshape_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    return TensorType(infer_reshape(t.shape, attrs.newshape, reverse=True), t.dtype)


define_op("contrib_reverse_reshape", num_inputs=1, attrs=A.ReshapeAttrs, rel=_reverse_reshape_rel,
          rel_name="ReverseReshape", pattern=_P.INJECTIVE, reference=lambda a, i, t: np.reshape(i[0], t.shape),
          compute=topi_compute("reshape", "contrib_reverse_reshape", lambda a, i, t: [i[0], list(t.shape)]), level=10)


@_export
def reverse_reshape(data, newshape):
    """Reshape with the special codes applied right to left (MXNet's reverse reshape; TVM's
    ``relay.reverse_reshape``): ``(10, 5, 4)`` with ``(-1, 0)`` gives ``(50, 4)``."""
    if isinstance(newshape, int):
        newshape = [newshape]
    return _call("contrib_reverse_reshape", [data], newshape=list(newshape))


def reshape_like_shape(data_shape, like_shape, attrs) -> tuple:
    """``data[:lhs_begin] + like[rhs_begin:rhs_end] + data[lhs_end:]`` (TVM's ReshapeLikeAttrs; ends may be
    negative or None)."""
    data_shape, like_shape = tuple(data_shape), tuple(like_shape)

    def span(begin, end, n):
        b = begin + n if begin < 0 else begin
        e = n if end is None else (end + n if end < 0 else end)
        if not 0 <= b <= e <= n:
            raise TypeInferenceError(f"reshape_like: range [{begin}, {end}) out of a rank-{n} shape")
        return b, e
    lb, le = span(int(getattr(attrs, "lhs_begin", 0) or 0), getattr(attrs, "lhs_end", None), len(data_shape))
    rb, re = span(int(getattr(attrs, "rhs_begin", 0) or 0), getattr(attrs, "rhs_end", None), len(like_shape))
    return data_shape[:lb] + like_shape[rb:re] + data_shape[le:]


def _reshape_like_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    like = tensor_arg(arg_types, 1, "shape_like")
    out = reshape_like_shape(t.shape, like.shape, attrs)
    known = all(isinstance(d, int) for d in tuple(t.shape) + tuple(out))
    if known and math.prod(_static(t.shape)) != math.prod(_static(out)):
        raise TypeInferenceError(f"reshape_like: {shape_text(t.shape)} and {shape_text(out)} differ in size")
    return TensorType(out, t.dtype)  # unknown dims: not comparable here (DynamicToStatic creates these only
    # with provably equal sizes)


_reshape_like_rel.handles_any = True

define_op("reshape_like", num_inputs=2, args=("data", "shape_like"), attrs=A.ReshapeLikeAttrs, rel=_reshape_like_rel,
          rel_name="ReshapeLike", pattern=_P.INJECTIVE, reference=lambda a, i, t: np.reshape(i[0], t.shape),
          compute=topi_compute("reshape", "reshape_like", lambda a, i, t: [i[0], list(t.shape)]), level=3)


@_export
def reshape_like(data, shape_like, lhs_begin=0, lhs_end=None, rhs_begin=0, rhs_end=None):
    """Reshape ``data`` to ``data.shape[:lhs_begin] + shape_like.shape[rhs_begin:rhs_end] +
    data.shape[lhs_end:]`` (TVM's signature; the defaults take the whole shape of ``shape_like``)."""
    return _call("reshape_like", [data, shape_like], lhs_begin=lhs_begin, lhs_end=lhs_end, rhs_begin=rhs_begin,
                 rhs_end=rhs_end)


# -- transpose / squeeze / expand_dims ---------------------------------------------------------------------------
def _perm(attrs, ndim):
    if attrs.axes is None or len(attrs.axes) == 0:
        return list(range(ndim - 1, -1, -1))
    if len(attrs.axes) != ndim:
        raise TypeInferenceError(f"transpose axes {list(attrs.axes)} do not match the rank {ndim} of the input")
    axes = [normalize_axis(a, ndim, "transpose axis") for a in attrs.axes]
    if sorted(axes) != list(range(ndim)):
        raise TypeInferenceError(f"transpose axes {list(attrs.axes)} are not a permutation of 0..{ndim - 1}")
    return axes


def _transpose_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    return TensorType([t.shape[a] for a in _perm(attrs, len(t.shape))], t.dtype)


define_op("transpose", num_inputs=1, attrs=A.TransposeAttrs, rel=_transpose_rel, rel_name="Transpose",
          pattern=_P.INJECTIVE, reference=lambda a, i, t: np.transpose(i[0], _perm(a, i[0].ndim)),
          compute=topi_compute("transpose", "transpose", lambda a, i, t: [i[0], _perm(a, len(i[0].shape))]), level=3)


@_export
def transpose(data, axes=None):
    """Permute the axes of ``data`` (reverse them when ``axes`` is None)."""
    return _call("transpose", [data], axes=list(axes) if axes is not None else None)


def _squeeze_axes(attrs, shape):
    if attrs.axis is None:
        return [d for d, n in enumerate(shape) if isinstance(n, int) and n == 1]
    axes = [normalize_axis(a, len(shape), "squeeze axis") for a in attrs.axis]
    for a in axes:
        if shape[a] != 1:
            raise TypeInferenceError(f"squeeze: axis {a} of shape {shape_text(shape)} has size {shape[a]}, not 1")
    return axes


def _squeeze_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    axes = _squeeze_axes(attrs, t.shape)
    return TensorType([n for d, n in enumerate(t.shape) if d not in axes], t.dtype)


define_op("squeeze", num_inputs=1, attrs=A.SqueezeAttrs, rel=_squeeze_rel, rel_name="Squeeze",
          pattern=_P.INJECTIVE, reference=lambda a, i, t: np.reshape(i[0], t.shape),
          compute=topi_compute("squeeze", "squeeze",
                               lambda a, i, t: [i[0], list(a.axis) if a.axis is not None else None]), level=3)


@_export
def squeeze(data, axis=None):
    """Remove size-1 axes (all of them when ``axis`` is None)."""
    return _call("squeeze", [data], axis=[axis] if isinstance(axis, int) else axis)


def _expand_dims_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    ndim = len(t.shape)
    if attrs.num_newaxis < 0:
        raise TypeInferenceError(f"expand_dims: num_newaxis must be >= 0, got {attrs.num_newaxis}")
    if not -ndim - 1 <= attrs.axis <= ndim:
        raise TypeInferenceError(f"expand_dims: axis {attrs.axis} is out of range [{-ndim - 1}, {ndim}] for shape "
                                 f"{shape_text(t.shape)}")
    pivot = attrs.axis + ndim + 1 if attrs.axis < 0 else attrs.axis
    return TensorType(t.shape[:pivot] + (1,) * attrs.num_newaxis + t.shape[pivot:], t.dtype)


def _expand_dims_ref(attrs, x):
    """From the value's own shape, so an input of run-time (Any) shape works in the interpreter."""
    axis = int(attrs.axis)
    axis = axis + x.ndim + 1 if axis < 0 else axis
    return np.reshape(x, x.shape[:axis] + (1,) * int(attrs.num_newaxis) + x.shape[axis:])


define_op("expand_dims", num_inputs=1, attrs=A.ExpandDimsAttrs, rel=_expand_dims_rel, rel_name="ExpandDims",
          pattern=_P.BROADCAST, reference=lambda a, i, t: _expand_dims_ref(a, i[0]),
          compute=topi_compute("expand_dims", "expand_dims", lambda a, i, t: [i[0], a.axis, a.num_newaxis]), level=1)


@_export
def expand_dims(data, axis, num_newaxis=1):
    """Insert ``num_newaxis`` size-1 axes at ``axis``."""
    return _call("expand_dims", [data], axis=axis, num_newaxis=num_newaxis)


# -- concatenate / stack / split ----------------------------------------------------------------------------------
def _concat_rel(arg_types, attrs):
    fields = tuple_arg(arg_types, 0)
    first = fields[0]
    ndim = len(first.shape)
    if ndim == 0:
        raise TypeInferenceError("concatenate: scalars cannot be concatenated")
    axis = normalize_axis(attrs.axis, ndim, "concatenate axis")
    total = 0
    for k, f in enumerate(fields):
        if f.dtype != first.dtype:
            raise TypeInferenceError(f"concatenate: input {k} has dtype {f.dtype}, input 0 has {first.dtype}")
        if len(f.shape) != ndim or any(not dims_compatible(f.shape[d], first.shape[d])
                                       for d in range(ndim) if d != axis):
            raise TypeInferenceError(f"concatenate along axis {axis}: input {k} has shape {shape_text(f.shape)}, "
                                     f"input 0 has {shape_text(first.shape)}; all other dimensions must match")
        total = total + f.shape[axis] if isinstance(total, int) and isinstance(f.shape[axis], int) else Any()
    shape = list(first.shape)
    for f in fields:  # a static size in any input fixes an Any dimension
        shape = [merge_dim(shape[d], f.shape[d]) if d != axis else total for d in range(ndim)]
    return TensorType(shape, first.dtype)


define_op("concatenate", num_inputs=1, attrs=A.ConcatenateAttrs, rel=_concat_rel, rel_name="Concatenate",
          pattern=_P.INJECTIVE, reference=lambda a, i, t: np.concatenate(i[0], axis=a.axis),
          compute=topi_compute("concatenate", "concatenate", lambda a, i, t: [list(i), a.axis]), level=1)


def _stack_rel(arg_types, attrs):
    fields = tuple_arg(arg_types, 0)
    first = fields[0]
    ndim = len(first.shape)
    if not -(ndim + 1) <= attrs.axis < ndim + 1:
        raise TypeInferenceError(f"stack: axis {attrs.axis} is out of range for inputs of rank {ndim}")
    axis = attrs.axis + ndim + 1 if attrs.axis < 0 else attrs.axis
    shape = list(first.shape)
    for k, f in enumerate(fields):
        if f.dtype != first.dtype or len(f.shape) != ndim or any(not dims_compatible(f.shape[d], shape[d])
                                                                  for d in range(ndim)):
            raise TypeInferenceError(f"stack: input {k} has type {f.astext()}, input 0 has {first.astext()}; "
                                     "all must be equal (an Any dimension matches any size)")
        shape = [merge_dim(shape[d], f.shape[d]) for d in range(ndim)]  # a static size fixes an Any one
    return TensorType(tuple(shape[:axis]) + (len(fields),) + tuple(shape[axis:]), first.dtype)


define_op("stack", num_inputs=1, attrs=A.StackAttrs, rel=_stack_rel, rel_name="Stack", pattern=_P.INJECTIVE,
          reference=lambda a, i, t: np.stack(i[0], axis=a.axis),
          compute=topi_compute("stack", "stack", lambda a, i, t: [list(i), a.axis]), level=3)


def _as_tuple_expr(data, what):
    if isinstance(data, TupleWrapper):
        return data.astuple()
    if isinstance(data, (list, tuple)):
        if not data:
            raise ValueError(f"relay.{what} expects at least one tensor")
        return Tuple(list(data))
    return data


@_export
def concatenate(data, axis):
    """Concatenate a list/tuple of tensors along ``axis``."""
    return _call("concatenate", [_as_tuple_expr(data, "concatenate")], axis=axis)


@_export
def stack(data, axis=0):
    """Stack a list/tuple of same-shaped tensors along a new ``axis``."""
    return _call("stack", [_as_tuple_expr(data, "stack")], axis=axis)


def _split_points(attrs, dim):
    ios = attrs.indices_or_sections
    if isinstance(ios, int):
        if ios <= 0 or dim % ios:
            raise TypeInferenceError(f"split: a dimension of size {dim} cannot be split into {ios} equal sections")
        step = dim // ios
        return [step * k for k in range(1, ios)]
    return list(ios)


def _split_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    axis = normalize_axis(attrs.axis, len(t.shape), "split axis")
    dim = t.shape[axis]
    points = _split_points(attrs, dim)
    bounds = [0] + points + [dim]
    fields = []
    for b, e in zip(bounds[:-1], bounds[1:]):
        size = max(min(e, dim) - min(b, dim), 0)
        if e < b:
            raise TypeInferenceError(f"split: indices {list(points)} must be increasing")
        fields.append(TensorType(t.shape[:axis] + (size,) + t.shape[axis + 1:], t.dtype))
    return TupleType(fields)


define_op("split", num_inputs=1, attrs=A.SplitAttrs, rel=_split_rel, rel_name="Split", pattern=_P.INJECTIVE,
          reference=lambda a, i, t: tuple(np.split(i[0], _split_points(a, i[0].shape[a.axis]), axis=a.axis)),
          compute=topi_compute("split", "split", lambda a, i, t: [i[0], a.indices_or_sections, a.axis]), level=3)


@_export
def split(data, indices_or_sections, axis=0):
    """Split ``data`` along ``axis`` into equal sections (int) or at the given indices; a TupleWrapper."""
    size = indices_or_sections if isinstance(indices_or_sections, int) else len(indices_or_sections) + 1
    ios = indices_or_sections if isinstance(indices_or_sections, int) else list(indices_or_sections)
    return TupleWrapper(_call("split", [data], indices_or_sections=ios, axis=axis), size)


# -- strided_slice ------------------------------------------------------------------------------------------------------
def slice_plan(shape, attrs) -> list:
    """(start, stop, step) per axis, with numpy slice semantics (TOPI's rule; stop -1 means 'through 0')."""
    try:
        return strided_slice_plan(shape, attrs.begin, attrs.end, attrs.strides, attrs.axes, attrs.slice_mode)
    except TypeInferenceError:
        raise
    except KilnError as err:
        raise TypeInferenceError(str(err)) from None


def _strided_slice_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    if any(is_any(d) for d in t.shape):  # an unknown axis sliced is only known at run time: Any
        plan = slice_plan([_ANY_PROBES[0] if is_any(d) else d for d in t.shape], attrs)
        return TensorType([_Any() if is_any(d) else len(range(*p)) for d, p in zip(t.shape, plan)], t.dtype)
    plan = slice_plan(_static(t.shape), attrs)
    return TensorType([len(range(*p)) for p in plan], t.dtype)


def _strided_slice_ref(attrs, inputs, out_type):
    return inputs[0][plan_slices(slice_plan(inputs[0].shape, attrs))]


define_op("strided_slice", num_inputs=1, attrs=A.StridedSliceAttrs, rel=_strided_slice_rel, rel_name="StridedSlice",
          pattern=_P.INJECTIVE, reference=_strided_slice_ref,
          compute=topi_compute("strided_slice", "strided_slice",
                               lambda a, i, t: [i[0], a.begin, a.end, a.strides, a.axes, a.slice_mode]), level=4)


def _int_list(v):
    if v is None:
        return None
    if isinstance(v, Constant):
        return [int(x) for x in v.numpy().reshape(-1)]
    if isinstance(v, int):
        return [v]
    return [int(x) for x in v]


@_export
def strided_slice(data, begin, end, strides=None, axes=None, slice_mode="end"):
    """``data[begin:end:strides]`` per axis (numpy semantics; ``slice_mode="size"``: end is a size)."""
    if _is_dyn(begin) or _is_dyn(end) or _is_dyn(strides):
        if axes is not None:
            raise OpNotImplemented("strided_slice: axes with run-time begin/end is not supported (dyn.strided_slice)")
        as_expr = [b if isinstance(b, RelayExpr) else _const(np.asarray(_int_list(b) or [1], "int64"))
                   for b in (begin, end, strides if strides is not None else [1])]
        return dyn_slice(data, *as_expr, slice_mode=slice_mode)
    return _call("strided_slice", [data], begin=_int_list(begin), end=_int_list(end),
                 strides=_int_list(strides) or [1], axes=_int_list(axes), slice_mode=slice_mode)


# -- take / gather ---------------------------------------------------------------------------------------------------------
def _take_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    idx = tensor_arg(arg_types, 1, "indices")
    if not idx.dtype.startswith(("int", "uint")):
        raise TypeInferenceError(f"take: indices must be integers, got {idx.dtype}")
    if attrs.mode not in ("clip", "wrap", "fast", "raise"):
        raise TypeInferenceError(f"take: mode must be 'clip', 'wrap', 'fast' or 'raise', got {attrs.mode!r}")
    if attrs.batch_dims != 0:
        raise OpNotImplemented("take: batch_dims other than 0 is not implemented in kiln")
    if attrs.axis is None:
        return TensorType(idx.shape, t.dtype)
    axis = normalize_axis(attrs.axis, len(t.shape), "take axis")
    return TensorType(t.shape[:axis] + idx.shape + t.shape[axis + 1:], t.dtype)


def _take_ref(attrs, inputs, out_type):
    data, idx = inputs
    axis = attrs.axis
    if axis is None:
        data, axis = data.reshape(-1), 0
    n = data.shape[axis]
    idx = idx.astype(np.int64)
    if attrs.mode == "raise":
        if ((idx < -n) | (idx >= n)).any():
            raise KilnError(f"take: an index is out of range for an axis of size {n} (valid: {-n}..{n - 1})")
        idx = np.where(idx < 0, idx + n, idx)
    else:
        idx = np.mod(idx, n) if attrs.mode == "wrap" else np.clip(idx, 0, max(n - 1, 0))
    return np.take(data, idx, axis=axis)


define_op("take", num_inputs=2, args=("data", "indices"), attrs=A.TakeAttrs, rel=_take_rel, rel_name="Take",
          pattern=_P.INJECTIVE, reference=_take_ref,
          compute=topi_compute("take", "take", lambda a, i, t: [i[0], i[1], a.axis, a.batch_dims, a.mode]), level=3)


@_export
def take(data, indices, axis=None, batch_dims=0, mode="clip"):
    """Gather elements of ``data`` along ``axis`` (flattened when None) at ``indices``."""
    return _call("take", [data, indices], axis=axis, batch_dims=batch_dims, mode=mode)


def _gather_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    idx = tensor_arg(arg_types, 1, "indices")
    if len(idx.shape) != len(t.shape):
        raise TypeInferenceError(f"gather: indices {shape_text(idx.shape)} must have the rank of data "
                                 f"{shape_text(t.shape)}")
    normalize_axis(attrs.axis, len(t.shape), "gather axis")
    return TensorType(idx.shape, t.dtype)


define_op("gather", num_inputs=2, args=("data", "indices"), attrs=A.GatherAttrs, rel=_gather_rel, rel_name="Gather",
          pattern=_P.INJECTIVE,
          reference=lambda a, i, t: np.take_along_axis(i[0], i[1].astype(np.int64), axis=a.axis),
          compute=topi_compute("gather", "gather", lambda a, i, t: [i[0], a.axis, i[1]]), level=3)


@_export
def gather(data, axis, indices):
    """``out[i][j][k] = data[indices[i][j][k]][j][k]`` for axis 0 (and so on)."""
    return _call("gather", [data, indices], axis=axis)


# -- broadcast_to / arange / layout_transform / tile / repeat / reverse --------------------------------------------------
def _broadcast_to_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    target = tuple(attrs.shape)
    if broadcast_shape(t.shape, target) != target:
        raise TypeInferenceError(f"broadcast_to: cannot broadcast {shape_text(t.shape)} to {shape_text(target)}")
    return TensorType(target, t.dtype)


define_op("broadcast_to", num_inputs=1, attrs=A.InitOpAttrs, rel=_broadcast_to_rel, rel_name="BroadCastTo",
          pattern=_P.BROADCAST, reference=lambda a, i, t: np.broadcast_to(i[0], t.shape).copy(),
          compute=topi_compute("broadcast_to", "broadcast_to", lambda a, i, t: [i[0], list(t.shape)]), level=4)


@_export
def broadcast_to(data, shape):
    """Broadcast ``data`` to ``shape`` (a Relay expression: dyn.broadcast_to)."""
    if _is_dyn(shape):
        return dyn_broadcast_to(data, shape)
    if isinstance(shape, Constant):
        shape = shape.numpy().tolist()
    return _call("broadcast_to", [data], shape=list(shape) if not isinstance(shape, int) else [shape])


def _arange_len(attrs) -> int:
    if attrs.start is None or attrs.stop is None or attrs.step is None:
        raise TypeInferenceError("arange: start, stop and step must be constants (kiln shapes are static)")
    if attrs.step == 0:
        raise TypeInferenceError("arange: step must not be 0")
    return max(int(math.ceil((attrs.stop - attrs.start) / attrs.step)), 0)


def _arange_is_dynamic(attrs) -> bool:
    """Whether a bound is a run-time value (its attribute is None): the length is then known at run time
    only (``relay.Any``; the VM runs the data-dependent shape function ``arange``)."""
    return attrs.start is None or attrs.stop is None or attrs.step is None


def _arange_rel(arg_types, attrs):
    for k, name in enumerate(("start", "stop", "step")):
        s = tensor_arg(arg_types, k, name)
        if s.shape != ():
            raise TypeInferenceError(f"arange: {name} must be a scalar, got shape {shape_text(s.shape)}")
    if _arange_is_dynamic(attrs):
        return TensorType((_AnyDim(),), attrs.dtype or "float32")
    return TensorType((_arange_len(attrs),), attrs.dtype or "float32")


def _arange_compute(attrs, inputs, out_type):
    """Constant bounds: TOPI's arange. Run-time bounds: ``start + i * step`` read from the scalar inputs over
    the output's (symbolic) length, which the VM computed from the values (TVM's DynamicArange)."""
    if not _arange_is_dynamic(attrs):
        return [topi_arange(attrs.start, attrs.stop, attrs.step, str(out_type.dtype))]
    start, step = inputs[0], inputs[2]
    dtype = str(out_type.dtype)

    def scalar(t):
        v = t()
        return tir.cast(v, dtype) if v.dtype != dtype else v
    return [te.compute(list(out_type.shape), lambda i: scalar(start) + tir.cast(i, dtype) * scalar(step),
                       name="T_arange_dyn")]


def _arange_ref(attrs, inputs, out_type):
    start, stop, step = (np.asarray(v).reshape(()) for v in inputs)
    if float(step) == 0:
        raise TypeInferenceError("arange: step must not be 0")
    n = max(int(math.ceil((float(stop) - float(start)) / float(step))), 0)
    return start.astype(np.float64) + np.arange(n, dtype=np.float64) * step.astype(np.float64)


define_op("arange", num_inputs=3, args=("start", "stop", "step"), attrs=A.ArangeAttrs, rel=_arange_rel,
          rel_name="Arange", pattern=_P.OPAQUE, reference=_arange_ref, compute=_arange_compute, level=3)


def _scalar_value(v, what):
    if isinstance(v, Constant):
        return float(v.numpy())
    if isinstance(v, RelayExpr):
        return None  # a run-time bound: the length is decided at run time (the VM)
    return float(v)


@_export
def arange(start, stop=None, step=None, dtype="float32"):
    """Evenly spaced values in ``[start, stop)``, like numpy.arange."""
    dtype = dtype_str(dtype)
    if step is None:
        step = 1
    if stop is None:
        start, stop = 0, start
    vals = [_scalar_value(v, n) for v, n in ((start, "start"), (stop, "stop"), (step, "step"))]
    args = [v if isinstance(v, RelayExpr) else _const(v, dtype) for v in (start, stop, step)]
    return _call("arange", args, start=vals[0], stop=vals[1], step=vals[2], dtype=dtype)


def _layout_transform_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    return TensorType(transform_shape(_static(t.shape), attrs.src_layout, attrs.dst_layout), t.dtype)


def _layout_transform_ref(attrs, inputs, out_type):
    return layout_transform_python(inputs[0], attrs.src_layout, attrs.dst_layout)


define_op("layout_transform", num_inputs=1, attrs=A.LayoutTransformAttrs, rel=_layout_transform_rel,
          rel_name="layout_transform", pattern=_P.INJECTIVE, reference=_layout_transform_ref,
          compute=topi_compute("layout_transform", "layout_transform",
                               lambda a, i, t: [i[0], a.src_layout, a.dst_layout]), level=5)


@_export
def layout_transform(data, src_layout, dst_layout):
    """Convert ``data`` from ``src_layout`` to ``dst_layout`` (e.g. NCHW -> NCHW8c)."""
    return _call("layout_transform", [data], src_layout=src_layout, dst_layout=dst_layout)


def _tile_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    reps = tuple(attrs.reps)
    if any(r < 0 for r in reps):
        raise TypeInferenceError(f"tile: reps {reps} must be non-negative")
    n = max(len(reps), len(t.shape))
    shape = (1,) * (n - len(t.shape)) + tuple(t.shape)
    reps = (1,) * (n - len(reps)) + reps
    return TensorType([d * r for d, r in zip(shape, reps)], t.dtype)


define_op("tile", num_inputs=1, attrs=A.TileAttrs, rel=_tile_rel, rel_name="Tile", pattern=_P.BROADCAST,
          reference=lambda a, i, t: np.tile(i[0], a.reps),
          compute=topi_compute("tile", "tile", lambda a, i, t: [i[0], list(a.reps)]), level=3)


@_export
def tile(data, reps):
    """Repeat the whole array ``reps`` times per axis (a Relay expression: dyn.tile)."""
    if _is_dyn(reps):
        return dyn_tile(data, reps)
    if isinstance(reps, Constant):
        reps = reps.numpy().reshape(-1).tolist()
    return _call("tile", [data], reps=list(reps))


def _repeat_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    if attrs.repeats < 1:
        raise TypeInferenceError(f"repeat: repeats must be >= 1, got {attrs.repeats}")
    axis = normalize_axis(attrs.axis, len(t.shape), "repeat axis")
    return TensorType(t.shape[:axis] + (t.shape[axis] * attrs.repeats,) + t.shape[axis + 1:], t.dtype)


define_op("repeat", num_inputs=1, attrs=A.RepeatAttrs, rel=_repeat_rel, rel_name="Repeat", pattern=_P.BROADCAST,
          reference=lambda a, i, t: np.repeat(i[0], a.repeats, axis=a.axis),
          compute=topi_compute("repeat", "repeat", lambda a, i, t: [i[0], a.repeats, a.axis]), level=3)


@_export
def repeat(data, repeats, axis):
    """Repeat each element ``repeats`` times along ``axis``."""
    return _call("repeat", [data], repeats=repeats, axis=axis)


class ReverseAttrs(A.Attrs):
    type_key = "relay.attrs.ReverseAttrs"
    fields = {"axis": A.Field(0, int)}


def _reverse_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    normalize_axis(attrs.axis, len(t.shape), "reverse axis")
    return TensorType(t.shape, t.dtype)


define_op("reverse", num_inputs=1, attrs=ReverseAttrs, rel=_reverse_rel, rel_name="Reverse", pattern=_P.INJECTIVE,
          reference=lambda a, i, t: np.flip(i[0], a.axis),
          compute=topi_compute("flip", "reverse", lambda a, i, t: [i[0], a.axis]), level=3)


@_export
def reverse(data, axis):
    """Reverse ``data`` along ``axis``."""
    return _call("reverse", [data], axis=axis)


from .scatter_nd import scatter_nd  # noqa: E402,F401  (TVM's relay.op.transform.scatter_nd; defined beside scatter)
