"""Ops whose output length depends on the input values (nonzero, masked select, unique), built from Relay ops
that the VM runs: the length is the value of a reduction that sizes an ``arange`` (the data-dependent shape
function of ``arange``); everything else has static shapes or shape functions.

Shared by the frontends (PyTorch's aten table; the same algorithm serves ONNX's NonZero/Compress/Unique). All
helpers work on flat (1-D) tensors of a static length ``n``. The positions of the hits: the running count of
hits (``cumsum``, a linear scan) is ascending, and the k-th hit is where it first reaches k + 1, found by a
binary search unrolled into log2(n) rounds of elementwise ops over ``arange(1, count + 1)``: O(n + count log n)
work and O(n) memory. Unique sorts once with the stable ``argsort`` (NaNs last, each NaN its own value, as
PyTorch and numpy do) and scatters the inverse back through the permutation: kiln's TOPI ``argsort`` and
``scatter_elements`` are quadratic reductions, so unique is O(n^2) work (fine for thousands of elements).
"""
from __future__ import annotations

import numpy as np

from .. import op as _op
from ..expr import const as _relay_const

__all__ = ["lower_bound", "nonzero_positions", "nonzero_coords", "unique_flat", "unique_rows", "empty"]


def _const(value, dtype: str):
    return _relay_const(np.asarray(value, dtype=dtype), dtype)


def empty(dtype: str, shape=(0,)):
    """A constant with no elements (the result of a data-dependent op over an empty input)."""
    return _const(np.zeros(shape, dtype=dtype), dtype)


def _arange_to(count):
    return _op.arange(_const(0, "int64"), count, _const(1, "int64"), dtype="int64")


def lower_bound(sorted_vec, n: int, targets):
    """For each target, the first index i in the ascending int64 vector ``sorted_vec`` (static length ``n``)
    with ``sorted_vec[i] >= target`` (``n`` if none): a binary search unrolled into ceil(log2(n + 1)) rounds
    of elementwise ops over the targets, so the cost is O(len(targets) * log n)."""
    lo = _op.zeros_like(targets)
    hi = _op.add(lo, _const(n, "int64"))
    for _ in range(max(int(np.ceil(np.log2(n + 1))), 1)):
        mid = _op.floor_divide(_op.add(lo, hi), _const(2, "int64"))
        val = _op.take(sorted_vec, mid, axis=0, mode="clip")
        go = _op.logical_and(_op.less(val, targets), _op.less(lo, hi))
        lo, hi = _op.where(go, _op.add(mid, _const(1, "int64")), lo), _op.where(go, hi, mid)
        # one fused kernel per round: fused across rounds, lo/hi would be inlined 2^rounds times
        lo, hi = _op.annotation.stop_fusion(lo), _op.annotation.stop_fusion(hi)
    return lo


def nonzero_positions(hit, n: int, count=None):
    """The positions (int64, ascending) where the flat length-``n`` tensor ``hit`` is nonzero / True; the
    result's length (the count of hits, or ``count`` when given: an int64 scalar expression or an int) is
    known at run time only. The k-th hit sits where the running count of hits first reaches k + 1."""
    if n == 0:
        return empty("int64")
    hit = _op.cast(hit, "int64")
    running = _op.cumsum(hit, axis=0, dtype="int64")  # ascending: a binary search finds each k-th hit
    if count is None:
        count = _op.sum(hit)
    elif isinstance(count, int):
        count = _const(count, "int64")
    targets = _op.arange(_const(1, "int64"), _op.add(count, _const(1, "int64")), _const(1, "int64"),
                         dtype="int64")
    return lower_bound(running, n, targets)


def nonzero_coords(x, shape, dtype: str) -> list:
    """One int64 vector of coordinates per axis of ``x`` (static ``shape``) for its nonzero entries, in
    row-major order (``numpy.nonzero``)."""
    n = int(np.prod(shape, dtype=np.int64))
    flat = _op.reshape(x, [-1]) if len(shape) != 1 else x
    hit = flat if dtype == "bool" else _op.not_equal(flat, _const(0, dtype))
    pos = nonzero_positions(hit, n)
    if not shape:
        return []
    if n == 0:
        return [empty("int64") for _ in shape]
    coords = []
    for k, d in enumerate(shape):
        stride = int(np.prod(shape[k + 1:], dtype=np.int64))
        c = pos if stride == 1 else _op.floor_divide(pos, _const(stride, "int64"))
        coords.append(c if k == 0 else _op.floor_mod(c, _const(d, "int64")))
    return coords


