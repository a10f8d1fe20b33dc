"""``get_valid_counts`` and ``all_class_non_max_suppression`` (TVM's ``topi.vision``): the box filtering that
SSD-style and ONNX ``NonMaxSuppression`` graphs run.

Both are extern stages written with the IR builder (a compiled C loop, sequential by nature). All-class NMS
orders each class's candidates (the boxes above the score threshold) inside the kernel by a stable bottom-up
merge sort on descending score (equal scores keep the lower box index first), O(n log n) per class.
All-class NMS follows ONNX Runtime's rules: a box takes part when its score is strictly above
``score_threshold``; corners may come in either order; a kept box suppresses a later one when their IoU is
strictly above ``iou_threshold`` (boxes that do not overlap, or have zero area, never suppress each other);
``max_output_boxes_per_class`` < 0 keeps every surviving box. The "onnx" output is a fixed-size
[batch * classes * boxes, 3] int64 tensor of (batch, class, box) rows in that order (by score within a class),
zero-filled past the count, and the count as a [1] int64 tensor: the frontend slices the first ``count`` rows.
"""
from __future__ import annotations

from ... import te, tir
from ...error import KilnError, OpNotImplemented
from ...tir import op as T
from ..utils import get_const_tuple

__all__ = ["get_valid_counts", "all_class_non_max_suppression"]


def _scalar_tensor(v, dtype: str, name: str):
    """A number or a 0-d / 1-element tensor as a tensor read at index ``first``."""
    if isinstance(v, te.Tensor):
        return v, (0,) * len(v.shape)
    c = T.const(int(v) if dtype.startswith("int") else float(v), dtype)
    return te.compute((1,), lambda _i: c, name=name), (0,)


def get_valid_counts(data, score_threshold=0, id_index: int = 0, score_index: int = 1):
    """data [B, N, K]: boxes with a score (``data[..., score_index]``) strictly above ``score_threshold`` and,
    when ``id_index`` >= 0, a class id >= 0 are valid. Returns [valid_count [B] int32, out [B, N, K] (valid
    boxes moved to the front in their order, the rest -1), out_indices [B, N] int32 (their original index,
    -1 past the count)]."""
    if len(data.shape) != 3:
        raise KilnError(f"get_valid_counts: data must be [batch, num_anchors, elem_length], got "
                        f"{get_const_tuple(data.shape)}")
    b_, n_, k_ = get_const_tuple(data.shape)
    if isinstance(k_, int) and not (0 <= score_index < k_ and id_index < k_):
        raise KilnError(f"get_valid_counts: score_index={score_index}, id_index={id_index} do not fit elem_length "
                        f"{k_}")
    thr, first = _scalar_tensor(score_threshold, data.dtype, "valid_counts_threshold")
    dt = data.dtype

    def kernel(ins, outs):
        ib = tir.ir_builder.create()
        d, th = ib.buffer_ptr(ins[0]), ib.buffer_ptr(ins[1])
        cnt, out, oidx = (ib.buffer_ptr(o) for o in outs)
        with ib.for_range(0, b_, name="b") as b:
            cnt[b] = 0
            with ib.for_range(0, n_, name="i") as i:
                ok = d[b, i, score_index] > T.cast(th[first], dt)
                if id_index >= 0:
                    ok = T.all(ok, d[b, i, id_index] >= T.const(0, dt))
                with ib.if_scope(ok):
                    with ib.for_range(0, k_, name="k") as k:
                        out[b, cnt[b], k] = d[b, i, k]
                    oidx[b, cnt[b]] = i
                    cnt[b] = cnt[b] + 1
            with ib.for_range(0, n_, name="i") as i:
                with ib.if_scope(i >= cnt[b]):
                    with ib.for_range(0, k_, name="k") as k:
                        out[b, i, k] = T.const(-1, dt)
                    oidx[b, i] = -1
        return ib.get()

    outs = te.extern([(b_,), (b_, n_, k_), (b_, n_)], [data, thr], kernel, dtype=["int32", dt, "int32"],
                     name="get_valid_counts", tag="get_valid_counts")
    return list(outs)


def _suppresses(bx, b, p, q, thr):
    """Whether box ``p`` suppresses box ``q`` of batch ``b`` (ONNX Runtime's IoU test)."""
    def corners(k):
        y1, x1, y2, x2 = (bx[b, k, c] for c in range(4))
        return T.min(y1, y2), T.min(x1, x2), T.max(y1, y2), T.max(x1, x2)
    at, al, ab, ar = corners(p)
    bt, bl, bb, br = corners(q)
    it, il = T.max(at, bt), T.max(al, bl)
    ib_, ir = T.min(ab, bb), T.min(ar, br)
    zero = T.const(0, bx.dtype)
    area_a = (ab - at) * (ar - al)
    area_b = (bb - bt) * (br - bl)
    inter = (ib_ - it) * (ir - il)
    union = area_a + area_b - inter
    ok = T.all(ib_ > it, ir > il, area_a > zero, area_b > zero, union > zero)
    safe = T.Select(ok, union, T.const(1, bx.dtype))
    return T.all(ok, inter / safe > thr)


