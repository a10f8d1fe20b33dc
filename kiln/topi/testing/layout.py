"""Data layouts as TVM writes them ("NCHW", "NHWC", "NCHW8c", "OIHW4i8o") and a numpy converter."""
from __future__ import annotations

import re

import numpy as np

from ...error import KilnError

_TOKEN = re.compile(r"(\d*)([A-Za-z])")


def parse_layout(layout: str) -> list:
    """``"NCHW8c"`` -> ``[("N", None), ("C", None), ("H", None), ("W", None), ("c", 8)]``.

    Upper-case letters are primal axes; a lower-case letter with a factor splits its primal axis.
    """
    pos, axes = 0, []
    for m in _TOKEN.finditer(layout):
        if m.start() != pos:
            break
        pos = m.end()
        digits, letter = m.groups()
        if letter.isupper():
            if digits:
                raise KilnError(f"layout {layout!r}: a primal axis {letter} cannot carry a factor")
            axes.append((letter, None))
        else:
            if not digits or int(digits) <= 0:
                raise KilnError(f"layout {layout!r}: sub-axis {letter} needs a positive factor, e.g. 8{letter}")
            axes.append((letter, int(digits)))
    if pos != len(layout) or not axes:
        raise KilnError(f"cannot parse layout {layout!r}; expected e.g. 'NCHW', 'NHWC' or 'NCHW8c'")
    names = [a for a, _ in axes]
    if len(set(names)) != len(names):
        raise KilnError(f"layout {layout!r} repeats an axis")
    for name, f in axes:
        if f is not None and name.upper() not in names:
            raise KilnError(f"layout {layout!r}: sub-axis {name} has no primal axis {name.upper()}")
    return axes


def primal_letters(layout: str) -> str:
    return "".join(a for a, f in parse_layout(layout) if f is None)


def layout_transform_numpy(data: np.ndarray, src_layout: str, dst_layout: str) -> np.ndarray:
    """Re-lay ``data`` from ``src_layout`` to ``dst_layout`` (same primal axes)."""
    src, dst = parse_layout(src_layout), parse_layout(dst_layout)
    if data.ndim != len(src):
        raise KilnError(f"layout_transform: data of rank {data.ndim} does not match layout {src_layout}")
    src_primal = [a for a, f in src if f is None]
    dst_primal = [a for a, f in dst if f is None]
    if sorted(src_primal) != sorted(dst_primal):
        raise KilnError(f"layout_transform: {src_layout} and {dst_layout} have different primal axes")
    names = [a for a, _ in src]
    # 1. to the primal layout (src's primal order): bring each sub-axis next to its primal axis and merge
    order, shape = [], []
    for p in src_primal:
        order.append(names.index(p))
        size = data.shape[names.index(p)]
        if p.lower() in names:
            order.append(names.index(p.lower()))
            size *= data.shape[names.index(p.lower())]
        shape.append(size)
    primal = data.transpose(order).reshape(shape)
    # 2. split by dst's factors and order as dst
    factors = {a.upper(): f for a, f in dst if f is not None}
    split_names, split_shape = [], []
    for p, size in zip(src_primal, shape):
        f = factors.get(p)
        if f is None:
            split_names.append(p)
            split_shape.append(size)
        else:
            if size % f:
                raise KilnError(f"layout_transform: axis {p} of size {size} does not split by {f} ({dst_layout})")
            split_names += [p, p.lower()]
            split_shape += [size // f, f]
    split = primal.reshape(split_shape)
    return split.transpose([split_names.index(a) for a, _ in dst])
