"""InferBound: the range of every iteration variable of every stage of a normalized schedule.

Stages are visited consumers first. Outputs and placeholders cover their whole shape. Any
other stage covers the union of the regions its consumers read, where a consumer's loops
*outside* the attach point of this stage stay symbolic (the producer is recomputed per
iteration of those loops) and the loops *inside* it are relaxed over their whole range.
Derived axes then get their ranges from the root axes through the stage's relations.
"""
from __future__ import annotations

from ..error import LoweringError
from ..tir import expr as E
from ..tir import op as tir_op
from ..tir.stmt_functor import StmtExprVisitor
from ..arith import Analyzer, IntSet, eval_set, union
from . import message_passing as mp
from .schedule import _post_dfs_ops, kGroupRoot, kInline, kInlinedAlready, kScope
from .tensor import ComputeOp, ExternOp, PlaceholderOp

_STORAGE_RANK = {"global": 0, "shared": 1, "warp": 2, "local": 3}


def _thread_rank(tag: str) -> int:
    if tag.startswith("vthread") or tag == "cthread":
        return 1
    if tag.startswith("blockIdx."):
        return 0
    if tag.startswith("threadIdx."):
        return 1
    raise LoweringError(f"unknown thread tag {tag!r} (expected blockIdx.x/y/z, threadIdx.x/y/z or vthread)")


def _storage_rank(scope: str) -> int:
    base = scope.split(".")[0] if scope else "global"
    if base not in _STORAGE_RANK:
        return 0
    return _STORAGE_RANK[base]


class _Ctx:
    def __init__(self, sch):
        self.feed_graph: dict = {}  # tensor -> the operations that read it
        for op in _post_dfs_ops([sch[op].op for op in sch.outputs]):
            for t in op.input_tensors:
                self.feed_graph.setdefault(t, []).append(op)
        self.bind_map = {}
        self.op2stage = {}
        for st in sch.stages:
            for iv, attr in st.iter_var_attrs.items():
                if attr.bind_thread is not None:
                    self.bind_map[iv] = attr.bind_thread
            self.op2stage[id(st.op)] = st
        self.attach_path = create_attach_path(sch)


def create_attach_path(sch) -> dict:
    """For each stage (by id of its op): the loops enclosing its attach point, innermost first."""
    ret = {}
    for stage in sch.stages:
        path = []
        visited = set()
        s = stage
        while s is not None:
            if id(s) in visited:
                raise LoweringError(f"compute_at attachments of stage '{stage.op.name}' form a cycle")
            visited.add(id(s))
            if s.attach_type != kScope:
                break
            ivar, parent = s.attach_ivar, s.attach_stage
            start = False
            for iv in reversed(parent.leaf_iter_vars):
                if not start and iv is ivar:
                    start = True
                if start:
                    path.append(iv)
            if not start:
                loops = ", ".join(iv.var.name for iv in parent.leaf_iter_vars)
                raise LoweringError(
                    f"stage '{s.op.name}' is computed at axis '{ivar.var.name}' of stage '{parent.op.name}', but "
                    f"that axis is no longer a loop of '{parent.op.name}' (its loops are [{loops}]); it was "
                    "probably split or fused after compute_at")
            s = parent
        ret[id(stage.op)] = path
    return ret


def _need_relax(iv, found_attach, bind_map, scope_rank) -> bool:
    bound = bind_map.get(iv)
    tag = bound.thread_tag if bound is not None else iv.thread_tag
    if not tag or tag == "pipeline":
        return not found_attach
    return scope_rank <= _thread_rank(tag)


def _infer_storage_rank(stage, ctx) -> int:
    if stage.scope:
        return _storage_rank(stage.scope)
    max_rank = -1
    for iv in ctx.attach_path[id(stage.op)]:
        bound = ctx.bind_map.get(iv)
        tag = bound.thread_tag if bound is not None else iv.thread_tag
        if tag and tag != "pipeline":
            max_rank = max(max_rank, _thread_rank(tag))
    return {-1: 0, 0: 1, 1: 3}[max_rank]


def _prop_bound_to_inputs(op, dom_map, tmap, ana: Analyzer):
    """Append, per read of a tensor in ``tmap``, the IntSet of each index to ``tmap[t]``.

    ``ana`` knows the ranges of the loops already bounded; an index set that provably covers the
    whole axis is replaced by the axis itself (a simpler, equally tight region)."""
    if isinstance(op, ExternOp):
        for t in op.inputs:
            if t in tmap:
                for i, s in enumerate(t.shape):
                    tmap[t][i].append(IntSet.interval(tir_op.const(0, s.dtype), ana.simplify(tir_op.sub(s, 1))))
        return
    if not isinstance(op, ComputeOp):
        return

    class _V(StmtExprVisitor):
        def visit_ProducerLoad(self, node):
            t = node.producer
            if t in tmap:
                for i, idx in enumerate(node.indices):
                    s = eval_set(idx, dom_map, ana)
                    shape_max = ana.simplify(tir_op.sub(t.shape[i], 1))
                    zero = tir_op.const(0, t.shape[i].dtype)
                    if (not s.has_lower_bound() or ana.can_prove(tir_op.less_equal(s.min_value, zero))) and \
                            (not s.has_upper_bound() or ana.can_prove(tir_op.less_equal(shape_max, s.max_value))):
                        s = IntSet.interval(zero, shape_max)
                    tmap[t][i].append(s)
            for idx in node.indices:
                self.visit(idx)

    v = _V()
    for b in op.body:
        v(b)


