"""Elementwise math (TVM's ``topi.math``): one ``te.compute`` per op, tagged ``elemwise``."""
from __future__ import annotations

from .. import te
from ..runtime.dtype import parse_dtype
from ..tir import op as T
from . import tag
from ..error import KilnError
from .utils import get_const_tuple


def _unary(fn, name):
    def op(x):
        return te.compute(x.shape, lambda *i: fn(x(*i)), name=f"T_{name}", tag=tag.ELEMWISE)
    op.__name__ = name
    op.__doc__ = f"Elementwise ``{name}``."
    return op


def _is_float(x) -> bool:
    return parse_dtype(x.dtype).is_float


exp = _unary(T.exp, "exp")
log = _unary(T.log, "log")
log2 = _unary(T.log2, "log2")
log10 = _unary(T.log10, "log10")
sqrt = _unary(T.sqrt, "sqrt")
rsqrt = _unary(T.rsqrt, "rsqrt")
tanh = _unary(T.tanh, "tanh")
sigmoid = _unary(T.sigmoid, "sigmoid")
erf = _unary(T.erf, "erf")
sin = _unary(T.sin, "sin")
cos = _unary(T.cos, "cos")
tan = _unary(T.tan, "tan")
sinh = _unary(T.sinh, "sinh")
cosh = _unary(T.cosh, "cosh")
asin = _unary(T.asin, "asin")
acos = _unary(T.acos, "acos")
atan = _unary(T.atan, "atan")
asinh = _unary(T.asinh, "asinh")
acosh = _unary(T.acosh, "acosh")
atanh = _unary(T.atanh, "atanh")
abs = _unary(T.abs, "abs")  # noqa: A001
isnan = _unary(T.isnan, "isnan")
isinf = _unary(T.isinf, "isinf")
isfinite = _unary(T.isfinite, "isfinite")


# exp as Cephes' expf does it: e^x = 2^n * e^r with n = round(x / ln 2), r = x - n ln 2 (ln 2 split in two
# constants so r is exact), e^r by a degree-7 polynomial, 2^n built in the exponent bits. Only +, *, floor,
# min/max, a cast, a shift and a reinterpret: it vectorizes. Inputs below -87.3 (results that would be
# denormal) give 0, above ln(FLT_MAX) inf.
_EXP_LO, _EXP_HI = -87.3, 88.3762626647949
_LOG2E = 1.44269504088896341
_LN2_HI, _LN2_LO = 0.693359375, -2.12194440e-4
_EXP_P = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
          5.0000001201e-1)


def fast_exp_expr(v):
    """``exp(v)`` for float32 ``v`` as a vectorizable expression, within 2 ulp of libm's expf over the normal
    range; NaN stays NaN."""
    dt = v.dtype
    c = lambda val: T.const(val, dt)  # noqa: E731
    x = T.max(c(_EXP_LO), T.min(c(_EXP_HI), v))  # constant first: a NaN lane stays NaN (see _odd_rational)
    n = T.floor(x * c(_LOG2E) + c(0.5))
    r = x - n * c(_LN2_HI) - n * c(_LN2_LO)
    p = c(_EXP_P[0])
    for coef in _EXP_P[1:]:
        p = p * r + c(coef)
    y = p * (r * r) + r + c(1.0)
    two_n = T.reinterpret(dt, T.shift_left(T.cast(n, "int32") + T.const(127, "int32"), T.const(23, "int32")))
    # beyond the clamp: 0 below (a masked attention score, exp(-inf), is exactly 0), inf above
    return T.Select(v < c(_EXP_LO), c(0.0), T.Select(v > c(88.7228390520684), c(float("inf")), y * two_n))


def fast_exp(x):
    """Elementwise exp by :func:`fast_exp_expr` for float32 (TVM's ``topi.fast_exp``); other dtypes use
    :func:`exp`."""
    if x.dtype != "float32":
        return exp(x)
    return te.compute(x.shape, lambda *i: fast_exp_expr(x(*i)), name="T_fast_exp", tag=tag.ELEMWISE)


