"""Image resize references: nearest / linear / cubic with TVM's coordinate transformation modes."""
from __future__ import annotations

import math

import numpy as np

from ...error import KilnError

_MODES = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "tf_half_pixel_for_nn")


def get_inx(x, image_width, target_width, coordinate_transformation_mode, scale=None):
    """Input coordinate of output coordinate ``x`` (array or scalar)."""
    x = np.asarray(x, dtype="float64")
    scale = image_width / target_width if scale is None else scale
    mode = coordinate_transformation_mode
    if mode == "half_pixel":
        return (x + 0.5) * scale - 0.5
    if mode == "pytorch_half_pixel":
        return (x + 0.5) * scale - 0.5 if target_width > 1 else np.zeros_like(x)
    if mode == "align_corners":
        return x * ((image_width - 1) / (target_width - 1)) if target_width > 1 else np.zeros_like(x)
    if mode == "asymmetric":
        return x * scale
    if mode == "tf_half_pixel_for_nn":
        return (x + 0.5) * scale
    raise KilnError(f"unsupported coordinate_transformation_mode {mode!r}; expected one of {_MODES}")


def _round(in_x, rounding_method, mode):
    if rounding_method in ("", None):
        rounding_method = "round" if mode == "align_corners" else "floor"
    if rounding_method in ("round", "round_prefer_ceil"):
        return np.floor(in_x + 0.5)
    if rounding_method == "round_prefer_floor":
        return np.ceil(in_x - 0.5)
    if rounding_method == "floor":
        return np.floor(in_x + 1e-5)
    if rounding_method == "ceil":
        return np.ceil(in_x - 1e-5)
    raise KilnError(f"unknown rounding_method {rounding_method!r}")


def _cubic_weights(t, alpha):
    t2, t3 = t * t, t * t * t
    return [alpha * (t3 - 2 * t2 + t),
            (alpha + 2) * t3 - (3 + alpha) * t2 + 1,
            -(alpha + 2) * t3 + (3 + 2 * alpha) * t2 - alpha * t,
            -alpha * t3 + alpha * t2]


def _resize_axis(data, axis, out_size, method, mode, rounding_method, cubic_alpha):
    """Resize one spatial axis; separable methods make N-d resizing a sequence of these."""
    in_size = data.shape[axis]
    src = get_inx(np.arange(out_size), in_size, out_size, mode)
    moved = np.moveaxis(data, axis, -1)
    if method == "nearest_neighbor":
        idx = np.clip(_round(src, rounding_method, mode).astype("int64"), 0, in_size - 1)
        out = moved[..., idx]
    elif method == "linear":
        x0 = np.floor(src)
        frac = src - x0
        i0 = np.clip(x0.astype("int64"), 0, in_size - 1)
        i1 = np.clip(x0.astype("int64") + 1, 0, in_size - 1)
        out = moved[..., i0] * (1 - frac) + moved[..., i1] * frac
    elif method == "cubic":
        x0 = np.floor(src)
        w = _cubic_weights(src - x0, cubic_alpha)
        out = 0
        for k in range(4):
            idx = np.clip(x0.astype("int64") + k - 1, 0, in_size - 1)
            out = out + moved[..., idx] * w[k]
    else:
        raise KilnError(f"unknown resize method {method!r}; expected nearest_neighbor, linear or cubic")
    return np.moveaxis(out, -1, axis)


def resize_nd(data, out_sizes, spatial_axes, method="nearest_neighbor",
              coordinate_transformation_mode="align_corners", rounding_method="", cubic_alpha=-0.5):
    """Resize ``data`` so that ``data.shape[spatial_axes[i]] == out_sizes[i]``."""
    out = data.astype("float64")
    for axis, size in zip(spatial_axes, out_sizes):
        out = _resize_axis(out, axis, int(size), method, coordinate_transformation_mode, rounding_method,
                           cubic_alpha)
    return out.astype(data.dtype)


def _out_sizes(shape, scale):
    return [int(round(i * s)) for i, s in zip(shape, scale)]


def resize1d_python(data, scale, layout="NCW", method="nearest_neighbor",
                    coordinate_transformation_mode="align_corners", rounding_method=""):
    """1-D resize by ``scale`` (a 1-tuple); output width ``round(w * scale)``."""
    axis = layout.index("W")
    return resize_nd(data, _out_sizes([data.shape[axis]], scale), [axis], method,
                     coordinate_transformation_mode, rounding_method)


def resize2d_python(data, scale, layout="NCHW", method="nearest_neighbor",
                    coordinate_transformation_mode="align_corners", rounding_method="", cubic_alpha=-0.5):
    """2-D resize by ``scale=(scale_h, scale_w)``; output size ``round(in * scale)`` (NCHW or NHWC)."""
    if layout not in ("NCHW", "NHWC"):
        raise KilnError(f"resize2d_python supports NCHW and NHWC, got {layout!r}")
    axes = [layout.index("H"), layout.index("W")]
    return resize_nd(data, _out_sizes([data.shape[a] for a in axes], scale), axes, method,
                     coordinate_transformation_mode, rounding_method, cubic_alpha)


def resize3d_python(data, scale, layout="NCDHW", method="nearest_neighbor",
                    coordinate_transformation_mode="align_corners", rounding_method=""):
    """3-D resize by ``scale=(d, h, w)``."""
    axes = [layout.index("D"), layout.index("H"), layout.index("W")]
    return resize_nd(data, _out_sizes([data.shape[a] for a in axes], scale), axes, method,
                     coordinate_transformation_mode, rounding_method)


def upsampling_python(data, scale, layout="NCHW"):
    """Nearest upsampling by integer-or-float ``scale=(scale_h, scale_w)``: ``out[y] = in[floor(y / s)]``."""
    axes = [layout.index("H"), layout.index("W")]
    out = data
    for axis, s in zip(axes, scale):
        n = data.shape[axis]
        size = int(round(n * s))
        idx = np.minimum(np.floor(np.arange(size) / s).astype("int64"), n - 1)
        out = np.take(out, idx, axis=axis)
    return out


def bilinear_resize_python(image, out_size, layout, coordinate_transformation_mode="align_corners"):
    """Bilinear resize to ``out_size=(h, w)``."""
    axes = [layout.index("H"), layout.index("W")]
    return resize_nd(image, out_size, axes, "linear", coordinate_transformation_mode)
