"""TVM's ``topi.gpu``: GPU (thread-bound) TE schedules, importable and lowerable without a GPU.

kiln generates code for the CPU only; these schedules bind loops to ``blockIdx``/``threadIdx`` axes so
TVM-era code that builds them (and inspects or lowers the result) runs. Building for ``cuda`` raises
kiln's clear no-GPU-backend error.
"""
from __future__ import annotations

from ... import te
from ...error import KilnError
from .. import tag

__all__ = ["schedule_injective", "schedule_reduce", "schedule_softmax", "dense_small_batch",
           "schedule_dense_small_batch", "dense_large_batch", "schedule_dense_large_batch", "bind_fused"]

NUM_THREAD = 512


def _outs(outs):
    return [outs] if isinstance(outs, te.Tensor) else list(outs)


def bind_fused(s, tensor, num_thread: int = NUM_THREAD):
    """Fuse the data-parallel axes of ``tensor``'s stage and bind them to (blockIdx.x, threadIdx.x)."""
    st = s[tensor]
    axes = list(st.op.axis)
    if not axes:
        fused = st.fuse()
    else:
        fused = st.fuse(*axes)
    bx, tx = st.split(fused, factor=num_thread)
    st.bind(bx, te.thread_axis("blockIdx.x"))
    st.bind(tx, te.thread_axis("threadIdx.x"))
    return bx, tx


def _ensure_schedule(outs):
    outs = _outs(outs)
    return outs, te.create_schedule([o.op for o in outs])


def schedule_injective(outs):
    """Each output: all axes fused, split by 512, bound to blocks and threads."""
    outs, s = _ensure_schedule(outs)
    te.schedule.AutoInlineInjective(s)
    for o in outs:
        bind_fused(s, o)
    return s


def schedule_reduce(outs):
    """Reductions: injective producers inlined, each reduction's output axes bound to threads, the
    reduction itself serial per thread."""
    outs, s = _ensure_schedule(outs)
    te.schedule.AutoInlineInjective(s)
    for st in list(s.stages):
        op = st.op
        if isinstance(op, te.ComputeOp) and st.attach_type == 1 and (op.reduce_axis or any(op is o.op for o in outs)):
            bind_fused(s, op.output(0))
    return s


def schedule_softmax(outs):
    """Softmax: every materialized stage (max, exp, sum, normalize) bound to blocks and threads."""
    outs, s = _ensure_schedule(outs)
    for st in list(s.stages):
        if isinstance(st.op, te.ComputeOp) and st.attach_type == 1:
            bind_fused(s, st.op.output(0), 64)
    return s


def _dense(data, weight, bias, out_dtype, name):
    if len(data.shape) != 2 or len(weight.shape) != 2:
        raise KilnError(f"{name}: data and weight must be 2-D, got {len(data.shape)}-D and {len(weight.shape)}-D")
    out_dtype = out_dtype or data.dtype
    _, k_in = data.shape
    k = te.reduce_axis((0, k_in), name="k")
    out = te.compute((data.shape[0], weight.shape[0]),
                     lambda i, j: te.sum(data[i, k].astype(out_dtype) * weight[j, k].astype(out_dtype), axis=k),
                     name="T_dense", tag="dense")
    if bias is not None:
        out = te.compute(out.shape, lambda i, j: out[i, j] + bias[j].astype(out_dtype), name="T_bias_add",
                         tag=tag.BROADCAST)
    return out


def dense_small_batch(cfg, data, weight, bias=None, out_dtype=None):
    """``data @ weight.T (+ bias)`` (TVM's AutoTVM template signature; ``cfg`` may be None)."""
    return _dense(data, weight, bias, out_dtype, "dense_small_batch")


def dense_large_batch(cfg, data, weight, bias=None, out_dtype=None):
    return _dense(data, weight, bias, out_dtype, "dense_large_batch")


def _schedule_dense(outs, split_k: int):
    outs, s = _ensure_schedule(outs)
    for st in list(s.stages):
        op = st.op
        if op.tag == "dense":
            i, j = st.op.axis
            (kk,) = st.op.reduce_axis
            ko, ki = st.split(kk, factor=split_k)
            fused = st.fuse(i, j)
            bx, tx = st.split(fused, factor=64)
            st.bind(bx, te.thread_axis("blockIdx.x"))
            st.bind(tx, te.thread_axis("threadIdx.x"))
        elif isinstance(op, te.ComputeOp) and any(o.op is op for o in outs):
            bind_fused(s, op.output(0), 64)
    return s


def schedule_dense_small_batch(cfg, outs):
    return _schedule_dense(outs, 4)


def schedule_dense_large_batch(cfg, outs):
    return _schedule_dense(outs, 8)
