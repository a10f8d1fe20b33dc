"""``vision.get_valid_counts`` and ``vision.all_class_non_max_suppression`` (TVM's names, attrs and output
layouts): type relations, shape functions (static in the inputs' shapes: the outputs are fixed-size, the
selected count is a value), numpy references; kernels in ``kiln.topi.vision.all_class_nms``."""
from __future__ import annotations

import numpy as np

from ....error import OpNotImplemented, TypeInferenceError
from ....ir.attrs import Attrs, Field
from ....ir.op import OpPattern
from ....ir.type import TensorType, TupleType
from ....tir.expr import Any
from ....topi.testing import all_class_nms_python, get_valid_counts_python
from .._define import define_op, topi_compute
from ..op import register_shape_func
from ..type_relations import is_any, shape_text, tensor_arg


class GetValidCountsAttrs(Attrs):
    type_key = "relay.attrs.GetValidCountsAttrs"
    fields = {"id_index": Field(0, int), "score_index": Field(1, int)}


def _gvc_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    if len(data.shape) != 3:
        raise TypeInferenceError(f"get_valid_counts: data must be [batch, num_anchors, elem_length], got "
                                 f"{shape_text(data.shape)}")
    b, n, _ = data.shape
    return TupleType([TensorType((b,), "int32"), TensorType(tuple(data.shape), data.dtype),
                      TensorType((b, n), "int32")])


def _gvc_ref(attrs, inputs, out_type):
    data, thr = inputs
    return get_valid_counts_python(data, float(np.asarray(thr).reshape(-1)[0]), attrs.id_index, attrs.score_index)


define_op("vision.get_valid_counts", num_inputs=2, args=("data", "score_threshold"), attrs=GetValidCountsAttrs,
          rel=_gvc_rel, rel_name="GetValidCount", pattern=OpPattern.OPAQUE, reference=_gvc_ref, level=5,
          compute=topi_compute("vision.get_valid_counts", "vision.get_valid_counts", lambda a, i, t: [
              i[0], i[1], a.id_index, a.score_index]))


def _gvc_shape_func(attrs, inputs, out_ndims):
    b, n, k = tuple(inputs[0])
    return [(b,), (b, n, k), (b, n)]


register_shape_func("vision.get_valid_counts", False, _gvc_shape_func)


class AllClassNonMaximumSuppressionAttrs(Attrs):
    type_key = "relay.attrs.AllClassNonMaximumSuppressionAttrs"
    fields = {"output_format": Field("onnx", str)}


def _acnms_rel(arg_types, attrs):
    boxes, scores = tensor_arg(arg_types, 0, "boxes"), tensor_arg(arg_types, 1, "scores")
    for k, name in ((2, "max_output_boxes_per_class"), (3, "iou_threshold"), (4, "score_threshold")):
        t = tensor_arg(arg_types, k, name)
        if len(t.shape) > 1 or (len(t.shape) == 1 and not is_any(t.shape[0]) and t.shape[0] != 1):
            raise TypeInferenceError(f"all_class_non_max_suppression: {name} must be a scalar, got "
                                     f"{shape_text(t.shape)}")
    if len(boxes.shape) != 3 or len(scores.shape) != 3 or (not is_any(boxes.shape[2]) and boxes.shape[2] != 4):
        raise TypeInferenceError(f"all_class_non_max_suppression: boxes must be [batch, num_boxes, 4] and scores "
                                 f"[batch, num_classes, num_boxes], got {shape_text(boxes.shape)} and "
                                 f"{shape_text(scores.shape)}")
    if attrs.output_format != "onnx":
        raise OpNotImplemented(f"all_class_non_max_suppression: output_format {attrs.output_format!r} is not "
                               f"implemented in kiln (only 'onnx')")
    b, n = boxes.shape[:2]
    c = scores.shape[1]
    total = Any() if any(is_any(d) for d in (b, c, n)) else b * c * n
    return TupleType([TensorType((total, 3), "int64"), TensorType((1,), "int64")])


def _acnms_ref(attrs, inputs, out_type):
    boxes, scores, mx, iou, sth = inputs
    sel = all_class_nms_python(boxes, scores, int(np.asarray(mx).reshape(-1)[0]),
                               float(np.asarray(iou).reshape(-1)[0]), float(np.asarray(sth).reshape(-1)[0]))
    b, c, n = scores.shape
    full = np.zeros((b * c * n, 3), "int64")
    full[:len(sel)] = sel
    return full, np.array([len(sel)], "int64")


define_op("vision.all_class_non_max_suppression", num_inputs=5,
          args=("boxes", "scores", "max_output_boxes_per_class", "iou_threshold", "score_threshold"),
          attrs=AllClassNonMaximumSuppressionAttrs, rel=_acnms_rel, rel_name="AllClassNMS",
          pattern=OpPattern.OPAQUE, reference=_acnms_ref, level=5,
          compute=topi_compute("vision.all_class_non_max_suppression", "vision.all_class_non_max_suppression",
                               lambda a, i, t: [i[0], i[1], i[2], i[3], i[4], a.output_format]))


def _acnms_shape_func(attrs, inputs, out_ndims):
    b, n, _ = tuple(inputs[0])
    c = tuple(inputs[1])[1]
    return [(b * c * n, 3), (1,)]


register_shape_func("vision.all_class_non_max_suppression", False, _acnms_shape_func)
