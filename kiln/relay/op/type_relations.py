"""Type relations shared by many ops (TVM's ``type_relations.cc``): Identity, Broadcast, BroadcastComp, ...

A relation is ``rel(arg_types, attrs) -> Type``. It gets resolved argument types and raises
``TypeInferenceError`` saying which shapes/dtypes clash; InferType adds the op name and the call.
"""
from __future__ import annotations

from ...error import TypeInferenceError
from ...ir.op import register_type_relation
from ...ir.type import TensorType, TupleType


def type_text(t) -> str:
    return t.astext() if hasattr(t, "astext") else str(t)


def shape_text(shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def tensor_arg(arg_types, i: int, name: str = "") -> TensorType:
    """Argument ``i`` as a TensorType, or a clear error."""
    t = arg_types[i]
    if not isinstance(t, TensorType):
        what = f"argument {i}" + (f" ({name})" if name else "")
        raise TypeInferenceError(f"{what} must be a tensor, got {type_text(t)}")
    return t


def tuple_arg(arg_types, i: int, name: str = "data") -> list:
    """Argument ``i`` as a list of TensorTypes (a tuple of tensors), or a clear error."""
    t = arg_types[i]
    if not isinstance(t, TupleType) or not all(isinstance(f, TensorType) for f in t.fields):
        raise TypeInferenceError(f"argument {i} ({name}) must be a tuple of tensors, got {type_text(t)}")
    if not t.fields:
        raise TypeInferenceError(f"argument {i} ({name}) is an empty tuple; at least one tensor is needed")
    return list(t.fields)


def is_int(d) -> bool:
    return isinstance(d, int)


def normalize_axis(axis: int, ndim: int, what: str = "axis") -> int:
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise TypeInferenceError(f"{what} {axis} is out of range for a tensor of rank {ndim} "
                                 f"(expected {-ndim} <= {what} < {ndim})")
    return axis + ndim if axis < 0 else axis


def same_dtype(types, what: str = "arguments") -> str:
    dtypes = [t.dtype for t in types]
    if len(set(dtypes)) > 1:
        raise TypeInferenceError(f"the {what} must have the same dtype, got {', '.join(dtypes)}")
    return dtypes[0]


def broadcast_shape(s1, s2) -> tuple:
    """numpy broadcasting of two shapes; symbolic (Any) dims pass through."""
    n = max(len(s1), len(s2))
    a = (1,) * (n - len(s1)) + tuple(s1)
    b = (1,) * (n - len(s2)) + tuple(s2)
    out = []
    for x, y in zip(a, b):
        if is_int(x) and x == 1:
            out.append(y)
        elif is_int(y) and y == 1:
            out.append(x)
        elif is_int(x) and is_int(y):
            if x != y:
                raise TypeInferenceError(f"shapes {shape_text(s1)} and {shape_text(s2)} are not broadcastable "
                                         f"(dimension {x} vs {y})")
            out.append(x)
        else:
            out.append(x if not is_int(x) else y)
    return tuple(out)


@register_type_relation("Identity")
def identity_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    return TensorType(t.shape, t.dtype)


@register_type_relation("IdentityCompRel")
def identity_comp_rel(arg_types, attrs):
    """Same shape, boolean result (isnan, isinf, isfinite)."""
    t = tensor_arg(arg_types, 0, "data")
    return TensorType(t.shape, "bool")


@register_type_relation("Broadcast")
def broadcast_rel(arg_types, attrs):
    a, b = tensor_arg(arg_types, 0, "lhs"), tensor_arg(arg_types, 1, "rhs")
    if a.dtype != b.dtype:
        raise TypeInferenceError(f"the operands must have the same dtype, got {a.dtype} and {b.dtype} "
                                 f"(shapes {shape_text(a.shape)} and {shape_text(b.shape)}); insert a cast")
    return TensorType(broadcast_shape(a.shape, b.shape), a.dtype)


@register_type_relation("BroadcastComp")
def broadcast_comp_rel(arg_types, attrs):
    t = broadcast_rel(arg_types, attrs)
    return TensorType(t.shape, "bool")


@register_type_relation("IdentityLike")
def same_as_first_rel(arg_types, attrs):
    """Output has the first argument's type; all arguments must have the same shape and dtype."""
    first = tensor_arg(arg_types, 0)
    for i in range(1, len(arg_types)):
        t = tensor_arg(arg_types, i)
        if t.shape != first.shape or t.dtype != first.dtype:
            raise TypeInferenceError(f"argument {i} has type {type_text(t)} but argument 0 has {type_text(first)}")
    return TensorType(first.shape, first.dtype)


def reduce_axes(ndim: int, axis, exclude: bool) -> list:
    """The axes a reduction removes (TVM's GetReduceAxes: an empty axis list means every axis, whatever
    ``exclude`` says)."""
    if axis is None:
        axes = list(range(ndim))
        return [] if exclude else axes
    if len(list(axis)) == 0:
        return list(range(ndim))
    axes = sorted({normalize_axis(a, ndim, "reduction axis") for a in axis})
    if len(axes) != len(list(axis)):
        raise TypeInferenceError(f"reduction axes {list(axis)} repeat an axis")
    if exclude:
        axes = [d for d in range(ndim) if d not in axes]
    return axes


def reduce_shape(shape, axes, keepdims: bool) -> tuple:
    if keepdims:
        return tuple(1 if d in axes else n for d, n in enumerate(shape))
    return tuple(n for d, n in enumerate(shape) if d not in axes)


@register_type_relation("Reduce")
def reduce_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    axes = reduce_axes(len(t.shape), attrs.axis, attrs.exclude)
    return TensorType(reduce_shape(t.shape, axes, attrs.keepdims), t.dtype)


@register_type_relation("ArgReduce")
def arg_reduce_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    axes = reduce_axes(len(t.shape), attrs.axis, attrs.exclude)
    return TensorType(reduce_shape(t.shape, axes, attrs.keepdims), "int32")


@register_type_relation("Variance")
def variance_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    m = tensor_arg(arg_types, 1, "mean")
    axes = reduce_axes(len(t.shape), attrs.axis, attrs.exclude)
    expect = reduce_shape(t.shape, axes, True)
    if tuple(m.shape) != expect or m.dtype != t.dtype:
        raise TypeInferenceError(f"variance: the mean has type {type_text(m)}, expected shape {shape_text(expect)} "
                                 f"and dtype {t.dtype} (data {type_text(t)})")
    return TensorType(reduce_shape(t.shape, axes, attrs.keepdims), t.dtype)
