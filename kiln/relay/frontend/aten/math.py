"""aten elementwise arithmetic, comparisons, activations and reductions."""
from __future__ import annotations

import math

import numpy as np

from ....error import FrontendError
from ...expr import Expr
from .registry import register, relay_op
from ... import op

_INT_BITS = {"bool": 1, "uint8": 8, "int8": 8, "int16": 16, "int32": 32, "int64": 64}
_FLOAT_BITS = {"float16": 16, "bfloat16": 16, "float32": 32, "float64": 64}


def _op():
    return op


def _category(dtype: str) -> int:
    if dtype == "bool":
        return 0
    return 2 if dtype in _FLOAT_BITS else 1


def _wider(a: str | None, b: str) -> str:
    if a is None or a == b:
        return b
    ca, cb = _category(a), _category(b)
    if ca != cb:
        return a if ca > cb else b
    bits = _FLOAT_BITS if ca == 2 else _INT_BITS
    return a if bits.get(a, 0) >= bits.get(b, 0) else b


def result_dtype(ctx, *operands) -> str:
    """PyTorch's type promotion: dimensioned tensors outrank 0-d tensors, which outrank Python scalars,
    unless a lower rank brings a higher category (bool < integer < float)."""
    levels: dict = {}
    for v in operands:
        if v is None:
            continue
        if isinstance(v, Expr):
            d, prio = ctx.dtype(v), (2 if ctx.ndim(v) > 0 else 1)
        else:
            d, prio = ctx.scalar_dtype(v), 0
        levels[prio] = _wider(levels.get(prio), d)
    top = max(_category(d) for d in levels.values())
    for prio in (2, 1, 0):
        d = levels.get(prio)
        if d is not None and _category(d) == top:
            return d
    raise FrontendError(f"{ctx.op_name}: no operands")  # unreachable with operands


def promote(ctx, *operands, dtype: str | None = None):
    dtype = dtype or result_dtype(ctx, *operands)
    return [ctx.as_expr(v, dtype) for v in operands]


def _binary(relay_name):
    def convert(ctx, args):
        a, b = promote(ctx, args[0], args[1])
        return ctx.fold(getattr(_op(), relay_name)(a, b))
    return convert


def _scaled(ctx, v, alpha):
    if alpha is None or (not isinstance(alpha, Expr) and alpha == 1):
        return v
    return v * alpha


def _with_alpha(ctx, args, relay_name: str, reverse: bool = False):
    """``a <op> alpha * b`` (add, sub), or with ``reverse`` ``b <op> alpha * a`` (rsub)."""
    dtype = result_dtype(ctx, args[0], args[1])
    a, b = promote(ctx, args[0], args[1], dtype=dtype)
    if reverse:
        a, b = b, a
    alpha = args["alpha"]
    if alpha is not None and alpha != 1:
        b = ctx.fold(_op().multiply(b, ctx.as_expr(alpha, dtype)))
    return ctx.fold(getattr(_op(), relay_name)(a, b))


@register("add", "__add__")
def _add(ctx, args):
    if isinstance(args[0], (list, tuple)):  # list concatenation in TorchScript
        return list(args[0]) + list(args[1])
    if not isinstance(args[0], Expr) and not isinstance(args[1], Expr):
        return args[0] + args[1] * (args.get("alpha", 1))
    return _with_alpha(ctx, args, "add")


@register("sub", "__sub__", "subtract")
def _sub(ctx, args):
    if not isinstance(args[0], Expr) and not isinstance(args[1], Expr):
        return args[0] - args[1] * (args.get("alpha", 1))
    return _with_alpha(ctx, args, "subtract")


@register("rsub")
def _rsub(ctx, args):
    return _with_alpha(ctx, args, "subtract", reverse=True)


@register("mul", "__mul__", "multiply")
def _mul(ctx, args):
    if not isinstance(args[0], Expr) and not isinstance(args[1], Expr):
        return args[0] * args[1]
    return _binary("multiply")(ctx, args)


