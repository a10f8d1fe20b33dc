"""References for indexing transforms: gather, gather_nd, one_hot, strided_slice and friends."""
from __future__ import annotations

import numpy as np

from ...error import KilnError
from .layout import layout_transform_numpy


def gather_python(data, axis, indices):
    """``out[i][j][k] = data[i][indices[i][j][k]][k]`` for axis 1 (np.take_along_axis)."""
    if data.ndim != indices.ndim:
        raise KilnError(f"gather: data rank {data.ndim} differs from indices rank {indices.ndim}")
    return np.take_along_axis(data, indices.astype("int64"), axis=axis)


def gather_nd_python(a_np, indices_np):
    """``out[y...] = a[indices[0][y...], ..., indices[M-1][y...], ...]``."""
    m = indices_np.shape[0]
    return a_np[tuple(indices_np[i].astype("int64") for i in range(m))]


def one_hot(indices, on_value, off_value, depth, axis, dtype):
    """One-hot encoding with the new axis of size ``depth`` inserted at ``axis`` (-1: last)."""
    indices = np.asarray(indices)
    axis = indices.ndim if axis == -1 else axis
    hot = np.expand_dims(indices, axis) == np.arange(depth).reshape(
        [depth if i == axis else 1 for i in range(indices.ndim + 1)])
    return np.where(hot, on_value, off_value).astype(dtype)


def strided_slice_python(data, begin, end, strides, slice_mode="end", axes=None):
    """Numpy slicing with TVM's argument forms (lists shorter than the rank, ``axes``, ``slice_mode="size"``)."""
    strides = [] if strides is None else list(strides)
    begin, end = list(begin), list(end)
    if axes is not None:
        rank = data.ndim
        nb, ne, ns = [0] * rank, list(data.shape), [1] * rank
        for i, ax in enumerate(axes):
            nb[ax], ne[ax] = begin[i], end[i]
            if i < len(strides):
                ns[ax] = strides[i]
        begin, end, strides = nb, ne, ns
    slices = []
    for i in range(data.ndim):
        b = begin[i] if i < len(begin) else None
        e = end[i] if i < len(end) else None
        s = strides[i] if i < len(strides) else None
        if slice_mode == "size":
            s = 1
            b = 0 if b is None else b
            if e is None or e < 0:
                e = None
            else:
                e = b + e
        slices.append(slice(b, e, s))
    return data[tuple(slices)]


def strided_set_python(data, v, begin, end, strides):
    """A copy of ``data`` with ``data[begin:end:strides] = v``."""
    out = data.copy()
    slices = [slice(b, e, s) for b, e, s in zip(begin, end, strides)]
    out[tuple(slices)] = v
    return out


def slice_axis_python(data, axis, begin, end=None):
    """``data[..., begin:end, ...]`` along ``axis``."""
    sl = [slice(None)] * data.ndim
    sl[axis] = slice(begin, end)
    return data[tuple(sl)]


def sequence_mask(data, valid_length, mask_value, axis):
    """Mask entries whose position along ``axis`` (0 or 1) is at or beyond their batch's valid length."""
    if axis not in (0, 1):
        raise KilnError(f"sequence_mask: axis must be 0 or 1, got {axis}")
    max_len = data.shape[axis]
    batch_axis = 1 - axis
    pos = np.arange(max_len).reshape([-1 if i == axis else 1 for i in range(2)])
    lens = np.asarray(valid_length).reshape([-1 if i == batch_axis else 1 for i in range(2)])
    mask = (pos < lens).reshape(data.shape[:2] + (1,) * (data.ndim - 2))
    return np.where(mask, data, mask_value).astype(data.dtype)


def take_python(a, indices, axis=None, mode="clip"):
    """``relay.take`` reference: modes "clip", "wrap" and "fast" (fast assumes indices are in range)."""
    size = a.size if axis is None else a.shape[axis]
    idx = np.asarray(indices).astype("int64")
    if mode == "wrap":
        idx = np.mod(idx, size)
    elif mode in ("clip", "fast"):
        idx = np.clip(idx, 0, size - 1) if mode == "clip" else np.where(idx < 0, idx + size, idx)
    else:
        raise KilnError(f"take: mode must be 'clip', 'wrap' or 'fast', got {mode!r}")
    return np.take(a, idx, axis=axis)


def layout_transform_python(data, src_layout: str, dst_layout: str):
    """Convert between layouts such as NCHW, NHWC and NCHW{x}c (sub-axes as lowercase with a factor)."""
    return layout_transform_numpy(data, src_layout, dst_layout)
