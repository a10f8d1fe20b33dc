"""Pixel shuffles between channels and space (TVM's ``topi.nn.depth_to_space`` / ``space_to_depth``), NCHW."""
from __future__ import annotations

from ... import te
from ...error import KilnError
from .. import tag
from ..utils import get_const_tuple

__all__ = ["depth_to_space", "space_to_depth"]


def _check(data, block_size, layout, what):
    if layout != "NCHW":
        raise KilnError(f"{what}: kiln computes NCHW, got layout {layout!r}")
    shape = get_const_tuple(data.shape)
    if len(shape) != 4:
        raise KilnError(f"{what}: data must be 4-D NCHW, got shape {shape}")
    if block_size < 1:
        raise KilnError(f"{what}: block_size must be at least 1, got {block_size}")
    return shape


def depth_to_space(data, block_size, layout="NCHW", mode="DCR"):
    """[N, C, H, W] -> [N, C / b^2, H * b, W * b]; ``mode`` DCR (depth-column-row: the block offset is the
    outer part of the channel) or CRD (column-row-depth: the block offset is the inner part)."""
    b = int(block_size)
    n, c, h, w = _check(data, b, layout, "depth_to_space")
    if c % (b * b):
        raise KilnError(f"depth_to_space: {c} channels are not divisible by block_size^2 = {b * b}")
    if mode not in ("DCR", "CRD"):
        raise KilnError(f"depth_to_space: mode must be 'DCR' or 'CRD', got {mode!r}")
    oc = c // (b * b)

    def f(bn, ch, y, x):
        by, bx = y % b, x % b
        src = (by * b + bx) * oc + ch if mode == "DCR" else ch * b * b + by * b + bx
        return data[bn, src, y // b, x // b]
    return te.compute((n, oc, h * b, w * b), f, name="T_depth_to_space", tag=tag.INJECTIVE)


def space_to_depth(data, block_size, layout="NCHW"):
    """[N, C, H, W] -> [N, C * b^2, H / b, W / b]; output channel ``(by * b + bx) * C + c``."""
    b = int(block_size)
    n, c, h, w = _check(data, b, layout, "space_to_depth")
    if h % b or w % b:
        raise KilnError(f"space_to_depth: {h}x{w} is not divisible by block_size {b}")

    def f(bn, ch, y, x):
        off, src = ch // c, ch % c
        return data[bn, src, y * b + off // b, x * b + off % b]
    return te.compute((n, c * b * b, h // b, w // b), f, name="T_space_to_depth", tag=tag.INJECTIVE)