@register("div", "true_divide", "__truediv__", "divide")
def _div(ctx, args):
    mode = args["rounding_mode"]
    if not isinstance(args[0], Expr) and not isinstance(args[1], Expr):
        q = args[0] / args[1]
        return math.floor(q) if mode == "floor" else (math.trunc(q) if mode == "trunc" else q)
    dtype = result_dtype(ctx, args[0], args[1])
    if mode is None and _category(dtype) < 2:
        dtype = ctx.default_dtype  # true division of integers gives floats
    a, b = promote(ctx, args[0], args[1], dtype=dtype)
    if mode == "floor":
        return ctx.fold(_op().floor_divide(a, b))
    if mode == "trunc":
        out = _op().divide(a, b)
        return ctx.fold(_op().trunc(out) if _category(dtype) == 2 else out)
    return ctx.fold(_op().divide(a, b))


@register("floor_divide", "__floordiv__")
def _floordiv(ctx, args):
    if not isinstance(args[0], Expr) and not isinstance(args[1], Expr):
        return args[0] // args[1]
    return _binary("floor_divide")(ctx, args)


register("remainder", "__mod__")(_binary("floor_mod"))
register("fmod")(_binary("trunc_mod"))
register("maximum")(_binary("maximum"))
register("minimum")(_binary("minimum"))
register("eq", "__eq__")(_binary("equal"))
register("ne", "__ne__")(_binary("not_equal"))
register("lt", "__lt__")(_binary("less"))
register("le", "__le__")(_binary("less_equal"))
register("gt", "__gt__")(_binary("greater"))
register("ge", "__ge__")(_binary("greater_equal"))
def _logical(relay_name):
    """torch.logical_*: any dtype, truth by nonzero; Relay's logical ops take bools."""
    def convert(ctx, args):
        a, b = (ctx.cast(ctx.as_expr(v, "bool" if not isinstance(v, Expr) else None), "bool") for v in args[:2])
        return ctx.fold(getattr(_op(), relay_name)(a, b))
    return convert


register("logical_and")(_logical("logical_and"))
register("logical_or")(_logical("logical_or"))
register("logical_xor")(_logical("logical_xor"))


def _bitwise(logical, bitwise):
    def convert(ctx, args):
        a, b = promote(ctx, args[0], args[1])
        name = logical if ctx.dtype(a) == "bool" else bitwise
        return ctx.fold(getattr(_op(), name)(a, b))
    return convert


register("bitwise_and", "__and__")(_bitwise("logical_and", "bitwise_and"))
register("bitwise_or", "__or__")(_bitwise("logical_or", "bitwise_or"))
register("bitwise_xor", "__xor__")(_bitwise("logical_xor", "bitwise_xor"))


@register("bitwise_not")
def _bitwise_not(ctx, args):
    x = args[0]
    return ctx.fold(_op().logical_not(x) if ctx.dtype(x) == "bool" else _op().bitwise_not(x))


@register("logical_not")
def _logical_not(ctx, args):
    return ctx.fold(_op().logical_not(ctx.cast(args[0], "bool")))


@register("pow")
def _pow(ctx, args):
    base, expo = args[0], args[1]
    if not isinstance(base, Expr) and not isinstance(expo, Expr):
        return base ** expo
    if isinstance(base, Expr) and not isinstance(expo, Expr):
        if expo == 2:
            return ctx.fold(_op().multiply(base, base))
        if expo == 0.5 and _category(ctx.dtype(base)) == 2:
            return ctx.fold(_op().sqrt(base))
        if expo == 1:
            return base
    a, b = promote(ctx, base, expo)
    return ctx.fold(_op().power(a, b))


def _float_input(ctx, x):
    """Float-valued math on an integer tensor computes in the default float dtype, as PyTorch does."""
    x = ctx.as_expr(x)
    if _category(ctx.dtype(x)) < 2:
        return ctx.cast(x, ctx.default_dtype)
    return x


def _unary_float(relay_name):
    def convert(ctx, args):
        return ctx.fold(getattr(_op(), relay_name)(_float_input(ctx, args[0])))
    return convert


def _unary(relay_name):
    def convert(ctx, args):
        return ctx.fold(getattr(_op(), relay_name)(ctx.as_expr(args[0])))
    return convert


for _aten, _relay in {"exp": "exp", "log": "log", "log2": "log2", "log10": "log10", "sqrt": "sqrt",
                      "rsqrt": "rsqrt", "sin": "sin", "cos": "cos", "tan": "tan", "tanh": "tanh",
                      "sigmoid": "sigmoid", "erf": "erf", "asin": "asin", "acos": "acos", "atan": "atan",
                      "sinh": "sinh", "cosh": "cosh"}.items():
    register(_aten)(_unary_float(_relay))