def _infer_root_bound(stage, ctx, rmap):
    if stage.attach_type == kInline:
        raise LoweringError("call Schedule.normalize() before lowering (a stage is still marked inline)")
    if stage.attach_type == kInlinedAlready:
        return
    op = stage.op
    if stage.is_output or isinstance(op, PlaceholderOp):
        for iv in op.root_iter_vars:
            rmap[iv] = iv.dom
        return
    tmap = {}
    consumers = []
    for i in range(op.num_outputs):
        t = op.output(i)
        tmap[t] = [[] for _ in range(t.ndim)]
        for c in ctx.feed_graph.get(t, []):
            if not any(c is x for x in consumers):
                consumers.append(c)
    scope_rank = _infer_storage_rank(stage, ctx)
    stage_attach = ctx.attach_path[id(op)]
    known = Analyzer()
    for iv, r in rmap.items():
        if r is not None:
            known.bind(iv.var, r, allow_override=True)
    for cop in consumers:
        cstage = ctx.op2stage.get(id(cop))
        if cstage is None:
            raise LoweringError(f"internal: no stage for consumer {cop.name} of {op.name}")
        relax_set = {}
        up_state = {}
        found_attach = False
        for iv in reversed(cstage.leaf_iter_vars):
            if stage_attach and iv is stage_attach[0]:
                found_attach = True
            vrange = rmap[iv]
            if known.can_prove_equal(vrange.extent, 1):
                up_state[iv] = IntSet.single_point(vrange.min)
            elif not _need_relax(iv, found_attach, ctx.bind_map, scope_rank):
                up_state[iv] = IntSet.single_point(iv.var)
            else:
                up_state[iv] = IntSet.from_range(vrange)
        for iv in ctx.attach_path[id(cop)]:
            if stage_attach and iv is stage_attach[0]:
                found_attach = True
            vrange = rmap[iv]
            if _need_relax(iv, found_attach, ctx.bind_map, scope_rank):
                relax_set[iv.var] = IntSet.from_range(vrange)
                bound = ctx.bind_map.get(iv)
                if bound is not None:
                    relax_set[bound.var] = IntSet.from_range(vrange)
        if stage_attach and not found_attach:
            at = stage.attach_stage.op.name if stage.attach_stage is not None else "?"
            raise LoweringError(
                f"invalid schedule: stage '{op.name}' is computed at axis '{stage_attach[0].var.name}' of stage "
                f"'{at}', but its consumer '{cop.name}' is not computed inside that loop; attach "
                f"'{cop.name}' inside it too (compute_at or compute_inline), or attach '{op.name}' to "
                f"'{cop.name}'")
        mp.pass_up_domain(cstage, rmap, up_state)
        dom_map = {}
        for iv in cop.root_iter_vars:
            r = up_state[iv].cover_range(iv.dom) if iv in up_state else iv.dom
            if relax_set:
                lo = eval_set(r.min, relax_set, known).min_value
                hi = eval_set(tir_op.sub(tir_op.add(r.min, r.extent), 1), relax_set, known).max_value
                dom_map[iv.var] = IntSet.interval(lo, hi)
            else:
                dom_map[iv.var] = IntSet.from_range(r)
        _prop_bound_to_inputs(cop, dom_map, tmap, known)
    _gather_bound(stage, tmap, rmap)


def _gather_bound(stage, tmap, rmap):
    op = stage.op
    if isinstance(op, ComputeOp):
        for i, iv in enumerate(op.axis):
            sets = []
            for k in range(op.num_outputs):
                sets.extend(tmap[op.output(k)][i])
            if not sets:
                rmap[iv] = iv.dom
                continue
            rmap[iv] = union(sets).cover_range(iv.dom)
        for iv in op.reduce_axis:
            rmap[iv] = iv.dom


def infer_bound(sch) -> dict:
    """IterVar -> Range for every axis of every (non-inlined) stage of a normalized schedule."""
    ctx = _Ctx(sch)
    rmap: dict = {}
    for stage in reversed(sch.stages):
        _infer_root_bound(stage, ctx, rmap)
        if stage.attach_type == kInlinedAlready:
            continue
        mp.pass_down_domain(stage, rmap)
    ana = Analyzer()
    out = {}
    for iv, r in rmap.items():
        out[iv] = E.Range.from_min_extent(ana.simplify(r.min), ana.simplify(r.extent))
    return out


__all__ = ["infer_bound", "create_attach_path", "kGroupRoot"]
