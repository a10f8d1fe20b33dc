"""ONNX converters for *axes* (and split sizes, a scan axis) that are run-time values.

From opset 13/18 ONNX passes Reduce* ``axes``, Squeeze/Unsqueeze ``axes``, Split ``split``, Slice/Pad ``axes``
and CumSum/CumProd ``axis`` as inputs. When such an input is computed from graph inputs, its *length* is still
known at import time (the input's static shape), so the output rank is known; only which axes are touched is
not. These converters (registered with ``@onnx_op(..., dynamic=True)``, tried when the static converter refused
the node) express the run-time choice with static ops plus one ``dyn.*`` op at the end:

- Reduce*: every axis is reduced *and* kept side by side (``concatenate([reduce(y, a), y], a)``), so one
  ``dyn.strided_slice`` picks, per axis, the reduced slot or the original ones; ``keepdims=0`` is a
  ``dyn.reshape`` to the kept dims. All kernels but the last are static.
- CumSum/CumProd: the scan along each possible axis, selected with ``where(axis == a, ...)`` (no VM needed).
- Squeeze/Unsqueeze: a ``dyn.reshape`` to a shape computed from the mask of the axes.
- Split: one ``dyn.strided_slice`` per output, bounds from the cumulative sizes.
- Slice/Pad with an ``axes`` input: the per-axis operands scattered into full-rank vectors.

The axis arithmetic works on small int64 vectors of static length (masks built by comparing with an
``arange`` constant), so ``DynamicToStatic`` folds everything back when the inputs become constants.
"""
from __future__ import annotations

import numpy as np

from .. import op as _op
from ..expr import const as _relay_const
from ..op import dyn as _dyn
from .onnx_common import onnx_op
from .onnx_dynamic import _i64, _length, _ndim
from . import onnx_ops_tensor as _static

__all__: list = []

_INT64_MAX = np.iinfo(np.int64).max


def const(value):
    value = np.asarray(value)
    return _relay_const(value, str(value.dtype))


def _i64c(v):
    return const(np.asarray(v, dtype="int64"))


# -- axis arithmetic on run-time int64 vectors -------------------------------------------------------------------
def _vector(x, ctx):
    """An axes operand as a 1-D int64 vector (a scalar becomes a one-element vector)."""
    x = _i64(x, ctx)
    return _op.reshape(x, [-1]) if _ndim(x, ctx) != 1 else x


def _normalize(axes, rank: int):
    """Negative axes counted from the end (``a + rank`` where ``a < 0``)."""
    return _op.where(_op.less(axes, _i64c(0)), _op.add(axes, _i64c(rank)), axes)


def _onehot(axes_norm, rank: int):
    """``[k, rank]`` bool: entry ``[j, i]`` is whether axis ``j`` of the operand is axis ``i``."""
    return _op.equal(_op.expand_dims(axes_norm, 1), _i64c(np.arange(rank)[None, :]))


def _mask(axes_norm, rank: int):
    """``[rank]`` bool: whether axis ``i`` is named by the operand."""
    hits = _op.sum(_op.cast(_onehot(axes_norm, rank), "int64"), axis=[0])
    return _op.greater(hits, _i64c(0))


def _scatter(axes_norm, rank: int, values, default: int):
    """The full-rank vector holding ``values[j]`` at ``axes[j]`` and ``default`` elsewhere."""
    hot = _onehot(axes_norm, rank)  # [k, rank]
    picked = _op.sum(_op.where(hot, _op.expand_dims(values, 1), _i64c(0)), axis=[0])
    return _op.where(_mask(axes_norm, rank), picked, _i64c(np.full(rank, default)))


def _compact(keep, values, rank: int, count: int):
    """The entries of ``values`` (length ``rank``) where ``keep`` holds, in order; ``count`` of them."""
    if count == 0:
        return _i64c(np.zeros(0))
    k = _op.cast(keep, "int64")
    # position of each kept entry in the output: (number of kept entries up to and including it) - 1
    pos = _op.subtract(_op.sum(_op.multiply(_i64c(np.tril(np.ones((rank, rank)))), k), axis=[1]), _i64c(1))
    sel = _op.logical_and(_op.equal(_op.expand_dims(pos, 0), _i64c(np.arange(count)[:, None])),
                          _op.expand_dims(keep, 0))  # [count, rank]
    return _op.sum(_op.where(sel, _op.expand_dims(values, 0), _i64c(0)), axis=[1])


