"""Elementwise, broadcast and tensor-creation ops (TVM's ``relay.op.tensor``) with their registrations."""
from __future__ import annotations

import math

import numpy as np

from ...error import TypeInferenceError
from ...ir.expr import RelayExpr
from ...ir.op import Op, OpPattern
from ...ir.type import TensorType
from ...runtime.dtype import dtype_str
from ..expr import Call, Constant, const as _const
from . import op_attrs as A
from ._define import define_op, topi_compute
from . import type_relations as _tr
from .type_relations import broadcast_shape, shape_text, tensor_arg
from .dyn import zeros as dyn_zeros, ones as dyn_ones, full as dyn_full

__all__: list = []

_P = OpPattern


def _export(name, fn):
    globals()[name] = fn
    __all__.append(name)
    return fn


def _erf(x):
    x = np.asarray(x)
    return np.vectorize(math.erf, otypes=[np.float64])(x) if x.size else x.astype(np.float64)


def _round(x):
    return np.round(x)  # half to even, as TVM's nearbyint


def _unary_ctor(op_name, py_name):
    def ctor(data):
        return Call(Op.get(op_name), [data])
    ctor.__name__ = py_name
    ctor.__doc__ = f"Elementwise ``{op_name}`` of ``data``."
    return ctor


def _binary_ctor(op_name, py_name):
    def ctor(lhs, rhs):
        return Call(Op.get(op_name), [lhs, rhs])
    ctor.__name__ = py_name
    ctor.__doc__ = f"Broadcasting ``{op_name}`` of ``lhs`` and ``rhs``."
    return ctor


def _unary_ref(fn):
    return lambda attrs, inputs, out_type: fn(inputs[0])


def _binary_ref(fn):
    return lambda attrs, inputs, out_type: fn(inputs[0], inputs[1])


# -- unary elementwise: name -> (numpy reference, topi function name, support level) --------------------
_UNARY = {
    "exp": (np.exp, "exp", 1), "log": (np.log, "log", 1), "log2": (np.log2, "log2", 1),
    "log10": (np.log10, "log10", 1), "sqrt": (np.sqrt, "sqrt", 1), "rsqrt": (lambda x: 1 / np.sqrt(x), "rsqrt", 1),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), "sigmoid", 1), "tanh": (np.tanh, "tanh", 1),
    "erf": (_erf, "erf", 1), "abs": (np.abs, "abs", 3), "negative": (np.negative, "negative", 3),
    "floor": (np.floor, "floor", 3), "ceil": (np.ceil, "ceil", 3), "round": (_round, "round", 3),
    "trunc": (np.trunc, "trunc", 3), "sign": (np.sign, "sign", 3),
    "sin": (np.sin, "sin", 1), "cos": (np.cos, "cos", 1), "tan": (np.tan, "tan", 1), "sinh": (np.sinh, "sinh", 1),
    "cosh": (np.cosh, "cosh", 1), "asin": (np.arcsin, "asin", 1), "acos": (np.arccos, "acos", 1),
    "atan": (np.arctan, "atan", 1), "asinh": (np.arcsinh, "asinh", 1), "acosh": (np.arccosh, "acosh", 1),
    "atanh": (np.arctanh, "atanh", 1), "copy": (np.copy, "identity", 3),
    "logical_not": (np.logical_not, "logical_not", 4), "bitwise_not": (np.invert, "bitwise_not", 4),
    "fast_exp": (np.exp, "fast_exp", 1), "fast_tanh": (np.tanh, "fast_tanh", 1), "fast_erf": (_erf, "fast_erf", 1),
}
# logical and bitwise ops check their operand dtype (TVM's relation name, a stricter relation)
_DTYPE_RELS = {"logical_not": _tr.logical_identity_rel, "bitwise_not": _tr.bitwise_identity_rel,
               **{n: _tr.logical_broadcast_rel for n in ("logical_and", "logical_or", "logical_xor")},
               **{n: _tr.bitwise_broadcast_rel for n in ("bitwise_and", "bitwise_or", "bitwise_xor", "left_shift",
                                                         "right_shift")}}

