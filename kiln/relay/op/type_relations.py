"""Type relations shared by many ops (TVM's ``type_relations.cc``): Identity, Broadcast, BroadcastComp, ...

A relation is ``rel(arg_types, attrs) -> Type``. It gets resolved argument types and raises
``TypeInferenceError`` saying which shapes/dtypes clash; InferType adds the op name and the call.
"""
from __future__ import annotations

from ...error import KilnError, TypeInferenceError
from ...ir.op import register_type_relation
from ...ir.type import TensorType, TupleType
from ...tir.expr import Any as _Any
from ...tir.stmt_functor import post_order_visit


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
        else:  # an unknown dim against a static n (not 1) is n, as TVM; against another unknown, unknown
            out.append(x if is_int(x) else y)
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


def _require_dtype(dtype: str, kind: str) -> None:
    """Operand dtype check for logical ("bool") and bitwise ("int") ops: TVM's TIR refuses other dtypes
    when the op is lowered (``Expected boolean argument`` / ``integer argument``); kiln refuses them
    here, so the error names the op and the call instead of failing at build or load time."""
    if kind == "bool":
        if dtype != "bool":
            raise TypeInferenceError(f"a logical op needs bool operands, got {dtype}; compare first "
                                     "(e.g. not_equal(x, zeros_like(x))) or cast(x, \"bool\")")
    elif not (dtype == "bool" or dtype.startswith(("int", "uint"))):
        raise TypeInferenceError(f"a bitwise op needs integer (or bool) operands, got {dtype}")


def logical_broadcast_rel(arg_types, attrs):
    """Broadcast for ``logical_and/or/xor``: bool operands, bool result."""
    t = broadcast_rel(arg_types, attrs)
    _require_dtype(t.dtype, "bool")
    return t


def logical_identity_rel(arg_types, attrs):
    """Identity for ``logical_not``: a bool operand."""
    t = identity_rel(arg_types, attrs)
    _require_dtype(t.dtype, "bool")
    return t


def bitwise_broadcast_rel(arg_types, attrs):
    """Broadcast for ``bitwise_and/or/xor``, ``left_shift``, ``right_shift``: integer or bool operands."""
    t = broadcast_rel(arg_types, attrs)
    _require_dtype(t.dtype, "int")
    return t


def bitwise_identity_rel(arg_types, attrs):
    """Identity for ``bitwise_not``: an integer or bool operand."""
    t = identity_rel(arg_types, attrs)
    _require_dtype(t.dtype, "int")
    return t


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


# -- Any (unknown) dimensions ---------------------------------------------------------------------------------
def is_any(d) -> bool:
    """A dimension that is ``relay.Any()`` (or an expression built from one)."""
    if isinstance(d, _Any):
        return True
    if isinstance(d, int):
        return False
    found = []

    def visit(node):
        if isinstance(node, _Any):
            found.append(node)
    try:
        post_order_visit(d, visit)
    except Exception:  # noqa: BLE001 - not a tir expression: not Any
        return False
    return bool(found)


def dims_compatible(a, b) -> bool:
    """Two dimensions that may be equal at run time (an Any matches anything)."""
    return is_any(a) or is_any(b) or a == b


def merge_dim(a, b):
    """The dimension known for two compatible dims (static wins over Any, as TVM)."""
    return b if is_any(a) else a


def _has_any(ty) -> bool:
    if isinstance(ty, TensorType):
        return any(is_any(d) for d in ty.shape)
    if isinstance(ty, TupleType):
        return any(_has_any(f) for f in ty.fields)
    return False


def _subst_any(ty, value: int):
    if isinstance(ty, TensorType):
        return TensorType(tuple(value if is_any(d) else d for d in ty.shape), ty.dtype)
    if isinstance(ty, TupleType):
        return TupleType([_subst_any(f, value) for f in ty.fields])
    return ty


def _normalize_any(ty):
    """Dimensions computed from an Any (``?*2``) are Any."""
    if isinstance(ty, TensorType):
        if not any(not isinstance(d, (int, _Any)) and is_any(d) for d in ty.shape):
            return ty
        return TensorType(tuple(_Any() if is_any(d) else d for d in ty.shape), ty.dtype)
    if isinstance(ty, TupleType):
        return TupleType([_normalize_any(f) for f in ty.fields])
    return ty


def _merge_runs(a, b):
    if isinstance(a, TensorType) and isinstance(b, TensorType) and len(a.shape) == len(b.shape):
        return TensorType(tuple(x if (isinstance(x, int) and x == y) else _Any() for x, y in zip(a.shape, b.shape)),
                          a.dtype)
    if isinstance(a, TupleType) and isinstance(b, TupleType) and len(a.fields) == len(b.fields):
        return TupleType([_merge_runs(x, y) for x, y in zip(a.fields, b.fields)])
    raise TypeInferenceError(f"the relation gives types of different structure for different sizes of an Any "
                             f"dimension ({type_text(a)} vs {type_text(b)})")


# Stand-ins for an Any dimension when a relation needs numbers: large (no clamp or window test trips) and
# divisible by every small factor (sections, layout splits, -1 inference divide); two runs tell which output
# dimensions follow the unknown one (those become Any).
_ANY_PROBES = (2 ** 12 * 3 ** 3 * 5 ** 2 * 7 * 11 * 13, 2 ** 13 * 3 ** 3 * 5 ** 2 * 7 * 11 * 13)
# ops whose relations must not use the probe (a dim clamped by a slice is only known at run time)
ANY_OPAQUE_RELATIONS: set = set()


def call_relation(rel, arg_types, attrs):
    """``rel(arg_types, attrs)`` that accepts ``relay.Any()`` dimensions for every op.

    A relation that handles Any itself (broadcast, dense, ...) runs as is; its output dims computed from an
    Any become Any. A relation that needs numbers (reshape with -1, conv windows, layout splits) runs twice
    with two large stand-in sizes for the unknown dims; output dims that differ between the runs are Any.
    """
    try:
        return _normalize_any(rel(arg_types, attrs))
    except (KilnError, ValueError, TypeError) as err:
        if not any(_has_any(t) for t in arg_types) or getattr(rel, "handles_any", False):
            raise  # (a relation marked handles_any, e.g. the dyn.* ops', is never probed with stand-in sizes)
        original = err
    try:
        runs = [rel([_subst_any(t, v) for t in arg_types], attrs) for v in _ANY_PROBES]
    except (KilnError, ValueError, TypeError):
        raise original from None
    return _merge_runs(*runs)