def _merge_sort_desc(ib, a, tmp, n, key):
    """Sort the first ``n`` entries of the int32 buffer ``a`` by descending ``key(entry)``, stably (equal keys
    keep their order): a bottom-up merge sort through ``tmp``, O(n log n)."""
    width = ib.allocate("int32", (1,), name="width", scope="local")
    width[0] = 1
    with ib.while_loop(width[0] < n):
        w = width[0]
        with ib.for_range(0, T.floordiv(n + 2 * w - 1, 2 * w), name="t") as t:
            lo = t * 2 * w
            mid = T.min(lo + w, n)
            hi = T.min(lo + 2 * w, n)
            left = ib.allocate("int32", (2,), name="heads", scope="local")  # next left / right positions
            left[0] = lo
            left[1] = mid
            with ib.for_range(lo, hi, name="k") as k:
                li, ri = left[0], left[1]
                # take the right head only when it scores strictly higher (stability)
                take_right = T.any(li >= mid, T.all(ri < hi, key(a[T.min(ri, hi - 1)]) > key(a[T.min(li, mid - 1)])))
                with ib.if_scope(take_right):
                    tmp[k] = a[ri]
                    left[1] = ri + 1
                with ib.else_scope():
                    tmp[k] = a[li]
                    left[0] = li + 1
        with ib.for_range(0, n, name="k") as k:
            a[k] = tmp[k]
        width[0] = w * 2


def all_class_non_max_suppression(boxes, scores, max_output_boxes_per_class, iou_threshold, score_threshold,
                                  output_format: str = "onnx"):
    """boxes [B, N, 4], scores [B, C, N]; the three limits are numbers or 0-d / 1-element tensors. Returns
    ("onnx") [selected [B*C*N, 3] int64 (batch, class, box) rows, zero-filled past the count; count [1] int64]."""
    if output_format != "onnx":
        raise OpNotImplemented(f"all_class_non_max_suppression: output_format {output_format!r} is not "
                               f"implemented in kiln (only 'onnx')")
    if len(boxes.shape) != 3 or len(scores.shape) != 3:
        raise KilnError(f"all_class_non_max_suppression: boxes must be [batch, boxes, 4] and scores [batch, "
                        f"classes, boxes], got {get_const_tuple(boxes.shape)} and {get_const_tuple(scores.shape)}")
    b_, n_, four = get_const_tuple(boxes.shape)
    _, c_, _ = get_const_tuple(scores.shape)
    if isinstance(four, int) and four != 4:
        raise KilnError(f"all_class_non_max_suppression: boxes must have 4 coordinates, got {four}")
    mx, f_mx = _scalar_tensor(max_output_boxes_per_class, "int64", "nms_max_out")
    iou, f_iou = _scalar_tensor(iou_threshold, boxes.dtype, "nms_iou")
    sth, f_sth = _scalar_tensor(score_threshold, scores.dtype, "nms_score_threshold")
    rows = b_ * c_ * n_
    rows = rows if isinstance(rows, int) else T.cast(rows, "int64")

    def kernel(ins, outs):
        ib = tir.ir_builder.create()
        bx, sc, mxb, ioub, sthb = (ib.buffer_ptr(t) for t in ins)
        sel, cnt = ib.buffer_ptr(outs[0]), ib.buffer_ptr(outs[1])
        total = ib.allocate("int64", (1,), name="total", scope="local")
        kept = ib.allocate("int64", (1,), name="kept", scope="local")
        ncand = ib.allocate("int32", (1,), name="ncand", scope="local")
        cand = ib.allocate("int32", (n_,), name="cand", scope="local")     # candidate box indices, sorted
        tmp = ib.allocate("int32", (n_,), name="tmp", scope="local")       # merge buffer
        alive = ib.allocate("int32", (n_,), name="alive", scope="local")
        limit = T.cast(mxb[f_mx], "int64")
        iou_t = T.cast(ioub[f_iou], boxes.dtype)
        score_t = T.cast(sthb[f_sth], scores.dtype)
        total[0] = T.const(0, "int64")
        with ib.for_range(0, b_, name="b") as b:
            with ib.for_range(0, c_, name="c") as c:
                # the boxes above the threshold, in index order (NaN scores fail the test)
                ncand[0] = 0
                with ib.for_range(0, n_, name="i") as i:
                    with ib.if_scope(sc[b, c, i] > score_t):
                        cand[ncand[0]] = i
                        ncand[0] = ncand[0] + 1
                _merge_sort_desc(ib, cand, tmp, ncand[0], lambda k: sc[b, c, k])
                kept[0] = T.const(0, "int64")
                with ib.for_range(0, ncand[0], name="i") as i:
                    alive[i] = 1
                with ib.for_range(0, ncand[0], name="i") as i:
                    with ib.if_scope(T.all(alive[i] > 0, T.any(limit < T.const(0, "int64"), kept[0] < limit))):
                        p = cand[i]
                        sel[total[0], 0] = T.cast(b, "int64")
                        sel[total[0], 1] = T.cast(c, "int64")
                        sel[total[0], 2] = T.cast(p, "int64")
                        total[0] = total[0] + T.const(1, "int64")
                        kept[0] = kept[0] + T.const(1, "int64")
                        with ib.for_range(i + 1, ncand[0], name="j") as j:
                            with ib.if_scope(T.all(alive[j] > 0, _suppresses(bx, b, p, cand[j], iou_t))):
                                alive[j] = 0
        cnt[0] = total[0]
        with ib.for_range(0, rows, name="r", dtype="int64") as r:
            with ib.if_scope(r >= total[0]):
                with ib.for_range(0, 3, name="k") as k:
                    sel[r, k] = T.const(0, "int64")
        return ib.get()

    outs = te.extern([(rows, 3), (1,)], [boxes, scores, mx, iou, sth], kernel, dtype=["int64", "int64"],
                     name="all_class_nms", tag="all_class_non_max_suppression")
    return list(outs)
