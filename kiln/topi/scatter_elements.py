"""``scatter_elements`` (TVM's ``topi.scatter_elements``): write or reduce ``updates`` into a copy of ``data`` at
the positions ``indices`` give along ``axis``.

Written as a gather over the indices: output element ``o`` reduces, over the ``indices.shape[axis]`` candidates
that share its other coordinates, the updates whose (wrapped) index equals ``o[axis]``. That costs
``data.size * indices.shape[axis]`` but needs no scatter in TE, so every schedule handles it. ``update`` keeps the
last candidate in index order (PyTorch leaves duplicates unspecified; this makes them deterministic).
"""
from __future__ import annotations

from .. import te
from ..error import KilnError
from ..tir import op as T
from .broadcast import REQUIRES, equal_requirement
from .utils import get_const_tuple

__all__ = ["scatter_elements"]

REDUCTIONS = ("update", "add", "mul", "mean", "min", "max")

_prod = T.comm_reducer(lambda x, y: x * y, lambda dt: T.const(1, dt), name="prod")


def scatter_elements(data, indices, updates, axis=0, reduction="update"):
    dshape = get_const_tuple(data.shape)
    ishape = get_const_tuple(indices.shape)
    ushape = get_const_tuple(updates.shape)  # unknown (relay.Any) extents are taken as equal
    if len(ushape) != len(ishape) or len(ishape) != len(dshape) or any(
            isinstance(u, int) and isinstance(i, int) and u != i for u, i in zip(ushape, ishape)):
        raise KilnError(f"scatter_elements: indices {ishape} and updates {get_const_tuple(updates.shape)} must have "
                        f"one shape, of the rank of data {dshape}")
    if reduction not in REDUCTIONS:
        raise KilnError(f"scatter_elements: reduction must be one of {REDUCTIONS}, got {reduction!r}")
    nd = len(dshape)
    axis = int(axis) + nd if int(axis) < 0 else int(axis)
    if isinstance(ishape[axis], int) and ishape[axis] == 0:
        return te.compute(dshape, lambda *o: data(*o), name="scatter_elements", tag="scatter")
    n_axis = dshape[axis]
    # two unknown extents of indices and updates are taken as equal: checked when the kernel runs
    req = [c for u, i in zip(ushape, ishape) for c in equal_requirement(u, i, "scatter_elements: indices/updates")]
    req_attrs = {REQUIRES: req} if req else None

    def candidate(o, r):
        p = [T.min(o[d], ishape[d] - 1) if d != axis else r for d in range(nd)]
        i = T.cast(indices(*p), "int32")
        i = T.if_then_else(i < 0, i + n_axis, i)
        conds = [o[d] < ishape[d] for d in range(nd) if d != axis and not (isinstance(ishape[d], int) and isinstance(dshape[d], int)
                                                                  and ishape[d] >= dshape[d])]
        return p, T.all(*(conds + [i == o[axis]]))

    dt = data.dtype
    if reduction == "update":
        r = te.reduce_axis((0, ishape[axis]), name="r")

        def last(*o):
            _, ok = candidate(o, r)
            return T.max(T.cast(r, "int32"), axis=r, where=ok)
        lst = te.compute(dshape, last, name="scatter_last", tag="scatter", attrs=req_attrs)

        def pick(*o):
            j = lst(*o)
            p, _ = candidate(o, T.max(j, 0))
            return T.if_then_else(j >= 0, updates(*p), data(*o))
        return te.compute(dshape, pick, name="scatter_elements", tag="scatter")

    r = te.reduce_axis((0, ishape[axis]), name="r")
    reducer = {"add": T.sum, "mean": T.sum, "mul": _prod, "min": T.min, "max": T.max}[reduction]

    def acc(*o):
        p, ok = candidate(o, r)
        return reducer(T.cast(updates(*p), dt), axis=r, where=ok)
    red = te.compute(dshape, acc, name="scatter_acc", tag="scatter", attrs=req_attrs)
    if reduction == "add":
        return te.compute(dshape, lambda *o: data(*o) + red(*o), name="scatter_elements", tag="scatter")
    if reduction == "mul":
        return te.compute(dshape, lambda *o: data(*o) * red(*o), name="scatter_elements", tag="scatter")
    if reduction == "min":
        return te.compute(dshape, lambda *o: T.min(data(*o), red(*o)), name="scatter_elements", tag="scatter")
    if reduction == "max":
        return te.compute(dshape, lambda *o: T.max(data(*o), red(*o)), name="scatter_elements", tag="scatter")
    r2 = te.reduce_axis((0, ishape[axis]), name="r2")

    def count(*o):
        _, ok = candidate(o, r2)
        return T.sum(T.const(1, "int32"), axis=r2, where=ok)
    cnt = te.compute(dshape, count, name="scatter_count", tag="scatter")
    return te.compute(dshape, lambda *o: (data(*o) + red(*o)) / T.cast(cnt(*o) + 1, dt),
                      name="scatter_elements", tag="scatter")
