"""Schedule primitives that rewrite the dataflow: cache_read, cache_write, rfactor, inlining.

They create new operations and rewire the readers of a tensor; axes (IterVars) of the
rewritten operations are kept, so existing splits and annotations stay valid.
"""
from __future__ import annotations

from ..error import ScheduleError
from ..tir import expr as E
from ..tir import op as tir_op
from ..tir.stmt_functor import StmtExprMutator, substitute
from ..arith import Analyzer
from . import message_passing as mp
from .operation import compute
from .schedule import (Fuse, Rebase, Split, Stage, Singleton, kGroupRoot, kInline, kInlinedAlready, kScope,
                       _as_op)
from .tensor import ComputeOp, Tensor


def replace_dataflow(stages, vmap: dict, rvmap: dict) -> None:
    """Make every stage read ``vmap[t]`` instead of ``t`` (ops rebuilt where they change)."""
    for s in stages:
        op = s.op.replace_inputs(vmap) if hasattr(s.op, "replace_inputs") else s.op
        if op is not s.op:
            for i in range(op.num_outputs):
                old = s.op.output(i)
                orig = rvmap.get(old)
                if orig is not None:
                    vmap[orig] = op.output(i)
                else:
                    vmap[old] = op.output(i)
                    rvmap[op.output(i)] = old
            s.op = op


def _stage_pos(sch, stage) -> int:
    for i, s in enumerate(sch.stages):
        if s is stage:
            return i
    raise ScheduleError(f"stage {stage.op.name} is not in the schedule")


# --------------------------------------------------------------------------------------------
# cache_read
# --------------------------------------------------------------------------------------------
def cache_read(sch, tensor, scope: str, readers):
    if not isinstance(tensor, Tensor):
        raise ScheduleError(f"cache_read: expected a te.Tensor, got {type(tensor).__name__}")
    if not isinstance(readers, (list, tuple)):
        readers = [readers]
    if not readers:
        raise ScheduleError(f"cache_read of {tensor.name}: give at least one reader")
    base = tensor.op.name if tensor.op.num_outputs == 1 else f"{tensor.op.name}.v{tensor.value_index}"
    name = base
    existing = {s.op.name for s in sch.stages}
    while f"{name}.{scope}" in existing:
        name += ".d"
    name = f"{name}.{scope}"
    src_stage = sch[tensor]
    sugar = src_stage.op.output(tensor.value_index)
    cache = compute(sugar.shape, lambda *i: sugar(*i), name=name)
    vsub = {sugar: cache}
    vmap, rvmap = {}, {}
    for r in readers:
        st = sch[_as_op(r, "cache_read")]
        new_op = st.op.replace_inputs(vsub) if hasattr(st.op, "replace_inputs") else st.op
        if new_op is st.op:
            raise ScheduleError(
                f"cache_read of {tensor.name}: stage '{st.op.name}' does not read {tensor.name}, so it cannot "
                "be one of the readers")
        for i in range(new_op.num_outputs):
            vmap[st.op.output(i)] = new_op.output(i)
            rvmap[new_op.output(i)] = st.op.output(i)
        st.op = new_op
    replace_dataflow(sch.stages, vmap, rvmap)
    pos = _stage_pos(sch, src_stage)
    cs = Stage(cache.op, sch)
    cs.scope = scope
    sch.stages.insert(pos + 1, cs)
    sch.stage_map[cache.op] = cs
    cs.group = src_stage.group
    return cache


