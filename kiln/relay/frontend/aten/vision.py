"""torchvision's TorchScript ops (``torchvision::<name>`` nodes): deform_conv2d -> ``nn.deformable_conv2d``,
roi_align -> ``vision.roi_align``."""
from __future__ import annotations

import numpy as np

from ....error import OpNotImplemented
from ... import op
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
