"""Numpy reference of TVM's ``vision.non_max_suppression`` with ``return_indices=True``: per batch, the first
``valid_count`` boxes sorted by score (descending, stable), greedily kept unless a kept box overlaps them with IoU
above the threshold (same class only, unless ``force_suppress``); result: the kept boxes' ``indices`` entries in
score order, padded with -1, and how many were kept."""
from __future__ import annotations

import numpy as np


def _iou(a, b) -> float:
    al, ar = min(a[0], a[2]), max(a[0], a[2])
    at, ab = min(a[1], a[3]), max(a[1], a[3])
    bl, br = min(b[0], b[2]), max(b[0], b[2])
    bt, bb = min(b[1], b[3]), max(b[1], b[3])
    w = max(0.0, min(ar, br) - max(al, bl))
    h = max(0.0, min(ab, bb) - max(at, bt))
    inter = w * h
    union = (ar - al) * (ab - at) + (br - bl) * (bb - bt) - inter
    return 0.0 if union <= 0 else inter / union


def non_max_suppression_python(data, valid_count, indices, max_output_size=-1, iou_threshold=0.5,
                               force_suppress=False, top_k=-1, coord_start=2, score_index=1, id_index=0):
    """data [B, N, K], valid_count [B], indices [B, N] -> (out_indices [B, N] int32, count [B, 1] int32)."""
    data = np.asarray(data, "float64")
    b_, n_ = data.shape[:2]
    out = np.full((b_, n_), -1, "int32")
    count = np.zeros((b_, 1), "int32")
    for b in range(b_):
        n = int(min(max(int(valid_count[b]), 0), n_))
        order = np.argsort(-data[b, :n, score_index], kind="stable")
        if top_k > 0:
            order = order[:top_k]
        kept: list = []
        for i in order:
            if 0 <= max_output_size <= len(kept):
                break
            box = data[b, i, coord_start:coord_start + 4]
            suppressed = any(
                (force_suppress or id_index < 0 or data[b, k, id_index] == data[b, i, id_index])
                and _iou(data[b, k, coord_start:coord_start + 4], box) > iou_threshold for k in kept)
            if not suppressed:
                kept.append(i)
        out[b, :len(kept)] = np.asarray(indices)[b, kept]
        count[b, 0] = len(kept)
    return out, count