for _name, (_ref, _topi, _level) in _UNARY.items():
    define_op(_name, num_inputs=1, rel=_DTYPE_RELS.get(_name, "Identity"), rel_name="Identity",
              pattern=_P.ELEMWISE, reference=_unary_ref(_ref), compute=topi_compute(_topi, _name), level=_level)
    _export(_name, _unary_ctor(_name, _name))

for _name, _ref in {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite}.items():
    define_op(_name, num_inputs=1, rel="IdentityCompRel", pattern=_P.ELEMWISE, reference=_unary_ref(_ref),
              compute=topi_compute(_name, _name), level=3)
    _export(_name, _unary_ctor(_name, _name))


# -- binary broadcast ---------------------------------------------------------------------------------------
def _is_int(a) -> bool:
    return np.asarray(a).dtype.kind in "iub"


def _divide(a, b):
    if _is_int(a):  # TVM's divide on integers truncates toward zero, as C does
        q = np.floor_divide(a, b)
        fix = (np.mod(a, b) != 0) & ((np.asarray(a) < 0) != (np.asarray(b) < 0))
        return q + fix
    return np.true_divide(a, b)


def _floor_divide(a, b):
    return np.floor_divide(a, b) if _is_int(a) else np.floor(np.true_divide(a, b))


def _trunc_mod(a, b):
    return np.fmod(a, b)


def _power(a, b):
    return np.power(a, b)


_BINARY = {
    "add": (np.add, "add", 1), "subtract": (np.subtract, "subtract", 1), "multiply": (np.multiply, "multiply", 1),
    "divide": (_divide, "divide", 1), "power": (_power, "power", 4), "maximum": (np.maximum, "maximum", 4),
    "minimum": (np.minimum, "minimum", 4), "floor_divide": (_floor_divide, "floor_divide", 1),
    "floor_mod": (np.mod, "floor_mod", 1), "mod": (_trunc_mod, "mod", 1),
    "trunc_divide": (_divide, "divide", 1), "trunc_mod": (_trunc_mod, "mod", 1),
    "logical_and": (np.logical_and, "logical_and", 4), "logical_or": (np.logical_or, "logical_or", 4),
    "logical_xor": (np.logical_xor, "logical_xor", 4), "bitwise_and": (np.bitwise_and, "bitwise_and", 4),
    "bitwise_or": (np.bitwise_or, "bitwise_or", 4), "bitwise_xor": (np.bitwise_xor, "bitwise_xor", 4),
    "left_shift": (np.left_shift, "left_shift", 4), "right_shift": (np.right_shift, "right_shift", 4),
}
for _name, (_ref, _topi, _level) in _BINARY.items():
    define_op(_name, num_inputs=2, args=("lhs", "rhs"), rel=_DTYPE_RELS.get(_name, "Broadcast"),
              rel_name="Broadcast", pattern=_P.BROADCAST, reference=_binary_ref(_ref),
              compute=topi_compute(_topi, _name), level=_level)
    _export(_name, _binary_ctor(_name, _name))

_COMPARE = {"equal": np.equal, "not_equal": np.not_equal, "less": np.less, "less_equal": np.less_equal,
            "greater": np.greater, "greater_equal": np.greater_equal}
for _name, _ref in _COMPARE.items():
    define_op(_name, num_inputs=2, args=("lhs", "rhs"), rel="BroadcastComp", pattern=_P.BROADCAST,
              reference=_binary_ref(_ref), compute=topi_compute(_name, _name), level=4)
    _export(_name, _binary_ctor(_name, _name))


