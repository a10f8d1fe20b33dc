"""Padding conventions shared by convolution and pooling (TVM's ``topi.nn.utils``)."""
from __future__ import annotations

from ...error import KilnError
from ..testing.common import get_pad_tuple as _pad2


def get_pad_tuple(padding, kernel):
    """2-D padding -> ``(top, left, bottom, right)``; see :func:`kiln.topi.testing.get_pad_tuple`."""
    return _pad2(padding, kernel)


def get_pad_tuple1d(padding, kernel):
    if isinstance(padding, (tuple, list)):
        if len(padding) == 1:
            return padding[0], padding[0]
        if len(padding) == 2:
            return padding[0], padding[1]
        raise KilnError(f"1-D padding needs 1 or 2 values, got {padding}")
    if isinstance(padding, int):
        return padding, padding
    if padding == "VALID":
        return 0, 0
    if padding == "SAME":
        total = kernel[0] - 1
        return (total + 1) // 2, total - (total + 1) // 2
    raise KilnError(f"unknown padding {padding!r}")


def infer_pad(padding, ndim: int):
    """Relay's padding attr (1, 2 or 2*ndim ints) -> (before, after) lists."""
    padding = [int(p) for p in padding]
    if len(padding) == 1:
        return padding * ndim, padding * ndim
    if len(padding) == ndim:
        return padding, padding
    if len(padding) == 2 * ndim:
        return padding[:ndim], padding[ndim:]
    raise KilnError(f"padding {padding} needs 1, {ndim} or {2 * ndim} values")