def _run_flags(srt, n: int):
    """(starts, ends): bool vectors flagging the first / last element of each run of equal values."""
    if n == 1:
        one = _const(np.ones(1), "bool")
        return one, one
    differ = _op.not_equal(_op.strided_slice(srt, [1], [n]), _op.strided_slice(srt, [0], [n - 1]))
    true = _const(np.ones(1), "bool")
    return _op.concatenate([true, differ], 0), _op.concatenate([differ, true], 0)


def _runs(srt, starts, ends, n: int):
    """Run start positions, run lengths and, for each sorted element, the index of its run."""
    start_pos = nonzero_positions(starts, n)
    counts = _op.add(_op.subtract(nonzero_positions(ends, n), start_pos), _const(1, "int64"))
    run_id = _op.subtract(_op.cumsum(_op.cast(starts, "int64"), axis=0, dtype="int64"), _const(1, "int64"))
    return start_pos, counts, run_id


def unique_flat(flat, n: int, dtype: str, consecutive: bool = False) -> dict:
    """Unique values of the flat length-``n`` tensor: ``values`` (ascending; with ``consecutive`` the runs of
    equal neighbours in input order), ``inverse`` (int64, per input element the index of its value),
    ``counts`` and ``first`` (int64, the input position of each value's first occurrence)."""
    if n == 0:
        return {"values": empty(dtype), "inverse": empty("int64"), "counts": empty("int64"),
                "first": empty("int64")}
    if consecutive:
        perm, srt = None, flat
    else:
        perm = _op.argsort(flat, axis=0, is_ascend=True, dtype="int64")   # stable, NaNs last
        srt = _op.take(flat, perm, axis=0)
    starts, ends = _run_flags(srt, n)
    start_pos, counts, run_id = _runs(srt, starts, ends, n)
    values = _op.take(srt, start_pos, axis=0)
    if perm is None:
        return {"values": values, "inverse": run_id, "counts": counts, "first": start_pos}
    inverse = _op.scatter_elements(_const(np.zeros(n), "int64"), perm, run_id, axis=0)
    return {"values": values, "inverse": inverse, "counts": counts, "first": _op.take(perm, start_pos, axis=0)}


def unique_rows(rows, n: int, m: int, consecutive: bool = False) -> dict:
    """Unique rows of the static [n, m] tensor ``rows`` (``torch.unique(dim=...)``): ``values`` [?, m] in
    lexicographic order (or runs of equal neighbouring rows with ``consecutive``), ``inverse``, ``counts`` and
    ``first`` (the index of each value's first row).
    The lexicographic order is m stable argsorts, from the last column to the first."""
    if n == 0:
        raise ValueError("unique over an empty dimension")
    if consecutive:
        perm, srt = None, rows
    else:
        perm = _const(np.arange(n), "int64")
        for c in reversed(range(m)):
            key = _op.take(_op.reshape(_op.strided_slice(rows, [c], [c + 1], axes=[1]), [n]), perm, axis=0)
            perm = _op.take(perm, _op.argsort(key, axis=0, is_ascend=True, dtype="int64"), axis=0)
        srt = _op.take(rows, perm, axis=0)
    if n == 1:
        starts = ends = _const(np.ones(1), "bool")
    elif m == 0:
        starts = _const(np.arange(n) == 0, "bool")
        ends = _const(np.arange(n) == n - 1, "bool")
    else:
        differ = _op.any(_op.not_equal(_op.strided_slice(srt, [1], [n], axes=[0]),
                                              _op.strided_slice(srt, [0], [n - 1], axes=[0])), axis=[1])
        true = _const(np.ones(1), "bool")
        starts, ends = _op.concatenate([true, differ], 0), _op.concatenate([differ, true], 0)
    start_pos, counts, run_id = _runs(srt, starts, ends, n)
    values = _op.take(srt, start_pos, axis=0)
    inverse = run_id if perm is None else _op.scatter_elements(_const(np.zeros(n), "int64"), perm, run_id, axis=0)
    first = start_pos if perm is None else _op.take(perm, start_pos, axis=0)  # stable sorts: a run's first row
    return {"values": values, "inverse": inverse, "counts": counts, "first": first}
