"""The schedule-lowering steps TVM exposes as ``te.schedule.*`` functions: ``InferBound``, ``ScheduleOps``,
``AutoInlineElemWise``, ``AutoInlineInjective``, ``AutoInlineBroadcast``.

TVM-era code lowers by hand: ``s = s.normalize(); bounds = te.schedule.InferBound(s);
stmt = te.schedule.ScheduleOps(s, bounds)``. These call the same steps ``schedule_to_primfunc`` uses.
"""
from __future__ import annotations

from ..error import ScheduleError
from ..tir import expr as E
from ..tir.stmt_functor import post_order_visit
from .tensor import ComputeOp


def InferBound(sch) -> dict:  # noqa: N802 (TVM's name)
    """IterVar -> Range of every loop of a normalized schedule (call ``sch.normalize()`` first)."""
    from .bound import infer_bound
    return infer_bound(sch)


def ScheduleOps(sch, dom_map: dict, debug_keep_trivial_loop: bool = False):  # noqa: N802
    """The TIR statement (Producer nodes, before storage flattening) that runs every stage of ``sch``."""
    from .schedule_ops import schedule_ops
    if not isinstance(dom_map, dict):
        raise ScheduleError("ScheduleOps: dom_map must be the dict te.schedule.InferBound returns")
    return schedule_ops(sch, dom_map)


def _reads_only(op, indices_ok) -> bool:
    """A compute without reduction each of whose tensor reads passes ``indices_ok(indices, axis_vars)``."""
    if not isinstance(op, ComputeOp) or op.reduce_axis or isinstance(op.body[0], E.Reduce):
        return False
    axis_vars = [iv.var for iv in op.axis]
    ok = [True]

    def check(node):
        if ok[0] and isinstance(node, E.ProducerLoad) and not indices_ok(node.indices, axis_vars):
            ok[0] = False

    for b in op.body:
        post_order_visit(b, check)
    return ok[0]


def _own_axes(indices, axis_vars) -> bool:
    return len(indices) == len(axis_vars) and all(a is b for a, b in zip(indices, axis_vars))


def _axes_subsequence(indices, axis_vars) -> bool:
    pos = 0
    for i in indices:
        while pos < len(axis_vars) and axis_vars[pos] is not i:
            pos += 1
        if pos == len(axis_vars):
            return False
        pos += 1
    return True


def _is_elemwise(op) -> bool:
    """A compute without reduction whose every tensor read indexes exactly its own axes, in order."""
    return _reads_only(op, _own_axes)


def _is_broadcast(op) -> bool:
    """A compute without reduction whose tensor reads index a subsequence of its axes (a broadcast)."""
    return _reads_only(op, _axes_subsequence)


def _auto_inline(sch, pred) -> None:
    for stage in sch.stages:
        if not stage.is_output and isinstance(stage.op, ComputeOp) and stage.op.num_outputs == 1 and pred(stage.op):
            stage.compute_inline()


def AutoInlineElemWise(sch) -> None:  # noqa: N802
    """Inline every non-output elementwise stage into its consumers (in place)."""
    _auto_inline(sch, _is_elemwise)


def AutoInlineBroadcast(sch) -> None:  # noqa: N802
    """Inline every non-output elementwise or broadcast stage (in place)."""
    _auto_inline(sch, _is_broadcast)


def AutoInlineInjective(sch) -> None:  # noqa: N802
    """Inline every non-output compute stage without a reduction (in place)."""
    _auto_inline(sch, lambda op: not op.reduce_axis and not isinstance(op.body[0], E.Reduce))


__all__ = ["InferBound", "ScheduleOps", "AutoInlineElemWise", "AutoInlineBroadcast", "AutoInlineInjective"]
