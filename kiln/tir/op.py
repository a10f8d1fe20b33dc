"""Building TIR expressions: dtype matching, constant folding, intrinsics and reducers.

Python numbers are converted to immediates that take the other operand's dtype, as TVM does.
Arithmetic on two constants folds immediately, and the trivial identities (x+0, x*1, x*0 for
integers) are applied, so shapes computed from constants stay constants.
"""
from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np

from ..error import DataTypeError, KilnError
from ..runtime.dtype import parse_dtype
from . import expr as _e

#: ``kiln_lane_masked(x, mask)``: ``x`` on the lanes where the vector bool ``mask`` is true. Around a vector
#: load, only those lanes are read (0 elsewhere); as the value of a vector store, only they are written; any
#: other ``x`` is its value. ``kiln_any_lane(mask)``: whether some lane is true. VectorizeLoop's masked last
#: vector (``transform.vectorize._Vectorizer._masked_region``) is made of them; the TIR interpreter runs them,
#: the C backend prints masked loads and stores (AVX-512 masked moves, AVX ``vmaskmov``), and
#: ``vector_split.slice_lanes`` slices value and mask alike.
LANE_MASKED = "tir.kiln_lane_masked"
ANY_LANE = "tir.kiln_any_lane"

# --------------------------------------------------------------------------------------------
# conversion
# --------------------------------------------------------------------------------------------


def const(value, dtype=None, span=None):
    """An immediate of ``dtype`` (default: int32 for ints, float32 for floats, bool for bools)."""
    if isinstance(value, (_e.IntImm, _e.FloatImm)):
        value = value.value
    if isinstance(value, (bool, np.bool_)):
        dtype = dtype or "bool"
    elif isinstance(value, (Integral, np.integer)):
        if dtype is None:
            dtype = "int32" if -(2 ** 31) <= int(value) < 2 ** 31 else "int64"
    elif isinstance(value, (Real, np.floating)):
        dtype = dtype or "float32"
    else:
        raise DataTypeError(f"cannot make a constant from {value!r}")
    dt = parse_dtype(dtype)
    if dt.lanes > 1:
        return _e.Broadcast(const(value, str(dt.element_of())), dt.lanes)
    if dt.is_float:
        return _e.FloatImm(dtype, float(value))
    return _e.IntImm(dtype, int(value))


def convert(value, dtype=None):
    """Turn Python numbers (and IterVars) into PrimExprs; leave other nodes untouched."""
    if isinstance(value, _e.PrimExpr):
        return value
    if isinstance(value, _e.IterVar):
        return value.var
    if isinstance(value, _e.EqualOp):
        return value.asobject()
    if isinstance(value, (bool, Integral, Real, np.generic)):
        return const(value, dtype)
    if isinstance(value, str):
        return _e.StringImm(value)
    return value


def _is_const(x):
    return isinstance(x, (_e.IntImm, _e.FloatImm))


def _const_value(x):
    return x.value


def _match(a, b):
    """Convert both operands to PrimExprs of one dtype (TVM's BinaryOpMatchTypes)."""
    a_py = not isinstance(a, (_e.PrimExpr, _e.IterVar))
    b_py = not isinstance(b, (_e.PrimExpr, _e.IterVar))
    if a_py and b_py:
        a, b = convert(a), convert(b)
    elif a_py:
        b = convert(b)
        a = _python_const_like(a, b.dtype)
    elif b_py:
        a = convert(a)
        b = _python_const_like(b, a.dtype)
    else:
        a, b = convert(a), convert(b)
    if a.dtype == b.dtype:
        return a, b
    da, db = parse_dtype(a.dtype), parse_dtype(b.dtype)
    if da.lanes != db.lanes:
        if da.lanes == 1:
            a = _e.Broadcast(a if da.element_of() == db.element_of() else cast(a, str(db.element_of())), db.lanes)
            return _match(a, b)
        if db.lanes == 1:
            b = _e.Broadcast(b if db.element_of() == da.element_of() else cast(b, str(da.element_of())), da.lanes)
            return _match(a, b)
        raise DataTypeError(f"cannot combine vectors of {da.lanes} and {db.lanes} lanes")
    if da.is_float and not db.is_float:
        return a, cast(b, a.dtype)
    if db.is_float and not da.is_float:
        return cast(a, b.dtype), b
    if da.is_float and db.is_float:
        return (cast(a, b.dtype), b) if db.bits > da.bits else (a, cast(b, a.dtype))
    if da.is_bool and not db.is_bool:
        return cast(a, b.dtype), b
    if db.is_bool and not da.is_bool:
        return a, cast(b, a.dtype)
    if da.bits != db.bits:
        return (cast(a, b.dtype), b) if db.bits > da.bits else (a, cast(b, a.dtype))
    if da.is_int != db.is_int:  # int vs uint of equal width: TVM picks the signed side
        return (a, cast(b, a.dtype)) if da.is_int else (cast(a, b.dtype), b)
    raise DataTypeError(f"cannot match dtypes {a.dtype} and {b.dtype}")


