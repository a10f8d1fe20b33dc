"""SSD anchors and box decoding (TVM's ``topi.vision.ssd.multibox_prior`` / ``multibox_transform_loc``).

``multibox_prior`` is a plain compute (every output element is a closed-form function of its position);
``multibox_transform_loc`` packs the boxes that pass the threshold to the front, so it is an IR-builder extern
(a sequential count per batch). Rows past a batch's count are -1 (TVM leaves them unwritten).
"""
from __future__ import annotations

import math

from .... import te, tir
from ....error import KilnError, OpNotImplemented
from ....tir import op as T
from ...math import clip as _clip
from ...utils import get_const_tuple

__all__ = ["multibox_prior", "multibox_transform_loc"]


def multibox_prior(data, sizes=(1.0,), ratios=(1.0,), steps=(-1.0, -1.0), offsets=(0.5, 0.5), clip=False):
    """Anchor boxes for a feature map ``data`` [N, C, H, W]: [1, H*W*(len(sizes)+len(ratios)-1), 4] corners
    (xmin, ymin, xmax, ymax) in [0, 1] units; per cell the sizes at ratio 1, then ratios[1:] at sizes[0]."""
    if len(data.shape) != 4:
        raise KilnError(f"multibox_prior: data must be 4-d NCHW, got {get_const_tuple(data.shape)}")
    sizes, ratios = [float(s) for s in sizes], [float(r) for r in ratios]
    if not sizes or not ratios:
        raise KilnError("multibox_prior: sizes and ratios must not be empty")
    _, _, h, w = get_const_tuple(data.shape)
    per = len(sizes) + len(ratios) - 1
    dt = data.dtype
    hf, wf = (T.const(float(v), dt) if isinstance(v, int) else T.cast(v, dt) for v in (h, w))
    step_h = T.const(float(steps[0]), dt) if float(steps[0]) > 0 else T.const(1.0, dt) / hf
    step_w = T.const(float(steps[1]), dt) if float(steps[1]) > 0 else T.const(1.0, dt) / wf
    # half widths / heights per anchor kind k (widths scale by H/W so boxes are square in pixels)
    half_w = [s / 2.0 for s in sizes] + [sizes[0] * math.sqrt(r) / 2.0 for r in ratios[1:]]
    half_h = [s / 2.0 for s in sizes] + [sizes[0] / math.sqrt(r) / 2.0 for r in ratios[1:]]

    def pick(table, k):
        v = T.const(table[-1], dt)
        for j in reversed(range(len(table) - 1)):
            v = T.Select(k == j, T.const(table[j], dt), v)
        return v

    def f(_b, a, c):
        k = a % per
        cell = a // per
        i, j = cell // w, cell % w
        cy = (T.cast(i, dt) + T.const(float(offsets[0]), dt)) * step_h
        cx = (T.cast(j, dt) + T.const(float(offsets[1]), dt)) * step_w
        hw = pick(half_w, k) * hf / wf
        hh = pick(half_h, k)
        return T.Select(c == 0, cx - hw, T.Select(c == 1, cy - hh, T.Select(c == 2, cx + hw, cy + hh)))

    out = te.compute((1, h * w * per, 4), f, name="multibox_prior", tag="multibox_prior")
    return _clip(out, 0, 1) if clip else out


def multibox_transform_loc(cls_prob, loc_pred, anchor, clip=True, threshold=0.01, variances=(0.1, 0.1, 0.2, 0.2),
                           keep_background=False):
    """cls_prob [B, C, A] (class 0 = background), loc_pred [B, A*4], anchor [1, A, 4] ->
    [out [B, A, 6] rows (class id - 1, score, xmin, ymin, xmax, ymax) of the anchors whose best non-background
    class scores >= ``threshold``, packed to the front (-1 after); valid_count [B] int32]."""
    if keep_background:
        raise OpNotImplemented("multibox_transform_loc with keep_background=True is not implemented in kiln "
                               "(TVM's kernel ignores it too)")
    if len(cls_prob.shape) != 3 or len(loc_pred.shape) != 2 or len(anchor.shape) != 3:
        raise KilnError(f"multibox_transform_loc: expected cls_prob [B, C, A], loc_pred [B, A*4], anchor [1, A, 4]; "
                        f"got {get_const_tuple(cls_prob.shape)}, {get_const_tuple(loc_pred.shape)}, "
                        f"{get_const_tuple(anchor.shape)}")
    b_, c_, a_ = get_const_tuple(cls_prob.shape)
    dt = loc_pred.dtype
    vx, vy, vw, vh = (T.const(float(v), dt) for v in variances)
    thr = T.const(float(threshold), cls_prob.dtype)

    def kernel(ins, outs):
        ib = tir.ir_builder.create()
        prob, loc, anc = (ib.buffer_ptr(t) for t in ins)
        out, cnt = ib.buffer_ptr(outs[0]), ib.buffer_ptr(outs[1])
        score = ib.allocate(cls_prob.dtype, (1,), name="score", scope="local")
        cls = ib.allocate("int32", (1,), name="cls", scope="local")
        zero, one, two = T.const(0.0, dt), T.const(1.0, dt), T.const(2.0, dt)
        with ib.for_range(0, b_, name="b") as b:
            cnt[b] = 0
            with ib.for_range(0, a_, name="a") as a:
                score[0] = T.const(-1.0, cls_prob.dtype)
                cls[0] = 0
                with ib.for_range(1, c_, name="k") as k:
                    p = prob[b, k, a]
                    with ib.if_scope(p > score[0]):
                        cls[0] = k
                        score[0] = p
                with ib.if_scope(T.all(cls[0] > 0, score[0] >= thr)):
                    al, at, ar, ab = (anc[0, a, q] for q in range(4))
                    aw, ah = ar - al, ab - at
                    ox = loc[b, a * 4] * vx * aw + (al + ar) / two
                    oy = loc[b, a * 4 + 1] * vy * ah + (at + ab) / two
                    ow = T.exp(loc[b, a * 4 + 2] * vw) * aw / two
                    oh = T.exp(loc[b, a * 4 + 3] * vh) * ah / two
                    row = cnt[b]
                    out[b, row, 0] = T.cast(cls[0] - 1, dt)
                    out[b, row, 1] = T.cast(score[0], dt)
                    for q, v in enumerate((ox - ow, oy - oh, ox + ow, oy + oh)):
                        out[b, row, 2 + q] = T.max(zero, T.min(one, v)) if clip else v
                    cnt[b] = cnt[b] + 1
            with ib.for_range(0, a_, name="a") as a:
                with ib.if_scope(a >= cnt[b]):
                    with ib.for_range(0, 6, name="q") as q:
                        out[b, a, q] = T.const(-1.0, dt)
        return ib.get()

    outs = te.extern([(b_, a_, 6), (b_,)], [cls_prob, loc_pred, anchor], kernel, dtype=[dt, "int32"],
                     name="multibox_transform_loc", tag="multibox_transform_loc")
    return list(outs)