for _aten, _relay in {"neg": "negative", "abs": "abs", "floor": "floor", "ceil": "ceil", "round": "round",
                      "sign": "sign", "trunc": "trunc"}.items():
    register(_aten)(_unary(_relay))
register("negative")(_unary("negative"))


@register("reciprocal")
def _reciprocal(ctx, args):
    x = _float_input(ctx, args[0])
    return ctx.fold(_op().divide(ctx.const(1, ctx.dtype(x)), x))


@register("square")
def _square(ctx, args):
    return ctx.fold(_op().multiply(args[0], args[0]))


@register("log1p")
def _log1p(ctx, args):
    x = _float_input(ctx, args[0])
    return _op().log(_op().add(x, ctx.const(1, ctx.dtype(x))))


@register("isnan")
def _isnan(ctx, args):
    return _op().isnan(args[0])


# -- activations ----------------------------------------------------------------------------------
@register("relu")
def _relu(ctx, args):
    return _op().nn.relu(args[0])


@register("relu6")
def _relu6(ctx, args):
    return _op().clip(args[0], 0.0, 6.0)


@register("leaky_relu")
def _leaky_relu(ctx, args):
    return _op().nn.leaky_relu(args[0], alpha=float(args.get("negative_slope", 0.01)))


@register("prelu")
def _prelu(ctx, args):
    x, w = args[0], args[1]
    if int(np.prod(ctx.shape(w))) > 1:
        return _op().nn.prelu(x, _op().reshape(w, (-1,)), axis=1)
    slope = _op().reshape(w, ())
    return _op().where(_op().greater(x, ctx.const(0, ctx.dtype(x))), x, _op().multiply(x, slope))


def _c(ctx, x, v):
    return ctx.const(v, ctx.dtype(x))


@register("gelu")
def _gelu(ctx, args):
    x = args[0]
    if args.get("approximate", "none") == "tanh":
        inner = _c(ctx, x, math.sqrt(2.0 / math.pi)) * (x + _c(ctx, x, 0.044715) * x * x * x)
        return _c(ctx, x, 0.5) * x * (_c(ctx, x, 1.0) + _op().tanh(inner))
    return _c(ctx, x, 0.5) * x * (_c(ctx, x, 1.0) + _op().erf(x * _c(ctx, x, 1.0 / math.sqrt(2.0))))


@register("silu")
def _silu(ctx, args):
    return _op().multiply(args[0], _op().sigmoid(args[0]))


@register("mish")
def _mish(ctx, args):
    x = args[0]
    return x * _op().tanh(_op().log(_c(ctx, x, 1.0) + _op().exp(x)))


@register("hardsigmoid")
def _hardsigmoid(ctx, args):
    x = args[0]
    return _op().divide(_op().clip(_op().add(x, _c(ctx, x, 3.0)), 0.0, 6.0), _c(ctx, x, 6.0))


@register("hardswish")
def _hardswish(ctx, args):
    x = args[0]
    return _op().multiply(x, _hardsigmoid(ctx, args))


@register("elu")
def _elu(ctx, args):
    x = args[0]
    alpha = float(args.get("alpha", 1.0))
    neg = _c(ctx, x, alpha) * (_op().exp(x) - _c(ctx, x, 1.0))
    return _op().where(_op().greater(x, _c(ctx, x, 0.0)), x, neg)


@register("softplus")
def _softplus(ctx, args):
    x = args[0]
    beta = float(args.get("beta", 1.0))
    threshold = float(args.get("threshold", 20.0))
    bx = x * _c(ctx, x, beta) if beta != 1.0 else x
    soft = _op().log(_c(ctx, x, 1.0) + _op().exp(bx))
    if beta != 1.0:
        soft = soft / _c(ctx, x, beta)
    return _op().where(_op().greater(bx, _c(ctx, x, threshold)), x, soft)


@register("hardtanh")
def _hardtanh(ctx, args):
    return _op().clip(args[0], float(args.get("min_val", -1.0)), float(args.get("max_val", 1.0)))


