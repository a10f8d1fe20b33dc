"""ROI align, NCHW (TVM's ``topi.vision.rcnn.roi_align_nchw``; Mask R-CNN's op, torchvision's ``roi_align`` with
``aligned=False``). Each output bin reduces a grid of bilinear samples whose size depends on the ROI when
``sample_ratio <= 0`` (ceil(roi size / bins) per side): the reduction extent is read from ``rois`` at run time."""
from __future__ import annotations

from .... import te
from ....error import KilnError
from ....tir import op as T
from ...utils import get_const_tuple

__all__ = ["roi_align_nchw"]


def _mode(mode) -> str:
    m = {0: "avg", 1: "max", b"avg": "avg", b"max": "max", "avg": "avg", "max": "max"}.get(
        mode if not hasattr(mode, "value") else mode.value)
    if m is None:
        raise KilnError(f"roi_align: mode must be 'avg' or 'max' (or 0 / 1), got {mode!r}")
    return m


def _fdim(n, dt):
    """An extent as a float of ``dt`` (a constant, or a cast of a symbolic relay.Any extent)."""
    return T.const(float(n), dt) if isinstance(n, int) else T.cast(n, dt)


def _bilinear(data, b, c, y, x, height, width, dt):
    """data[b, c] at (y, x) with torchvision's rules: 0 beyond one pixel outside, coordinates clamped at 0,
    the last row/column repeated (every load index is clamped into the tensor)."""
    zero, one = T.const(0.0, dt), T.const(1.0, dt)
    valid = T.all(y >= T.const(-1.0, dt), y <= _fdim(height, dt), x >= T.const(-1.0, dt),
                  x <= _fdim(width, dt))
    yc, xc = T.max(y, zero), T.max(x, zero)
    y0 = T.min(T.cast(T.floor(yc), "int32"), height - 1)
    x0 = T.min(T.cast(T.floor(xc), "int32"), width - 1)
    y1, x1 = T.min(y0 + 1, height - 1), T.min(x0 + 1, width - 1)
    ly = T.min(yc - T.cast(y0, dt), one)
    lx = T.min(xc - T.cast(x0, dt), one)

    def at(yy, xx):
        return T.cast(data[b, c, yy, xx], dt)
    v = ((one - ly) * (one - lx) * at(y0, x0) + (one - ly) * lx * at(y0, x1) + ly * (one - lx) * at(y1, x0)
         + ly * lx * at(y1, x1))
    return T.Select(valid, v, zero)


def roi_align_nchw(data, rois, pooled_size, spatial_scale, mode="avg", sample_ratio=-1):
    """data [N, C, H, W], rois [R, 5] (batch index, x1, y1, x2, y2) -> [R, C, PH, PW]. ``mode``: "avg" / "max"
    (TVM's 0 / 1); ``sample_ratio``: samples per bin side, or <= 0 for ceil(roi size / pooled size)."""
    mode = _mode(mode)
    n, c, h, w = get_const_tuple(data.shape)
    rshape = get_const_tuple(rois.shape)
    if len(rshape) != 2 or rshape[1] != 5:
        raise KilnError(f"roi_align: rois must have shape [num_roi, 5], got {rshape}")
    num_roi = rshape[0]  # an int, or a symbolic extent (relay.Any)
    ph, pw = (pooled_size, pooled_size) if isinstance(pooled_size, int) else \
        tuple(int(v) for v in get_const_tuple(pooled_size))
    dt = data.dtype if data.dtype in ("float32", "float64") else "float32"
    scale = T.const(float(spatial_scale), dt)
    one = T.const(1.0, dt)
    half = T.const(0.5, dt)
    sample_ratio = int(sample_ratio)

    def box(r, k):
        return T.cast(rois[r, k], dt) * scale

    def body(r, ch, i, j):
        b = T.max(T.min(T.cast(rois[r, 0], "int32"), n - 1), 0)
        x1, y1, x2, y2 = box(r, 1), box(r, 2), box(r, 3), box(r, 4)
        roi_h, roi_w = T.max(y2 - y1, one), T.max(x2 - x1, one)
        bin_h, bin_w = roi_h / T.const(float(ph), dt), roi_w / T.const(float(pw), dt)
        if sample_ratio > 0:
            gh = gw = T.const(sample_ratio, "int32")
        else:
            gh = T.cast(T.ceil(bin_h), "int32")
            gw = T.cast(T.ceil(bin_w), "int32")
        ry = te.reduce_axis((0, gh), name="ry")
        rx = te.reduce_axis((0, gw), name="rx")
        y = y1 + T.cast(i, dt) * bin_h + (T.cast(ry, dt) + half) * bin_h / T.cast(gh, dt)
        x = x1 + T.cast(j, dt) * bin_w + (T.cast(rx, dt) + half) * bin_w / T.cast(gw, dt)
        v = _bilinear(data, b, ch, y, x, h, w, dt)
        if mode == "max":
            return te.max(v, axis=[ry, rx])
        return te.sum(v / T.cast(T.max(gh * gw, 1), dt), axis=[ry, rx])

    out = te.compute((num_roi, c, ph, pw), body, name="roi_align", tag="roi_align_nchw")
    if dt != data.dtype:
        out = te.compute(out.shape, lambda *idx: T.cast(out(*idx), data.dtype), name="roi_align_cast")
    return out
