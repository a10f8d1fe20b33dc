"""torchvision's TorchScript ops (``torchvision::<name>`` nodes): deform_conv2d -> ``nn.deformable_conv2d``,
roi_align -> ``vision.roi_align``, nms -> ``vision.non_max_suppression`` (its result's length is known at run time
only: the module runs on the Relay VM)."""
from __future__ import annotations

import numpy as np

from ....error import OpNotImplemented
from ....ir.expr import RelayExpr as Expr
from ... import op
from .. import data_dependent as dd
from .registry import register


@register("torchvision::deform_conv2d")
def _deform_conv2d(ctx, args):
    """(input, weight, offset, mask, bias, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups,
    offset_groups, use_mask): torchvision's offsets are (dy, dx) per offset group and kernel tap, the layout
    ``nn.deformable_conv2d`` takes. The modulation mask (DCNv2, ``use_mask=True``) has no Relay op."""
    x, weight, offset, _mask, bias = args[0], args[1], args[2], args[3], args[4]
    sh, sw, ph, pw, dh, dw, groups, offset_groups = (int(ctx.scalar(v)) for v in args[5:13])
    if bool(args[13]):
        raise OpNotImplemented("torchvision::deform_conv2d with a modulation mask (use_mask=True, DCNv2) is not "
                               "supported: relay.nn.deformable_conv2d has no mask input")
    kh, kw = ctx.shape(weight)[2:]
    out = op.nn.deformable_conv2d(x, offset, weight, strides=(sh, sw), padding=(ph, pw), dilation=(dh, dw),
                                  deformable_groups=offset_groups, groups=groups, channels=ctx.shape(weight)[0],
                                  kernel_size=(kh, kw))
    b = ctx.value(bias)
    if b is not None and not np.asarray(b).any():
        return out
    return op.nn.bias_add(out, ctx.cast(bias, ctx.dtype(x)), axis=1)


@register("torchvision::roi_align")
def _roi_align(ctx, args):
    """(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned): rois [K, 5] rows
    (batch index, x1, y1, x2, y2), Relay's layout. ``aligned=True`` (pixel centres shifted by half a pixel, no
    1x1 minimum ROI size) has no Relay counterpart: TVM's ROIAlign is torchvision's ``aligned=False``."""
    x, rois = args[0], args[1]
    scale = float(ctx.scalar(args[2]))
    ph, pw, ratio = (int(ctx.scalar(v)) for v in args[3:6])
    if len(args) > 6 and bool(ctx.scalar(args[6])):
        raise OpNotImplemented("torchvision::roi_align with aligned=True is not supported: relay.vision.roi_align "
                               "has the semantics of aligned=False (TVM's ROIAlign)")
    return op.vision.roi_align(x, ctx.cast(rois, ctx.dtype(x)), (ph, pw), scale, ratio)


@register("torchvision::nms")
def _nms(ctx, args):
    """(boxes [N, 4] x1y1x2y2, scores [N], iou_threshold) -> int64 indices of the kept boxes by decreasing score:
    TVM's lowering, ``vision.non_max_suppression`` over [1, N, 5] rows (score, box) with every box valid, no
    class ids (``force_suppress``), then the first ``count`` indices (a length known at run time)."""
    boxes, scores = args[0], args[1]
    shape = tuple(ctx.shape(boxes))
    if len(shape) != 2 or not isinstance(shape[0], (int, np.integer)):
        raise OpNotImplemented(f"torchvision::nms: boxes must have a static shape [num_boxes, 4], got {shape}")
    n = int(shape[0])
    dt = ctx.dtype(boxes)
    if n == 0:
        return dd.empty("int64")
    data = op.expand_dims(op.concatenate([op.expand_dims(ctx.cast(scores, dt), -1), boxes], -1), 0)
    thr = args[2] if isinstance(args[2], Expr) else ctx.const(float(ctx.scalar(args[2])), dt)
    valid = ctx.const(np.array([n], "int32"), "int32")
    indices = ctx.const(np.arange(n, dtype="int32").reshape(1, n), "int32")
    out, count = op.vision.non_max_suppression(data, valid, indices, -1, thr, force_suppress=True, top_k=-1,
                                               coord_start=1, score_index=0, id_index=-1, return_indices=True)
    length = op.cast(op.reshape(count, []), "int64")
    return op.cast(op.take(op.reshape(out, [n]), dd._arange_to(length), axis=0), "int64")