# --------------------------------------------------------------------------------------------
# cache_write
# --------------------------------------------------------------------------------------------
def cache_write(sch, tensor, scope: str):
    tensors = list(tensor) if isinstance(tensor, (list, tuple)) else [tensor]
    if not tensors or not all(isinstance(t, Tensor) for t in tensors):
        raise ScheduleError("cache_write: expected a te.Tensor or a list of the outputs of one operation")
    op0 = tensors[0].op
    if any(t.op is not op0 for t in tensors):
        raise ScheduleError("cache_write: all tensors must be outputs of the same operation")
    orig = sch[tensors[0]]
    compute_op = orig.op
    if not isinstance(compute_op, ComputeOp):
        raise ScheduleError(f"cache_write of {tensors[0].name}: only compute operations can be cache-written")
    if orig.attach_type in (kInline, kInlinedAlready):
        raise ScheduleError(f"cache_write of {tensors[0].name}: the stage is inlined")
    if len(tensors) != compute_op.num_outputs and compute_op.num_outputs > 1:
        raise ScheduleError(
            f"cache_write of {tensors[0].name}: pass all {compute_op.num_outputs} outputs of the operation")

    red_axis = set(id(iv) for iv in compute_op.reduce_axis)
    dom_map = {iv: iv.dom for iv in compute_op.axis}
    mp.pass_down_domain(orig, dom_map, allow_missing=True)
    value_map = {}
    new_axis = []
    vsub2new = {}
    ana = Analyzer()
    for iv in orig.leaf_iter_vars:
        if id(iv) in red_axis:
            continue
        if iv.iter_type != E.IterVar.DataPar or iv not in dom_map:
            raise ScheduleError(
                f"cache_write of {tensors[0].name}: axis '{iv.var.name}' mixes reduction and data-parallel "
                "iteration; cache_write can only re-layout data-parallel axes")
        dom = dom_map[iv]
        new_iv = E.IterVar(dom, E.Var(iv.var.name + ".c", iv.var.dtype), iv.iter_type)
        new_axis.append(new_iv)
        if ana.can_prove_equal(dom.extent, 1):
            value_map[iv] = dom.min
        else:
            value_map[iv] = iv.var
            vsub2new[iv.var] = new_iv.var
    mp.pass_up_index(orig, dom_map, value_map, allow_missing=True)
    skip = set(compute_op.reduce_axis)
    preds = mp.make_bound_check(orig, dom_map, value_map, True, skip)
    vsub = {iv.var: value_map[iv] for iv in compute_op.axis if iv in value_map}

    bodies = []
    first = None
    for b in compute_op.body:
        nb = _subst_with_combiner(b, vsub)
        nb = _inject_predicate(preds, nb)
        nb = _subst_with_combiner(nb, vsub2new)
        if isinstance(nb, E.Reduce):
            if first is None:
                first = nb
            else:
                nb = E.Reduce(first.combiner, first.source, first.axis, first.condition, nb.value_index, nb.init)
        bodies.append(nb)
    # reader indices: the leaf (non-reduction) axes of the original stage, from its root axes
    value_map2 = {iv: iv.var for iv in compute_op.axis}
    mp.pass_down_index(orig, dom_map, value_map2, allow_missing=True)
    args = [value_map2[iv] for iv in orig.leaf_iter_vars if id(iv) not in red_axis]
    cache_op = ComputeOp(f"{compute_op.name}.{scope}", compute_op.tag, compute_op.attrs, new_axis, bodies)
    new_bodies = [cache_op.output(i)(*args) for i in range(compute_op.num_outputs)]
    orig_new_op = ComputeOp(compute_op.name, compute_op.tag, compute_op.attrs, compute_op.axis, new_bodies)

    vmap, rvmap = {}, {}
    for i in range(compute_op.num_outputs):
        vmap[compute_op.output(i)] = orig_new_op.output(i)
        rvmap[orig_new_op.output(i)] = compute_op.output(i)
    replace_dataflow(sch.stages, vmap, rvmap)
    orig.op = orig_new_op
    orig.all_iter_vars = list(orig_new_op.root_iter_vars)
    orig.leaf_iter_vars = list(orig.all_iter_vars)
    orig.relations = []
    pos = _stage_pos(sch, orig)
    cs = Stage(cache_op, sch)
    cs.scope = scope
    sch.stages.insert(pos, cs)
    sch.stage_map[cache_op] = cs
    cs.group = orig.group
    outs = cache_op.outputs
    return outs if isinstance(tensor, (list, tuple)) else outs[0]


def _subst_with_combiner(expr, vmap):
    """``substitute`` that also rewrites a reduction's combiner and identity, which may use the
    compute's axes (a loop-dependent reducer); plain substitution treats the combiner as a leaf."""
    out = substitute(expr, vmap)
    if not isinstance(out, E.Reduce) or not vmap:
        return out
    c = out.combiner
    result = [substitute(r, vmap) for r in c.result]
    ident = [substitute(r, vmap) for r in c.identity_element]
    if all(a is b for a, b in zip(result, c.result)) and all(a is b for a, b in zip(ident, c.identity_element)):
        return out
    comb = E.CommReducer(c.lhs, c.rhs, result, ident)
    return E.Reduce(comb, out.source, out.axis, out.condition, out.value_index, out.init)


def _inject_predicate(preds, body):
    if not preds:
        return body
    cond = tir_op.all(*preds)
    if isinstance(body, E.Reduce):
        return E.Reduce(body.combiner, body.source, body.axis, tir_op.logical_and(body.condition, cond),
                        body.value_index, body.init)
    return tir_op.Select(cond, body, tir_op.const(0, body.dtype))


