"""The default CPU schedule every op can use: inline injective producers, parallelize the outer loop.

Each output stage gets its outer spatial axes fused and parallelized when the work is large enough,
and (``vectorize_inner``) its innermost axis vectorized when that axis is a small constant. Kernels stay
correct for any shape: no split leaves a tail, so nothing needs a bounds guard.
"""
from __future__ import annotations

from ... import te
from ...tir import expr as E
from .. import tag as _tag

# Work below this many output elements is not worth a parallel region.
PARALLEL_MIN_ELEMENTS = 1 << 14
VECTORIZE_MAX_EXTENT = 16
# Vectorizing needs a code generator that handles every expression in vector form; off until proven.
VECTORIZE_INNER = False


def _as_list(outs):
    if isinstance(outs, (list, tuple)):
        return list(outs)
    return [outs]


def _extent(iv):
    ext = iv.dom.extent if getattr(iv, "dom", None) is not None else None
    return int(ext.value) if isinstance(ext, E.IntImm) else None


def inline_injective(s, outs) -> None:
    """compute_inline every injective compute stage that is not an output."""
    out_ops = {t.op for t in outs}
    seen = set()
    read_by_extern = set()  # an extern stage reads its inputs' buffers: they must stay materialized

    def visit(op):
        if op in seen:
            return
        seen.add(op)
        if not hasattr(op, "axis"):
            read_by_extern.update(t.op for t in op.input_tensors)
        for t in op.input_tensors:
            visit(t.op)
    for t in outs:
        visit(t.op)
    seen.clear()

    def inline(op):
        if op in seen:
            return
        seen.add(op)
        if hasattr(op, "axis") and op not in out_ops and op not in read_by_extern \
                and _tag.is_injective(getattr(op, "tag", "")):
            s[op].compute_inline()
        for t in op.input_tensors:
            inline(t.op)
    for t in outs:
        inline(t.op)


def schedule_output_loops(s, op, vectorize_inner=None) -> None:
    """Parallelize the (fused) outer spatial loops of ``op``; optionally vectorize the innermost."""
    axes = list(getattr(op, "axis", []))
    if not axes:
        return
    vectorize_inner = VECTORIZE_INNER if vectorize_inner is None else vectorize_inner
    extents = [_extent(a) for a in axes]
    if any(e is None for e in extents):
        return
    total = 1
    for e in extents:
        total *= e
    stage = s[op]
    inner = None
    if vectorize_inner and len(axes) >= 2 and extents[-1] <= VECTORIZE_MAX_EXTENT and not getattr(op, "reduce_axis", None):
        inner = axes[-1]
        axes = axes[:-1]
    if total >= PARALLEL_MIN_ELEMENTS and axes:
        outer = axes[0] if len(axes) == 1 else stage.fuse(*axes[: max(1, len(axes) - 1)])
        stage.parallel(outer)
    if inner is not None:
        stage.vectorize(inner)


def default_schedule(outs, auto_inline: bool = True):
    """A schedule for ``outs``: injective producers inlined, outputs' outer loops parallel."""
    outs = _as_list(outs)
    s = te.create_schedule([t.op for t in outs])
    if auto_inline:
        inline_injective(s, outs)
    for t in outs:
        if hasattr(t.op, "axis"):
            schedule_output_loops(s, t.op)
    return s
