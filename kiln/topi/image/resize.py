"""Image resizing (TVM's ``topi.image.resize1d/2d``): nearest, linear and cubic interpolation."""
from __future__ import annotations

from ... import te
from ...error import KilnError
from ...tir import op as T
from ..utils import get_const_tuple

_MODES = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "tf_half_pixel_for_nn")


def get_inx(x, image_width, target_width, coordinate_transformation_mode, dtype="float32"):
    """Input coordinate (float expression) of output coordinate ``x``.

    The ratio of the sizes is applied as ``(x * in) / out``: an exact product, then one correctly
    rounded division. Multiplying by a rounded ``in / out`` instead lands beside exact half-way points
    (``3.5 * float(2/7)`` is not ``1``), and how far beside depends on whether the C compiler contracts
    the multiply and the following add into an FMA, which differs with the vector width it picks: the
    nearest-neighbour tie rules then chose a different pixel on AVX2 and AVX-512 hosts.
    """
    xf = T.cast(x, dtype)
    mode = coordinate_transformation_mode

    def ratio(num, n_in, n_out):
        def f(n):  # a constant, or a cast of a symbolic (relay.Any) extent
            return T.const(float(n), dtype) if isinstance(n, (int, float)) else T.cast(n, dtype)
        return (num * f(n_in)) / f(n_out)
    if mode == "half_pixel":
        return ratio(xf + T.const(0.5, dtype), image_width, target_width) - T.const(0.5, dtype)
    if mode == "pytorch_half_pixel":
        if target_width <= 1:
            return T.const(0.0, dtype)
        return ratio(xf + T.const(0.5, dtype), image_width, target_width) - T.const(0.5, dtype)
    if mode == "align_corners":
        if target_width <= 1:
            return T.const(0.0, dtype)
        return ratio(xf, image_width - 1, target_width - 1)
    if mode == "asymmetric":
        return ratio(xf, image_width, target_width)
    if mode == "tf_half_pixel_for_nn":
        return ratio(xf + T.const(0.5, dtype), image_width, target_width)
    raise KilnError(f"resize: unsupported coordinate_transformation_mode {mode!r}; expected one of {_MODES}")


def get_closest_index(in_x, rounding_method, mode):
    if rounding_method in ("", None):
        rounding_method = "round" if mode == "align_corners" else "floor"
    dt = in_x.dtype
    if rounding_method in ("round", "round_prefer_ceil"):
        v = T.floor(in_x + T.const(0.5, dt))
    elif rounding_method == "round_prefer_floor":
        v = T.ceil(in_x - T.const(0.5, dt))
    elif rounding_method == "floor":
        v = T.floor(in_x + T.const(1e-5, dt))
    elif rounding_method == "ceil":
        v = T.ceil(in_x - T.const(1e-5, dt))
    else:
        raise KilnError(f"resize: unknown rounding_method {rounding_method!r}")
    return T.cast(v, "int32")


def _clamp(i, n):
    return T.min(T.max(i, 0), n - 1)


def _cubic_weights(t, alpha, dt):
    a = T.const(alpha, dt)
    t2, t3 = t * t, t * t * t
    one, two, three = T.const(1.0, dt), T.const(2.0, dt), T.const(3.0, dt)
    return [a * (t3 - two * t2 + t),
            (a + two) * t3 - (three + a) * t2 + one,
            -(a + two) * t3 + (three + two * a) * t2 - a * t,
            -a * t3 + a * t2]


def _interp_axis_terms(o, in_size, out_size, method, mode, rounding_method, alpha, dt):
    """For one spatial axis: a list of (index, weight) whose weighted sum interpolates."""
    in_x = get_inx(o, in_size, out_size, mode, dt)
    if method == "nearest_neighbor":
        return [(_clamp(get_closest_index(in_x, rounding_method, mode), in_size), None)]
    x0f = T.floor(in_x)
    x0 = T.cast(x0f, "int32")
    frac = in_x - x0f
    if method == "linear":
        return [(_clamp(x0, in_size), T.const(1.0, dt) - frac), (_clamp(x0 + 1, in_size), frac)]
    if method == "cubic":
        w = _cubic_weights(frac, alpha, dt)
        return [(_clamp(x0 + (k - 1), in_size), w[k]) for k in range(4)]
    raise KilnError(f"resize: unknown method {method!r}; expected nearest_neighbor, linear or cubic")


