"""Numpy reference of ROI align (TVM's ``topi.testing.roi_align_nchw_python``): the semantics of torchvision's
``roi_align`` with ``aligned=False`` (Mask R-CNN's): each ROI (batch index, x1, y1, x2, y2 in input coordinates
times ``spatial_scale``) is at least 1x1, split into ``pooled_size`` bins; each bin averages (mode "avg") or takes
the maximum of (mode "max") a grid of bilinear samples, ``sample_ratio`` per side, or ceil(roi size / bins) when
``sample_ratio <= 0``."""
from __future__ import annotations

import math

import numpy as np


def _bilinear(img, y, x):
    """img [C, H, W] at (y, x), torchvision's rules: 0 beyond one pixel outside, edges clamped."""
    _, h, w = img.shape
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return np.zeros(img.shape[0], "float64")
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = int(y), int(x)
    if y0 >= h - 1:
        y0 = y1 = h - 1
        y = float(y0)
    else:
        y1 = y0 + 1
    if x0 >= w - 1:
        x0 = x1 = w - 1
        x = float(x0)
    else:
        x1 = x0 + 1
    ly, lx = y - y0, x - x0
    hy, hx = 1.0 - ly, 1.0 - lx
    return hy * hx * img[:, y0, x0] + hy * lx * img[:, y0, x1] + ly * hx * img[:, y1, x0] + ly * lx * img[:, y1, x1]


def roi_align_nchw_python(a_np, rois_np, pooled_size, spatial_scale, sample_ratio, mode="avg"):
    """a_np [N, C, H, W], rois_np [R, 5] -> [R, C, PH, PW] (mode "avg" or "max"; also TVM's 0 / 1)."""
    mode = {0: "avg", 1: "max", b"avg": "avg", b"max": "max"}.get(mode, mode)
    ph, pw = (pooled_size, pooled_size) if isinstance(pooled_size, int) else tuple(int(v) for v in pooled_size)
    data = np.asarray(a_np, "float64")
    rois = np.asarray(rois_np, "float64")
    out = np.zeros((rois.shape[0], data.shape[1], ph, pw), "float64")
    for r, roi in enumerate(rois):
        img = data[int(roi[0])]
        x1, y1, x2, y2 = (v * spatial_scale for v in roi[1:])
        roi_h, roi_w = max(y2 - y1, 1.0), max(x2 - x1, 1.0)
        bin_h, bin_w = roi_h / ph, roi_w / pw
        gh = sample_ratio if sample_ratio > 0 else int(math.ceil(roi_h / ph))
        gw = sample_ratio if sample_ratio > 0 else int(math.ceil(roi_w / pw))
        for i in range(ph):
            for j in range(pw):
                samples = [_bilinear(img, y1 + i * bin_h + (iy + 0.5) * bin_h / gh,
                                     x1 + j * bin_w + (ix + 0.5) * bin_w / gw)
                           for iy in range(gh) for ix in range(gw)]
                if not samples:
                    continue
                out[r, :, i, j] = np.max(samples, axis=0) if mode == "max" else np.sum(samples, axis=0) / max(
                    gh * gw, 1)
    return out.astype(np.asarray(a_np).dtype)