# Rational minimax approximations x * P(x^2) / Q(x^2) on a clamped input, the coefficients Eigen publishes
# for float32 (TVM's fast_tanh / fast_erf use the same ones). Only +, *, /, min and max: they vectorize
# (a libm call runs lane by lane). Measured against float64 on a dense grid of float32 inputs: tanh within
# 3.5e-7 absolute (6 ulp), erf within 4.2e-7 absolute (7 ulp).
_TANH_CLAMP = 9.0
_TANH_P = (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
           1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03)
_TANH_Q = (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03)
_ERF_CLAMP = 4.0
_ERF_P = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
          -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02)
_ERF_Q = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
          -1.42647390514189e-02)


def _horner(x, coeffs, dtype):
    acc = T.const(coeffs[0], dtype)
    for c in coeffs[1:]:
        acc = acc * x + T.const(c, dtype)
    return acc


def _odd_rational(v, clamp: float, p, q, dtype):
    # min/max compile to ``a < b ? a : b``, which gives ``b`` for a NaN lane: the constant goes first so
    # that a NaN input stays NaN (as libm's tanh / erf give) instead of being clamped to +-1
    x = T.max(T.const(-clamp, dtype), T.min(T.const(clamp, dtype), v))
    x2 = x * x
    y = x * _horner(x2, p, dtype) / _horner(x2, q, dtype)
    one = T.const(1.0, dtype)
    return T.max(-one, T.min(one, y))  # the approximation may overshoot 1 by an ulp; tanh and erf never do


def fast_tanh_expr(v):
    """``tanh(v)`` as a vectorizable float32 expression (see the accuracy note above)."""
    return _odd_rational(v, _TANH_CLAMP, _TANH_P, _TANH_Q, v.dtype)


def fast_erf_expr(v):
    """``erf(v)`` as a vectorizable expression, computed in float32 for float16/float32 ``v``."""
    if v.dtype == "float16":
        return T.cast(fast_erf_expr(T.cast(v, "float32")), "float16")
    return _odd_rational(v, _ERF_CLAMP, _ERF_P, _ERF_Q, v.dtype)


def fast_tanh(x):
    """Elementwise tanh by a rational approximation for float32 (TVM's ``topi.fast_tanh``); other dtypes use
    :func:`tanh`."""
    if x.dtype != "float32":
        return tanh(x)
    return te.compute(x.shape, lambda *i: fast_tanh_expr(x(*i)), name="T_fast_tanh", tag=tag.ELEMWISE)


def fast_erf(x):
    """Elementwise erf by a rational approximation for float16/float32 (TVM's ``topi.fast_erf``); other
    dtypes use :func:`erf`."""
    if x.dtype not in ("float32", "float16"):
        return erf(x)
    return te.compute(x.shape, lambda *i: fast_erf_expr(x(*i)), name="T_fast_erf", tag=tag.ELEMWISE)


def _float_only(fn, name):
    def op(x):
        if not _is_float(x):
            return identity(x)  # floor/ceil/round/trunc of an integer is itself
        return te.compute(x.shape, lambda *i: fn(x(*i)), name=f"T_{name}", tag=tag.ELEMWISE)
    op.__name__ = name
    return op


floor = _float_only(T.floor, "floor")
ceil = _float_only(T.ceil, "ceil")
round = _float_only(T.round, "round")  # noqa: A001 - half to even, as numpy and TVM's nearbyint
trunc = _float_only(T.trunc, "trunc")


def identity(x):
    return te.compute(x.shape, lambda *i: x(*i), name="T_identity", tag=tag.ELEMWISE)


def negative(x):
    return te.compute(x.shape, lambda *i: -x(*i), name="T_negative", tag=tag.ELEMWISE)