def _resize_nd(data, axes, out_sizes, method, mode, rounding_method, alpha, out_dtype, name):
    shape = get_const_tuple(data.shape)
    out_shape = list(shape)
    for a, s in zip(axes, out_sizes):
        out_shape[a] = int(s)
    dt = "float64" if data.dtype == "float64" else "float32"

    def f(*i):
        terms = [_interp_axis_terms(i[a], shape[a], int(s), method, mode, rounding_method, alpha, dt)
                 for a, s in zip(axes, out_sizes)]
        total = None

        def rec(j, idx, weight):
            nonlocal total
            if j == len(axes):
                v = T.cast(data(*idx), dt)
                v = v if weight is None else v * weight
                total = v if total is None else total + v
                return
            for (x, w) in terms[j]:
                nidx = list(idx)
                nidx[axes[j]] = x
                rec(j + 1, nidx, w if weight is None else (weight if w is None else weight * w))
        rec(0, list(i), None)
        return T.cast(total, out_dtype or data.dtype)
    return te.compute(out_shape, f, name=name, tag="resize")


def _layout_axes(layout, letters):
    if any(c not in layout for c in letters):
        raise KilnError(f"resize: layout {layout!r} lacks the axes {letters}")
    return [layout.index(c) for c in letters]


def resize2d(data, roi, size, layout="NCHW", method="linear", coordinate_transformation_mode="half_pixel",
             rounding_method="", bicubic_alpha=-0.5, bicubic_exclude=0, extrapolation_value=0.0, out_dtype=None,
             output_shape=None):
    """Resize the H and W axes to ``size=(out_h, out_w)``."""
    if coordinate_transformation_mode == "tf_crop_and_resize":
        raise KilnError("resize2d: coordinate_transformation_mode 'tf_crop_and_resize' is not implemented in kiln")
    if bicubic_exclude:
        raise KilnError("resize2d: bicubic_exclude=1 is not implemented in kiln")
    size = [int(s) for s in get_const_tuple(size)]
    return _resize_nd(data, _layout_axes(layout, "HW"), size, method, coordinate_transformation_mode,
                      rounding_method, bicubic_alpha, out_dtype, "resize")


def resize1d(data, roi, size, layout="NCW", method="linear", coordinate_transformation_mode="half_pixel",
             rounding_method="", bicubic_alpha=-0.5, bicubic_exclude=0, extrapolation_value=0.0, out_dtype=None,
             output_shape=None):
    size = [int(s) for s in get_const_tuple(size)]
    return _resize_nd(data, _layout_axes(layout, "W"), size, method, coordinate_transformation_mode,
                      rounding_method, bicubic_alpha, out_dtype, "resize")


def resize3d(data, roi, size, layout="NCDHW", method="linear", coordinate_transformation_mode="half_pixel",
             rounding_method="", bicubic_alpha=-0.5, bicubic_exclude=0, extrapolation_value=0.0, out_dtype=None,
             output_shape=None):
    """Resize the D, H and W axes to ``size=(out_d, out_h, out_w)``."""
    if coordinate_transformation_mode == "tf_crop_and_resize":
        raise KilnError("resize3d: coordinate_transformation_mode 'tf_crop_and_resize' is not implemented in kiln")
    size = [int(s) for s in get_const_tuple(size)]
    return _resize_nd(data, _layout_axes(layout, "DHW"), size, method, coordinate_transformation_mode,
                      rounding_method, bicubic_alpha, out_dtype, "resize")
