"""Upsampling by scale factors (TVM's ``topi.nn.upsampling``), built on resize2d."""
from __future__ import annotations

from ..image.resize import resize2d
from ..utils import get_const_tuple


def upsampling(data, scale_h, scale_w, layout="NCHW", method="nearest_neighbor", align_corners=False,
               output_shape=None):
    """Resize H and W by ``scale_h`` / ``scale_w`` (output ``round(in * scale)``)."""
    shape = get_const_tuple(data.shape)
    h, w = shape[layout.index("H")], shape[layout.index("W")]
    size = (int(round(h * scale_h)), int(round(w * scale_w))) if output_shape is None else output_shape
    if method[:2] == "bi":
        method = method[2:]  # "bilinear" -> "linear", "bicubic" -> "cubic"
    mode = "align_corners" if align_corners else "asymmetric"
    return resize2d(data, [0.0] * 4, size, layout, method, mode)
