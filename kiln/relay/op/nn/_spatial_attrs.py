"""The per-axis attributes of the 1-, 2- and 3-D conv / pool ops (strides, dilation, padding) in full form, and
the pooled output extent: one place that expands a single value to every axis and checks the count, for type
relations, shape functions, references and computes alike."""
from __future__ import annotations

from ....error import TypeInferenceError


def _ints(v) -> tuple:
    """One value, or any sequence of them (tuple, list, array), as a tuple of ints."""
    try:
        items = list(v)
    except TypeError:  # a single value
        return (int(v),)
    return tuple(int(x) for x in items)


def _prefix(op: str) -> str:
    return f"{op}: " if op else ""


def ntuple(v, n: int, what: str, op: str = "") -> tuple:
    """``n`` ints from one value (every axis) or ``n`` values; ``what`` / ``op`` name them in the error."""
    v = _ints(v)
    if len(v) == 1:
        return v * n
    if len(v) != n:
        raise TypeInferenceError(f"{_prefix(op)}{what} must have 1 or {n} values, got {v}")
    return v


def pad_tuple(padding, ndim: int, op: str = "") -> tuple:
    """(before per axis..., after per axis...) from 1 value (every side), ``ndim`` values (both sides of each
    axis) or ``2 * ndim`` values (TVM's get_pad_tuple1d / 2d / 3d)."""
    p = _ints(padding)
    if len(p) == 1:
        return p * (2 * ndim)
    if len(p) == ndim:
        return p + p
    if len(p) == 2 * ndim:
        return p
    counts = sorted({1, ndim, 2 * ndim})
    allowed = ", ".join(str(c) for c in counts[:-1]) + f" or {counts[-1]}"
    raise TypeInferenceError(f"{_prefix(op)}padding must have {allowed} values, got {p}")


def window_span(n, k: int, dilation: int, pad):
    """How far a window of ``k`` taps ``dilation`` apart slides over ``n + pad`` elements (< 0: it does not fit)."""
    return n + pad - ((k - 1) * dilation + 1)


def pooled_size(span, stride: int, ceil_mode: bool):
    """Output extent of a pooling window whose window_span is ``span`` (ceil_mode: a last partial step counts)."""
    return (span + stride - 1) // stride + 1 if ceil_mode else span // stride + 1
