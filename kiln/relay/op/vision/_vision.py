"""``vision.roi_align`` (TVM's ROIAlign): data [N, C, H, W], rois [R, 5] -> [R, C, PH, PW]; computed by
``topi.vision.roi_align_nchw``, referenced by ``topi.testing.roi_align_nchw_python``.
``vision.non_max_suppression`` (TVM's NMS, ``return_indices=True``): ``topi.vision.non_max_suppression``."""
from __future__ import annotations

from ....error import TypeInferenceError
from ....ir.attrs import Attrs, Field
from ....ir.op import OpPattern
from ....ir.type import TensorType, TupleType
from ....topi.testing import non_max_suppression_python, roi_align_nchw_python
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


class NonMaximumSuppressionAttrs(Attrs):
    type_key = "relay.attrs.NonMaximumSuppressionAttrs"
    fields = {"force_suppress": Field(False, bool), "top_k": Field(-1, int), "coord_start": Field(2, int),
              "score_index": Field(1, int), "id_index": Field(0, int), "return_indices": Field(True, bool),
              "invalid_to_bottom": Field(False, bool)}


def _nms_rel(arg_types, attrs):
    data, valid, indices = (tensor_arg(arg_types, k, n) for k, n in enumerate(("data", "valid_count", "indices")))
    if len(data.shape) != 3:
        raise TypeInferenceError(f"non_max_suppression: data must be [batch, num_anchors, elem_length], got "
                                 f"{shape_text(data.shape)}")
    if tuple(valid.shape) != tuple(data.shape[:1]) or tuple(indices.shape) != tuple(data.shape[:2]):
        raise TypeInferenceError(f"non_max_suppression: valid_count {shape_text(valid.shape)} and indices "
                                 f"{shape_text(indices.shape)} must be [batch] and [batch, num_anchors] for data "
                                 f"{shape_text(data.shape)}")
    if not attrs.return_indices:
        raise TypeInferenceError("non_max_suppression: kiln implements return_indices=True only (the indices of "
                                 "the kept boxes and their count)")
    b, n = data.shape[:2]
    return TupleType([TensorType((b, n), "int32"), TensorType((b, 1), "int32")])


def _nms_ref(attrs, inputs, out_type):
    data, valid, indices, max_out, thr = inputs
    return non_max_suppression_python(data, valid, indices, int(max_out), float(thr), attrs.force_suppress,
                                      attrs.top_k, attrs.coord_start, attrs.score_index, attrs.id_index)


define_op("vision.non_max_suppression", num_inputs=5,
          args=("data", "valid_count", "indices", "max_output_size", "iou_threshold"),
          attrs=NonMaximumSuppressionAttrs, rel=_nms_rel, rel_name="NMS", pattern=OpPattern.OPAQUE,
          reference=_nms_ref, level=5,
          compute=topi_compute("vision.non_max_suppression", "vision.non_max_suppression", lambda a, i, t: [
              i[0], i[1], i[2], i[3], i[4], a.force_suppress, a.top_k, a.coord_start, a.score_index, a.id_index,
              a.return_indices, a.invalid_to_bottom]))
