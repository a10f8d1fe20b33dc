"""ONNX converters for elementwise ops: arithmetic, comparisons, logic, unary math, activations, Clip,
Cast/CastLike, Where, the variadic Min/Max/Sum/Mean (QuantizeLinear / DequantizeLinear: onnx_qnn.py)."""
from __future__ import annotations

import numpy as np

from .. import op as _op
from ..op import nn as _nn
from .onnx_common import const, onnx_dtype, onnx_op


def scalar(value, dtype: str):
    """A scalar constant of ``dtype``."""
    return const(np.asarray(value, dtype=dtype))


def _is_float(dtype: str) -> bool:
    return dtype.startswith("float")


# -- binary arithmetic -----------------------------------------------------------------------------------------------
def _binary(relay_fn):
    def convert(inputs, attr, ctx):
        a, b = inputs[0], inputs[1]
        if ctx.dtype(a) != ctx.dtype(b):
            raise ctx.error(f"inputs have different dtypes {ctx.dtype(a)} and {ctx.dtype(b)}")
        return relay_fn(a, b)
    return convert


for _name, _fn in {"Add": _op.add, "Sub": _op.subtract, "Mul": _op.multiply, "Equal": _op.equal,
                   "Less": _op.less, "Greater": _op.greater, "LessOrEqual": _op.less_equal,
                   "GreaterOrEqual": _op.greater_equal, "And": _op.logical_and, "Or": _op.logical_or,
                   "Xor": _op.logical_xor, "BitwiseAnd": _op.bitwise_and, "BitwiseOr": _op.bitwise_or,
                   "BitwiseXor": _op.bitwise_xor}.items():
    onnx_op(_name, since=1)(_binary(_fn))


@onnx_op("Div", since=1)
def _div(inputs, attr, ctx):
    a, b = inputs
    if _is_float(ctx.dtype(a)):
        return _op.divide(a, b)
    return _op.trunc_divide(a, b)  # ONNX integer division truncates toward zero


@onnx_op("Mod", since=10)
def _mod(inputs, attr, ctx):
    a, b = inputs
    fmod = int(attr.get("fmod", 0))
    return _op.trunc_mod(a, b) if fmod else _op.floor_mod(a, b)


@onnx_op("Pow", since=1)
def _pow(inputs, attr, ctx):
    a, b = inputs
    dt = ctx.dtype(a)
    if ctx.dtype(b) != dt:
        b = _op.cast(b, dt)
    if not _is_float(dt):  # integer power: compute in float64, exact for the ranges ONNX tests use
        return _op.cast(_op.power(_op.cast(a, "float64"), _op.cast(b, "float64")), dt)
    return _op.power(a, b)


@onnx_op("BitShift", since=11)
def _bit_shift(inputs, attr, ctx):
    direction = attr.get("direction")
    if direction == "LEFT":
        return _op.left_shift(inputs[0], inputs[1])
    if direction == "RIGHT":
        return _op.right_shift(inputs[0], inputs[1])
    raise ctx.error(f"direction must be LEFT or RIGHT, got {direction!r}")


# -- unary -----------------------------------------------------------------------------------------------------------
def _unary(relay_fn, float_only=False):
    def convert(inputs, attr, ctx):
        if float_only and not _is_float(ctx.dtype(inputs[0])):
            raise ctx.unsupported(f"a {ctx.dtype(inputs[0])} input")
        return relay_fn(inputs[0])
    return convert


_UNARY = {"Abs": _op.abs, "Neg": _op.negative, "Sqrt": _op.sqrt, "Exp": _op.exp, "Log": _op.log, "Erf": _op.erf,
          "Tanh": _op.tanh, "Sigmoid": _op.sigmoid, "Relu": _nn.relu, "Ceil": _op.ceil, "Floor": _op.floor,
          "Round": _op.round, "Sign": _op.sign, "Sin": _op.sin, "Cos": _op.cos, "Tan": _op.tan, "Asin": _op.asin,
          "Acos": _op.acos, "Atan": _op.atan, "Sinh": _op.sinh, "Cosh": _op.cosh, "Asinh": _op.asinh,
          "Acosh": _op.acosh, "Atanh": _op.atanh, "Not": _op.logical_not, "BitwiseNot": _op.bitwise_not,
          "IsNaN": _op.isnan}
for _name, _fn in _UNARY.items():
    onnx_op(_name, since=1)(_unary(_fn))


@onnx_op("Identity", since=1)
def _identity(inputs, attr, ctx):
    return inputs[0]