def scatter_axes(axes, rank: int, values, default: int, ctx):
    """The full-rank int64 vector holding ``values[j]`` at axis ``axes[j]`` (run-time, negative allowed) and
    ``default`` elsewhere (Slice/Pad operands given for some axes only)."""
    return _scatter(_normalize(_vector(axes, ctx), rank), rank, _vector(values, ctx), default)


# -- Reduce* with run-time axes ---------------------------------------------------------------------------------
def _lse_step(y, a):
    """log(sum(exp(y))) over axis ``a`` (kept), shifted by the max so large values do not overflow."""
    mx = _op.max(y, axis=[a], keepdims=True)
    safe = _op.where(_op.isfinite(mx), mx, _op.zeros_like(mx))
    return _op.add(_op.log(_op.sum(_op.exp(_op.subtract(y, safe)), axis=[a], keepdims=True)), safe)


def _sum_step(y, a):
    return _op.sum(y, axis=[a], keepdims=True)


# name -> (elementwise before, one-axis reduction with keepdims, elementwise after, computed in float)
_REDUCE_PLANS = {
    "ReduceSum": (None, _sum_step, None, False),
    "ReduceMean": (None, lambda y, a: _op.mean(y, axis=[a], keepdims=True), None, False),
    "ReduceMax": (None, lambda y, a: _op.max(y, axis=[a], keepdims=True), None, False),
    "ReduceMin": (None, lambda y, a: _op.min(y, axis=[a], keepdims=True), None, False),
    "ReduceProd": (None, lambda y, a: _op.prod(y, axis=[a], keepdims=True), None, False),
    "ReduceL1": (_op.abs, _sum_step, None, False),
    "ReduceSumSquare": (lambda y: _op.multiply(y, y), _sum_step, None, False),
    "ReduceL2": (lambda y: _op.multiply(y, y), _sum_step, _op.sqrt, True),
    "ReduceLogSum": (None, _sum_step, _op.log, False),
    "ReduceLogSumExp": (None, _lse_step, None, True),
}


def _reduce_runtime_axes(name: str, inputs, attr, ctx):
    """Reduce* over the axes a run-time operand names (its length, so the output rank, is static)."""
    x = inputs[0]
    rank = _ndim(x, ctx)
    keepdims = bool(int(attr.get("keepdims", 1)))
    axes = _vector(inputs[1], ctx)
    k = _length(axes, ctx, "axes")
    if k == 0:  # an empty operand is known to be empty: reduce everything, or nothing (noop_with_empty_axes)
        if int(attr.get("noop_with_empty_axes", 0)):
            return x
        return _static._REDUCERS.get(name, lambda c, v, a, kd: _op.sum(v, axis=a, keepdims=kd))(
            ctx, x, list(range(rank)), keepdims)
    pre, step, post, in_float = _REDUCE_PLANS[name]
    dt = ctx.dtype(x)
    cast_back = in_float and not dt.startswith("float")
    y = _op.cast(x, "float64") if cast_back else x
    if pre is not None:
        y = pre(y)
    # reduce every axis and keep both: slot 0 of axis a holds the reduction, slots 1.. the entries as they were
    for a in range(rank):
        y = _op.concatenate([step(y, a), y], axis=a)
    mask = _mask(_normalize(axes, rank), rank)
    begin = _op.where(mask, _i64c(np.zeros(rank)), _i64c(np.ones(rank)))
    end = _op.where(mask, _i64c(np.ones(rank)), _op.shape_of(y, "int64"))
    out = _dyn.strided_slice(y, begin, end, _i64c(np.ones(rank)))
    if post is not None:
        out = post(out)
    if cast_back:
        out = _op.cast(out, dt)
    if not keepdims:
        kept = _compact(_op.logical_not(mask), _op.shape_of(x, "int64"), rank, rank - k)
        out = _dyn.reshape(out, kept)
    return out


def _register_reductions():
    for name in _REDUCE_PLANS:
        since = 13 if name == "ReduceSum" else 18
        onnx_op(name, since=since, dynamic=True)(
            lambda inputs, attr, ctx, _n=name: _reduce_runtime_axes(_n, inputs, attr, ctx))


_register_reductions()


# -- CumSum / CumProd with a run-time axis -----------------------------------------------------------------------
def _scan_runtime_axis(scan, inputs, attr, ctx):
    """``scan(ctx, x, axis)`` along the axis named by a run-time scalar: every axis computed, one selected."""
    x = inputs[0]
    rank = _ndim(x, ctx)
    if rank == 0:
        raise ctx.error("CumSum/CumProd of a scalar")
    axis = _normalize(_op.reshape(_i64(inputs[1], ctx), []), rank)
    out = scan(ctx, x, rank - 1)
    for a in range(rank - 2, -1, -1):
        out = _op.where(_op.equal(axis, _i64c(a)), scan(ctx, x, a), out)
    return out


