"""Scans along an axis (TVM's ``topi.cumsum`` / ``topi.cumprod``).

Each scan is a ``te.extern`` whose body is a serial loop along the scanned axis nested inside loops over
the other axes, so the work is linear in the input size (a prefix sum written as a reduction would be
quadratic).
"""
from __future__ import annotations

from typing import Callable

from .. import te
from ..error import KilnError
from ..tir import expr as E
from ..tir import op as T
from ..tir import stmt as S
from .utils import get_const_tuple, normalize_axis

__all__ = ["scanop", "cumsum", "cumprod"]


def _flatten(data):
    """A 1-D copy of ``data`` as its own stage (not tagged injective, so it is never inlined into the scan)."""
    shape = get_const_tuple(data.shape)
    strides = []
    acc = 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    strides.reverse()

    def f(i):
        idx = [(i // st) % d if k else i // st for k, (st, d) in enumerate(zip(strides, shape))]
        return data(*idx)
    return te.compute((acc,), f, name="scan_flatten", tag="scan_flatten")


def scanop(data, binop: Callable, identity_value, op_name: str, axis=None, dtype=None, exclusive=None):
    """Inclusive (or ``exclusive``) scan of ``data`` with ``binop`` along ``axis`` (all elements, flattened,
    when ``axis`` is None), accumulating in ``dtype`` (default: the input's)."""
    dtype = dtype or data.dtype
    if axis is None:
        data = _flatten(data) if len(data.shape) != 1 else data
        axis = 0
    shape = get_const_tuple(data.shape)
    axis = normalize_axis(axis, len(shape), f"{op_name} axis")
    n = shape[axis]
    if isinstance(n, int) and n == 0:
        raise KilnError(f"{op_name}: the scanned axis {axis} of {shape} is empty")
    exclusive = bool(exclusive)

    def body(ins, outs):
        x, out = ins[0], outs[0]
        loop_vars = [te.var(f"i{d}") for d in range(len(shape)) if d != axis]
        j = te.var("j")

        def index(pos):
            idx = list(loop_vars)
            idx.insert(axis, pos)
            return idx

        def load(pos):
            v = x[index(pos)]
            return v if v.dtype == dtype else T.cast(v, dtype)
        first = T.const(identity_value, dtype) if exclusive else load(T.const(0, "int32"))
        stmt = S.BufferStore(out, first, index(T.const(0, "int32")))
        if not isinstance(n, int) or n > 1:  # an unknown extent: a loop of n - 1 (maybe 0) steps
            prev = out[index(j - 1)]
            step = binop(prev, load(j - 1) if exclusive else load(j))
            loop = S.For(j, 1, n - 1, S.ForKind.SERIAL, S.BufferStore(out, step, index(j)))
            stmt = S.SeqStmt([stmt, loop])
        outer = [d for d in range(len(shape)) if d != axis]
        for v, d in reversed(list(zip(loop_vars, outer))):
            stmt = S.For(v, 0, shape[d], S.ForKind.SERIAL, stmt)
        return stmt
    return te.extern(shape, [data], body, name=f"T_{op_name}", dtype=dtype, tag=op_name)


def cumsum(data, axis=None, dtype=None, exclusive=None):
    """Running sum along ``axis`` (``exclusive``: each output excludes its own element, starting at 0)."""
    return scanop(data, lambda a, b: a + b, 0, "cumsum", axis, dtype, exclusive)


def cumprod(data, axis=None, dtype=None, exclusive=None):
    """Running product along ``axis`` (``exclusive``: each output excludes its own element, starting at 1)."""
    return scanop(data, lambda a, b: a * b, 1, "cumprod", axis, dtype, exclusive)
