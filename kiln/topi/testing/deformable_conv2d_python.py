"""numpy reference of deformable 2-D convolution, NCHW / OIHW (TVM's
``topi.testing.deformable_conv2d_nchw_python``): torchvision's bilinear sampling, no modulation mask."""
from __future__ import annotations

import numpy as np


def _bilinear(img, y, x):
    """img [H, W] at real points y, x (arrays of one shape); 0 outside (-1, H) x (-1, W)."""
    h, w = img.shape
    y0, x0 = np.floor(y).astype(np.int64), np.floor(x).astype(np.int64)
    ly, lx = y - y0, x - x0
    out = np.zeros(y.shape, dtype=np.float64)
    for dy, dx, wt in ((0, 0, (1 - ly) * (1 - lx)), (0, 1, (1 - ly) * lx), (1, 0, ly * (1 - lx)), (1, 1, ly * lx)):
        yi, xi = y0 + dy, x0 + dx
        ok = (yi >= 0) & (yi < h) & (xi >= 0) & (xi < w)
        out += np.where(ok, img[np.clip(yi, 0, h - 1), np.clip(xi, 0, w - 1)], 0.0) * wt
    valid = (y > -1) & (y < h) & (x > -1) & (x < w)
    return np.where(valid, out, 0.0)


def deformable_conv2d_nchw_python(data, offset, kernel, stride, padding, dilation, deformable_groups=1, groups=1):
    n, c, h, w = data.shape
    f, cg, kh, kw = kernel.shape
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    dh, dw = (dilation, dilation) if isinstance(dilation, int) else dilation
    p = (padding, padding) if isinstance(padding, int) else tuple(padding)
    pt, pl = p[0], p[1]
    oh, ow = offset.shape[2], offset.shape[3]
    oy, ox = np.meshgrid(np.arange(oh), np.arange(ow), indexing="ij")
    per_dg = c // deformable_groups
    cols = np.zeros((n, c, kh, kw, oh, ow), dtype=np.float64)
    for b in range(n):
        for ch in range(c):
            g = ch // per_dg
            for i in range(kh):
                for j in range(kw):
                    k = (g * kh * kw + i * kw + j) * 2
                    y = oy * sh - pt + i * dh + offset[b, k].astype(np.float64)
                    x = ox * sw - pl + j * dw + offset[b, k + 1].astype(np.float64)
                    cols[b, ch, i, j] = _bilinear(data[b, ch].astype(np.float64), y, x)
    out = np.zeros((n, f, oh, ow), dtype=np.float64)
    fg = f // groups
    for g in range(groups):
        col = cols[:, g * cg:(g + 1) * cg]                                  # [n, cg, kh, kw, oh, ow]
        ker = kernel[g * fg:(g + 1) * fg].astype(np.float64)                # [fg, cg, kh, kw]
        out[:, g * fg:(g + 1) * fg] = np.einsum("bcijyx,fcij->bfyx", col, ker)
    return out.astype(data.dtype)
