"""Numpy references of ``vision.get_valid_counts`` and ``vision.all_class_non_max_suppression`` (ONNX
``NonMaxSuppression``), written from the ONNX operator definition and ONNX Runtime's documented behaviour:
per (batch, class), boxes scoring strictly above the score threshold are visited by descending score (ties:
lower index first), each kept unless a kept box of that class has IoU strictly above the IoU threshold with
it; at most ``max_output_boxes_per_class`` kept (negative: no limit). Arithmetic in float32, as the kernel."""
from __future__ import annotations

import numpy as np

__all__ = ["all_class_nms_python", "get_valid_counts_python", "box_iou_exceeds"]


def box_iou_exceeds(a, b, thr) -> bool:
    """Whether boxes ``a`` and ``b`` (4 coordinates, diagonal corners in any order) overlap with IoU > thr."""
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    a_lo, a_hi = np.minimum(a[:2], a[2:]), np.maximum(a[:2], a[2:])
    b_lo, b_hi = np.minimum(b[:2], b[2:]), np.maximum(b[:2], b[2:])
    lo, hi = np.maximum(a_lo, b_lo), np.minimum(a_hi, b_hi)
    if np.any(hi <= lo):
        return False
    area_a = np.float32((a_hi[0] - a_lo[0]) * (a_hi[1] - a_lo[1]))
    area_b = np.float32((b_hi[0] - b_lo[0]) * (b_hi[1] - b_lo[1]))
    inter = np.float32((hi[0] - lo[0]) * (hi[1] - lo[1]))
    union = np.float32(area_a + area_b - inter)
    if area_a <= 0 or area_b <= 0 or union <= 0:
        return False
    return bool(np.float32(inter / union) > np.float32(thr))


def all_class_nms_python(boxes, scores, max_output_boxes_per_class=-1, iou_threshold=0.0,
                         score_threshold=-np.inf) -> np.ndarray:
    """boxes [B, N, 4] (corner form), scores [B, C, N] -> selected [k, 3] int64 rows (batch, class, box)."""
    boxes = np.asarray(boxes, np.float32)
    scores = np.asarray(scores, np.float32)
    limit = int(max_output_boxes_per_class)
    rows = []
    for b in range(scores.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c]
            cand = [i for i in np.argsort(-s, kind="stable") if s[i] > np.float32(score_threshold)]
            kept = []
            for i in cand:
                if 0 <= limit <= len(kept):
                    break
                if not any(box_iou_exceeds(boxes[b, k], boxes[b, i], iou_threshold) for k in kept):
                    kept.append(i)
            rows += [(b, c, k) for k in kept]
    return np.array(rows, np.int64).reshape(-1, 3)


def get_valid_counts_python(data, score_threshold, id_index=0, score_index=1):
    """data [B, N, K] -> (valid_count [B] int32, out [B, N, K] valid boxes first then -1, indices [B, N])."""
    data = np.asarray(data)
    b_, n_, _ = data.shape
    count = np.zeros(b_, "int32")
    out = np.full(data.shape, -1, data.dtype)
    idx = np.full((b_, n_), -1, "int32")
    for b in range(b_):
        for i in range(n_):
            ok = data[b, i, score_index] > np.asarray(score_threshold, data.dtype)
            if id_index >= 0:
                ok = ok and data[b, i, id_index] >= 0
            if ok:
                out[b, count[b]] = data[b, i]
                idx[b, count[b]] = i
                count[b] += 1
    return count, out, idx