@onnx_op("Reciprocal", since=1)
def _reciprocal(inputs, attr, ctx):
    x = inputs[0]
    return _op.divide(scalar(1, ctx.dtype(x)), x)


@onnx_op("IsInf", since=10)
def _is_inf(inputs, attr, ctx):
    x = inputs[0]
    pos, neg = int(attr.get("detect_positive", 1)), int(attr.get("detect_negative", 1))
    inf = _op.isinf(x)
    if pos and neg:
        return inf
    zero = scalar(0, ctx.dtype(x))
    if pos:
        return _op.logical_and(inf, _op.greater(x, zero))
    if neg:
        return _op.logical_and(inf, _op.less(x, zero))
    return _op.logical_and(inf, _op.logical_not(inf))


# -- activations -----------------------------------------------------------------------------------------------------
@onnx_op("LeakyRelu", since=1)
def _leaky_relu(inputs, attr, ctx):
    return _nn.leaky_relu(inputs[0], alpha=float(attr.get("alpha", 0.01)))


@onnx_op("PRelu", since=1)
def _p_relu(inputs, attr, ctx):
    x, slope = inputs
    zero = scalar(0, ctx.dtype(x))
    return _op.where(_op.less(x, zero), _op.multiply(x, slope), x)


@onnx_op("Elu", since=1)
def _elu(inputs, attr, ctx):
    x = inputs[0]
    dt = ctx.dtype(x)
    alpha = scalar(float(attr.get("alpha", 1.0)), dt)
    neg = _op.multiply(alpha, _op.subtract(_op.exp(x), scalar(1, dt)))
    return _op.where(_op.greater(x, scalar(0, dt)), x, neg)


@onnx_op("Celu", since=12)
def _celu(inputs, attr, ctx):
    x = inputs[0]
    dt = ctx.dtype(x)
    alpha = float(attr.get("alpha", 1.0))
    neg = _op.multiply(scalar(alpha, dt), _op.subtract(_op.exp(_op.divide(x, scalar(alpha, dt))), scalar(1, dt)))
    return _op.add(_op.maximum(x, scalar(0, dt)), _op.minimum(scalar(0, dt), neg))


@onnx_op("Selu", since=1)
def _selu(inputs, attr, ctx):
    x = inputs[0]
    dt = ctx.dtype(x)
    alpha = float(attr.get("alpha", 1.67326319217681884765625))
    gamma = float(attr.get("gamma", 1.05070102214813232421875))
    neg = _op.multiply(scalar(alpha, dt), _op.subtract(_op.exp(x), scalar(1, dt)))
    return _op.multiply(scalar(gamma, dt), _op.where(_op.greater(x, scalar(0, dt)), x, neg))


@onnx_op("ThresholdedRelu", since=10)
def _thresholded_relu(inputs, attr, ctx):
    x = inputs[0]
    dt = ctx.dtype(x)
    alpha = float(attr.get("alpha", 1.0))
    return _op.where(_op.greater(x, scalar(alpha, dt)), x, _op.zeros_like(x))


def hard_sigmoid(x, dt, alpha, beta):
    return _op.clip(_op.add(_op.multiply(x, scalar(alpha, dt)), scalar(beta, dt)), 0.0, 1.0)


@onnx_op("HardSigmoid", since=1)
def _hard_sigmoid(inputs, attr, ctx):
    x = inputs[0]
    return hard_sigmoid(x, ctx.dtype(x), float(attr.get("alpha", 0.2)), float(attr.get("beta", 0.5)))


@onnx_op("HardSwish", since=14)
def _hard_swish(inputs, attr, ctx):
    x = inputs[0]
    return _op.multiply(x, hard_sigmoid(x, ctx.dtype(x), 1.0 / 6, 0.5))


def softplus(x, dt):
    # log(1 + exp(x)) computed as max(x, 0) + log(1 + exp(-|x|)) so large inputs do not overflow
    return _op.add(_op.maximum(x, scalar(0, dt)), _op.log(_op.add(scalar(1, dt), _op.exp(_op.negative(_op.abs(x))))))


@onnx_op("Softplus", since=1)
def _softplus(inputs, attr, ctx):
    return softplus(inputs[0], ctx.dtype(inputs[0]))


@onnx_op("Softsign", since=1)
def _softsign(inputs, attr, ctx):
    x = inputs[0]
    return _op.divide(x, _op.add(scalar(1, ctx.dtype(x)), _op.abs(x)))


@onnx_op("Mish", since=18)
def _mish(inputs, attr, ctx):
    x = inputs[0]
    return _op.multiply(x, _op.tanh(softplus(x, ctx.dtype(x))))


