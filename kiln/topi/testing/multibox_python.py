"""Numpy references of TVM's SSD ops ``multibox_prior`` and ``multibox_transform_loc`` (rows past a batch's
count are -1 in kiln)."""
from __future__ import annotations

import numpy as np

__all__ = ["multibox_prior_python", "multibox_transform_loc_python"]


def multibox_prior_python(data_shape, sizes=(1.0,), ratios=(1.0,), steps=(-1.0, -1.0), offsets=(0.5, 0.5),
                          clip=False, dtype="float32"):
    _, _, h, w = data_shape
    step_h = steps[0] if steps[0] > 0 else 1.0 / h
    step_w = steps[1] if steps[1] > 0 else 1.0 / w
    kinds = [(s * h / w / 2.0, s / 2.0) for s in sizes]
    kinds += [(sizes[0] * h / w * np.sqrt(r) / 2.0, sizes[0] / np.sqrt(r) / 2.0) for r in ratios[1:]]
    out = []
    for i in range(h):
        cy = (i + offsets[0]) * step_h
        for j in range(w):
            cx = (j + offsets[1]) * step_w
            out += [(cx - hw, cy - hh, cx + hw, cy + hh) for hw, hh in kinds]
    out = np.array(out, dtype).reshape(1, -1, 4)
    return np.clip(out, 0, 1) if clip else out


def multibox_transform_loc_python(cls_prob, loc_pred, anchor, clip=True, threshold=0.01,
                                  variances=(0.1, 0.1, 0.2, 0.2)):
    b_, c_, a_ = cls_prob.shape
    out = np.full((b_, a_, 6), -1, loc_pred.dtype)
    count = np.zeros(b_, "int32")
    vx, vy, vw, vh = variances
    for b in range(b_):
        for a in range(a_):
            probs = cls_prob[b, 1:, a]
            if c_ < 2:
                continue
            k = int(np.argmax(probs))  # first maximum, as the kernel's strict '>'
            score = probs[k]
            if not score >= threshold or not score > -1:
                continue
            al, at, ar, ab = anchor[0, a].astype(np.float64)
            aw, ah = ar - al, ab - at
            px, py, pw, ph = loc_pred[b, a * 4:a * 4 + 4].astype(np.float64)
            ox, oy = px * vx * aw + (al + ar) / 2, py * vy * ah + (at + ab) / 2
            ow, oh = np.exp(pw * vw) * aw / 2, np.exp(ph * vh) * ah / 2
            box = np.array([ox - ow, oy - oh, ox + ow, oy + oh])
            if clip:
                box = np.clip(box, 0, 1)
            out[b, count[b]] = [k, score, *box]
            count[b] += 1
    return out, count