@register("clamp", "clip")
def _clamp(ctx, args):
    x = ctx.as_expr(args[0])
    lo, hi = args[1], args[2]
    if not isinstance(lo, Expr) and not isinstance(hi, Expr):
        dtype = ctx.dtype(x)
        if _category(dtype) < 2 and any(isinstance(v, float) for v in (lo, hi)):
            x = ctx.cast(x, ctx.default_dtype)
        big = float(np.finfo(np.float64).max)
        lo_v = -big if lo is None else float(lo)
        hi_v = big if hi is None else float(hi)
        if _category(ctx.dtype(x)) == 2:
            fi = np.finfo(ctx.dtype(x) if ctx.dtype(x) != "bfloat16" else "float32")
            lo_v, hi_v = max(lo_v, float(fi.min)), min(hi_v, float(fi.max))
        return ctx.fold(_op().clip(x, lo_v, hi_v))
    if lo is not None:
        a, b = promote(ctx, x, lo)
        x = _op().maximum(a, b)
    if hi is not None:
        a, b = promote(ctx, x, hi)
        x = _op().minimum(a, b)
    return x


register("clamp_min")(lambda ctx, args: _clamp(ctx, type(args)([args[0], args[1], None], ["self", "min", "max"])))
register("clamp_max")(lambda ctx, args: _clamp(ctx, type(args)([args[0], None, args[1]], ["self", "min", "max"])))


@register("softmax", "_softmax")
def _softmax(ctx, args):
    x = args[0]
    dtype = args["dtype"]
    if dtype is not None and not isinstance(dtype, bool):
        x = ctx.cast(x, str(dtype))
    return _op().nn.softmax(x, axis=int(args[1]))


@register("log_softmax", "_log_softmax")
def _log_softmax(ctx, args):
    x = args[0]
    dtype = args["dtype"]
    if dtype is not None and not isinstance(dtype, bool):
        x = ctx.cast(x, str(dtype))
    return _op().nn.log_softmax(x, axis=int(args[1]))


@register("where")
def _where(ctx, args):
    if len(args) < 3 or args[1] is None:
        from .dynamic import where_one_arg  # nonzero(cond, as_tuple=True): lengths known at run time only
        return where_one_arg(ctx, args)
    cond = ctx.cast(ctx.as_expr(args[0], "bool"), "bool")
    a, b = promote(ctx, args[1], args[2])
    return ctx.fold(_op().where(cond, a, b))


@register("masked_fill")
def _masked_fill(ctx, args):
    x, mask, value = args[0], args[1], args[2]
    dtype = ctx.dtype(x)
    v = ctx.as_expr(value, dtype) if isinstance(value, Expr) else ctx.const(value, dtype)
    return _op().where(ctx.cast(mask, "bool"), v, x)


# -- reductions -----------------------------------------------------------------------------------
def _dims(ctx, x, dim):
    if dim is None:
        return None
    dims = ctx.int_list(dim, "dim")
    return dims if dims else None


def _reduce(relay_name, float_only=False):
    def convert(ctx, args):
        x = ctx.as_expr(args[0])
        dtype = args["dtype"]
        if dtype is not None:
            x = ctx.cast(x, str(dtype))
        elif relay_name == "sum" and _category(ctx.dtype(x)) < 2:
            x = ctx.cast(x, "int64")  # PyTorch sums integers (and bools) in int64
        elif float_only and _category(ctx.dtype(x)) < 2:
            raise FrontendError(f"{ctx.op_name}: {ctx.dtype(x)} input; PyTorch requires a floating dtype here")
        keepdim = bool(args.get("keepdim", False))
        axis = _dims(ctx, x, args["dim"])
        return ctx.fold(getattr(_op(), relay_name)(x, axis=axis, keepdims=keepdim))
    return convert


register("sum")(_reduce("sum"))
register("mean")(_reduce("mean", float_only=True))
register("prod")(_reduce("prod"))


@register("amax")
def _amax(ctx, args):
    return _op().max(args[0], axis=_dims(ctx, args[0], args["dim"]), keepdims=bool(args.get("keepdim", False)))


@register("amin")
def _amin(ctx, args):
    return _op().min(args[0], axis=_dims(ctx, args[0], args["dim"]), keepdims=bool(args.get("keepdim", False)))


def _max_min(is_max):
    def convert(ctx, args):
        red = _op().max if is_max else _op().min
        arg = _op().argmax if is_max else _op().argmin
        x = args[0]
        if not isinstance(x, Expr):
            vals = list(x) if isinstance(x, (list, tuple)) else [x, args[1]]
            return max(vals) if is_max else min(vals)
        if len(args) > 1 and isinstance(args[1], Expr):  # max.other: elementwise
            a, b = promote(ctx, x, args[1])
            return (_op().maximum if is_max else _op().minimum)(a, b)
        if len(args) == 1 or args[1] is None:
            return red(x)
        dim = int(args[1])
        keep = bool(args.get("keepdim", False))
        return [red(x, axis=[dim], keepdims=keep), arg(x, axis=[dim], keepdims=keep).astype("int64")]
    return convert


