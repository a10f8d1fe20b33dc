"""Constructors of the SSD ops (TVM's ``relay.vision.multibox_prior`` / ``multibox_transform_loc``)."""
from __future__ import annotations

from ....ir.op import Op
from ...expr import Call, TupleWrapper

__all__ = ["multibox_prior", "multibox_transform_loc"]


def multibox_prior(data, sizes=(1.0,), ratios=(1.0,), steps=(-1.0, -1.0), offsets=(0.5, 0.5), clip=False):
    """Anchor boxes [1, H*W*(len(sizes)+len(ratios)-1), 4] for the feature map ``data`` [N, C, H, W]."""
    op = Op.get("vision.multibox_prior")
    return Call(op, [data], op.make_attrs(sizes=tuple(sizes), ratios=tuple(ratios), steps=tuple(steps),
                                          offsets=tuple(offsets), clip=bool(clip)))


def multibox_transform_loc(cls_prob, loc_pred, anchor, clip=True, threshold=0.01, variances=(0.1, 0.1, 0.2, 0.2),
                           keep_background=False):
    """Decode SSD box predictions: a TupleWrapper of (boxes [B, A, 6] (class id, score, corners), packed to the
    front; valid_count [B] int32)."""
    op = Op.get("vision.multibox_transform_loc")
    out = Call(op, [cls_prob, loc_pred, anchor],
               op.make_attrs(clip=bool(clip), threshold=float(threshold), variances=tuple(variances),
                             keep_background=bool(keep_background)))
    return TupleWrapper(out, 2)