def _python_const_like(value, dtype):
    dt = parse_dtype(dtype)
    if isinstance(value, (bool, np.bool_)) and not dt.is_bool:
        value = int(value)
    if dt.is_float or dt.element_of().is_float:
        return const(float(value), dtype)
    if isinstance(value, (float, np.floating)) and not float(value).is_integer():
        return const(float(value), "float32" if dt.lanes == 1 else f"float32x{dt.lanes}")
    if dt.is_handle:
        return const(value)
    return const(int(value), dtype)


def cast(value, dtype, span=None):
    value = convert(value)
    dtype = str(parse_dtype(dtype))
    if value.dtype == dtype:
        return value
    dt = parse_dtype(dtype)
    if isinstance(value, _e.IntImm) and dt.lanes == 1:
        if dt.is_float:
            return _e.FloatImm(dtype, float(value.value))
        if dt.is_bool:
            return _e.IntImm("bool", int(value.value != 0))
        return _e.IntImm(dtype, _wrap_int(value.value, dt))
    if isinstance(value, _e.FloatImm) and dt.lanes == 1:
        if dt.is_float:
            return _e.FloatImm(dtype, value.value)
        if dt.is_bool:
            return _e.IntImm("bool", int(value.value != 0))
        if math.isfinite(value.value):
            return _e.IntImm(dtype, _wrap_int(int(value.value), dt))
    if isinstance(value, _e.Broadcast) and dt.lanes == value.lanes:
        return _e.Broadcast(cast(value.value, str(dt.element_of())), dt.lanes)
    if dt.lanes > 1 and parse_dtype(value.dtype).lanes == 1:
        return _e.Broadcast(cast(value, str(dt.element_of())), dt.lanes)
    return _e.Cast(dtype, value)


def _wrap_int(v: int, dt) -> int:
    if dt.bits >= 64 and dt.is_int:
        return v
    bits = dt.bits
    v &= (1 << bits) - 1
    if dt.is_int and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


# --------------------------------------------------------------------------------------------
# arithmetic with constant folding
# --------------------------------------------------------------------------------------------


def _fold_int(dtype, value):
    return _e.IntImm(dtype, _wrap_int(value, parse_dtype(dtype)))


def _is_zero(x):
    return _is_const(x) and x.value == 0


def _is_one(x):
    return _is_const(x) and x.value == 1


def add(a, b, span=None):
    a, b = _match(a, b)
    if _is_const(a) and _is_const(b):
        return _fold(a, a.value + b.value)
    if _is_zero(b):
        return a
    if _is_zero(a):
        return b
    return _e.Add(a, b)


def sub(a, b, span=None):
    a, b = _match(a, b)
    if _is_const(a) and _is_const(b):
        return _fold(a, a.value - b.value)
    if _is_zero(b):
        return a
    return _e.Sub(a, b)


def mul(a, b, span=None):
    a, b = _match(a, b)
    if _is_const(a) and _is_const(b):
        return _fold(a, a.value * b.value)
    if _is_one(b):
        return a
    if _is_one(a):
        return b
    if parse_dtype(a.dtype).is_integral and (_is_zero(a) or _is_zero(b)):
        return const(0, a.dtype)
    return _e.Mul(a, b)