@onnx_op("Swish", since=24)
def _swish(inputs, attr, ctx):
    x = inputs[0]
    alpha = float(attr.get("alpha", 1.0))
    return _op.multiply(x, _op.sigmoid(_op.multiply(x, scalar(alpha, ctx.dtype(x)))))


@onnx_op("Gelu", since=20)
def _gelu(inputs, attr, ctx):
    x = inputs[0]
    dt = ctx.dtype(x)
    approx = attr.get("approximate", "none")
    half, one = scalar(0.5, dt), scalar(1, dt)
    if approx == "tanh":
        inner = _op.multiply(scalar(np.sqrt(2 / np.pi), dt),
                             _op.add(x, _op.multiply(scalar(0.044715, dt), _op.multiply(x, _op.multiply(x, x)))))
        return _op.multiply(_op.multiply(half, x), _op.add(one, _op.tanh(inner)))
    if approx != "none":
        raise ctx.error(f"approximate must be 'none' or 'tanh', got {approx!r}")
    return _op.multiply(_op.multiply(half, x), _op.add(one, _op.erf(_op.multiply(x, scalar(2 ** -0.5, dt)))))


@onnx_op("Shrink", since=9)
def _shrink(inputs, attr, ctx):
    x = inputs[0]
    dt = ctx.dtype(x)
    bias, lambd = float(attr.get("bias", 0.0)), float(attr.get("lambd", 0.5))
    cdt = dt if _is_float(dt) else "float64"  # integer inputs: compute in float64, cast back
    xc = x if cdt == dt else _op.cast(x, cdt)
    lo = _op.add(xc, scalar(bias, cdt))
    hi = _op.subtract(xc, scalar(bias, cdt))
    out = _op.where(_op.less(xc, scalar(-lambd, cdt)), lo,
                    _op.where(_op.greater(xc, scalar(lambd, cdt)), hi, scalar(0, cdt)))
    return out if cdt == dt else _op.cast(out, dt)


# -- Clip ------------------------------------------------------------------------------------------------------------
@onnx_op("Clip", since=1)
def _clip_v1(inputs, attr, ctx):
    x = inputs[0]
    lo = attr.get("min", float(np.finfo(np.float32).min))
    hi = attr.get("max", float(np.finfo(np.float32).max))
    return _op.clip(x, float(lo), float(hi))


@onnx_op("Clip", since=11)
def _clip_v11(inputs, attr, ctx):
    x = inputs[0]
    dt = ctx.dtype(x)
    lo = inputs[1] if len(inputs) > 1 else None
    hi = inputs[2] if len(inputs) > 2 else None
    lo_v, hi_v = ctx.value(lo), ctx.value(hi)
    if _is_float(dt) and (lo is None or lo_v is not None) and (hi is None or hi_v is not None):
        a_min = float(lo_v) if lo is not None else -np.inf
        a_max = float(hi_v) if hi is not None else np.inf
        if a_min <= a_max:
            return _op.clip(x, a_min, a_max)
    out = x
    if lo is not None:
        out = _op.maximum(out, lo)
    if hi is not None:
        out = _op.minimum(out, hi)
    return out


# -- Cast / Where -------------------------------------------------------------------------------------------------
@onnx_op("Cast", since=1)
def _cast(inputs, attr, ctx):
    to = attr.get("to")
    if to is None:
        raise ctx.error("attribute 'to' is required")
    return _op.cast(inputs[0], onnx_dtype(to, ctx.where))


@onnx_op("CastLike", since=15)
def _cast_like(inputs, attr, ctx):
    return _op.cast(inputs[0], ctx.dtype(inputs[1]))


@onnx_op("Where", since=9)
def _where(inputs, attr, ctx):
    return _op.where(inputs[0], inputs[1], inputs[2])


# -- variadic -------------------------------------------------------------------------------------------------------
def _variadic(fn, mean=False):
    def convert(inputs, attr, ctx):
        args = [i for i in inputs if i is not None]
        if not args:
            raise ctx.error("needs at least one input")
        out = args[0]
        for a in args[1:]:
            out = fn(out, a)
        if mean:
            out = _op.divide(out, scalar(len(args), ctx.dtype(args[0])))
        return out
    return convert


onnx_op("Sum", since=1)(_variadic(_op.add))
onnx_op("Mean", since=1)(_variadic(_op.add, mean=True))
onnx_op("Max", since=1)(_variadic(_op.maximum))
onnx_op("Min", since=1)(_variadic(_op.minimum))

