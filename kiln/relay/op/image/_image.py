"""Registration of image.resize2d (type relation, pattern, numpy reference)."""
from __future__ import annotations

from ....error import OpNotImplemented, TypeInferenceError
from ....ir.op import OpPattern
from ....ir.type import TensorType
from .. import op_attrs as A
from .._define import define_op
from .._layout import from_primal, to_primal
from ..type_relations import tensor_arg

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
    from ....topi.testing.resize import resize_nd
    x = inputs[0]
    layout = attrs.layout
    axes = [layout.index("H"), layout.index("W")]
    return resize_nd(x.astype("float64"), list(attrs.size), axes, attrs.method, attrs.coordinate_transformation_mode,
                     attrs.rounding_method, attrs.cubic_alpha)


define_op("image.resize2d", num_inputs=1, attrs=A.Resize2DAttrs, rel=resize2d_rel, rel_name="Resize2D",
          pattern=OpPattern.INJECTIVE, reference=resize2d_ref, level=5)