def _fold(like, value):
    if isinstance(like, _e.FloatImm):
        return _e.FloatImm(like.dtype, value)
    if like.dtype == "bool":
        return _e.IntImm("bool", int(bool(value)))
    return _fold_int(like.dtype, int(value))


def neg(a, span=None):
    a = convert(a)
    if _is_const(a):
        return _fold(a, -a.value)
    return sub(const(0, a.dtype) if parse_dtype(a.dtype).lanes == 1 else _python_const_like(0, a.dtype), a)


def _check_div_zero(b):
    if _is_zero(b) and parse_dtype(b.dtype).is_integral:
        raise KilnError("integer division by the constant zero")


def truncdiv(a, b, span=None):
    a, b = _match(a, b)
    _check_div_zero(b)
    if _is_const(a) and _is_const(b) and parse_dtype(a.dtype).is_integral:
        q = abs(a.value) // abs(b.value)
        return _fold_int(a.dtype, q if (a.value >= 0) == (b.value >= 0) else -q)
    if _is_one(b):
        return a
    return _e.Div(a, b)


def truncmod(a, b, span=None):
    a, b = _match(a, b)
    _check_div_zero(b)
    if _is_const(a) and _is_const(b) and parse_dtype(a.dtype).is_integral:
        r = abs(a.value) % abs(b.value)
        return _fold_int(a.dtype, r if a.value >= 0 else -r)
    if _is_one(b) and parse_dtype(a.dtype).is_integral:
        return const(0, a.dtype)
    return _e.Mod(a, b)


