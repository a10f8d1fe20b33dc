"""Constructors of the image ops (TVM's ``relay.image``)."""
from __future__ import annotations

from ....ir.op import Op
from ....runtime.dtype import dtype_str
from ...expr import Call, Constant
from ....ir.expr import RelayExpr
from ..dyn.image import resize2d as dyn_resize2d


def resize2d(data, size, roi=None, layout="NCHW", method="linear", coordinate_transformation_mode="half_pixel",
             rounding_method="", cubic_alpha=-0.5, cubic_exclude=0, extrapolation_value=0.0, out_dtype=None):
    """Resize the H and W axes of ``data`` to ``size`` (a Relay expression: dyn.image.resize2d)."""
    if isinstance(size, Constant):
        size = size.numpy().tolist()
    elif isinstance(size, RelayExpr):
        return dyn_resize2d(data, size, roi, layout, method, coordinate_transformation_mode, rounding_method,
                            cubic_alpha, cubic_exclude, extrapolation_value, out_dtype)
    size = [size, size] if isinstance(size, int) else [int(s) for s in size]
    op = Op.get("image.resize2d")
    attrs = op.make_attrs(size=size, roi=list(roi) if roi is not None else [0.0, 0.0, 0.0, 0.0], layout=layout,
                          method=method, coordinate_transformation_mode=coordinate_transformation_mode,
                          rounding_method=rounding_method, cubic_alpha=cubic_alpha, cubic_exclude=cubic_exclude,
                          extrapolation_value=extrapolation_value,
                          out_dtype=dtype_str(out_dtype) if out_dtype else "")
    return Call(op, [data], attrs)


def _resize_nd(name, n, data, size, roi, layout, method, coordinate_transformation_mode, rounding_method,
               cubic_alpha, cubic_exclude, extrapolation_value, out_dtype):
    if isinstance(size, Constant):
        size = size.numpy().tolist()
    size = [size] * n if isinstance(size, int) else [int(s) for s in size]
    op = Op.get(name)
    attrs = op.make_attrs(size=size, roi=list(roi) if roi is not None else [0.0] * (2 * n), layout=layout,
                          method=method, coordinate_transformation_mode=coordinate_transformation_mode,
                          rounding_method=rounding_method, cubic_alpha=cubic_alpha, cubic_exclude=cubic_exclude,
                          extrapolation_value=extrapolation_value,
                          out_dtype=dtype_str(out_dtype) if out_dtype else "")
    return Call(op, [data], attrs)


def resize1d(data, size, roi=None, layout="NCW", method="linear", coordinate_transformation_mode="half_pixel",
             rounding_method="", cubic_alpha=-0.5, cubic_exclude=0, extrapolation_value=0.0, out_dtype=None):
    """Resize the W axis of ``data`` to ``size`` (static sizes only)."""
    return _resize_nd("image.resize1d", 1, data, size, roi, layout, method, coordinate_transformation_mode,
                      rounding_method, cubic_alpha, cubic_exclude, extrapolation_value, out_dtype)


def resize3d(data, size, roi=None, layout="NCDHW", method="linear", coordinate_transformation_mode="half_pixel",
             rounding_method="", cubic_alpha=-0.5, cubic_exclude=0, extrapolation_value=0.0, out_dtype=None):
    """Resize the D, H and W axes of ``data`` to ``size`` (static sizes only)."""
    return _resize_nd("image.resize3d", 3, data, size, roi, layout, method, coordinate_transformation_mode,
                      rounding_method, cubic_alpha, cubic_exclude, extrapolation_value, out_dtype)