# -- where / clip / cast ---------------------------------------------------------------------------------------
def _where_rel(arg_types, attrs):
    c = tensor_arg(arg_types, 0, "condition")
    x = tensor_arg(arg_types, 1, "x")
    y = tensor_arg(arg_types, 2, "y")
    if x.dtype != y.dtype:
        raise TypeInferenceError(f"x and y must have the same dtype, got {x.dtype} and {y.dtype}")
    try:
        shape = broadcast_shape(broadcast_shape(c.shape, x.shape), y.shape)
    except TypeInferenceError:
        raise TypeInferenceError(f"condition {shape_text(c.shape)}, x {shape_text(x.shape)} and y "
                                 f"{shape_text(y.shape)} are not broadcastable") from None
    return TensorType(shape, x.dtype)


define_op("where", num_inputs=3, args=("condition", "x", "y"), rel=_where_rel, rel_name="Where",
          pattern=_P.BROADCAST, reference=lambda a, i, t: np.where(i[0].astype(bool), i[1], i[2]),
          compute=topi_compute("where", "where"), level=4)


def where(condition, x, y):
    """Select from ``x`` where ``condition`` is true, else from ``y`` (broadcasting)."""
    return Call(Op.get("where"), [condition, x, y])


_export("where", where)


define_op("clip", num_inputs=1, attrs=A.ClipAttrs, rel="Identity", pattern=_P.ELEMWISE,
          reference=lambda a, i, t: np.clip(i[0], a.a_min, a.a_max),
          compute=topi_compute("clip", "clip", lambda a, i, t: [i[0], a.a_min, a.a_max]), level=3)


def clip(a, a_min, a_max):
    """Clip the values of ``a`` into ``[a_min, a_max]``."""
    op = Op.get("clip")
    return Call(op, [a], op.make_attrs(a_min=a_min, a_max=a_max))


_export("clip", clip)


def _cast_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    if not attrs.dtype:
        raise TypeInferenceError("cast needs a target dtype")
    return TensorType(t.shape, attrs.dtype)


define_op("cast", num_inputs=1, attrs=A.CastAttrs, rel=_cast_rel, rel_name="Cast", pattern=_P.ELEMWISE,
          reference=lambda a, i, t: i[0].astype(t.dtype),
          compute=topi_compute("cast", "cast", lambda a, i, t: [i[0], a.dtype]), level=3)


def cast(data, dtype):
    """Cast ``data`` to ``dtype``."""
    op = Op.get("cast")
    return Call(op, [data], op.make_attrs(dtype=dtype_str(dtype)))


_export("cast", cast)


def _cast_like_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    like = tensor_arg(arg_types, 1, "dtype_like")
    return TensorType(t.shape, like.dtype)


define_op("cast_like", num_inputs=2, args=("data", "dtype_like"), rel=_cast_like_rel, rel_name="CastLike",
          pattern=_P.ELEMWISE, reference=lambda a, i, t: i[0].astype(t.dtype),
          compute=topi_compute("cast", "cast_like", lambda a, i, t: [i[0], i[1].dtype]), level=3)
_export("cast_like", lambda data, dtype_like: Call(Op.get("cast_like"), [data, dtype_like]))


# -- creation: zeros / ones / full and their _like versions -----------------------------------------------
def _init_rel(arg_types, attrs):
    if attrs.shape is None:
        raise TypeInferenceError("the shape attribute is required")
    if any(d < 0 for d in attrs.shape):
        raise TypeInferenceError(f"shape {shape_text(attrs.shape)} has a negative dimension")
    return TensorType(attrs.shape, attrs.dtype or "float32")


def _full_rel(arg_types, attrs):
    fill = tensor_arg(arg_types, 0, "fill_value")
    if fill.shape != ():
        raise TypeInferenceError(f"fill_value must be a scalar, got shape {shape_text(fill.shape)}")
    out = _init_rel(arg_types, attrs)
    return TensorType(out.shape, attrs.dtype or fill.dtype)


def _full_like_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    fill = tensor_arg(arg_types, 1, "fill_value")
    if fill.shape != ():
        raise TypeInferenceError(f"fill_value must be a scalar, got shape {shape_text(fill.shape)}")
    return TensorType(t.shape, t.dtype)