def floordiv(a, b, span=None):
    a, b = _match(a, b)
    _check_div_zero(b)
    if parse_dtype(a.dtype).is_float:
        return floor(div(a, b))
    if _is_const(a) and _is_const(b):
        return _fold_int(a.dtype, a.value // b.value)
    if _is_one(b):
        return a
    if _is_zero(a):
        return a
    return _e.FloorDiv(a, b)


def floormod(a, b, span=None):
    a, b = _match(a, b)
    _check_div_zero(b)
    if parse_dtype(a.dtype).is_float:
        # numpy's / Python's mod from C's fmod: the remainder takes the divisor's sign. Unlike a - floor(a/b)*b
        # it is exact and keeps the ±inf rules (5 mod inf = 5, -5 mod inf = inf, inf mod y = nan); r*b < 0
        # exactly when r is nonzero with the other sign (NaN compares false)
        if _is_const(a) and _is_const(b):
            return const(float(a.value) % float(b.value), a.dtype)  # Python's float % has numpy's rules
        r = fmod(a, b)
        return _e.Select(less(mul(r, b), const(0, a.dtype)), add(r, b), r)
    if _is_const(a) and _is_const(b):
        return _fold_int(a.dtype, a.value % b.value)
    if _is_one(b) or _is_zero(a):
        return const(0, a.dtype)
    return _e.FloorMod(a, b)


def ceildiv(a, b, span=None):
    """``ceil(a / b)`` of integers, as ``floordiv(a + b - 1, b)`` (TVM's ``tir.ceildiv``); floats use
    ``ceil(a / b)``. Constant operands fold."""
    a, b = _match(a, b)
    _check_div_zero(b)
    if parse_dtype(a.dtype).is_float:
        return ceil(div(a, b))
    if _is_const(a) and _is_const(b):
        return _fold_int(a.dtype, -(-a.value // b.value))
    if _is_one(b):
        return a
    return floordiv(add(a, sub(b, 1)), b)

def div(a, b, span=None):
    """``tir.Div``: true division for floats, truncating for integers."""
    a, b = _match(a, b)
    if parse_dtype(a.dtype).is_float:
        if _is_const(a) and _is_const(b) and b.value != 0:
            return _e.FloatImm(a.dtype, a.value / b.value)
        if _is_one(b):
            return a
        return _e.Div(a, b)
    return truncdiv(a, b)


def true_divide(a, b):
    a_e, b_e = _match(a, b)
    if parse_dtype(a_e.dtype).is_integral:
        raise KilnError(
            "true division `/` of two integer expressions is ambiguous; use `//` (floordiv), "
            "kiln.tir.truncdiv or kiln.tir.indexdiv, or cast to float first"
        )
    return div(a_e, b_e)


indexdiv = floordiv
indexmod = floormod


def min(a, b=None, span=None, *, axis=None, where=None, init=None):  # noqa: A001
    """Two-argument min of expressions, or (``te.min(expr, axis=...)``) a min-reduction."""
    if axis is not None or (b is not None and _looks_like_axis(b)):
        return _min_reducer(a, axis if axis is not None else b, where, init)
    if b is None:
        raise KilnError("min needs two operands (min(a, b)), or axis=... for a min-reduction "
                        "(min(expr, axis=k) with k = te.reduce_axis(...))")
    a, b = _match(a, b)
    if _is_const(a) and _is_const(b):
        return a if a.value <= b.value or a.value != a.value else b  # a NaN wins, as at run time
    if a is b:
        return a
    return _e.Min(a, b)


def max(a, b=None, span=None, *, axis=None, where=None, init=None):  # noqa: A001
    """Two-argument max of expressions, or (``te.max(expr, axis=...)``) a max-reduction."""
    if axis is not None or (b is not None and _looks_like_axis(b)):
        return _max_reducer(a, axis if axis is not None else b, where, init)
    if b is None:
        raise KilnError("max needs two operands (max(a, b)), or axis=... for a max-reduction "
                        "(max(expr, axis=k) with k = te.reduce_axis(...))")
    a, b = _match(a, b)
    if _is_const(a) and _is_const(b):
        return a if a.value >= b.value or a.value != a.value else b  # a NaN wins, as at run time
    if a is b:
        return a
    return _e.Max(a, b)


def _looks_like_axis(x):
    if isinstance(x, _e.IterVar):
        return x.iter_type == _e.IterVar.CommReduce
    if isinstance(x, (list, tuple)) and x and all(isinstance(i, _e.IterVar) for i in x):
        return True
    return False


def _cmp(cls_name, pyop):
    # the node class is looked up when called: tir.expr and this module import each other at their tops
    def build(a, b, span=None):
        a, b = _match(a, b)
        if _is_const(a) and _is_const(b):
            return const(bool(pyop(a.value, b.value)), "bool")
        return getattr(_e, cls_name)(a, b)
    return build


equal = _cmp("EQ", lambda x, y: x == y)
not_equal = _cmp("NE", lambda x, y: x != y)
less = _cmp("LT", lambda x, y: x < y)
less_equal = _cmp("LE", lambda x, y: x <= y)
greater = _cmp("GT", lambda x, y: x > y)
greater_equal = _cmp("GE", lambda x, y: x >= y)


def _as_bool(x):
    x = convert(x)
    if parse_dtype(x.dtype).element_of().is_bool:
        return x
    return not_equal(x, _python_const_like(0, x.dtype))


def logical_and(a, b, span=None):
    a, b = _as_bool(a), _as_bool(b)
    if _is_const(a):
        return b if a.value else a
    if _is_const(b):
        return a if b.value else b
    return _e.And(a, b)


def logical_or(a, b, span=None):
    a, b = _as_bool(a), _as_bool(b)
    if _is_const(a):
        return a if a.value else b
    if _is_const(b):
        return b if b.value else a
    return _e.Or(a, b)


def logical_not(a, span=None):
    a = _as_bool(a)
    if _is_const(a):
        return const(not a.value, "bool")
    return _e.Not(a)


def all(*args, span=None):  # noqa: A001
    """The conjunction of conditions (``tvm.tir.all``)."""
    return _fold_conditions("tir.all", args, logical_and)


def any(*args, span=None):  # noqa: A001
    """The disjunction of conditions (``tvm.tir.any``)."""
    return _fold_conditions("tir.any", args, logical_or)


def _fold_conditions(name, args, combine):
    """Combine the conditions ``args`` (given inline or as one list) left to right."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = args[0]
    if not args:
        raise KilnError(f"{name} needs at least one condition")
    result = _as_bool(args[0])
    for x in args[1:]:
        result = combine(result, x)
    return result


def _bitwise(name, pyop):
    def build(a, b, span=None):
        a, b = _match(a, b)
        dt = parse_dtype(a.dtype)
        if dt.is_float:
            raise DataTypeError(f"{name} needs integer operands, got {a.dtype}")
        if dt.is_bool and name in ("bitwise_and", "bitwise_or"):
            return logical_and(a, b) if name == "bitwise_and" else logical_or(a, b)
        if _is_const(a) and _is_const(b):
            return _fold_int(a.dtype, pyop(a.value, b.value))
        return _e.Call(a.dtype, "tir." + name, [a, b])
    return build


bitwise_and = _bitwise("bitwise_and", lambda x, y: x & y)
bitwise_or = _bitwise("bitwise_or", lambda x, y: x | y)
bitwise_xor = _bitwise("bitwise_xor", lambda x, y: x ^ y)
shift_left = _bitwise("shift_left", lambda x, y: x << y)
shift_right = _bitwise("shift_right", lambda x, y: x >> y)


def bitwise_not(a, span=None):
    a = convert(a)
    if parse_dtype(a.dtype).is_bool:
        return logical_not(a)
    if parse_dtype(a.dtype).is_float:
        raise DataTypeError(f"bitwise_not needs an integer operand, got {a.dtype}")
    if _is_const(a):
        return _fold_int(a.dtype, ~a.value)
    return _e.Call(a.dtype, "tir.bitwise_not", [a])


# --------------------------------------------------------------------------------------------
# selection and intrinsics
# --------------------------------------------------------------------------------------------


def if_then_else(cond, t, f, span=None):
    """``cond ? t : f`` where only the taken branch is evaluated (guards out-of-bounds reads)."""
    cond = _as_bool(cond)
    t, f = _match(t, f)
    if _is_const(cond):
        return t if cond.value else f
    return _e.Call(t.dtype, "tir.if_then_else", [cond, t, f])


def Select(cond, t, f):  # noqa: N802 - TVM spelling
    cond = _as_bool(cond)
    t, f = _match(t, f)
    return _e.Select(cond, t, f)


select = Select


def likely(cond, span=None):
    cond = convert(cond)
    if _is_const(cond):
        return cond
    return _e.Call(cond.dtype, "tir.likely", [cond])


def _float_arg(x):
    x = convert(x)
    if not parse_dtype(x.dtype).element_of().is_float:
        x = cast(x, "float32" if parse_dtype(x.dtype).lanes == 1 else f"float32x{parse_dtype(x.dtype).lanes}")
    return x


def _unary_intrin(name, fold=None, keep_int=False):
    def build(x, span=None):
        x = convert(x) if keep_int else _float_arg(x)
        if fold is not None and _is_const(x):
            try:
                v = fold(x.value)
                return _fold(x, v) if not isinstance(x, _e.FloatImm) else _e.FloatImm(x.dtype, v)
            except (ValueError, OverflowError, ZeroDivisionError):
                pass
        return _e.Call(x.dtype, "tir." + name, [x])
    build.__name__ = name
    build.__doc__ = f"Elementwise ``{name}`` intrinsic."
    return build


exp = _unary_intrin("exp", math.exp)
exp2 = _unary_intrin("exp2", lambda v: 2.0 ** v)
exp10 = _unary_intrin("exp10", lambda v: 10.0 ** v)
log = _unary_intrin("log", math.log)
log2 = _unary_intrin("log2", math.log2)
log10 = _unary_intrin("log10", math.log10)
log1p = _unary_intrin("log1p", math.log1p)
expm1 = _unary_intrin("expm1", math.expm1)
sqrt = _unary_intrin("sqrt", math.sqrt)
rsqrt = _unary_intrin("rsqrt", lambda v: 1.0 / math.sqrt(v))
sin = _unary_intrin("sin", math.sin)
cos = _unary_intrin("cos", math.cos)
tan = _unary_intrin("tan", math.tan)
sinh = _unary_intrin("sinh", math.sinh)
cosh = _unary_intrin("cosh", math.cosh)
tanh = _unary_intrin("tanh", math.tanh)
asin = _unary_intrin("asin", math.asin)
acos = _unary_intrin("acos", math.acos)
atan = _unary_intrin("atan", math.atan)
asinh = _unary_intrin("asinh", math.asinh)
acosh = _unary_intrin("acosh", math.acosh)
atanh = _unary_intrin("atanh", math.atanh)
erf = _unary_intrin("erf", math.erf)
sigmoid = _unary_intrin("sigmoid", lambda v: 1.0 / (1.0 + math.exp(-v)))
floor = _unary_intrin("floor", math.floor)
ceil = _unary_intrin("ceil", math.ceil)
trunc = _unary_intrin("trunc", math.trunc)
round = _unary_intrin("round", lambda v: float(np.round(v)))  # noqa: A001 - half to even, as nearbyint
nearbyint = _unary_intrin("nearbyint", lambda v: float(np.round(v)))


def abs(x, span=None):  # noqa: A001
    x = convert(x)
    if _is_const(x):
        return _fold(x, builtins_abs(x.value))
    dt = parse_dtype(x.dtype)
    if dt.is_uint or dt.is_bool:
        return x
    return _e.Call(x.dtype, "tir.fabs" if dt.is_float else "tir.abs", [x])


def builtins_abs(v):
    return v if v >= 0 else -v


def _predicate_intrin(name):
    def build(x, span=None):
        x = convert(x)
        dt = parse_dtype(x.dtype)
        out = "bool" if dt.lanes == 1 else f"boolx{dt.lanes}"
        if not dt.is_float:
            return const(name == "isfinite", "bool")
        return _e.Call(out, "tir." + name, [x])
    build.__name__ = name
    return build


isnan = _predicate_intrin("isnan")
isinf = _predicate_intrin("isinf")
isfinite = _predicate_intrin("isfinite")


def power(x, y, span=None):
    x, y = _match(_float_arg(x), y)
    if _is_const(y) and y.value == 1:
        return x
    return _e.Call(x.dtype, "tir.pow", [x, y])


pow = power  # noqa: A001


def fmod(x, y, span=None):
    x, y = _match(_float_arg(x), y)
    return _e.Call(x.dtype, "tir.fmod", [x, y])


def atan2(x, y, span=None):
    x, y = _match(_float_arg(x), y)
    return _e.Call(x.dtype, "tir.atan2", [x, y])


def popcount(x, span=None):
    x = convert(x)
    return _e.Call(x.dtype, "tir.popcount", [x])


def reinterpret(dtype, value, span=None):
    value = convert(value)
    return _e.Call(dtype, "tir.reinterpret", [value])


def call_intrin(dtype, func_name, *args, span=None):
    return _e.Call(dtype, func_name, [convert(a) for a in args])


def call_pure_extern(dtype, func_name, *args, span=None):
    return _e.Call(dtype, "tir.call_pure_extern", [_e.StringImm(func_name)] + [convert(a) for a in args])


def call_extern(dtype, func_name, *args, span=None):
    return _e.Call(dtype, "tir.call_extern", [_e.StringImm(func_name)] + [convert(a) for a in args])


def call_packed(*args, span=None):
    """Call a function of the global registry by name from generated code.

    ``call_packed("name", a, b, ...)``; arguments may be scalars or buffers (passed as NDArrays).
    Returns an int32 expression (the callee's integer/bool return, or 0).
    """
    if not args:
        raise KilnError("call_packed needs the registered function's name as its first argument")
    name = args[0]
    if isinstance(name, _e.StringImm):
        name = name.value
    if not isinstance(name, str):
        raise KilnError(f"call_packed: the first argument must be the function name, got {name!r}")
    return _e.Call("int32", "tir.tvm_call_packed", [_e.StringImm(name)] + [convert(a) for a in args[1:]])


def call_packed_lowered(*args, span=None):
    return call_packed(*args)


def ret(val, span=None):
    val = convert(val)
    return _e.Call(val.dtype, "tir.ret", [val])


def min_value(dtype, span=None):
    dt = parse_dtype(dtype)
    if dt.is_float:
        return const(-math.inf if dt.bits > 16 else dt.min_value(), dtype)
    return const(dt.min_value(), dtype)


def max_value(dtype, span=None):
    dt = parse_dtype(dtype)
    if dt.is_float:
        return const(math.inf if dt.bits > 16 else dt.max_value(), dtype)
    return const(dt.max_value(), dtype)


def infinity(dtype, span=None):
    return const(math.inf, dtype)


# --------------------------------------------------------------------------------------------
# reducers
# --------------------------------------------------------------------------------------------


def comm_reducer(fcombine, fidentity, name="reduce"):
    """Make a commutative reducer (``tvm.te.comm_reducer``).

    ``fcombine(x, y)`` combines (tuples for multi-value reducers such as argmax);
    ``fidentity(dtype...)`` gives the identity element(s). The result is called as
    ``reducer(expr, axis, where=None, init=None)`` inside ``te.compute``.
    """
    import inspect
    n_args = len(inspect.signature(fcombine).parameters)
    if n_args != 2:
        raise KilnError("comm_reducer's fcombine must take two arguments (x, y), tuples for multi-value")

    def reducer(expr, axis=None, where=None, init=None, *args):
        axes = _reduce_axes(name, axis)
        exprs = list(expr) if isinstance(expr, (list, tuple)) else [convert(expr)]
        exprs = [convert(e) for e in exprs]
        dtypes = [e.dtype for e in exprs]
        size = len(exprs)
        lhs = [_e.Var(f"x{i}" if size > 1 else "x", d) for i, d in enumerate(dtypes)]
        rhs = [_e.Var(f"y{i}" if size > 1 else "y", d) for i, d in enumerate(dtypes)]
        if size == 1:
            result = [convert(fcombine(lhs[0], rhs[0]))]
            ident = [convert(fidentity(dtypes[0]))]
        else:
            result = [convert(r) for r in fcombine(tuple(lhs), tuple(rhs))]
            ident = [convert(r) for r in fidentity(*dtypes)]
        result = [cast(r, d) for r, d in zip(result, dtypes)]
        ident = [cast(r, d) for r, d in zip(ident, dtypes)]
        combiner = _e.CommReducer(lhs, rhs, result, ident)
        cond = _as_bool(where) if where is not None else const(True, "bool")
        inits = []
        if init is not None:
            inits = [convert(i) for i in (init if isinstance(init, (list, tuple)) else [init])]
        outs = [_e.Reduce(combiner, exprs, axes, cond, i, inits) for i in range(size)]
        return outs[0] if size == 1 else tuple(outs)

    reducer.__name__ = name
    return reducer


def _reduce_axes(name, axis) -> list:
    """The reduction axes of a ``name`` reduction: each must come from ``te.reduce_axis``."""
    if axis is None:
        raise KilnError(f"{name} reduction: give the axes to reduce over, e.g. "
                        f"{name}(expr, axis=k) with k = te.reduce_axis((0, n), 'k')")
    # an empty list is a reduction over no axes (TVM allows it): the identity combined with one value
    axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
    for ax in axes:
        if not isinstance(ax, _e.IterVar) or ax.iter_type != _e.IterVar.CommReduce:
            what = f"data-parallel axis '{ax.var.name}'" if isinstance(ax, _e.IterVar) else repr(ax)
            raise KilnError(f"{name} reduction: {what} is not a reduction axis; reduce over axes made by "
                            "te.reduce_axis((begin, end), name)")
    return axes


def _sum_combine(x, y):
    return x + y


sum = comm_reducer(_sum_combine, lambda dt: const(0, dt), name="sum")  # noqa: A001
_min_reducer = comm_reducer(lambda x, y: min(x, y), lambda dt: max_value(dt), name="min")
_max_reducer = comm_reducer(lambda x, y: max(x, y), lambda dt: min_value(dt), name="max")