register("max")(_max_min(True))
register("min")(_max_min(False))


def _argreduce(is_max):
    def convert(ctx, args):
        x = args[0]
        dim = args["dim"]
        keep = bool(args.get("keepdim", False))
        fn = _op().argmax if is_max else _op().argmin
        if dim is None:
            out = fn(_op().reshape(x, (-1,)), axis=[0], keepdims=False)
            if keep:
                out = _op().reshape(out, [1] * ctx.ndim(x))
        else:
            out = fn(x, axis=[int(dim)], keepdims=keep)
        return out.astype("int64")
    return convert


register("argmax")(_argreduce(True))
register("argmin")(_argreduce(False))


def _correction(args) -> int:
    corr = args["correction"]
    if corr is not None:
        return int(corr)
    unbiased = args["unbiased"]
    return 1 if unbiased is None or unbiased else 0


def _var(ctx, args, std):
    x = args[0]
    axis = _dims(ctx, x, args["dim"])
    keep = bool(args.get("keepdim", False))
    corr = _correction(args)
    mean = _op().mean(x, axis=axis, keepdims=True)
    diff = x - mean
    sq = _op().sum(diff * diff, axis=axis, keepdims=keep)
    shape = ctx.shape(x)
    n = int(np.prod([shape[a] for a in axis])) if axis else int(np.prod(shape))
    out = sq / _c(ctx, x, max(n - corr, 0) or float("nan"))
    return _op().sqrt(out) if std else out


register("var")(lambda ctx, args: _var(ctx, args, False))
register("std")(lambda ctx, args: _var(ctx, args, True))


@register("all")
def _all(ctx, args):
    return _op().all(ctx.cast(args[0], "bool"), axis=_dims(ctx, args[0], args["dim"]),
                     keepdims=bool(args.get("keepdim", False)))


@register("any")
def _any(ctx, args):
    return _op().any(ctx.cast(args[0], "bool"), axis=_dims(ctx, args[0], args["dim"]),
                     keepdims=bool(args.get("keepdim", False)))


@register("cumsum")
def _cumsum(ctx, args):
    x = args[0]
    dtype = args["dtype"]
    if dtype is None and _category(ctx.dtype(x)) < 2:
        dtype = "int64"
    if dtype is not None:
        x = ctx.cast(x, str(dtype))
    return relay_op("cumsum")(x, axis=int(args[1]))


@register("norm", "linalg_vector_norm")
def _norm(ctx, args):
    x = args[0]
    p = args["p"] if "p" in args.names else args["ord"]
    p = 2 if p is None else float(p)
    axis = _dims(ctx, x, args["dim"])
    keep = bool(args.get("keepdim", False))
    if p == 2:
        return _op().sqrt(_op().sum(x * x, axis=axis, keepdims=keep))
    if p == 1:
        return _op().sum(_op().abs(x), axis=axis, keepdims=keep)
    if p == 0:  # the number of nonzero entries
        return _op().sum(ctx.cast(_op().not_equal(x, _c(ctx, x, 0)), ctx.dtype(x)), axis=axis, keepdims=keep)
    if math.isinf(p):
        return (_op().max if p > 0 else _op().min)(_op().abs(x), axis=axis, keepdims=keep)
    s = _op().sum(_op().power(_op().abs(x), _c(ctx, x, p)), axis=axis, keepdims=keep)
    return _op().power(s, _c(ctx, x, 1.0 / p))


@register("numel")
def _numel(ctx, args):
    return int(np.prod(ctx.shape(args[0]), dtype=np.int64))


@register("size", "sym_size")
def _size(ctx, args):
    shape = ctx.shape(args[0])
    if len(args) > 1 and args[1] is not None:
        return int(shape[int(args[1])])
    return [int(d) for d in shape]


@register("dim")
def _dim(ctx, args):
    return ctx.ndim(args[0])


@register("sym_numel")
def _sym_numel(ctx, args):
    return _numel(ctx, args)


@register("_assert_scalar", "_assert_async", "sym_constrain_range_for_size", "_assert_tensor_metadata")
def _noop(ctx, args):
    return None


__all__ = ["result_dtype", "promote"]
