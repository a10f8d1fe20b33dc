"""Shared helpers of the numpy references: padding tuples and argument normalization."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ...error import KilnError


def as_tuple(value, n: int, what: str = "value") -> tuple:
    """``3`` -> ``(3, 3)``; a sequence of length ``n`` is returned as a tuple."""
    if isinstance(value, (int, np.integer)):
        return (int(value),) * n
    value = tuple(int(v) for v in value)
    if len(value) == 1:
        return value * n
    if len(value) != n:
        raise KilnError(f"{what} needs 1 or {n} integers, got {value}")
    return value


def get_pad_tuple(padding, kernel: Sequence[int]) -> tuple:
    """TVM's 2-D padding convention -> ``(top, left, bottom, right)``.

    ``padding`` is an int, ``"VALID"``, ``"SAME"``, 2 ints (symmetric per axis) or 4 ints
    (top, left, bottom, right). ``kernel`` is the (dilated) kernel size used by ``"SAME"``.
    """
    if isinstance(padding, (tuple, list)):
        if len(padding) == 2:
            pad_h, pad_w = padding[0] * 2, padding[1] * 2
        elif len(padding) == 4:
            return tuple(int(p) for p in padding)
        else:
            raise KilnError(f"padding must have 2 or 4 entries, got {padding}")
    elif isinstance(padding, (int, np.integer)):
        pad_h = pad_w = int(padding) * 2
    elif padding == "VALID":
        pad_h = pad_w = 0
    elif padding == "SAME":
        pad_h, pad_w = kernel[0] - 1, kernel[1] - 1
    else:
        raise KilnError(f"unknown padding {padding!r}; expected an int, 2 or 4 ints, 'VALID' or 'SAME'")
    pad_top = (pad_h + 1) // 2
    pad_left = (pad_w + 1) // 2
    return pad_top, pad_left, pad_h - pad_top, pad_w - pad_left


def acc_dtype(dtype) -> np.dtype:
    """The dtype references accumulate in: float64 for floats, int64 for integers."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.dtype("float64")
    if dtype.kind in "iub":
        return np.dtype("int64")
    return dtype


def layout_perm(src: str, dst: str) -> list:
    """The transpose that takes an array in layout ``src`` to layout ``dst`` (same letters)."""
    if sorted(src) != sorted(dst):
        raise KilnError(f"layouts {src} and {dst} do not hold the same axes")
    return [src.index(c) for c in dst]
