"""Non-maximum suppression (TVM's ``topi.vision.non_max_suppression``), the ``return_indices=True`` form the
PyTorch and ONNX importers use. Boxes are sorted by score with ``topi.argsort`` (boxes past ``valid_count``
ranked last); the greedy pass, sequential by nature, is an extern stage written with the IR builder."""
from __future__ import annotations

from ... import te, tir
from ...error import KilnError, OpNotImplemented
from ...tir import op as T
from ..sort import argsort
from ..utils import get_const_tuple

__all__ = ["non_max_suppression"]


def _overlap(ib, d, b, i, j, coord_start):
    """IoU of boxes i and j of batch b (corners in either order, as TVM)."""
    def corners(k):
        x1, y1 = d[b, k, coord_start], d[b, k, coord_start + 1]
        x2, y2 = d[b, k, coord_start + 2], d[b, k, coord_start + 3]
        return T.min(x1, x2), T.min(y1, y2), T.max(x1, x2), T.max(y1, y2)
    al, at, ar, ab = corners(i)
    bl, bt, br, bb = corners(j)
    zero = T.const(0.0, d.dtype)
    w = T.max(zero, T.min(ar, br) - T.max(al, bl))
    h = T.max(zero, T.min(ab, bb) - T.max(at, bt))
    inter = w * h
    union = (ar - al) * (ab - at) + (br - bl) * (bb - bt) - inter
    return T.Select(union <= zero, zero, inter / T.Select(union <= zero, T.const(1.0, d.dtype), union))


def non_max_suppression(data, valid_count, indices, max_output_size=-1, iou_threshold=0.5, force_suppress=False,
                        top_k=-1, coord_start=2, score_index=1, id_index=0, return_indices=True,
                        invalid_to_bottom=False):
    """data [B, N, K] (score at ``score_index``, box corners from ``coord_start``, class at ``id_index``),
    valid_count [B] int32, indices [B, N] int32; ``max_output_size`` / ``iou_threshold``: numbers or 0-d
    tensors. Returns [out_indices [B, N] int32 (-1 padded), valid_box_count [B, 1] int32]."""
    if not return_indices:
        raise OpNotImplemented("non_max_suppression with return_indices=False (boxes rewritten in place) is not "
                               "implemented in kiln: use return_indices=True")
    if len(data.shape) != 3:
        raise KilnError(f"non_max_suppression: data must be [batch, num_anchors, elem_length], got "
                        f"{get_const_tuple(data.shape)}")
    b_, n_, k_ = get_const_tuple(data.shape)
    if not (0 <= score_index < k_ and 0 <= coord_start <= k_ - 4 and id_index < k_):
        raise KilnError(f"non_max_suppression: score_index={score_index}, coord_start={coord_start}, "
                        f"id_index={id_index} do not fit elem_length {k_}")
    dt = data.dtype
    lowest = T.min_value(dt)
    keyed = te.compute((b_, n_), lambda b, i: T.Select(i < valid_count[b], data[b, i, score_index], lowest),
                       name="nms_score")
    order = argsort(keyed, axis=1, is_ascend=False, dtype="int32")
    scalars = []
    for v, dtype in ((max_output_size, "int32"), (iou_threshold, dt)):
        if isinstance(v, te.Tensor):
            scalars.append(v)
        else:
            const = T.const(float(v) if dtype != "int32" else int(v), dtype)
            scalars.append(te.compute((1,), lambda _i, c=const: c, name="nms_scalar"))
    first = [() if len(t.shape) == 0 else (0,) * len(t.shape) for t in scalars]
    top_k = int(top_k)

    def kernel(ins, outs):
        ib = tir.ir_builder.create()
        d, srt, vc, idx, mx, thr = (ib.buffer_ptr(t) for t in ins)
        out, cnt = ib.buffer_ptr(outs[0]), ib.buffer_ptr(outs[1])
        kept = ib.allocate("int32", (1,), name="kept", scope="local")
        alive = ib.allocate("int32", (n_,), name="alive", scope="local")
        nvalid = ib.allocate("int32", (1,), name="nvalid", scope="local")
        with ib.for_range(0, b_, name="b") as b:
            nvalid[0] = T.max(T.min(vc[b], n_), 0)
            if top_k > 0:
                nvalid[0] = T.min(nvalid[0], top_k)
            kept[0] = 0
            with ib.for_range(0, n_, name="i") as i:
                alive[i] = T.Select(i < nvalid[0], 1, 0)
                out[b, i] = -1
            with ib.for_range(0, n_, name="i") as i:
                with ib.if_scope(T.all(alive[i] > 0, T.any(mx[first[0]] < 0, kept[0] < mx[first[0]]))):
                    bi = srt[b, i]
                    out[b, kept[0]] = idx[b, bi]
                    kept[0] = kept[0] + 1
                    with ib.for_range(0, n_, name="j") as j:
                        bj = srt[b, j]
                        same = T.const(True, "bool") if (force_suppress or id_index < 0) else \
                            d[b, bi, id_index] == d[b, bj, id_index]
                        with ib.if_scope(T.all(j > i, alive[j] > 0, same,
                                               _overlap(ib, d, b, bi, bj, coord_start) > thr[first[1]])):
                            alive[j] = 0
            cnt[b, 0] = kept[0]
        return ib.get()

    outs = te.extern([(b_, n_), (b_, 1)], [data, order, valid_count, indices] + scalars, kernel,
                     dtype=["int32", "int32"], name="nms", tag="non_max_suppression")
    return list(outs)
