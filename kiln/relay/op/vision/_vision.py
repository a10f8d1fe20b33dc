"""``vision.roi_align`` (TVM's ROIAlign): data [N, C, H, W], rois [R, 5] -> [R, C, PH, PW]; computed by
``topi.vision.roi_align_nchw``, referenced by ``topi.testing.roi_align_nchw_python``."""
from __future__ import annotations

from ....error import TypeInferenceError
from ....ir.attrs import Attrs, Field
from ....ir.op import OpPattern
from ....ir.type import TensorType
from ....topi.testing import roi_align_nchw_python
from .. import op_attrs as A
from .._define import define_op, topi_compute
from ..type_relations import shape_text, tensor_arg


class ROIAlignAttrs(Attrs):
    type_key = "relay.attrs.ROIAlignAttrs"
    fields = {"pooled_size": Field(None, A._int_tuple), "spatial_scale": Field(1.0, float),
              "sample_ratio": Field(-1, int), "layout": "NCHW", "mode": "avg"}


def _pooled(attrs):
    p = tuple(attrs.pooled_size)
    if len(p) == 1:
        p = p * 2
    if len(p) != 2 or min(p) < 1:
        raise TypeInferenceError(f"roi_align: pooled_size must be one or two positive ints, got {p}")
    return p


def _rel(arg_types, attrs):
    data, rois = tensor_arg(arg_types, 0, "data"), tensor_arg(arg_types, 1, "rois")
    if attrs.layout != "NCHW":
        raise TypeInferenceError(f"roi_align: kiln supports layout NCHW, got {attrs.layout}")
    if attrs.mode not in ("avg", "max"):
        raise TypeInferenceError(f"roi_align: mode must be 'avg' or 'max', got {attrs.mode!r}")
    if len(data.shape) != 4:
        raise TypeInferenceError(f"roi_align: data must be 4-d NCHW, got {shape_text(data.shape)}")
    if len(rois.shape) != 2 or (isinstance(rois.shape[1], int) and rois.shape[1] != 5):
        raise TypeInferenceError(f"roi_align: rois must have shape [num_roi, 5] (batch index, x1, y1, x2, y2), "
                                 f"got {shape_text(rois.shape)}")
    ph, pw = _pooled(attrs)
    return TensorType((rois.shape[0], data.shape[1], ph, pw), data.dtype)


def _ref(attrs, inputs, out_type):
    return roi_align_nchw_python(inputs[0], inputs[1], _pooled(attrs), attrs.spatial_scale, attrs.sample_ratio,
                                 attrs.mode)


define_op("vision.roi_align", num_inputs=2, args=("data", "rois"), attrs=ROIAlignAttrs, rel=_rel,
          rel_name="ROIAlign", pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=_ref, level=5,
          compute=topi_compute("vision.roi_align_nchw", "vision.roi_align", lambda a, i, t: [
              i[0], i[1], _pooled(a), a.spatial_scale, a.mode, a.sample_ratio]))
