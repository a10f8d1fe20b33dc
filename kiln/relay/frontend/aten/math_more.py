"""aten activations and reductions beyond ``math.py``: celu, selu, glu, log_sigmoid, threshold, isinf,
isfinite, logsumexp, var_mean, addcmul, addcdiv, lerp, bit shifts."""
from __future__ import annotations

import math

from ....error import FrontendError
from ...expr import Expr
from .math import _c, _category, _dims, _float_input, _var, promote
from .registry import register
from .tensor import _axis
from ... import op


def _op():
    return op


@register("celu")
def _celu(ctx, args):
    x = args[0]
    alpha = float(args.get("alpha", 1.0))
    neg = _c(ctx, x, alpha) * (_op().exp(x / _c(ctx, x, alpha)) - _c(ctx, x, 1.0))
    return _op().where(_op().greater(x, _c(ctx, x, 0.0)), x, neg)


@register("selu")
def _selu(ctx, args):
    x = args[0]
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    neg = _c(ctx, x, alpha) * (_op().exp(x) - _c(ctx, x, 1.0))
    return _c(ctx, x, scale) * _op().where(_op().greater(x, _c(ctx, x, 0.0)), x, neg)


@register("glu")
def _glu(ctx, args):
    x = args[0]
    dim = _axis(args.get("dim", -1), ctx.ndim(x))
    n = ctx.shape(x)[dim]
    if n % 2:
        raise ValueError(f"aten::glu: dimension {dim} has odd size {n}; it must split in halves")
    a = _op().strided_slice(x, [0], [n // 2], [1], axes=[dim])
    b = _op().strided_slice(x, [n // 2], [n], [1], axes=[dim])
    return a * _op().sigmoid(b)


@register("log_sigmoid")
def _log_sigmoid(ctx, args):
    # log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), finite for large |x|
    x = _float_input(ctx, args[0])
    zero, one = _c(ctx, x, 0.0), _c(ctx, x, 1.0)
    return _op().minimum(x, zero) - _op().log(one + _op().exp(_op().negative(_op().abs(x))))


@register("log_sigmoid_forward")
def _log_sigmoid_forward(ctx, args):
    out = _log_sigmoid(ctx, args)
    return [out, _op().zeros_like(args[0])]


@register("threshold")
def _threshold(ctx, args):
    x = args[0]
    dt = ctx.dtype(x)
    return _op().where(_op().greater(x, ctx.const(args[1], dt)), x, ctx.const(args[2], dt))


def _float_predicate(name, int_value):
    def convert(ctx, args):
        x = ctx.as_expr(args[0])
        if _category(ctx.dtype(x)) < 2:  # integers are never inf / nan
            return _op().full(ctx.const(int_value, "bool"), list(ctx.shape(x)), "bool")
        return ctx.fold(getattr(_op(), name)(x))
    return convert


register("isinf")(_float_predicate("isinf", False))
register("isfinite")(_float_predicate("isfinite", True))


@register("isposinf", "isneginf")
def _isposneginf(ctx, args):
    x = ctx.as_expr(args[0])
    if _category(ctx.dtype(x)) < 2:
        return _op().full(ctx.const(False, "bool"), list(ctx.shape(x)), "bool")
    inf = ctx.const(math.inf if ctx.op_name == "isposinf" else -math.inf, ctx.dtype(x))
    return _op().equal(x, inf)


@register("logsumexp")
def _logsumexp(ctx, args):
    """log(sum(exp(x))) shifted by the max for stability; an all -inf slice gives -inf, and a +inf entry +inf."""
    x = _float_input(ctx, args[0])
    axis = _dims(ctx, x, args["dim"])
    keep = bool(args.get("keepdim", False))
    if axis is None:
        axis = list(range(ctx.ndim(x)))
    m = _op().max(x, axis=axis, keepdims=True)
    m = _op().where(_op().isinf(m), _c(ctx, x, 0.0), m)
    s = _op().log(_op().sum(_op().exp(x - m), axis=axis, keepdims=True)) + m
    return s if keep else _op().squeeze(s, axis=axis)


@register("var_mean", "std_mean")
def _var_mean(ctx, args):
    x = args[0]
    var = _var(ctx, args, ctx.op_name == "std_mean")
    mean = _op().mean(x, axis=_dims(ctx, x, args["dim"]), keepdims=bool(args.get("keepdim", False)))
    return [var, mean]


def _addc(is_div):
    def convert(ctx, args):
        inp, t1, t2 = args[0], args[1], args[2]
        value = args.get("value", 1)
        a, b, c = promote(ctx, inp, t1, t2)
        prod = _op().divide(b, c) if is_div else _op().multiply(b, c)
        if isinstance(value, Expr) or value != 1:
            prod = _op().multiply(prod, ctx.as_expr(value, ctx.dtype(a)))
        return _op().add(a, prod)
    return convert


register("addcmul")(_addc(False))
register("addcdiv")(_addc(True))


@register("lerp")
def _lerp(ctx, args):
    """start + weight * (end - start), in PyTorch's two-sided form (exact at weight 1: end - (end - start) *
    (1 - weight) for weight >= 0.5)."""
    start, end, weight = promote(ctx, args[0], args[1], args[2])
    diff = _op().subtract(end, start)
    low = _op().add(start, _op().multiply(weight, diff))
    high = _op().subtract(end, _op().multiply(diff, _op().subtract(_c(ctx, weight, 1.0), weight)))
    return _op().where(_op().less(_op().abs(weight), _c(ctx, weight, 0.5)), low, high)


def _shift(relay_name):
    def convert(ctx, args):
        a, b = promote(ctx, args[0], args[1])
        if _category(ctx.dtype(a)) != 1:
            raise FrontendError(f"aten::{ctx.op_name}: shifts need integer tensors, got {ctx.dtype(a)}")
        return ctx.fold(getattr(_op(), relay_name)(a, b))
    return convert


register("__lshift__", "bitwise_left_shift")(_shift("left_shift"))
register("__rshift__", "bitwise_right_shift")(_shift("right_shift"))
