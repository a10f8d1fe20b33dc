"""Constructors of the vision ops (TVM's ``relay.vision`` / ``relay.op.vision``)."""
from __future__ import annotations

from ....error import OpNotImplemented
from ....ir.expr import RelayExpr
from ....ir.op import Op
from ...expr import Call, TupleWrapper, const


def roi_align(data, rois, pooled_size, spatial_scale, sample_ratio=-1, layout="NCHW", mode="avg"):
    """ROI align (Mask R-CNN): ``rois`` [R, 5] rows (batch index, x1, y1, x2, y2) in input coordinates times
    ``spatial_scale``; each of the ``pooled_size`` bins averages ("avg") or maxes ("max") a grid of bilinear
    samples (``sample_ratio`` per side, or ceil(roi size / bins) when <= 0). Result [R, C, PH, PW]."""
    def _int(v):
        return int(v.numpy()) if hasattr(v, "numpy") else int(v)
    pooled = (pooled_size, pooled_size) if not isinstance(pooled_size, (list, tuple)) else pooled_size
    spatial_scale = float(spatial_scale.numpy()) if hasattr(spatial_scale, "numpy") else float(spatial_scale)
    op = Op.get("vision.roi_align")
    attrs = op.make_attrs(pooled_size=tuple(_int(p) for p in pooled), spatial_scale=spatial_scale,
                          sample_ratio=_int(sample_ratio), layout=layout, mode=mode)
    return Call(op, [data, rois], attrs)


def non_max_suppression(data, valid_count, indices, max_output_size=-1, iou_threshold=0.5, force_suppress=False,
                        top_k=-1, coord_start=2, score_index=1, id_index=0, return_indices=True,
                        invalid_to_bottom=False):
    """Greedy non-maximum suppression of ``data`` [B, N, K] (TVM's signature). With ``return_indices=True`` (the
    form kiln implements) a TupleWrapper of (indices of the kept boxes [B, N] int32, padded with -1; their count
    [B, 1] int32). ``max_output_size`` / ``iou_threshold`` may be numbers or Relay expressions."""
    if not isinstance(max_output_size, RelayExpr):
        max_output_size = const(int(max_output_size), "int32")
    if not isinstance(iou_threshold, RelayExpr):
        iou_threshold = const(float(iou_threshold), "float32")
    op = Op.get("vision.non_max_suppression")
    attrs = op.make_attrs(force_suppress=bool(force_suppress), top_k=int(top_k), coord_start=int(coord_start),
                          score_index=int(score_index), id_index=int(id_index), return_indices=bool(return_indices),
                          invalid_to_bottom=bool(invalid_to_bottom))
    out = Call(op, [data, valid_count, indices, max_output_size, iou_threshold], attrs)
    return TupleWrapper(out, 2) if return_indices else out


def get_valid_counts(data, score_threshold, id_index=0, score_index=1):
    """Boxes of ``data`` [B, N, K] whose score is above ``score_threshold`` (a number or a Relay expression)
    and, with ``id_index`` >= 0, whose class id is >= 0, moved to the front: a TupleWrapper of (valid_count [B]
    int32, out [B, N, K] (-1 past the count), out_indices [B, N] int32 (-1 past the count))."""
    if not isinstance(score_threshold, RelayExpr):
        score_threshold = const(float(score_threshold), "float32")
    op = Op.get("vision.get_valid_counts")
    out = Call(op, [data, score_threshold], op.make_attrs(id_index=int(id_index), score_index=int(score_index)))
    return TupleWrapper(out, 3)


def all_class_non_max_suppression(boxes, scores, max_output_boxes_per_class=-1, iou_threshold=-1.0,
                                  score_threshold=-1.0, output_format="onnx"):
    """Per-class greedy NMS (ONNX's NonMaxSuppression): boxes [B, N, 4], scores [B, C, N]; the limits are
    numbers or Relay scalars. ``output_format="onnx"``: a TupleWrapper of (selected [B*C*N, 3] int64 rows
    (batch, class, box) valid up to the count, count [1] int64)."""
    if output_format != "onnx":
        raise OpNotImplemented(f"all_class_non_max_suppression: output_format {output_format!r} is not implemented "
                               f"in kiln (only 'onnx')")
    if not isinstance(max_output_boxes_per_class, RelayExpr):
        max_output_boxes_per_class = const(int(max_output_boxes_per_class), "int32")
    if not isinstance(iou_threshold, RelayExpr):
        iou_threshold = const(float(iou_threshold), "float32")
    if not isinstance(score_threshold, RelayExpr):
        score_threshold = const(float(score_threshold), "float32")
    op = Op.get("vision.all_class_non_max_suppression")
    out = Call(op, [boxes, scores, max_output_boxes_per_class, iou_threshold, score_threshold],
               op.make_attrs(output_format=str(output_format)))
    return TupleWrapper(out, 2)