define_op("zeros", num_inputs=0, args=(), attrs=A.InitOpAttrs, rel=_init_rel, rel_name="InitOp",
          pattern=_P.ELEMWISE, reference=lambda a, i, t: np.zeros(t.shape, t.dtype),
          compute=topi_compute("zeros", "zeros", lambda a, i, t: [t.shape, t.dtype]), level=3)
define_op("ones", num_inputs=0, args=(), attrs=A.InitOpAttrs, rel=_init_rel, rel_name="InitOp",
          pattern=_P.ELEMWISE, reference=lambda a, i, t: np.ones(t.shape, t.dtype),
          compute=topi_compute("ones", "ones", lambda a, i, t: [t.shape, t.dtype]), level=3)
define_op("full", num_inputs=1, args=("fill_value",), attrs=A.InitOpAttrs, rel=_full_rel, rel_name="Full",
          pattern=_P.ELEMWISE, reference=lambda a, i, t: np.full(t.shape, i[0], t.dtype),
          compute=topi_compute("full", "full", lambda a, i, t: [t.shape, t.dtype, i[0]()]), level=3)
define_op("zeros_like", num_inputs=1, rel="Identity", pattern=_P.ELEMWISE,
          reference=lambda a, i, t: np.zeros_like(i[0]),
          compute=topi_compute("full_like", "zeros_like", lambda a, i, t: [i[0], 0]), level=3)
define_op("ones_like", num_inputs=1, rel="Identity", pattern=_P.ELEMWISE,
          reference=lambda a, i, t: np.ones_like(i[0]),
          compute=topi_compute("full_like", "ones_like", lambda a, i, t: [i[0], 1]), level=3)
define_op("full_like", num_inputs=2, args=("data", "fill_value"), rel=_full_like_rel, rel_name="FullLike",
          pattern=_P.ELEMWISE, reference=lambda a, i, t: np.full(i[0].shape, i[1], t.dtype),
          compute=topi_compute("full_like", "full_like", lambda a, i, t: [i[0], i[1]()]), level=3)


def _shape_tuple(shape):
    if isinstance(shape, Constant):
        return tuple(int(x) for x in shape.numpy().reshape(-1))
    if isinstance(shape, int):
        return (shape,)
    return tuple(int(x) for x in shape)


def zeros(shape, dtype="float32"):
    """A tensor of zeros (``shape`` a Relay expression: dyn.zeros)."""
    if isinstance(shape, RelayExpr) and not isinstance(shape, Constant):
        return dyn_zeros(shape, dtype)
    op = Op.get("zeros")
    return Call(op, [], op.make_attrs(shape=_shape_tuple(shape), dtype=dtype_str(dtype)))


def ones(shape, dtype="float32"):
    """A tensor of ones (``shape`` a Relay expression: dyn.ones)."""
    if isinstance(shape, RelayExpr) and not isinstance(shape, Constant):
        return dyn_ones(shape, dtype)
    op = Op.get("ones")
    return Call(op, [], op.make_attrs(shape=_shape_tuple(shape), dtype=dtype_str(dtype)))


def full(fill_value, shape=(), dtype=""):
    """A tensor of ``shape`` filled with the scalar ``fill_value`` (an expression or a number)."""
    if not isinstance(fill_value, RelayExpr):  # a Python number
        fill_value = _const(fill_value, dtype or None)
    if isinstance(shape, RelayExpr) and not isinstance(shape, Constant):
        return dyn_full(fill_value, shape, dtype)
    op = Op.get("full")
    return Call(op, [fill_value], op.make_attrs(shape=_shape_tuple(shape), dtype=dtype_str(dtype) if dtype else ""))


def zeros_like(data):
    return Call(Op.get("zeros_like"), [data])


def ones_like(data):
    return Call(Op.get("ones_like"), [data])


def full_like(data, fill_value):
    return Call(Op.get("full_like"), [data, fill_value])


for _f in (zeros, ones, full, zeros_like, ones_like, full_like):
    _export(_f.__name__, _f)


del _name, _ref, _topi, _level, _f
