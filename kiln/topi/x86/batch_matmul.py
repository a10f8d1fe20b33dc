"""Batched matmul on x86 (TVM's ``batch_matmul.x86``): per batch the same blocked GEMM as dense.

The right operand is packed per call into ``[B, ceil(N / bn), K, bn]`` panels (both operands are usually
activations, e.g. attention scores, so nothing can be packed at compile time); the packing costs
``B·N·K`` copies against ``2·B·M·N·K`` flops. Batch and row/column blocks form the parallel loop. When ``bn``
does not divide N the GEMM runs over whole (zero-padded) panels and a copy stage drops the padding, as in
``dense_pack``.
"""
from __future__ import annotations

from ... import autotvm, te
from ...error import KilnError
from ...tir import op as T
from ..utils import get_const_tuple
from .dense import _ceil_div, _define_dense_space, padded_units, schedule_gemm_block
from .utils import as_list, is_static, reduction_flops, size_hint, traverse_inline, worth_parallel
from ...te.lower import REQUIRES
from ..broadcast import broadcast_index, broadcast_requirements, broadcast_shape, equal_requirement


class _Batch:
    """A 1-D shape holder for :func:`broadcast_index` (the batch extent of one operand)."""

    def __init__(self, extent):
        self.shape = [extent]


@autotvm.register_topi_compute("batch_matmul.x86")
def batch_matmul(cfg, tensor_a, tensor_b, out_shape=None, out_dtype=None, transpose_a=False, transpose_b=True):
    """``A [B, M, K] · B [B, N, K]ᵀ`` (``transpose_b``) or ``· B [B, K, N]``; a batch of 1 broadcasts."""
    out_dtype = out_dtype or tensor_a.dtype
    a_shape, b_shape = get_const_tuple(tensor_a.shape), get_const_tuple(tensor_b.shape)
    if len(a_shape) != 3 or len(b_shape) != 3:
        raise KilnError(f"batch_matmul.x86: needs 3-D inputs, got {a_shape} and {b_shape}")
    ba, bb = a_shape[0], b_shape[0]
    # symbolic batches (VM kernels) broadcast as topi.broadcast does: the output extent is the common one (or
    # max(a, b) for two different unknowns) and an operand whose unknown batch is 1 at run time reads index 0
    (batch,) = broadcast_shape([ba], [bb], "batch_matmul.x86 batch")
    M, K = (a_shape[2], a_shape[1]) if transpose_a else (a_shape[1], a_shape[2])
    N, kb = (b_shape[1], b_shape[2]) if transpose_b else (b_shape[2], b_shape[1])
    if is_static(K) and is_static(kb) and K != kb:
        raise KilnError(f"batch_matmul.x86: reduction sizes differ ({K} vs {kb}) for {a_shape} and {b_shape}")
    # unknown sizes are checked when the kernel runs (on the pack stage): batches broadcast, K agrees
    requires = (broadcast_requirements([[ba], [bb]], [batch], "batch_matmul.x86 batch")
                + equal_requirement(K, kb, "batch_matmul.x86 reduction (K)"))
    req = {REQUIRES: requires} if requires else None
    _define_dense_space(cfg, M, N, K)
    bn = cfg["tile_x"].size[-1]
    static_n = is_static(N)
    nb = _ceil_div(N, bn) if static_n else (N + (bn - 1)) // bn
    zero = T.const(0, tensor_b.dtype)

    def b_at(b, n, k):
        return tensor_b[b, n, k] if transpose_b else tensor_b[b, k, n]

    if static_n and N % bn == 0:
        packed = te.compute((bb, nb, K, bn), lambda b, z, k, x: b_at(b, z * bn + x, k), name="packed_b",
                            tag="batch_matmul_pack", attrs=req)
    else:
        # likely(): LoopPartition gives the whole panels (z < N // bn) a loop without the test; the clamped
        # index keeps a vectorized read of the last panel inside the tensor
        packed = te.compute((bb, nb, K, bn), lambda b, z, k, x: T.if_then_else(
            T.likely(z * bn + x < N), b_at(b, T.min(z * bn + x, N - 1), k), zero), name="packed_b",
            tag="batch_matmul_pack", attrs=req)
    k = te.reduce_axis((0, K), name="k")

    def body(b, i, j):
        (a_b,) = broadcast_index(_Batch(ba), [b], [batch])
        (b_b,) = broadcast_index(_Batch(bb), [b], [batch])
        a = tensor_a[a_b, k, i] if transpose_a else tensor_a[a_b, i, k]
        return te.sum(T.cast(a, out_dtype) * T.cast(packed[b_b, j // bn, k, j % bn], out_dtype), axis=k)
    cfg.add_flop(2 * size_hint(batch) * size_hint(M) * size_hint(N) * size_hint(K))
    n_pad = nb * bn
    if static_n and n_pad == N:
        return te.compute((batch, M, N), body, name="T_batch_matmul", tag="batch_matmul")
    # columns padded to whole panels: every micro-kernel block full; the copy to [batch, M, N] is guarded
    padded = te.compute((batch, M, n_pad), body, name="T_batch_matmul", tag="batch_matmul", attrs={"units": N})
    return te.compute((batch, M, N), lambda b, i, j: padded[b, i, j], name="T_batch_matmul_unpad",
                      tag="injective")


@autotvm.register_topi_schedule("batch_matmul.x86")
def schedule_batch_matmul(cfg, outs):
    """Schedule of :func:`batch_matmul` and its fused epilogue."""
    outs = as_list(outs)
    s = te.create_schedule([o.op for o in outs])

    def callback(op):
        if op.tag != "batch_matmul":
            return
        packed = op.input_tensors[-1] if op.input_tensors[-1].op.tag == "batch_matmul_pack" else None
        for t in op.input_tensors:
            if t.op.tag == "batch_matmul_pack":
                packed = t
        if packed is not None and worth_parallel(reduction_flops(op.output(0))):
            if is_static(packed.shape[1]):
                s[packed].parallel(s[packed].fuse(packed.op.axis[0], packed.op.axis[1]))
            else:  # panels over a run-time N: the panel loop stays inside, for LoopPartition (see the compute)
                s[packed].parallel(packed.op.axis[0])
        schedule_gemm_block(s, cfg, op.output(0), outs[0].op, n_batch=1, staged=padded_units(op) is not None)
    traverse_inline(s, outs[0].op, callback)
    return s
