"""aten losses (nll_loss, cross_entropy_loss, l1_loss, mse_loss), torch.mv and weight normalization.

Reductions follow PyTorch's enum (0 none, 1 mean, 2 sum). For nll_loss / cross_entropy with class indices,
``mean`` divides by the summed weights of the targets that are not ``ignore_index`` (PyTorch's rule), not by
the element count.
"""
from __future__ import annotations

from ....error import FrontendError, OpNotImplemented
from .math import _float_input, promote
from .registry import register
from ... import op

_NONE, _MEAN, _SUM = 0, 1, 2


def _reduction(ctx, args) -> int:
    r = args.get("reduction", _MEAN)
    if isinstance(r, str):
        r = {"none": _NONE, "mean": _MEAN, "sum": _SUM}[r]
    if int(r) not in (_NONE, _MEAN, _SUM):
        raise FrontendError(f"aten::{ctx.op_name}: unknown reduction {r!r}")
    return int(r)


def _reduce(loss, reduction):
    if reduction == _NONE:
        return loss
    return op.sum(loss) if reduction == _SUM else op.mean(loss)


def _nll(ctx, logp, target, weight, reduction: int, ignore_index: int):
    """-logp[n, target[n, ...], ...] * weight[target], over inputs (N, C, d...), (N, C) or (C,)."""
    shape = list(ctx.shape(logp))
    dt = ctx.dtype(logp)
    if len(shape) == 1:  # one sample without a batch axis
        logp, target = op.expand_dims(logp, 0), op.expand_dims(target, 0)
        shape = [1] + shape
    n_cls = shape[1]
    target = ctx.cast(target, "int64")
    keep = op.not_equal(target, ctx.const(ignore_index, "int64"))
    safe = op.where(keep, target, ctx.const(0, "int64"))
    picked = op.squeeze(op.gather(logp, 1, op.expand_dims(safe, 1)), axis=[1])
    w = ctx.cast(keep, dt)
    if weight is not None:
        if list(ctx.shape(weight)) != [n_cls]:
            raise FrontendError(f"aten::{ctx.op_name}: weight has shape {ctx.shape(weight)}, expected ({n_cls},)")
        w = op.multiply(w, op.take(ctx.cast(weight, dt), safe))
    loss = op.negative(op.multiply(picked, w))
    if reduction == _NONE:
        return loss
    total = op.sum(loss)
    return total if reduction == _SUM else op.divide(total, op.sum(w))


@register("nll_loss", "nll_loss_nd", "nll_loss2d")
def _nll_loss(ctx, args):
    x = _float_input(ctx, args[0])
    red = _reduction(ctx, args)
    out = _nll(ctx, x, ctx.as_expr(args[1]), args["weight"], red, int(args.get("ignore_index", -100)))
    if red == _NONE and ctx.ndim(args[0]) == 1:
        out = op.squeeze(out, axis=[0])
    return out


@register("cross_entropy_loss")
def _cross_entropy(ctx, args):
    x = _float_input(ctx, args[0])
    target = ctx.as_expr(args[1])
    red = _reduction(ctx, args)
    if float(args.get("label_smoothing", 0.0) or 0.0) != 0.0:
        raise OpNotImplemented("aten::cross_entropy_loss with label_smoothing is not supported by kiln")
    axis = 0 if ctx.ndim(x) == 1 else 1
    logp = op.nn.log_softmax(x, axis=axis)
    if ctx.dtype(target).startswith("float"):  # class probabilities, same shape as the input
        x_, t = promote(ctx, logp, target)
        prod = op.multiply(x_, t)
        weight = args["weight"]
        if weight is not None:
            view = [1] * ctx.ndim(x)
            view[axis] = -1
            prod = op.multiply(prod, op.reshape(ctx.cast(weight, ctx.dtype(x)), view))
        loss = op.negative(op.sum(prod, axis=[axis]))
        if red == _MEAN:
            n = 1
            for i, d in enumerate(ctx.shape(x)):
                n *= 1 if i == axis else int(d)
            return op.divide(op.sum(loss), ctx.const(n, ctx.dtype(x)))
        return _reduce(loss, red)
    out = _nll(ctx, logp, target, args["weight"], red, int(args.get("ignore_index", -100)))
    if red == _NONE and ctx.ndim(x) == 1:
        out = op.squeeze(out, axis=[0])
    return out


def _pointwise_loss(fn):
    def convert(ctx, args):
        a, b = promote(ctx, _float_input(ctx, args[0]), args[1])
        return _reduce(fn(a, b), _reduction(ctx, args))
    return convert


register("l1_loss")(_pointwise_loss(lambda a, b: op.abs(op.subtract(a, b))))
register("mse_loss")(_pointwise_loss(lambda a, b: op.multiply(op.subtract(a, b), op.subtract(a, b))))


@register("mv")
def _mv(ctx, args):
    m, v = promote(ctx, args[0], args[1])
    if ctx.ndim(m) != 2 or ctx.ndim(v) != 1:
        raise FrontendError(f"aten::mv expects a matrix and a vector, got shapes {ctx.shape(m)} and {ctx.shape(v)}")
    return op.squeeze(op.nn.dense(m, op.expand_dims(v, 0)), axis=[1])


@register("_weight_norm")
def _weight_norm(ctx, args):
    """v * g / ||v||, the norm over every axis but ``dim`` (over all axes when dim is -1)."""
    v, g = promote(ctx, args[0], args[1])
    dim = int(args.get("dim", 0))
    nd = ctx.ndim(v)
    axes = list(range(nd)) if dim == -1 else [a for a in range(nd) if a != (dim + nd if dim < 0 else dim)]
    norm = op.sqrt(op.sum(op.multiply(v, v), axis=axes, keepdims=True))
    return op.multiply(v, op.divide(g, norm))