# --------------------------------------------------------------------------------------------
# rfactor
# --------------------------------------------------------------------------------------------
def rfactor(sch, tensor, axis, factor_axis: int = 0):
    if not isinstance(tensor, Tensor):
        raise ScheduleError(f"rfactor: expected a te.Tensor, got {type(tensor).__name__}")
    st = sch[tensor]
    op = st.op
    if not isinstance(op, ComputeOp) or not op.reduce_axis:
        raise ScheduleError(f"rfactor of {tensor.name}: it is not a reduction")
    if not isinstance(axis, E.IterVar) or axis.iter_type != E.IterVar.CommReduce:
        raise ScheduleError(f"rfactor of {tensor.name}: can only factor a reduction axis, got {axis!r}")
    st._find_leaf(axis, "rfactor")
    touch = {axis: 1}
    mp.pass_up_bitmask_or(st, touch)
    mp.pass_down_bitmask_or(st, touch)
    for iv in op.axis:
        if iv in touch:
            raise ScheduleError(f"rfactor of {tensor.name}: the factored axis is fused with a data-parallel axis")
    skip = set(op.axis)
    dom_map = {}
    for iv in op.reduce_axis:
        if iv in touch:
            dom_map[iv] = iv.dom
        else:
            skip.add(iv)
    mp.pass_down_domain(st, dom_map, allow_missing=True)
    ana = Analyzer()
    value_map = {}
    for iv in st.leaf_iter_vars:
        if iv in touch:
            dom = dom_map[iv]
            value_map[iv] = dom.min if ana.can_prove_equal(dom.extent, 1) else iv.var
    mp.pass_up_index(st, dom_map, value_map, allow_missing=True)
    preds = mp.make_bound_check(st, dom_map, value_map, True, skip)

    n_axis = len(op.axis)
    pos = factor_axis if factor_axis >= 0 else n_axis + 1 + factor_axis
    if not 0 <= pos <= n_axis:
        raise ScheduleError(f"rfactor of {tensor.name}: factor_axis {factor_axis} is out of range for "
                            f"{n_axis} output axes")
    fdom = dom_map[axis]
    if not ana.can_prove_equal(fdom.min, 0):
        raise ScheduleError(f"rfactor of {tensor.name}: the factored domain must start at 0")
    fiv = E.IterVar(fdom, axis.var, E.IterVar.DataPar)
    new_axis = list(op.axis)
    new_axis.insert(pos, fiv)

    reduce = op.body[tensor.value_index]
    preds.append(reduce.condition)
    preds = [p for p in preds if not (isinstance(p, E.IntImm) and p.value)]
    predicate = tir_op.likely(tir_op.all(*preds)) if preds else tir_op.const(True, "bool")
    vsub = {}
    new_red = []
    for iv in op.reduce_axis:
        if iv not in touch:
            new_red.append(iv)
        else:
            vsub[iv.var] = value_map[iv]
    for iv in st.leaf_iter_vars:
        if iv in touch and iv is not axis:
            if iv.iter_type != E.IterVar.CommReduce:
                raise ScheduleError(f"rfactor of {tensor.name}: axis {iv.var.name} is not a reduction axis")
            new_red.append(E.IterVar(dom_map[iv], iv.var, iv.iter_type, iv.thread_tag))
    new_source = [substitute(s, vsub) for s in reduce.source]
    new_pred = substitute(predicate, vsub)
    bodies = [E.Reduce(reduce.combiner, new_source, new_red, new_pred, i, None)
              for i in range(len(reduce.source))]
    factor_op = ComputeOp(op.name + ".rf", op.tag, op.attrs, new_axis, bodies)
    fstage = Stage(factor_op, sch)
    sch.stages.insert(_stage_pos(sch, st), fstage)
    sch.stage_map[factor_op] = fstage
    fstage.group = st.group

    repl_axis = E.IterVar(fdom, E.Var(axis.var.name + ".v", axis.var.dtype), E.IterVar.CommReduce)
    factor_tensors = factor_op.outputs
    old_tensors = op.outputs
    size = len(factor_tensors)

    def fcompute(*i):
        idx = list(i)
        idx.insert(pos, repl_axis.var)
        exprs = [t(*idx) for t in factor_tensors]
        return [E.Reduce(reduce.combiner, exprs, [repl_axis], tir_op.const(True, "bool"), k, None)
                for k in range(size)]

    # one output per reducer value; the last `size` of a multi-output reduction
    repl = compute(old_tensors[0].shape, lambda *i: fcompute(*i), name=op.name + ".repl")
    vmap, rvmap = {}, {}
    for k in range(size):
        vmap[old_tensors[k]] = repl[k]
        rvmap[repl[k]] = old_tensors[k]
    replace_dataflow(sch.stages, vmap, rvmap)
    st.op = repl[0].op
    st.all_iter_vars = list(st.op.root_iter_vars)
    st.leaf_iter_vars = list(st.all_iter_vars)
    st.relations = []
    st.iter_var_attrs = {}
    return factor_tensors[0] if size == 1 else factor_tensors


