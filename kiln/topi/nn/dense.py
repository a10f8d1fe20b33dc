"""Dense, matmul and batch_matmul computes."""
from __future__ import annotations

from ... import te
from ...error import KilnError
from ...tir import op as T
from ...te.lower import REQUIRES
from ..broadcast import equal_requirement
from ..utils import get_const_tuple


def matmul(tensor_a, tensor_b, bias=None, out_dtype=None, transpose_a=False, transpose_b=False,
           auto_scheduler_rewritten_layout="", meta_schedule_original_shape=None):
    """``op(A) · op(B) (+ bias)`` for 2-D A and B; A may carry extra leading axes."""
    out_dtype = out_dtype or tensor_a.dtype
    a_shape, b_shape = get_const_tuple(tensor_a.shape), get_const_tuple(tensor_b.shape)
    if len(b_shape) != 2 or len(a_shape) < 2 and not (len(a_shape) >= 1 and not transpose_a):
        raise KilnError(f"matmul: expects a weight of rank 2, got shapes {a_shape} and {b_shape}")
    if transpose_a and len(a_shape) != 2:
        raise KilnError(f"matmul: transpose_a needs a 2-D input, got {a_shape}")
    k_a = a_shape[-2] if transpose_a else a_shape[-1]
    k_b = b_shape[1] if transpose_b else b_shape[0]
    n = b_shape[0] if transpose_b else b_shape[1]
    if k_a != k_b:
        raise KilnError(f"matmul: reduction sizes differ ({k_a} vs {k_b}) for shapes {a_shape} and {b_shape} "
                        f"(transpose_a={transpose_a}, transpose_b={transpose_b})")
    k = te.reduce_axis((0, k_a), name="k")
    lead = [a_shape[-1]] if transpose_a else list(a_shape[:-1])

    def body(*i):
        rows, col = i[:-1], i[-1]
        a = tensor_a[(k,) + tuple(rows)] if transpose_a else tensor_a[tuple(rows) + (k,)]
        b = tensor_b[col, k] if transpose_b else tensor_b[k, col]
        return T.sum(T.cast(a, out_dtype) * T.cast(b, out_dtype), axis=k)
    name = "T_matmul_NT" if (transpose_b and not transpose_a) else "T_matmul"
    out = te.compute(lead + [n], body, name=name, tag="matmul")
    if bias is not None:
        out = te.compute(out.shape, lambda *i: out(*i) + T.cast(bias[i[-1]], out_dtype), name="T_add",
                         tag="broadcast")
    return out


def dense(data, weight, bias=None, out_dtype=None, auto_scheduler_rewritten_layout="",
          meta_schedule_original_shape=None):
    """``data · weightᵀ (+ bias)``: data [..., K], weight [N, K] -> [..., N]."""
    out_dtype = out_dtype or data.dtype
    d_shape, w_shape = get_const_tuple(data.shape), get_const_tuple(weight.shape)
    if len(w_shape) != 2 or d_shape[-1] != w_shape[1]:
        raise KilnError(f"dense: data {d_shape} and weight {w_shape} do not fit (weight must be [units, {d_shape[-1]}])")
    k = te.reduce_axis((0, d_shape[-1]), name="k")

    def body(*i):
        return T.sum(T.cast(data[tuple(i[:-1]) + (k,)], out_dtype) * T.cast(weight[i[-1], k], out_dtype), axis=k)
    out = te.compute(list(d_shape[:-1]) + [w_shape[0]], body, name="T_dense", tag="dense")
    if bias is not None:
        out = te.compute(out.shape, lambda *i: out(*i) + T.cast(bias[i[-1]], out_dtype), name="T_add",
                         tag="broadcast")
    return out


def batch_matmul(tensor_a, tensor_b, oshape=None, out_dtype=None, transpose_a=False, transpose_b=True,
                 auto_scheduler_rewritten_layout="", meta_schedule_original_shape=None):
    """Batched matmul of [B, M, K] and [B, N, K] (``transpose_b``); batch 1 broadcasts."""
    out_dtype = out_dtype or tensor_a.dtype
    a_shape, b_shape = get_const_tuple(tensor_a.shape), get_const_tuple(tensor_b.shape)
    if len(a_shape) != 3 or len(b_shape) != 3:
        raise KilnError(f"batch_matmul: needs 3-D inputs, got {a_shape} and {b_shape}")
    ba, bb = a_shape[0], b_shape[0]
    static = isinstance(ba, int) and isinstance(bb, int)
    if static and ba != bb and 1 not in (ba, bb):
        raise KilnError(f"batch_matmul: batch sizes {ba} and {bb} do not broadcast")
    m, ka = (a_shape[2], a_shape[1]) if transpose_a else (a_shape[1], a_shape[2])
    n, kb = (b_shape[1], b_shape[2]) if transpose_b else (b_shape[2], b_shape[1])
    if isinstance(ka, int) and isinstance(kb, int) and ka != kb:
        raise KilnError(f"batch_matmul: reduction sizes differ ({ka} vs {kb}) for {a_shape} and {b_shape}")
    # unknown sizes are checked when the kernel runs (batches broadcast, K agrees): never a read out of bounds
    out_b = max(ba, bb) if static else (bb if isinstance(ba, int) and ba == 1 else ba)
    # (this compute broadcasts a batch only where it is the static 1: an unknown batch must equal the other)
    requires = [] if 1 in (ba, bb) else equal_requirement(ba, bb, "batch_matmul batch")
    requires += equal_requirement(ka, kb, "batch_matmul reduction (K)")
    if not isinstance(ka, int) and isinstance(kb, int):
        ka = kb
    k = te.reduce_axis((0, ka), name="k")

    def body(b, i, j):
        a_b = 0 if isinstance(ba, int) and ba == 1 else b
        b_b = 0 if isinstance(bb, int) and bb == 1 else b
        a = tensor_a[a_b, k, i] if transpose_a else tensor_a[a_b, i, k]
        w = tensor_b[b_b, j, k] if transpose_b else tensor_b[b_b, k, j]
        return T.sum(T.cast(a, out_dtype) * T.cast(w, out_dtype), axis=k)
    return te.compute((out_b, m, n), body, name="T_batch_matmul", tag="batch_matmul",
                      attrs={REQUIRES: requires} if requires else None)
