"""Pooling references: max/avg with padding, dilation, ceil_mode, count_include_pad; adaptive pooling."""
from __future__ import annotations

import itertools
import math

import numpy as np

from ...error import KilnError
from .common import acc_dtype, layout_perm

_CHANNEL_FIRST = {3: "NCW", 4: "NCHW", 5: "NCDHW"}


def _to_channel_first(data, layout):
    base = _CHANNEL_FIRST.get(data.ndim)
    if base is None:
        raise KilnError(f"pooling supports 3-D to 5-D inputs, got shape {data.shape}")
    if layout is None or layout == base:
        return data, None
    return data.transpose(layout_perm(layout, base)), layout_perm(base, layout)


def poolnd_python(np_data, kernel, strides, dilation, padding_before, padding_after, pool_type,
                  count_include_pad=True, ceil_mode=False, dtype="float32", layout=None):
    """N-d max/avg pooling with TVM's semantics.

    The output size is ``floor`` (or ``ceil`` with ``ceil_mode``) of
    ``(in + pad_before + pad_after - dilated_kernel) / stride`` plus one. Max pooling ignores padding (a window of padding only gives -inf / the dtype's minimum).
    Average pooling divides by the window clipped to the padded input (``count_include_pad``) or by
    the number of real input elements in the window.
    """
    if pool_type not in ("max", "avg"):
        raise KilnError(f"pool_type must be 'max' or 'avg', got {pool_type!r}")
    data, back = _to_channel_first(np.asarray(np_data), layout)
    nsp = data.ndim - 2
    spatial = data.shape[2:]
    out_sp = []
    for i in range(nsp):
        span = spatial[i] + padding_before[i] + padding_after[i] - (kernel[i] - 1) * dilation[i] - 1
        out_sp.append((math.ceil(span / strides[i]) if ceil_mode else span // strides[i]) + 1)
    acc = acc_dtype(data.dtype)
    out = np.zeros(data.shape[:2] + tuple(out_sp), dtype=acc)
    for coord in itertools.product(*[range(o) for o in out_sp]):
        idx = [slice(None), slice(None)]
        n_real, n_padded = 1, 1
        for i, o in enumerate(coord):
            start = o * strides[i] - padding_before[i]
            taps = start + np.arange(kernel[i]) * dilation[i]
            inside_padded = taps[taps <= spatial[i] + padding_after[i] - 1]
            real = inside_padded[(inside_padded >= 0) & (inside_padded < spatial[i])]
            n_padded *= len(inside_padded)
            n_real *= len(real)
            idx.append(real)
        if n_real == 0:
            # a ceil-mode window that only sees padding: avg gives 0, max the padding value
            if pool_type == "max":
                out[(slice(None), slice(None)) + coord] = (-np.inf if data.dtype.kind == "f"
                                                           else np.iinfo(data.dtype).min)
            continue
        window = data[np.ix_(*[np.arange(data.shape[0]), np.arange(data.shape[1])] + idx[2:])]
        axes = tuple(range(2, data.ndim))
        out_idx = (slice(None), slice(None)) + coord
        if pool_type == "max":
            out[out_idx] = window.max(axis=axes)
        else:
            out[out_idx] = window.astype(acc).sum(axis=axes) / (n_padded if count_include_pad else n_real)
    out = out.astype(dtype)
    return out.transpose(back) if back is not None else out


def pool2d_python(data, kernel, strides, padding, pool_type, ceil_mode=False, count_include_pad=True,
                  layout="NCHW", dilation=(1, 1), dtype=None):
    """2-D pooling; ``padding`` is (top, left, bottom, right) or (pad_h, pad_w)."""
    if len(padding) == 2:
        padding = (padding[0], padding[1], padding[0], padding[1])
    return poolnd_python(data, kernel, strides, dilation, padding[:2], padding[2:], pool_type,
                         count_include_pad, ceil_mode, dtype or str(data.dtype), layout)


def pool1d_ncw_python(np_data, kernel, strides, padding, out_shape=None, pool_type="max",
                      count_include_pad=True, ceil_mode=False, dtype="float32", dilation=(1,)):
    """1-D pooling on NCW data; ``padding`` is (left, right)."""
    return poolnd_python(np_data, kernel, strides, dilation, padding[:1], padding[1:], pool_type,
                         count_include_pad, ceil_mode, dtype)


def pool3d_ncdhw_python(np_data, kernel, strides, padding, out_shape=None, pool_type="max",
                        count_include_pad=True, ceil_mode=False, dtype="float32", dilation=(1, 1, 1)):
    """3-D pooling on NCDHW data; ``padding`` is (front, top, left, back, bottom, right)."""
    return poolnd_python(np_data, kernel, strides, dilation, padding[:3], padding[3:], pool_type,
                         count_include_pad, ceil_mode, dtype)


def _adaptive_bounds(out_size, in_size):
    return [(int(np.floor(i * in_size / out_size)), int(np.ceil((i + 1) * in_size / out_size)))
            for i in range(out_size)]


def adaptive_pool(np_data, out_size, pool_type, layout):
    """Adaptive max/avg pooling (1-d to 3-d): output cell ``i`` covers ``[floor(i*I/O), ceil((i+1)*I/O))``."""
    if isinstance(out_size, (int, np.integer)):
        out_size = (int(out_size),)
    out_size = tuple(out_size)
    if pool_type not in ("max", "avg"):
        raise KilnError(f"pool_type must be 'max' or 'avg', got {pool_type!r}")
    data, back = _to_channel_first(np.asarray(np_data), layout)
    if len(out_size) != data.ndim - 2:
        raise KilnError(f"adaptive_pool: output size {out_size} does not fit input shape {np_data.shape}")
    op = np.max if pool_type == "max" else np.mean
    bounds = [_adaptive_bounds(o, i) for o, i in zip(out_size, data.shape[2:])]
    out = np.zeros(data.shape[:2] + out_size, dtype=data.dtype)
    axes = tuple(range(2, data.ndim))
    for coord in itertools.product(*[range(o) for o in out_size]):
        sl = tuple(slice(*bounds[i][c]) for i, c in enumerate(coord))
        out[(slice(None), slice(None)) + coord] = op(data[(slice(None), slice(None)) + sl], axis=axes)
    return out.transpose(back) if back is not None else out
