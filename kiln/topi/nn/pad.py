"""Padding (TVM's ``topi.nn.pad`` / ``mirror_pad``): constant, edge and reflect modes."""
from __future__ import annotations

from ... import te
from ...error import KilnError
from ...tir import op as T
from .. import tag
from ..utils import get_const_tuple


def pad(data, pad_before, pad_after=None, pad_value=0.0, name="PadInput", attrs=None):
    """Constant padding; out-of-range reads become ``pad_value``."""
    shape = get_const_tuple(data.shape)
    n = len(shape)
    pad_before = list(get_const_tuple(pad_before))
    pad_after = list(get_const_tuple(pad_after)) if pad_after is not None else list(pad_before)
    if len(pad_before) != n or len(pad_after) != n:
        raise KilnError(f"pad: needs {n} before/after values for a rank-{n} tensor, got {pad_before}, {pad_after}")
    if all(b == 0 for b in pad_before) and all(a == 0 for a in pad_after):
        return data
    out_shape = [s + b + a for s, b, a in zip(shape, pad_before, pad_after)]
    value = pad_value if hasattr(pad_value, "dtype") else T.const(pad_value, data.dtype)
    value = T.cast(value, data.dtype)

    def f(*i):
        conds, idx = [], []
        for d in range(n):
            if pad_before[d] == 0 and pad_after[d] <= 0:
                idx.append(i[d])
                continue
            x = i[d] - pad_before[d]
            idx.append(x)
            if pad_before[d] > 0:
                conds.append(i[d] >= pad_before[d])
            if pad_after[d] > 0:
                conds.append(i[d] < pad_before[d] + shape[d])
        if not conds:
            return data(*idx)
        return T.if_then_else(T.all(*conds), data(*idx), value)
    return te.compute(out_shape, f, name=name, tag=tag.INJECTIVE + ",pad")


def mirror_pad(data, pad_before, pad_after=None, mode="SYMMETRIC", name="MirrorPadInput"):
    """Mirror padding: "REFLECT" (edge not repeated, numpy 'reflect') or "SYMMETRIC" (edge repeated)."""
    shape = get_const_tuple(data.shape)
    pad_before = list(get_const_tuple(pad_before))
    pad_after = list(get_const_tuple(pad_after)) if pad_after is not None else list(pad_before)
    mode = mode.upper()
    if mode not in ("REFLECT", "SYMMETRIC"):
        raise KilnError(f"mirror_pad: mode must be REFLECT or SYMMETRIC, got {mode!r}")
    off = 1 if mode == "REFLECT" else 0
    for d, (b, a) in enumerate(zip(pad_before, pad_after)):
        if max(b, a) > shape[d] - off:
            raise KilnError(f"mirror_pad ({mode}): padding {b}/{a} on axis {d} exceeds what size {shape[d]} allows")
    out_shape = [s + b + a for s, b, a in zip(shape, pad_before, pad_after)]

    def f(*i):
        idx = []
        for d in range(len(shape)):
            x = i[d] - pad_before[d]
            below = -x - 1 + off  # mirror of a negative index
            above = 2 * shape[d] - 1 - x - off  # mirror of an index past the end
            idx.append(T.Select(x < 0, below, T.Select(x >= shape[d], above, x)))
        return data(*idx)
    return te.compute(out_shape, f, name=name, tag=tag.INJECTIVE + ",pad")


def edge_pad(data, pad_before, pad_after=None, name="EdgePadInput"):
    """Replicate the border value (numpy 'edge')."""
    shape = get_const_tuple(data.shape)
    pad_before = list(get_const_tuple(pad_before))
    pad_after = list(get_const_tuple(pad_after)) if pad_after is not None else list(pad_before)
    out_shape = [s + b + a for s, b, a in zip(shape, pad_before, pad_after)]

    def f(*i):
        return data(*[T.min(T.max(i[d] - pad_before[d], 0), shape[d] - 1) for d in range(len(shape))])
    return te.compute(out_shape, f, name=name, tag=tag.INJECTIVE + ",pad")