def logical_not(x):
    return te.compute(x.shape, lambda *i: T.logical_not(x(*i)), name="T_logical_not", tag=tag.ELEMWISE)


def bitwise_not(x):
    return te.compute(x.shape, lambda *i: T.bitwise_not(x(*i)), name="T_bitwise_not", tag=tag.ELEMWISE)


def sign(x):
    """-1, 0 or 1 in ``x``'s dtype; NaN stays NaN for floats (numpy and PyTorch)."""
    is_float = str(x.dtype).startswith(("float", "bfloat"))

    def f(*i):
        v = x(*i)
        zero, one = T.const(0, x.dtype), T.const(1, x.dtype)
        out = T.Select(v > zero, one, T.Select(v < zero, T.const(-1, x.dtype), zero))
        return T.Select(T.isnan(v), v, out) if is_float else out
    return te.compute(x.shape, f, name="T_sign", tag=tag.ELEMWISE)


def clip(x, a_min, a_max):
    """Clamp to ``[a_min, a_max]``."""
    def f(*i):
        lo, hi = T.const(a_min, x.dtype), T.const(a_max, x.dtype)
        return T.max(T.min(x(*i), hi), lo)
    return te.compute(x.shape, f, name="T_clip", tag=tag.ELEMWISE)


def cast(x, dtype):
    """Convert to ``dtype`` (floats to integers truncate toward zero, as C does)."""
    if not hasattr(x, "shape"):
        return T.cast(x, dtype)
    return te.compute(x.shape, lambda *i: T.cast(x(*i), dtype), name="T_cast", tag=tag.ELEMWISE)


def reinterpret(x, dtype):
    return te.compute(x.shape, lambda *i: T.reinterpret(dtype, x(*i)), name="T_reinterpret", tag=tag.ELEMWISE)


def elemwise_sum(xs):
    """The elementwise sum of a list of same-shape, same-dtype tensors."""
    xs = list(xs) if isinstance(xs, (list, tuple)) else None
    if not xs:
        raise KilnError("elemwise_sum expects a non-empty list of tensors, e.g. topi.elemwise_sum([a, b])")
    first = xs[0]
    for k, x in enumerate(xs[1:], 1):
        if get_const_tuple(x.shape) != get_const_tuple(first.shape) or x.dtype != first.dtype:
            raise KilnError(f"elemwise_sum: input {k} has shape {get_const_tuple(x.shape)} and dtype {x.dtype}, "
                            f"but input 0 has shape {get_const_tuple(first.shape)} and dtype {first.dtype}; "
                            "all inputs must match (use topi.add to broadcast)")

    def f(*i):
        total = xs[0](*i)
        for x in xs[1:]:
            total = total + x(*i)
        return total
    return te.compute(first.shape, f, name="T_elemwise_sum", tag=tag.ELEMWISE)


def erf_gelu(x):
    """``x * 0.5 * (1 + erf(x / sqrt(2)))`` (exact GELU)."""
    def f(*i):
        v = x(*i)
        return v * T.const(0.5, x.dtype) * (T.const(1.0, x.dtype) + T.erf(v * T.const(0.7071067811865476, x.dtype)))
    return te.compute(x.shape, f, name="T_gelu", tag=tag.ELEMWISE)


def tanh_gelu(x):
    """``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`` (GELU's tanh approximation)."""
    def f(*i):
        v = x(*i)
        inner = T.const(0.7978845608028654, x.dtype) * (v + T.const(0.044715, x.dtype) * v * v * v)
        return T.const(0.5, x.dtype) * v * (T.const(1.0, x.dtype) + T.tanh(inner))
    return te.compute(x.shape, f, name="T_gelu_tanh", tag=tag.ELEMWISE)

__all__ = [_n for _n, _v in list(globals().items())
           if callable(_v) and getattr(_v, "__module__", None) == __name__ and not _n.startswith("_")]
