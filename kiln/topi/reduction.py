"""Reductions over axes (TVM's ``topi.reduction``): sum, max, min, prod, all, any, argmax, argmin."""
from __future__ import annotations

from .. import te
from ..error import KilnError
from ..runtime.dtype import parse_dtype
from ..tir import op as T
from . import tag
from .utils import get_const_tuple, normalize_axis, ravel_index
from .broadcast import broadcast_index


def reduce_axes(ndim: int, axis=None, exclude: bool = False) -> list:
    """The sorted list of axes a reduction covers (``None``: all; an empty list: none, as TVM v0.13's
    GetRealAxis and numpy's ``axis=()``; ``exclude``: all but these)."""
    axes = None if axis is None else ([axis] if isinstance(axis, int) else list(get_const_tuple(axis)))
    if axes is None:
        return list(range(ndim))
    axes = sorted({normalize_axis(int(a), ndim) for a in axes})
    if exclude:
        axes = [a for a in range(ndim) if a not in axes]
    return axes


def _reduce_shape(shape, axes, keepdims):
    out = []
    for d, n in enumerate(shape):
        if d in axes:
            if keepdims:
                out.append(1)
        else:
            out.append(n)
    return out


def _split_indices(shape, axes, keepdims, out_idx, rvars):
    """Input indices from output indices and reduction variables."""
    idx, it_out, it_r = [], iter(out_idx), iter(rvars)
    for d in range(len(shape)):
        if d in axes:
            if keepdims:
                next(it_out)
            idx.append(next(it_r))
        else:
            idx.append(next(it_out))
    return idx


def comm_reduce(data, axis=None, keepdims=False, reducer=T.sum, name="reduce", exclude=False):
    shape = get_const_tuple(data.shape)
    axes = reduce_axes(len(shape), axis, exclude)
    raxes = [te.reduce_axis((0, shape[a]), name=f"k{j}") for j, a in enumerate(axes)]
    out_shape = _reduce_shape(shape, axes, keepdims)

    def f(*i):
        return reducer(data(*_split_indices(shape, axes, keepdims, i, raxes)), axis=raxes)
    return te.compute(out_shape, f, name=f"T_{name}", tag=tag.COMM_REDUCE)


def sum(data, axis=None, keepdims=False, exclude=False):  # noqa: A001
    return comm_reduce(data, axis, keepdims, T.sum, "sum", exclude)


def max(data, axis=None, keepdims=False, exclude=False):  # noqa: A001
    return comm_reduce(data, axis, keepdims, T.max, "max", exclude)


def min(data, axis=None, keepdims=False, exclude=False):  # noqa: A001
    return comm_reduce(data, axis, keepdims, T.min, "min", exclude)


_prod_reducer = T.comm_reducer(lambda x, y: x * y, lambda dt: T.const(1, dt), name="prod")


def prod(data, axis=None, keepdims=False, exclude=False):
    return comm_reduce(data, axis, keepdims, _prod_reducer, "prod", exclude)


_all_reducer = T.comm_reducer(lambda x, y: T.logical_and(x, y), lambda dt: T.const(True, dt), name="all")
_any_reducer = T.comm_reducer(lambda x, y: T.logical_or(x, y), lambda dt: T.const(False, dt), name="any")


def all(data, axis=None, keepdims=False, exclude=False):  # noqa: A001
    if data.dtype != "bool":
        raise KilnError(f"all: needs a bool tensor, got {data.dtype}")
    return comm_reduce(data, axis, keepdims, _all_reducer, "all", exclude)


def any(data, axis=None, keepdims=False, exclude=False):  # noqa: A001
    if data.dtype != "bool":
        raise KilnError(f"any: needs a bool tensor, got {data.dtype}")
    return comm_reduce(data, axis, keepdims, _any_reducer, "any", exclude)


