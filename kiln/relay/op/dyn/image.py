"""``dyn.image.resize2d``: the output size is a run-time tensor ``(out_h, out_w)``."""
from __future__ import annotations

import numpy as np

from ....error import TypeInferenceError
from ....ir.type import TensorType
from ....tir.expr import Any
from .. import op_attrs as A
from ..type_relations import tensor_arg
from ._common import call, define_dyn_op, operand_length
from ....ir.op import Op
from .... import tir, te
from ....topi.image.resize import _clamp, _cubic_weights, get_closest_index
from ....topi.utils import get_const_tuple
from ....runtime.dtype import dtype_str
from ...expr import RelayExpr, const

__all__ = ["resize2d"]


def _rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    if operand_length(arg_types, 1, "size", "dyn.image.resize2d") != 2:
        raise TypeInferenceError("dyn.image.resize2d: size must hold two values (out_h, out_w)")
    shape = list(t.shape)
    for c in "HW":
        shape[attrs.layout.index(c)] = Any()
    return TensorType(tuple(shape), attrs.out_dtype or t.dtype)


def _static_attrs(attrs, size):
    op_attrs = {f: getattr(attrs, f) for f in type(attrs).fields}
    op_attrs["size"] = tuple(int(s) for s in size)
    return A.Resize2DAttrs(**op_attrs)


def _ref(attrs, inputs, out_type):
    size = [int(s) for s in np.asarray(inputs[1]).reshape(-1)]
    static = Op.get("image.resize2d").get_attr("FReference")
    shape = list(inputs[0].shape)
    shape[attrs.layout.index("H")], shape[attrs.layout.index("W")] = size
    return static(_static_attrs(attrs, size), inputs[:1], TensorType(tuple(shape), out_type.dtype))


def _as_float(n, dt):
    """``n`` (a static size or a run-time extent) as a float of ``dt``."""
    return tir.const(float(n), dt) if isinstance(n, int) else tir.cast(n, dt)


def _inx(x, n_in, n_out, mode, dt):
    """Input coordinate of output coordinate ``x`` for a run-time output size ``n_out`` (topi's rule)."""
    xf = tir.cast(x, dt)
    fin, fout = _as_float(n_in, dt), tir.cast(n_out, dt)
    half = tir.const(0.5, dt)
    if mode == "half_pixel":
        return (xf + half) * fin / fout - half
    if mode == "pytorch_half_pixel":
        return tir.Select(n_out > 1, (xf + half) * fin / fout - half, tir.const(0.0, dt))
    if mode == "align_corners":
        return tir.Select(n_out > 1, xf * _as_float(n_in - 1, dt) / tir.cast(tir.max(n_out - 1, 1), dt),
                          tir.const(0.0, dt))
    if mode == "asymmetric":
        return xf * fin / fout
    if mode == "tf_half_pixel_for_nn":
        return (xf + half) * fin / fout
    raise TypeInferenceError(f"dyn.image.resize2d: unsupported coordinate_transformation_mode {mode!r}")


def _compute(attrs, inputs, out_type):
    data = inputs[0]
    shape = get_const_tuple(data.shape)
    axes = [attrs.layout.index("H"), attrs.layout.index("W")]
    # a run-time input H/W (an Any dim lowered to a shape variable) is read as an int32 extent
    shape = [s if isinstance(s, int) else tir.cast(s, "int32") if s.dtype != "int32" else s for s in shape]
    out_shape = list(out_type.shape)
    dt = "float64" if data.dtype == "float64" else "float32"
    method, mode = attrs.method, attrs.coordinate_transformation_mode

    def terms(o, n_in, n_out):
        in_x = _inx(o, n_in, tir.cast(n_out, o.dtype) if n_out.dtype != o.dtype else n_out, mode, dt)
        if method == "nearest_neighbor":
            return [(_clamp(get_closest_index(in_x, attrs.rounding_method, mode), n_in), None)]
        x0f = tir.floor(in_x)
        x0 = tir.cast(x0f, "int32")
        frac = in_x - x0f
        if method == "linear":
            return [(_clamp(x0, n_in), tir.const(1.0, dt) - frac), (_clamp(x0 + 1, n_in), frac)]
        if method == "cubic":
            w = _cubic_weights(frac, attrs.cubic_alpha, dt)
            return [(_clamp(x0 + (k - 1), n_in), w[k]) for k in range(4)]
        raise TypeInferenceError(f"dyn.image.resize2d: unknown method {method!r}")

    def f(*i):
        th, tw = terms(i[axes[0]], shape[axes[0]], out_shape[axes[0]]), terms(i[axes[1]], shape[axes[1]],
                                                                             out_shape[axes[1]])
        total = None
        for yh, wh in th:
            for xw, ww in tw:
                idx = list(i)
                idx[axes[0]], idx[axes[1]] = yh, xw
                v = tir.cast(data(*idx), dt)
                w = wh if ww is None else (ww if wh is None else wh * ww)
                v = v if w is None else v * w
                total = v if total is None else total + v
        return tir.cast(total, str(out_type.dtype))
    return [te.compute(out_shape, f, name="T_dyn_resize2d")]


define_dyn_op("dyn.image.resize2d", args=("data", "size", "roi"), attrs=A.Resize2DAttrs, rel=_rel,
              reference=_ref, compute=_compute)


def resize2d(data, size, roi=None, layout="NCHW", method="linear", coordinate_transformation_mode="half_pixel",
             rounding_method="", cubic_alpha=-0.5, cubic_exclude=0, extrapolation_value=0.0, out_dtype=None):
    if roi is None or not isinstance(roi, RelayExpr):
        roi = const(np.asarray(roi if roi is not None else [0.0] * 4, dtype="float32"))
    return call("dyn.image.resize2d", [data, size, roi], size=None, layout=layout, method=method,
                coordinate_transformation_mode=coordinate_transformation_mode, rounding_method=rounding_method,
                cubic_alpha=cubic_alpha, cubic_exclude=cubic_exclude, extrapolation_value=extrapolation_value,
                out_dtype=dtype_str(out_dtype) if out_dtype else "")