# --------------------------------------------------------------------------------------------
# normalize: inline and rebase
# --------------------------------------------------------------------------------------------
class _Inliner(StmtExprMutator):
    """Replaces loads of inlined tensors by their (already fully inlined) bodies."""

    def __init__(self, bodies: dict):
        self.bodies = bodies   # tensor -> (axis vars, body)

    def visit_ProducerLoad(self, node):
        idx = self._mutate_value(node.indices)
        hit = self.bodies.get(node.producer)
        if hit is not None:
            args, body = hit
            # the index takes the axis variable's dtype (TVM's Inline casts too): an int64 index from a
            # consumer (take with int64 indices) must not meet int32 arithmetic of the inlined body
            return substitute(body, {a: (i if i.dtype == a.dtype else E.Cast(a.dtype, i)) for a, i in zip(args, idx)})
        return node if idx is node.indices else E.ProducerLoad(node.producer, idx)


def inject_inline(sch) -> None:
    """Substitute the bodies of stages marked compute_inline into their readers (in place).

    Stages are in producer-before-consumer order, so one forward sweep suffices: each stage's body
    is rewritten once, with the final bodies of the inlined stages it reads (which read no inlined
    stage themselves). Each body is walked once, instead of every inlined stage re-walking every
    later body (cubic in a chain of fused elementwise ops)."""
    n = len(sch.stages)
    new_body = [None] * n
    changed = [False] * n
    bodies: dict = {}
    inliner = _Inliner(bodies)
    for i in range(n):
        stage = sch.stages[i]
        if not isinstance(stage.op, ComputeOp):
            continue
        cur = list(stage.op.body)
        if bodies:
            if isinstance(cur[0], E.Reduce):
                nv = inliner(cur[0])
                if nv is not cur[0]:
                    changed[i] = True
                    cur = [E.Reduce(nv.combiner, nv.source, nv.axis, nv.condition, k, nv.init)
                           for k in range(len(cur))]
            else:
                for k in range(len(cur)):
                    nv = inliner(cur[k])
                    if nv is not cur[k]:
                        cur[k] = nv
                        changed[i] = True
        new_body[i] = cur
        if stage.attach_type == kInline:
            stage.attach_type = kInlinedAlready
            bodies[stage.op.output(0)] = ([iv.var for iv in stage.op.axis], cur[0])
    repl = {}
    for i, s in enumerate(sch.stages):
        if s.attach_type == kInlinedAlready:
            continue
        op = s.op
        if new_body[i] is not None and changed[i]:
            op = ComputeOp(op.name, op.tag, op.attrs, op.axis, new_body[i])
        if hasattr(op, "replace_inputs"):
            op = op.replace_inputs(repl)
        if op is not s.op:
            for k in range(op.num_outputs):
                repl[s.op.output(k)] = op.output(k)
            s.op = op


def rebase_non_zero_min_loop(sch) -> None:
    """Replace every root axis still used as a loop by a rebased copy starting at 0."""
    rebase_map = {}
    for s in sch.stages:
        if s.attach_type == kInlinedAlready:
            continue
        for iv in s.op.root_iter_vars:
            idx = next((k for k, x in enumerate(s.leaf_iter_vars) if x is iv), None)
            if idx is None:
                continue
            attr = s.iter_var_attrs.get(iv)
            if attr is not None and attr.bind_thread is not None:
                continue
            rebased = E.IterVar(None, E.Var(iv.var.name, iv.var.dtype), iv.iter_type)
            s.relations.append(Rebase(iv, rebased))
            if attr is not None:
                s.iter_var_attrs[rebased] = attr
            s.leaf_iter_vars[idx] = rebased
            s.all_iter_vars.append(rebased)
            rebase_map[iv] = rebased
    for s in sch.stages:
        if s.attach_type == kScope and s.attach_ivar in rebase_map:
            s.attach_ivar = rebase_map[s.attach_ivar]


__all__ = ["cache_read", "cache_write", "rfactor", "inject_inline", "rebase_non_zero_min_loop",
           "replace_dataflow", "Fuse", "Split", "Singleton", "kGroupRoot"]
