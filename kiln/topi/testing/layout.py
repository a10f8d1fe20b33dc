"""Data layouts as TVM writes them ("NCHW", "NHWC", "NCHW8c", "OIHW4i8o") and a numpy converter."""
from __future__ import annotations

import numpy as np

from ...error import KilnError

from ...tir.layout import parse_layout  # noqa: E402  (the one layout parser)


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


def dense_pack_weight_python(weight: np.ndarray, bn: int) -> np.ndarray:
    """numpy reference of ``topi.x86.dense.pack_weight``: ``[N, K]`` -> ``[ceil(N / bn), K, bn]`` panels,
    zero beyond ``N`` (the pre-packed weight ``dense_pack.x86`` / ``nn.contrib_dense_pack`` take)."""
    n, k = weight.shape
    nb = -(-n // bn)
    padded = np.zeros((nb * bn, k), weight.dtype)
    padded[:n] = weight
    return padded.reshape(nb, bn, k).transpose(0, 2, 1).copy()
