"""Sorting along an axis (TVM's ``topi.argsort`` / ``topi.sort`` / ``topi.topk``).

Every element's rank is counted in TE: ``rank[i] = #{j : x[j] comes before x[i]}``, where "before" is the
sort order with ties broken by position (a stable sort) and NaNs last, as numpy's stable argsort. The
permutation is then the inverse of the rank (``idx[p] = the i with rank[i] == p``) and values are gathered
through it. The work per row is quadratic in the axis length, which keeps the kernel a plain reduction
(no data-dependent control flow) and is cheap for the lengths models sort (class scores, proposals).
"""
from __future__ import annotations

from .. import te
from ..error import KilnError
from ..runtime.dtype import parse_dtype
from ..tir import op as T
from .utils import get_const_tuple, normalize_axis

__all__ = ["argsort", "sort", "topk"]


def _before(a, b, ja, jb, is_ascend: bool, is_float: bool):
    """Whether element ``a`` (at ``ja``) sorts strictly before element ``b`` (at ``jb``)."""
    less = a < b if is_ascend else a > b
    equal = a == b
    if is_float:
        a_nan, b_nan = T.isnan(a), T.isnan(b)
        less = T.logical_or(less, T.logical_and(T.logical_not(a_nan), b_nan))
        equal = T.logical_or(equal, T.logical_and(a_nan, b_nan))
    return T.logical_or(less, T.logical_and(equal, ja < jb))


def _rank(data, axis: int, is_ascend: bool):
    shape = get_const_tuple(data.shape)
    n = shape[axis]
    is_float = parse_dtype(data.dtype).is_float
    j = te.reduce_axis((0, n), name="j")

    def f(*i):
        other = list(i)
        other[axis] = j
        before = _before(data(*other), data(*i), j, i[axis], is_ascend, is_float)
        return te.sum(T.Select(before, T.const(1, "int32"), T.const(0, "int32")), axis=j)
    return te.compute(shape, f, name="T_sort_rank", tag="sort_rank")


def _permutation(data, axis: int, is_ascend: bool, k: int):
    """int32 indices of the first ``k`` elements in sorted order along ``axis``."""
    shape = get_const_tuple(data.shape)
    rank = _rank(data, axis, is_ascend)
    r = te.reduce_axis((0, shape[axis]), name="r")
    out_shape = list(shape)
    out_shape[axis] = k

    def f(*p):
        src = list(p)
        src[axis] = r
        return te.sum(T.Select(rank(*src) == p[axis], r, T.const(0, "int32")), axis=r)
    return te.compute(out_shape, f, name="T_sort_perm", tag="sort_perm")


def _gather(data, perm, axis: int, name: str):
    def f(*p):
        src = list(p)
        src[axis] = perm(*p)
        return data(*src)
    return te.compute(get_const_tuple(perm.shape), f, name=name, tag="sort_gather")


def _cast(t, dtype: str, name: str):
    if t.dtype == dtype:
        return t
    return te.compute(t.shape, lambda *i: T.cast(t(*i), dtype), name=name, tag="sort_gather")


def _check(data, axis, what):
    shape = get_const_tuple(data.shape)
    axis = normalize_axis(axis, len(shape), f"{what} axis")
    if shape[axis] == 0:
        raise KilnError(f"{what}: axis {axis} of {shape} is empty")
    return shape, axis


def argsort(data, valid_count=None, axis: int = -1, is_ascend: bool = True, dtype: str = "float32"):
    """Indices that sort ``data`` along ``axis`` (stable: equal elements keep their order)."""
    if valid_count is not None:
        raise KilnError("argsort: valid_count is not supported by kiln's argsort (pass None)")
    shape, axis = _check(data, axis, "argsort")
    perm = _permutation(data, axis, bool(is_ascend), shape[axis])
    return _cast(perm, dtype, "T_argsort")


def sort(data, axis: int = -1, is_ascend: bool = True):
    """``data`` sorted along ``axis``."""
    shape, axis = _check(data, axis, "sort")
    perm = _permutation(data, axis, bool(is_ascend), shape[axis])
    return _gather(data, perm, axis, "T_sort")


def topk(data, k: int = 1, axis: int = -1, ret_type: str = "both", is_ascend: bool = False, dtype: str = "int64"):
    """The ``k`` largest (``is_ascend``: smallest) elements along ``axis`` and/or their indices;
    ``k < 1`` takes the whole axis. ``ret_type``: "both" ([values, indices]), "values" or "indices"."""
    shape, axis = _check(data, axis, "topk")
    k = int(k)
    if k < 1:
        k = shape[axis]
    if k > shape[axis]:
        raise KilnError(f"topk: k={k} is larger than axis {axis} of {shape}")
    if ret_type not in ("both", "values", "indices"):
        raise KilnError(f"topk: ret_type must be 'both', 'values' or 'indices', got {ret_type!r}")
    perm = _permutation(data, axis, bool(is_ascend), k)
    values = _gather(data, perm, axis, "T_topk_values")
    indices = _cast(perm, dtype, "T_topk_indices")
    if ret_type == "values":
        return values
    if ret_type == "indices":
        return indices
    return [values, indices]
