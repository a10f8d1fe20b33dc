"""Registration of image.resize2d (type relation, pattern, numpy reference)."""
from __future__ import annotations

from ....error import OpNotImplemented, TypeInferenceError
from ....ir.attrs import Attrs, Field
from ....ir.op import OpPattern
from ....ir.type import TensorType
from .. import op_attrs as A
from .._layout import from_primal, to_primal
from ..type_relations import tensor_arg
from ....topi.testing.resize import resize_nd
from .._define import define_op, topi_fn

_METHODS = ("nearest_neighbor", "linear", "cubic")
_MODES = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "tf_half_pixel_for_nn")


def resize2d_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    d = to_primal(data.shape, attrs.layout)
    if set(d) != set("NCHW"):
        raise TypeInferenceError(f"resize2d: unsupported layout {attrs.layout}")
    if attrs.method not in _METHODS:
        raise TypeInferenceError(f"resize2d: method must be one of {_METHODS}, got {attrs.method!r}")
    if attrs.coordinate_transformation_mode not in _MODES:
        if attrs.coordinate_transformation_mode == "tf_crop_and_resize":
            raise OpNotImplemented("resize2d: coordinate_transformation_mode 'tf_crop_and_resize' is not "
                                   "implemented in kiln")
        raise TypeInferenceError(f"resize2d: coordinate_transformation_mode must be one of {_MODES}, got "
                                 f"{attrs.coordinate_transformation_mode!r}")
    if attrs.size is None or len(attrs.size) != 2 or min(attrs.size) <= 0:
        raise TypeInferenceError(f"resize2d: size must be two positive integers, got {attrs.size}")
    shape = from_primal({"N": d["N"], "C": d["C"], "H": attrs.size[0], "W": attrs.size[1]}, attrs.layout)
    return TensorType(shape, attrs.out_dtype or data.dtype)


def resize2d_ref(attrs, inputs, out_type):
    x = inputs[0]
    layout = attrs.layout
    axes = [layout.index("H"), layout.index("W")]
    return resize_nd(x.astype("float64"), list(attrs.size), axes, attrs.method, attrs.coordinate_transformation_mode,
                     attrs.rounding_method, attrs.cubic_alpha)


define_op("image.resize2d", num_inputs=1, attrs=A.Resize2DAttrs, rel=resize2d_rel, rel_name="Resize2D",
          pattern=OpPattern.INJECTIVE, reference=resize2d_ref, level=5)


# -- resize1d / resize3d (NCW / NCDHW) -------------------------------------------------------------------------
def _floats(v):
    return tuple(float(x) for x in v)


class Resize1DAttrs(Attrs):
    type_key = "relay.attrs.Resize1DAttrs"
    fields = dict(A.Resize2DAttrs.fields, layout="NCW", roi=Field((0.0, 0.0), _floats))


class Resize3DAttrs(Attrs):
    type_key = "relay.attrs.Resize3DAttrs"
    fields = dict(A.Resize2DAttrs.fields, layout="NCDHW", roi=Field((0.0,) * 6, _floats))


def _resize_nd_rel(letters):
    name = f"resize{len(letters)}d"

    def rel(arg_types, attrs):
        data = tensor_arg(arg_types, 0, "data")
        layout = attrs.layout
        if sorted(layout) != sorted("NC" + letters):
            raise TypeInferenceError(f"{name}: unsupported layout {layout}; expected a permutation of NC{letters}")
        if len(data.shape) != len(layout):
            raise TypeInferenceError(f"{name}: data of rank {len(data.shape)} does not match layout {layout}")
        if attrs.method not in _METHODS:
            raise TypeInferenceError(f"{name}: method must be one of {_METHODS}, got {attrs.method!r}")
        if attrs.coordinate_transformation_mode not in _MODES:
            raise TypeInferenceError(f"{name}: coordinate_transformation_mode must be one of {_MODES}, got "
                                     f"{attrs.coordinate_transformation_mode!r}")
        if attrs.size is None or len(attrs.size) != len(letters) or min(attrs.size) <= 0:
            raise TypeInferenceError(f"{name}: size must be {len(letters)} positive integers, got {attrs.size}")
        shape = list(data.shape)
        for c, s in zip(letters, attrs.size):
            shape[layout.index(c)] = int(s)
        return TensorType(shape, attrs.out_dtype or data.dtype)
    return rel


def _resize_nd_ref(letters):
    def ref(attrs, inputs, out_type):
        axes = [attrs.layout.index(c) for c in letters]
        return resize_nd(inputs[0].astype("float64"), list(attrs.size), axes, attrs.method,
                         attrs.coordinate_transformation_mode, attrs.rounding_method, attrs.cubic_alpha)
    return ref


def _resize_nd_compute(letters):
    def compute(attrs, inputs, out_type):
        name = f"resize{len(letters)}d"
        fn = topi_fn(f"image.{name}", f"image.{name}")
        return [fn(inputs[0], list(attrs.roi), list(attrs.size), attrs.layout, attrs.method,
                   attrs.coordinate_transformation_mode, attrs.rounding_method, attrs.cubic_alpha,
                   attrs.cubic_exclude, attrs.extrapolation_value, attrs.out_dtype or out_type.dtype)]
    return compute


define_op("image.resize1d", num_inputs=1, attrs=Resize1DAttrs, rel=_resize_nd_rel("W"), rel_name="Resize1D",
          pattern=OpPattern.INJECTIVE, reference=_resize_nd_ref("W"), compute=_resize_nd_compute("W"), level=5)
define_op("image.resize3d", num_inputs=1, attrs=Resize3DAttrs, rel=_resize_nd_rel("DHW"), rel_name="Resize3D",
          pattern=OpPattern.INJECTIVE, reference=_resize_nd_ref("DHW"), compute=_resize_nd_compute("DHW"), level=5)