@onnx_op("CumSum", since=11, dynamic=True)
def _cum_sum(inputs, attr, ctx):
    ex, rev = int(attr.get("exclusive", 0)), int(attr.get("reverse", 0))
    return _scan_runtime_axis(lambda c, x, a: _static.cum_sum_expr(c, x, a, ex, rev), inputs, attr, ctx)


@onnx_op("CumProd", since=26, dynamic=True)
def _cum_prod(inputs, attr, ctx):
    ex, rev = bool(int(attr.get("exclusive", 0))), bool(int(attr.get("reverse", 0)))
    return _scan_runtime_axis(lambda c, x, a: _static.cum_prod_expr(c, x, a, ex, rev), inputs, attr, ctx)


# -- Squeeze / Unsqueeze with run-time axes ----------------------------------------------------------------------
@onnx_op("Squeeze", since=13, dynamic=True)
def _squeeze(inputs, attr, ctx):
    x = inputs[0]
    rank = _ndim(x, ctx)
    if len(inputs) < 2 or inputs[1] is None:
        raise ctx.unsupported("Squeeze without axes of a tensor whose dims are only known at run time (the output "
                              "rank would depend on the data)")
    axes = _vector(inputs[1], ctx)
    k = _length(axes, ctx, "axes")
    keep = _op.logical_not(_mask(_normalize(axes, rank), rank))
    return _dyn.reshape(x, _compact(keep, _op.shape_of(x, "int64"), rank, rank - k))


@onnx_op("Unsqueeze", since=13, dynamic=True)
def _unsqueeze(inputs, attr, ctx):
    x = inputs[0]
    rank = _ndim(x, ctx)
    axes = _vector(inputs[1], ctx)
    out_rank = rank + _length(axes, ctx, "axes")
    inserted = _mask(_normalize(axes, out_rank), out_rank)
    # output position p takes input dim p - (number of inserted positions before p)
    before = _op.sum(_op.multiply(_i64c(np.tril(np.ones((out_rank, out_rank)), -1)),
                                  _op.cast(inserted, "int64")), axis=[1])
    src = _op.clip(_op.subtract(_i64c(np.arange(out_rank)), before), 0, max(rank - 1, 0))
    dims = _op.take(_op.shape_of(x, "int64"), src) if rank else _i64c(np.ones(out_rank))
    return _dyn.reshape(x, _op.where(inserted, _i64c(np.ones(out_rank)), dims))


# -- Split with run-time sizes ----------------------------------------------------------------------------------
def _split_runtime(inputs, attr, ctx):
    x = inputs[0]
    rank = _ndim(x, ctx)
    axis = _static._axis(ctx, int(attr.get("axis", 0)), rank)
    if len(inputs) > 1 and inputs[1] is not None:
        sizes = _vector(inputs[1], ctx)
    else:  # num_outputs (or one output each) over a dim known only at run time: ceil-sized chunks, last smaller
        k = int(attr.get("num_outputs", len(ctx.node.output)))
        dim = _op.take(_op.shape_of(x, "int64"), _i64c(axis))
        step = _op.divide(_op.add(dim, _i64c(k - 1)), _i64c(k))
        last = _op.subtract(dim, _op.multiply(step, _i64c(k - 1)))
        sizes = _op.concatenate([_op.expand_dims(step, 0)] * (k - 1) + [_op.expand_dims(last, 0)], 0)
    n = _length(sizes, ctx, "split")
    if n != len(ctx.node.output):
        raise ctx.error(f"split holds {n} sizes for {len(ctx.node.output)} outputs")
    ends = _op.sum(_op.multiply(_i64c(np.tril(np.ones((n, n)))), _op.expand_dims(sizes, 0)), axis=[1])
    starts = _op.subtract(ends, sizes)
    onehot = np.arange(rank) == axis
    outs = []
    for j in range(n):
        b = _op.where(const(onehot), _op.strided_slice(starts, [j], [j + 1]), _i64c(np.zeros(rank)))
        e = _op.where(const(onehot), _op.strided_slice(ends, [j], [j + 1]), _i64c(np.full(rank, _INT64_MAX)))
        outs.append(_dyn.strided_slice(x, b, e, _i64c(np.ones(rank))))
    return outs


onnx_op("Split", since=13, dynamic=True)(_split_runtime)
onnx_op("Split", since=18, dynamic=True)(_split_runtime)
