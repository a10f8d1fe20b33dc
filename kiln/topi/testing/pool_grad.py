"""Reference gradients of 2-D max/avg pooling (the adjoints of ``pool2d_python``)."""
from __future__ import annotations

import math

import numpy as np

from ...error import KilnError


def pool2d_grad_nchw_python(grad, data, kernel, strides, padding, pool_type, ceil_mode=False,
                            count_include_pad=True, dilation=(1, 1)):
    """d(loss)/d(data) of NCHW pooling given d(loss)/d(output).

    Max pooling sends each output's gradient to the first maximum of its window (row-major order, as
    TVM's ``pool_grad``); average pooling spreads it over the window's real elements, divided as the
    forward op divides (``count_include_pad``: the window clipped to the padded input).
    """
    if pool_type not in ("max", "avg"):
        raise KilnError(f"pool_type must be 'max' or 'avg', got {pool_type!r}")
    data = np.asarray(data)
    grad = np.asarray(grad)
    pt, pl, pb, pr = padding if len(padding) == 4 else (padding[0], padding[1], padding[0], padding[1])
    h, w = data.shape[2:]
    out_sp = []
    for size, k, s, d, pad in ((h, kernel[0], strides[0], dilation[0], pt + pb),
                               (w, kernel[1], strides[1], dilation[1], pl + pr)):
        span = size + pad - (k - 1) * d - 1
        out_sp.append((math.ceil(span / s) if ceil_mode else span // s) + 1)
    if tuple(grad.shape) != tuple(data.shape[:2]) + tuple(out_sp):
        raise KilnError(f"pool2d_grad: the output gradient has shape {grad.shape}, expected "
                        f"{tuple(data.shape[:2]) + tuple(out_sp)}")
    acc = np.float64 if data.dtype == np.float64 else np.float32
    out = np.zeros(data.shape, dtype=acc)
    n_idx, c_idx = np.meshgrid(np.arange(data.shape[0]), np.arange(data.shape[1]), indexing="ij")
    for oh in range(out_sp[0]):
        for ow in range(out_sp[1]):
            taps = []
            n_padded = 1
            for o, s, k, d, before, after, size in ((oh, strides[0], kernel[0], dilation[0], pt, pb, h),
                                                    (ow, strides[1], kernel[1], dilation[1], pl, pr, w)):
                t = o * s - before + np.arange(k) * d
                t = t[t <= size + after - 1]
                n_padded *= len(t)
                taps.append(t[(t >= 0) & (t < size)])
            rows, cols = taps
            if len(rows) == 0 or len(cols) == 0:
                continue
            g = grad[:, :, oh, ow].astype(acc)
            if pool_type == "avg":
                div = n_padded if count_include_pad else len(rows) * len(cols)
                out[np.ix_(np.arange(data.shape[0]), np.arange(data.shape[1]), rows, cols)] += (g / div)[:, :, None,
                                                                                                         None]
            else:
                window = data[:, :, rows][:, :, :, cols].reshape(data.shape[0], data.shape[1], -1)
                first = window.argmax(axis=2)
                r = rows[first // len(cols)]
                c = cols[first % len(cols)]
                np.add.at(out, (n_idx, c_idx, r, c), g)
    return out.astype(data.dtype)
