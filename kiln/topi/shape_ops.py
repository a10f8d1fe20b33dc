"""Shape-following ops (TVM's ``topi.slice_like``, ``topi.collapse_sum``, ``topi.ndarray_size``)."""
from __future__ import annotations

import numpy as np

from .. import te
from ..error import KilnError
from ..tir import op as T
from . import tag
from .reduction import sum as _sum
from .utils import get_const_tuple, normalize_axis

__all__ = ["slice_like", "collapse_sum", "ndarray_size"]


def slice_like(data, shape_like, axes=None):
    """The leading corner of ``data`` with the size of ``shape_like`` on ``axes`` (None: every axis both have)."""
    shape = list(get_const_tuple(data.shape))
    like = get_const_tuple(shape_like.shape)
    if axes is None or len(axes) == 0:
        axes = list(range(min(len(shape), len(like))))
    else:
        axes = [normalize_axis(int(a), len(shape), "slice_like axis") for a in axes]
    for a in axes:
        if a >= len(like) or (isinstance(like[a], int) and isinstance(shape[a], int) and like[a] > shape[a]):
            raise KilnError(f"slice_like: shape_like {like} does not fit data {tuple(shape)} on axis {a}")
        shape[a] = like[a]
    return te.compute(shape, lambda *i: data(*i), name="T_slice_like", tag=tag.INJECTIVE)


def _int_or_sym(d):
    v = getattr(d, "value", d)
    return int(v) if isinstance(v, (int, np.integer)) else d


def collapse_axes(shape, target, what: str = "collapse_sum", error=KilnError) -> list:
    """Axes of ``shape`` summed away to give ``target`` (numpy broadcasting run backwards: the leading axes,
    and axes of size 1 in ``target``); ``error`` (naming ``what``) when ``target`` does not broadcast."""
    shape, target = tuple(_int_or_sym(d) for d in shape), tuple(_int_or_sym(d) for d in target)
    lead = len(shape) - len(target)
    if lead < 0:
        raise error(f"{what}: target {target} has more dimensions than data {shape}")
    axes = list(range(lead))
    for i, d in enumerate(target):
        s = shape[lead + i]
        if not isinstance(d, int) or not isinstance(s, int):  # unknown (relay.Any) dims: a target 1 sums the
            if isinstance(d, int) and d == 1:                   # axis, anything else is taken as equal
                axes.append(lead + i)
            continue
        if d == 1 and s != 1:
            axes.append(lead + i)
        elif d != s:
            raise error(f"{what}: data {shape} does not broadcast from {target}")
    return axes


def collapse_sum(data, target_shape):
    """Sum ``data`` down to ``target_shape`` (undo numpy broadcasting: leading axes and axes of size 1)."""
    shape = get_const_tuple(data.shape)
    target = get_const_tuple(target_shape)
    lead = len(shape) - len(target)
    axes = collapse_axes(shape, target)
    if not axes:
        return te.compute(shape, lambda *i: data(*i), name="T_collapse_sum", tag=tag.INJECTIVE)
    summed = _sum(data, axes, keepdims=True)
    if lead == 0:
        return summed
    return te.compute(target, lambda *i: summed(*([0] * lead + list(i))), name="T_collapse_sum",
                      tag=tag.INJECTIVE)


def ndarray_size(array, dtype="int32"):
    """The number of elements of ``array`` as a 0-d tensor of ``dtype``."""
    n = 1
    for d in get_const_tuple(array.shape):
        n *= int(d)
    return te.compute((), lambda: T.const(n, dtype), name="ndarray_size", tag=tag.ELEMWISE)