def _arg_reducer(is_max: bool, select_last_index: bool):
    """argmax/argmin as numpy and PyTorch define them: a NaN wins over every number (both argmax and
    argmin return the first NaN), ties go to the first (or last) index."""
    def combine(lhs, rhs):
        li, lv = lhs
        ri, rv = rhs
        better = lv > rv if is_max else lv < rv
        tie_pick_l = li > ri if select_last_index else li < ri
        tie = lv == rv
        if parse_dtype(lv.dtype).is_float:
            l_nan, r_nan = lv != lv, rv != rv
            better = T.logical_or(T.logical_and(l_nan, T.logical_not(r_nan)), better)
            tie = T.logical_or(tie, T.logical_and(l_nan, r_nan))
        take_l = T.logical_or(better, T.logical_and(tie, tie_pick_l))
        return T.Select(take_l, li, ri), T.Select(take_l, lv, rv)

    def identity(idx_dtype, val_dtype):
        return T.const(-1, idx_dtype), (T.min_value(val_dtype) if is_max else T.max_value(val_dtype))
    return T.comm_reducer(combine, identity, name="argmax" if is_max else "argmin")


def _arg_reduce(data, axis, keepdims, exclude, select_last_index, is_max):
    shape = get_const_tuple(data.shape)
    axes = reduce_axes(len(shape), axis, exclude)
    raxes = [te.reduce_axis((0, shape[a]), name=f"k{j}") for j, a in enumerate(axes)]
    out_shape = _reduce_shape(shape, axes, keepdims)
    reducer = _arg_reducer(is_max, select_last_index)

    def f(*i):
        flat = T.cast(ravel_index([r.var for r in raxes], [shape[a] for a in axes]), "int32")
        return reducer((flat, data(*_split_indices(shape, axes, keepdims, i, raxes))), axis=raxes)
    name = "argmax" if is_max else "argmin"
    out = te.compute(out_shape, f, name=f"T_{name}_red_temp", tag=tag.COMM_REDUCE_IDX)
    return out[0] if isinstance(out, (list, tuple)) else out


def argmax(data, axis=None, keepdims=False, select_last_index=False, exclude=False):
    """Index (int32, flat over the reduced axes) of the first maximum."""
    return _arg_reduce(data, axis, keepdims, exclude, select_last_index, True)


def argmin(data, axis=None, keepdims=False, select_last_index=False, exclude=False):
    return _arg_reduce(data, axis, keepdims, exclude, select_last_index, False)


def mean(data, axis=None, keepdims=False, exclude=False):
    """Sum divided by the number of reduced elements (computed in ``data``'s float dtype)."""
    shape = get_const_tuple(data.shape)
    axes = reduce_axes(len(shape), axis, exclude)
    count = 1
    for a in axes:
        count *= shape[a]
    s = sum(data, axes, keepdims)
    # a symbolic (relay.Any) reduced dim makes the count an expression, evaluated at run time
    div = T.const(count, s.dtype) if isinstance(count, int) else T.cast(count, s.dtype)
    return te.compute(s.shape, lambda *i: s(*i) / div, name="T_mean", tag=tag.ELEMWISE)


def variance(data, axis=None, keepdims=False, exclude=False, unbiased=False, mean_value=None):
    """Mean of squared deviations (``unbiased``: divide by N-1)."""
    shape = get_const_tuple(data.shape)
    axes = reduce_axes(len(shape), axis, exclude)
    count = 1
    for a in axes:
        count *= shape[a]
    m = mean_value if mean_value is not None else mean(data, axes, keepdims=True)
    dev = te.compute(data.shape, lambda *i: (data(*i) - m(*broadcast_index(m, i))) * (data(*i) - m(*broadcast_index(m, i))),
                     name="T_sq_dev", tag=tag.BROADCAST)
    s = sum(dev, axes, keepdims)
    denom = count - 1 if unbiased else count
    return te.compute(s.shape, lambda *i: s(*i) / T.const(denom, s.dtype), name="T_variance", tag=tag.ELEMWISE)


def std(data, axis=None, keepdims=False, exclude=False, unbiased=False):
    v = variance(data, axis, keepdims, exclude, unbiased)
    return te.compute(v.shape, lambda *i: T.sqrt(v(*i)), name="T_std", tag=tag.ELEMWISE)
