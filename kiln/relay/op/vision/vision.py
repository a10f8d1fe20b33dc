"""Constructors of the vision ops (TVM's ``relay.vision`` / ``relay.op.vision``)."""
from __future__ import annotations

from ....ir.op import Op
from ...expr import Call


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
