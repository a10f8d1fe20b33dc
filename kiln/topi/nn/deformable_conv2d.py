"""Deformable 2-D convolution, NCHW data / OIHW kernel (TVM's ``topi.nn.deformable_conv2d_nchw``): each kernel
tap reads the input at its regular position moved by a learned (dy, dx) offset, bilinearly interpolated; points
outside the input (beyond one pixel) read 0, taps of the interpolation outside the input read 0, as in
torchvision's ``deform_conv2d`` (without the modulation mask)."""
from __future__ import annotations

from ... import te
from ...error import KilnError
from ...tir import op as T
from ..utils import get_const_tuple

__all__ = ["deformable_conv2d_nchw"]


def _pair(v, what):
    v = (v,) if isinstance(v, int) else tuple(int(x) for x in get_const_tuple(v))
    if len(v) == 1:
        v = v * 2
    if len(v) not in (2, 4):
        raise KilnError(f"deformable_conv2d: {what} must have 1, 2 (or 4 for padding) values, got {v}")
    return v


def _bilinear(data, n, c, y, x, height, width, dt):
    """data[n, c] at the real point (y, x); 0 outside (-1, height) x (-1, width), out-of-range taps 0."""
    y0f, x0f = T.floor(y), T.floor(x)
    y0, x0 = T.cast(y0f, "int32"), T.cast(x0f, "int32")
    ly, lx = y - y0f, x - x0f
    one, zero = T.const(1.0, dt), T.const(0.0, dt)

    def tap(yi, xi):
        inside = T.all(yi >= 0, yi < height, xi >= 0, xi < width)
        yc = T.max(T.min(yi, height - 1), 0)
        xc = T.max(T.min(xi, width - 1), 0)
        return T.Select(inside, T.cast(data[n, c, yc, xc], dt), zero)
    v = ((one - ly) * (one - lx) * tap(y0, x0) + (one - ly) * lx * tap(y0, x0 + 1)
         + ly * (one - lx) * tap(y0 + 1, x0) + ly * lx * tap(y0 + 1, x0 + 1))
    valid = T.all(y > T.const(-1.0, dt), y < T.const(float(height), dt), x > T.const(-1.0, dt),
                  x < T.const(float(width), dt))
    return T.Select(valid, v, zero)


def deformable_conv2d_nchw(data, offset, kernel, strides, padding, dilation, deformable_groups=1, groups=1,
                           out_dtype=None):
    """data [N, C, H, W], offset [N, 2 * deformable_groups * KH * KW, OH, OW] (per group and tap: dy, dx),
    kernel [F, C // groups, KH, KW] -> [N, F, OH, OW]."""
    out_dtype = out_dtype or data.dtype
    n, c, h, w = get_const_tuple(data.shape)
    f, cg, kh, kw = get_const_tuple(kernel.shape)
    sh, sw = _pair(strides, "strides")
    dh, dw = _pair(dilation, "dilation")
    p = _pair(padding, "padding")
    pt, pl, pb, pr = p if len(p) == 4 else (p[0], p[1], p[0], p[1])
    if groups < 1 or c % groups or f % groups or c // groups != cg:
        raise KilnError(f"deformable_conv2d: data channels {c}, kernel {get_const_tuple(kernel.shape)} and "
                        f"groups={groups} do not fit")
    if deformable_groups < 1 or c % deformable_groups:
        raise KilnError(f"deformable_conv2d: {c} channels do not split into {deformable_groups} deformable groups")
    oh = (h + pt + pb - ((kh - 1) * dh + 1)) // sh + 1
    ow = (w + pl + pr - ((kw - 1) * dw + 1)) // sw + 1
    want = (n, 2 * deformable_groups * kh * kw, oh, ow)
    if tuple(get_const_tuple(offset.shape)) != want:
        raise KilnError(f"deformable_conv2d: offset has shape {get_const_tuple(offset.shape)}, expected {want}")
    dt = "float64" if "float64" in (data.dtype, offset.dtype) else "float32"
    per_dg = c // deformable_groups

    def sample(b, ch, i, j, y, x):
        k = ((ch // per_dg) * kh * kw + i * kw + j) * 2
        yy = T.cast(y * sh - pt + i * dh, dt) + T.cast(offset[b, k, y, x], dt)
        xx = T.cast(x * sw - pl + j * dw, dt) + T.cast(offset[b, k + 1, y, x], dt)
        return _bilinear(data, b, ch, yy, xx, h, w, dt)
    cols = te.compute((n, c, kh, kw, oh, ow), sample, name="data_deform", tag="data_deform")
    rc = te.reduce_axis((0, cg), name="rc")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    f_per_group = f // groups

    def body(b, ff, y, x):
        ch = rc if groups == 1 else (ff // f_per_group) * cg + rc
        return T.sum(T.cast(cols[b, ch, ry, rx, y, x], out_dtype) * T.cast(kernel[ff, rc, ry, rx], out_dtype),
                     axis=[rc, ry, rx])
    return te.compute((n, f, oh, ow), body, name="deformable_conv2d_nchw", tag="deformable_conv2d_nchw")
