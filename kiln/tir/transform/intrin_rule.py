"""The default intrinsic lowering rules: math intrinsics become C library (libm) calls.

kiln's CPU targets ("c", "llvm") print C, so these rules are registered for the ``default`` target
key (TVM's ``default.FLowerIntrinsic``, its ``DispatchPureExtern<FloatSuffix>``); a target kind
overrides one with ``kiln.ir.register_intrin_lowering(op, target=kind, f=rule)``. LowerIntrin tries
the target kind's rule first, then these, and lowers what a rule returns again, so rules chain:

* ``float32`` calls the ``f``-suffixed function (``tir.exp`` -> ``expf``), ``float64`` the plain one;
* ``float16`` computes in ``float32`` and casts back (C has no half-precision libm);
* vectors call ``tir.call_lanewise_extern``: the scalar function applied lane by lane (the C printer
  emits a small helper looping over the lanes); vector store splitting slices it like any
  elementwise call;
* ``sigmoid``, ``rsqrt``, ``exp10`` are rewritten into arithmetic and the calls above.

``LowerIntrin`` also turns float ``%``, floordiv and floormod into these calls (``fmod``, ``floor``).
"""
from __future__ import annotations

from ...error import LoweringError
from ...ir.op import register_intrin_lowering
from ...runtime.dtype import parse_dtype
from .. import expr as E
from ..op import const

# intrinsic (without "tir.") -> C library function for float64; float32 adds the "f" suffix
LIBM = {
    "exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "log10": "log10", "log1p": "log1p",
    "expm1": "expm1", "sqrt": "sqrt", "sin": "sin", "cos": "cos", "tan": "tan", "sinh": "sinh",
    "cosh": "cosh", "tanh": "tanh", "asin": "asin", "acos": "acos", "atan": "atan", "asinh": "asinh",
    "acosh": "acosh", "atanh": "atanh", "erf": "erf", "floor": "floor", "ceil": "ceil", "trunc": "trunc",
    "round": "nearbyint", "nearbyint": "nearbyint", "fabs": "fabs", "pow": "pow", "fmod": "fmod",
    "atan2": "atan2", "cbrt": "cbrt", "erfc": "erfc", "hypot": "hypot", "copysign": "copysign",
}

# A pure scalar C function applied to every lane of its vector operands (scalar operands are shared
# by all lanes): Call(dtype, LANEWISE_EXTERN, [StringImm(function name), args...]).
LANEWISE_EXTERN = "tir.call_lanewise_extern"

RULE_LEVEL = 5  # below register_intrin_lowering's default, so a user's "default" rule overrides these


def _short(call) -> str:
    op = str(call.op)
    return op[4:] if op.startswith("tir.") else op


def _float_dtype(call):
    dt = parse_dtype(call.dtype)
    if not dt.is_float:
        raise LoweringError(f"{call.op} needs float operands, got {call.dtype} (in `{call}`); "
                            "cast the operand to a float type first")
    return dt


def _as_float32(call):
    """A float16 call computed in float32: cast(f16, op(cast(f32, args)))."""
    f32 = lambda d: str(parse_dtype("float32").with_lanes(parse_dtype(d).lanes))  # noqa: E731
    args = [E.Cast(f32(a.dtype), a) for a in call.args]
    return E.Cast(call.dtype, E.Call(f32(call.dtype), call.op, args))


def _const(value: float, dtype):
    """``value`` in ``dtype``: a float immediate, broadcast for vector dtypes."""
    dt = parse_dtype(dtype)
    scalar = const(value, str(dt.element_of()))
    return scalar if dt.lanes == 1 else E.Broadcast(scalar, dt.lanes)


def dispatch_libm(call):
    """``tir.<name>(args)`` -> the C library function of the call's float type."""
    dt = _float_dtype(call)
    if dt.bits == 16:
        return _as_float32(call)
    fname = LIBM[_short(call)] + ("f" if dt.bits == 32 else "")
    if dt.lanes == 1:
        return E.Call(call.dtype, "tir.call_pure_extern", [E.StringImm(fname)] + list(call.args))
    return E.Call(call.dtype, LANEWISE_EXTERN, [E.StringImm(fname)] + list(call.args))


def _rewrite(expand):
    """A rule that rewrites a float call with ``expand(x, dtype)`` (float16 goes through float32)."""
    def rule(call):
        dt = _float_dtype(call)
        if dt.bits == 16:
            return _as_float32(call)
        return expand(*call.args, dtype=call.dtype)
    return rule


def _sigmoid(x, dtype):
    one = _const(1.0, dtype)
    return E.Div(one, E.Add(one, E.Call(dtype, "tir.exp", [E.Sub(_const(0.0, dtype), x)])))


def _rsqrt(x, dtype):
    return E.Div(_const(1.0, dtype), E.Call(dtype, "tir.sqrt", [x]))


def _exp10(x, dtype):
    return E.Call(dtype, "tir.pow", [_const(10.0, dtype), x])


DEFAULT_RULES = {f"tir.{name}": dispatch_libm for name in LIBM}
DEFAULT_RULES.update({"tir.sigmoid": _rewrite(_sigmoid), "tir.rsqrt": _rewrite(_rsqrt),
                      "tir.exp10": _rewrite(_exp10)})

for _op, _rule in DEFAULT_RULES.items():
    register_intrin_lowering(_op, "default", f=_rule, level=RULE_LEVEL)
