"""Injective, elementwise, pooling and reduction schedules for x86: fused, vectorized, parallel.

Every non-inlined stage gets its leading data-parallel axes fused into one parallel loop (enough chunks for the
cores) and its innermost data-parallel axis split by the SIMD width and vectorized when the width divides it
(reduction axes are moved outside that vector axis, so e.g. a pool over NCHW8c reduces 8 channels at once).
"""
from __future__ import annotations

from ... import te
from ...tir import expr as E
from ...te.schedule import kInline, kInlinedAlready
from .. import generic
from ..generic.default import PARALLEL_MIN_ELEMENTS, inline_injective
from .utils import as_list, simd_width, size_hint


def _const_extent(iv):
    ext = iv.dom.extent
    return int(ext.value) if isinstance(ext, E.IntImm) else None


def schedule_stage_loops(s, op) -> None:
    """Parallelize and vectorize one compute stage in place."""
    axes = list(s[op].op.axis)
    if not axes:
        return
    extents = [_const_extent(a) for a in axes]
    symbolic = [e is None for e in extents]
    # a VM kernel's symbolic extents count at their size hint for the decisions below; the loops keep
    # running over the run-time extent (only a static innermost extent is split for the vector lanes)
    extents = [size_hint(a.dom.extent) if e is None else e for a, e in zip(axes, extents)]
    reduce_axes = list(getattr(s[op].op, "reduce_axis", []) or [])
    lanes = simd_width(op.output(0).dtype) if op.output(0).dtype.startswith("float") else simd_width("float32")
    stage = s[op]
    inner = None
    if not symbolic[-1] and extents[-1] % lanes == 0 and extents[-1] >= lanes:
        outer_last, inner = stage.split(axes[-1], factor=lanes)
        axes = axes[:-1] + [outer_last]
        extents = extents[:-1] + [extents[-1] // lanes]
    total = 1
    for e in extents:
        total *= e
    if reduce_axes and inner is not None:
        stage.reorder(*axes, *reduce_axes, inner)
    if total * (lanes if inner is not None else 1) >= PARALLEL_MIN_ELEMENTS // 4 and len(axes) >= 1:
        # a symbolic extent may be 1 at run time (batch 1): it counts as 1 here, so the next axes join the
        # parallel loop (dividing the fused index by run-time extents costs once per outer iteration)
        fused, prod = [axes[0]], 1 if symbolic[0] else extents[0]
        for ax, e, sym in zip(axes[1:], extents[1:], symbolic[1:len(axes)]):
            if prod >= 64:
                break
            fused.append(ax)
            prod *= 1 if sym else e
        if len(fused) == len(axes) and reduce_axes and inner is None:
            pass  # keep a serial loop inside when the whole nest would become one fused parallel loop
        par = fused[0] if len(fused) == 1 else stage.fuse(*fused)
        stage.parallel(par)
    if inner is not None:
        stage.vectorize(inner)


def schedule_injective_from_existing(sch, out):
    """Add the x86 loop schedule of ``out`` to an existing schedule."""
    schedule_stage_loops(sch, out.op)
    return sch


def schedule_injective(outs):
    """Injective / elementwise / broadcast groups: producers inlined, output parallel + vectorized."""
    outs = as_list(outs)
    s = te.create_schedule([o.op for o in outs])
    inline_injective(s, outs)
    for o in outs:
        if hasattr(o.op, "axis"):
            schedule_stage_loops(s, o.op)
    return s


def _schedule_all_stages(outs):
    """Every remaining (non-inlined) compute stage gets the loop schedule (for reductions, pools, softmax)."""
    outs = as_list(outs)
    s = te.create_schedule([o.op for o in outs])
    inline_injective(s, outs)
    for stage in list(s.stages):
        op = stage.op
        if not hasattr(op, "axis") or not op.input_tensors:
            continue
        if stage.attach_type in (kInline, kInlinedAlready):
            continue
        schedule_stage_loops(s, op)
    return s


schedule_elemwise = schedule_injective
schedule_broadcast = schedule_injective
schedule_concatenate = schedule_injective
schedule_reduce = _schedule_all_stages
schedule_pool = _schedule_all_stages
schedule_adaptive_pool = _schedule_all_stages
schedule_global_pool = _schedule_all_stages
def schedule_softmax(outs):
    """Softmax along the last axis, one row at a time: the row's max, exponentials, sum and normalization
    are computed inside the (parallel) loop over rows, so a row is read from memory once and stays in cache
    across the four stages; the exponential and normalization loops are vectorized. Other axes keep the
    stage-by-stage schedule."""
    outs = as_list(outs)
    norm = outs[0].op
    if len(outs) != 1 or getattr(norm, "tag", "") != "softmax_output" or len(norm.axis) < 2:
        return _schedule_all_stages(outs)
    ndim = len(norm.axis)
    axis = int(norm.attrs["axis"]) if "axis" in (norm.attrs or {}) else -1
    if axis % ndim != ndim - 1:
        return _schedule_all_stages(outs)
    by_name = {t.op.name: t.op for t in norm.input_tensors}
    ex, sm = by_name.get("T_softmax_exp"), by_name.get("T_softmax_expsum")
    mx = {t.op.name: t.op for t in ex.input_tensors}.get("T_softmax_maxelem") if ex is not None else None
    if ex is None or sm is None or mx is None:
        return _schedule_all_stages(outs)
    s = te.create_schedule([norm])
    inline_injective(s, outs)
    stage = s[norm]
    *rows, col = list(stage.op.axis)
    row = rows[0] if len(rows) == 1 else stage.fuse(*rows)
    stage.parallel(row)
    lanes = simd_width(norm.output(0).dtype)
    n = _const_extent(col)
    for op in (mx, ex, sm):
        s[op].compute_at(stage, row)
    if n is not None and n % lanes == 0 or n is None:
        # a symbolic row length (a VM kernel): the guarded last vector is split off by LoopPartition
        _, vi = stage.split(col, factor=lanes)
        stage.vectorize(vi)
        _, evi = s[ex].split(s[ex].op.axis[-1], factor=lanes)
        s[ex].vectorize(evi)
    return s


schedule_log_softmax = _schedule_all_stages
schedule_layer_norm = _schedule_all_stages


# -- registrations: these are topi.generic's schedules on targets with the "cpu" key ------------------------------
for _generic, _x86 in ((generic.schedule_injective, schedule_injective),
                       (generic.schedule_injective_from_existing, schedule_injective_from_existing),
                       (generic.schedule_elemwise, schedule_elemwise),
                       (generic.schedule_broadcast, schedule_broadcast),
                       (generic.schedule_concatenate, schedule_concatenate),
                       (generic.schedule_reduce, schedule_reduce),
                       (generic.schedule_pool, schedule_pool),
                       (generic.schedule_adaptive_pool, schedule_adaptive_pool),
                       (generic.schedule_global_pool, schedule_global_pool),
                       (generic.schedule_softmax, schedule_softmax),
                       (generic.schedule_log_softmax, schedule_log_softmax),
                       (generic.schedule_layer_norm, schedule_layer_norm)):
    _generic.register("cpu", _x86)
