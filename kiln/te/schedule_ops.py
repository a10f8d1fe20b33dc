"""ScheduleOps: turn a normalized, bound-inferred schedule into one TIR statement.

Each stage becomes a loop nest over its leaf axes (``For`` per loop, or a thread/let binding),
with the original axes recomputed from the loop variables, guards where a split does not divide
evenly, and (for reductions) an init nest placed just outside the first reduction loop.
Stages at root are sequenced producer-first; a stage attached with compute_at is injected at
its attach loop inside the consumer's nest. Tensors are still written with Producer* nodes here;
:mod:`kiln.te.lower` maps them to buffers.
"""
from __future__ import annotations

from ..error import LoweringError
from ..ir.node import Node
from ..tir import expr as E, op as tir_op, stmt as S
from ..tir.stmt_functor import StmtExprMutator
from ..arith import Analyzer
from . import message_passing as mp
from .schedule import kGroupRoot, kInlinedAlready, kScope
from .tensor import ComputeOp, ExternOp, PlaceholderOp
from .bound import _storage_rank, _thread_rank
from .tensor_intrin import make_tensorize_stmt

LOOP_SCOPE = "loop_scope"
PREFETCH_SCOPE = "prefetch_scope"
PREFETCH_SPREAD_SCOPE = "prefetch_spread_scope"
PREFETCH_SPREAD_AT = "prefetch_spread_at"
_NOOP = None


# --------------------------------------------------------------------------------------------
# substitution that leaves defining positions and IterVar annotations alone
# --------------------------------------------------------------------------------------------
class _VarSubst(StmtExprMutator):
    def __init__(self, vmap):
        self.vmap = vmap

    def visit_Var(self, v):
        return self.vmap.get(v, v)

    def visit_IterVar(self, iv):
        return iv

    def visit_For(self, s):
        mn, ext, body = self.visit(s.min), self.visit(s.extent), self.visit(s.body)
        if mn is s.min and ext is s.extent and body is s.body:
            return s
        return S.For(s.loop_var, mn, ext, s.kind, body, s.thread_binding, s.annotations)

    def visit_LetStmt(self, s):
        chain = []
        while isinstance(s, S.LetStmt):  # a chain in a loop
            chain.append((s, self.visit(s.value)))
            s = s.body
        body = self.visit(s)
        for let, value in reversed(chain):
            if not (value is let.value and body is let.body):
                let = S.LetStmt(let.var, value, body)
            body = let
        return body

    def visit_AttrStmt(self, s):
        value, body = self.visit(s.value), self.visit(s.body)
        if value is s.value and body is s.body:
            return s
        return S.AttrStmt(s.node, s.attr_key, value, body)


def substitute_ivs(stmt, iv_map: dict):
    """Replace each IterVar's var by the mapped expression (identity entries are skipped)."""
    vmap = {iv.var: tir_op.convert(v) for iv, v in iv_map.items() if v is not iv.var}
    if not vmap:
        return stmt
    return _VarSubst(vmap)(stmt)


# --------------------------------------------------------------------------------------------
# loop nests
# --------------------------------------------------------------------------------------------
def _wrap(kind, *args):
    """A nest entry: a function of the inner body building one statement."""
    if kind == "for":
        var, mn, ext, fkind, tb = args
        return lambda body: S.For(var, mn, ext, fkind, body, tb)
    if kind == "let":
        var, value = args
        return lambda body: S.LetStmt(var, value, body)
    if kind == "attr":
        node, key, value = args
        return lambda body: S.AttrStmt(node, key, value, body)
    if kind == "if":
        (cond,) = args
        return lambda body: S.IfThenElse(cond, body)
    raise AssertionError(kind)


def merge_nest(nest, body):
    """Wrap ``body`` in the nest levels, innermost level last."""
    for level in reversed(nest):
        for make in reversed(level):
            body = make(body)
    return body


_KIND_OF = {
    E.IterVar.Unrolled: S.ForKind.UNROLLED,
    E.IterVar.Vectorized: S.ForKind.VECTORIZED,
    E.IterVar.Parallelized: S.ForKind.PARALLEL,
}


def make_loop_nest(stage, dom_map, begin_iter_pos, new_loop_var, skip_iter, value_map):
    leaves = stage.leaf_iter_vars
    nest = [[] for _ in range(len(leaves) + 1)]
    ana = Analyzer()
    for i in range(begin_iter_pos, len(leaves)):
        iv = leaves[i]
        if iv in skip_iter or iv.iter_type == E.IterVar.Ordered:
            value_map[iv] = iv.var
            continue
        attr = stage.iter_var_attrs.get(iv)
        bind_iv = attr.bind_thread if attr is not None and attr.bind_thread is not None else iv
        dom = dom_map[iv]
        var = bind_iv.var
        level = nest[i + 1]
        if not bind_iv.thread_tag:
            if new_loop_var:
                var = E.Var(iv.var.name + ".init", bind_iv.var.dtype)
            kind = S.ForKind.SERIAL
            if attr is not None:
                kind = _KIND_OF.get(attr.iter_type, S.ForKind.SERIAL)
                for key, value in zip(attr.pragma_keys, attr.pragma_values):
                    level.append(_wrap("attr", iv, "pragma_" + key,
                                       value if value is not None else tir_op.const(1, "int32")))
            if ana.can_prove_equal(dom.extent, 1):
                level.append(_wrap("let", var, dom.min))
                value_map[iv] = dom.min
            elif ana.can_prove_equal(dom.min, 0):
                level.append(_wrap("for", var, dom.min, dom.extent, kind, None))
                value_map[iv] = var
            else:
                idx = E.Var(bind_iv.var.name + ".idx", iv.var.dtype)
                level.append(_wrap("for", idx, tir_op.const(0, dom.extent.dtype), dom.extent, kind, None))
                value_map[iv] = tir_op.add(dom.min, idx)
                level.append(_wrap("let", var, value_map[iv]))
            if attr is not None and attr.prefetch_data and not new_loop_var and \
                    not ana.can_prove_equal(dom.extent, 1):
                # inside the loop, around the stages computed at it (kiln.tir.transform.InjectPrefetch); a loop
                # of one iteration has no later iteration to prefetch for
                for tensor, offset, spread in zip(attr.prefetch_data, attr.prefetch_offset, attr.prefetch_spread):
                    level.append(_wrap("attr", tensor, PREFETCH_SPREAD_SCOPE if spread else PREFETCH_SCOPE, offset))
            if attr is not None and attr.prefetch_spread_at and not new_loop_var:
                # marks the loop a spread prefetch is shared over (InjectPrefetch puts the requests here)
                for tensor in attr.prefetch_spread_at:
                    level.append(_wrap("attr", tensor, PREFETCH_SPREAD_AT, tir_op.const(0, "int32")))
        else:
            if not ana.can_prove_equal(dom.min, 0):
                raise LoweringError(f"thread-bound axis {iv.var.name} must start at 0, but starts at {dom.min}")
            tag = bind_iv.thread_tag
            key = "virtual_thread" if tag.startswith("vthread") or tag == "cthread" else "thread_extent"
            level.append(_wrap("attr", bind_iv, key, dom.extent))
            if ana.can_prove_equal(dom.extent, 1):
                value_map[iv] = dom.min
            elif _thread_value_ignored(stage, tag):
                value_map[iv] = dom.min
            else:
                value_map[iv] = var
        if not new_loop_var:
            level.append(_wrap("attr", iv, LOOP_SCOPE, iv.var))
    mp.pass_up_index(stage, dom_map, value_map)
    return nest


def _thread_value_ignored(stage, tag) -> bool:
    """A global/shared buffer does not index by thread axes of a lower rank (TVM's rule)."""
    if not stage.scope:
        return False
    return _storage_rank(stage.scope) > _thread_rank(tag)


def _if_nest(preds):
    return [_wrap("if", p) for p in preds]


# --------------------------------------------------------------------------------------------
# compute ops
# --------------------------------------------------------------------------------------------
def _provide_args(op):
    return [iv.var for iv in op.axis]


def _make_reduction(op, tensors):
    args = _provide_args(op)
    reduce = op.body[0]
    combiner = reduce.combiner
    lhs = [E.ProducerLoad(t, args) for t in tensors]
    update = combiner(lhs, reduce.source)
    init_value = reduce.init if reduce.init else combiner.identity_element
    inits = [S.ProducerStore(t, tir_op.cast(v, t.dtype), args) for t, v in zip(tensors, init_value)]
    if len(tensors) == 1:
        provide = S.ProducerStore(tensors[0], update[0], args)
    else:
        # all updated values are computed from the old ones before any is stored
        tmps = [E.Var(f"{t.op.name}_v{i}", u.dtype) for i, (t, u) in enumerate(zip(tensors, update))]
        provide = S.seq(*[S.ProducerStore(t, v, args) for t, v in zip(tensors, tmps)])
        for tmp, u in reversed(list(zip(tmps, update))):
            provide = S.LetStmt(tmp, u, provide)
    if not (isinstance(reduce.condition, E.IntImm) and reduce.condition.value):
        provide = S.IfThenElse(reduce.condition, provide)
    return S.seq(*inits), provide


def make_compute_stmt(stage, dom_map):
    op = stage.op
    for pos, iv in enumerate(stage.leaf_iter_vars):
        attr = stage.iter_var_attrs.get(iv)
        if attr is not None and attr.tensor_intrin is not None:
            return make_tensorize_stmt(stage, dom_map, pos, attr.tensor_intrin, make_loop_nest, _if_nest,
                                       merge_nest, mp)
    main_vmap = {}
    main_nest = make_loop_nest(stage, dom_map, 0, False, set(), main_vmap)
    preds = [tir_op.likely(p) for p in mp.make_bound_check(stage, dom_map, main_vmap, False, set())]
    if stage.store_predicate is not None:
        preds.append(stage.store_predicate)
    main_nest.append(_if_nest(preds))
    tensors = op.outputs
    if isinstance(op.body[0], E.Reduce):  # also a reduction over no axes
        update_state = {iv: 2 for iv in op.reduce_axis}
        for iv in op.axis:
            update_state[iv] = 1
        mp.pass_down_bitmask_or(stage, update_state)
        leaves = stage.leaf_iter_vars
        begin = len(leaves)
        init_vmap = {}
        for i, iv in enumerate(leaves):
            if update_state.get(iv, 0) & 2:
                begin = i
                break
            init_vmap[iv] = main_vmap[iv]
        skip = {iv for iv, flag in update_state.items() if flag == 2}
        init_nest = make_loop_nest(stage, dom_map, begin, True, skip, init_vmap)
        init_preds = [tir_op.likely(p) for p in mp.make_bound_check(stage, dom_map, init_vmap, True, skip)]
        init_nest.append(_if_nest(init_preds))
        init, provide = _make_reduction(op, tensors)
        init = substitute_ivs(merge_nest(init_nest, init), init_vmap)
        common = main_nest[:begin + 1]
        inner = main_nest[begin + 1:]
        provide = merge_nest(inner, provide)
        body = merge_nest(common, S.seq(init, provide))
        return substitute_ivs(body, main_vmap)
    provides = [S.ProducerStore(t, op.body[i], _provide_args(op)) for i, t in enumerate(tensors)]
    body = merge_nest(main_nest, S.seq(*provides))
    return substitute_ivs(body, main_vmap)


def build_provide(stage, dom_map):
    op = stage.op
    if isinstance(op, ComputeOp):
        return make_compute_stmt(stage, dom_map)
    if isinstance(op, ExternOp):
        return S.AttrStmt(op, "extern_scope", 0, op.body)
    raise LoweringError(f"cannot lower stage {op.name} of kind {type(op).__name__}")


def build_realize(stage, dom_map, body):
    op = stage.op
    if isinstance(op, ComputeOp):
        bounds = [dom_map[iv] for iv in op.axis]
        per_output = [bounds] * op.num_outputs
    else:
        per_output = [[E.Range.from_min_extent(tir_op.const(0, s.dtype), s) for s in t.shape]
                      for t in op.outputs]
    for i in range(op.num_outputs - 1, -1, -1):
        body = S.ProducerRealize(op.output(i), per_output[i], tir_op.const(True, "bool"), body,
                                 stage.scope or "")
    return body


def make_pipeline(stage, dom_map, consumer):
    producer = build_provide(stage, dom_map)
    pipeline = producer if consumer is None else S.seq(producer, consumer)
    return build_realize(stage, dom_map, pipeline)


class _InjectAttach(StmtExprMutator):
    def __init__(self, stage, dom_map):
        self.stage, self.dom_map = stage, dom_map
        self.found = False

    def visit_AttrStmt(self, s):
        body = self.visit(s.body)
        if s.attr_key == LOOP_SCOPE and s.node is self.stage.attach_ivar:
            if self.found:
                raise LoweringError(f"attach point {s.node.var.name} found twice in the loop nest")
            self.found = True
            return S.AttrStmt(s.node, s.attr_key, s.value, make_pipeline(self.stage, self.dom_map, body))
        if body is s.body:
            return s
        return S.AttrStmt(s.node, s.attr_key, s.value, body)

    def visit_IterVar(self, iv):
        return iv

    def generic_visit(self, node):
        if isinstance(node, E.PrimExpr):
            return node  # attach points live in statements only
        return StmtExprMutator.generic_visit(self, node)


class _PostProc(StmtExprMutator):
    """Drop loop_scope markers and nested duplicates of the same thread binding, and replace
    the variables of thread-bound axes by the thread variables."""

    def __init__(self, var_value=None):
        self.thread_scope = {}
        self.var_value = var_value or {}

    def visit_Var(self, v):
        return self.var_value.get(v, v)

    def visit_AttrStmt(self, s):
        if s.attr_key == LOOP_SCOPE:
            return self.visit(s.body)
        if s.attr_key == "thread_extent" and isinstance(s.node, E.IterVar):
            key = id(s.node)
            if key in self.thread_scope:
                if not Analyzer().can_prove_equal(self.thread_scope[key], s.value):
                    raise LoweringError(
                        f"thread axis {s.node.thread_tag} is bound with extents {self.thread_scope[key]} and "
                        f"{s.value} in nested stages")
                return self.visit(s.body)
            self.thread_scope[key] = s.value
            body = self.visit(s.body)
            del self.thread_scope[key]
            return s if body is s.body else S.AttrStmt(s.node, s.attr_key, s.value, body)
        body = self.visit(s.body)
        return s if body is s.body else S.AttrStmt(s.node, s.attr_key, s.value, body)

    def visit_IterVar(self, iv):
        return iv

    def generic_visit(self, node):
        if isinstance(node, E.PrimExpr) and not self.var_value:
            return node
        return StmtExprMutator.generic_visit(self, node)


def schedule_ops(sch, dom_map) -> S.Stmt:
    """The TIR statement (with Producer* nodes) computing every stage of ``sch``."""
    body = None
    for stage in reversed(sch.stages):
        if stage.attach_type == kInlinedAlready or isinstance(stage.op, PlaceholderOp):
            continue
        if stage.attach_type == kGroupRoot:
            body = make_pipeline(stage, dom_map, body)
        elif stage.attach_type == kScope:
            if body is None:
                raise LoweringError(f"stage {stage.op.name} is attached but its consumer produced no code")
            inj = _InjectAttach(stage, dom_map)
            body = inj(body)
            if not inj.found:
                raise LoweringError(
                    f"did not find the attach point of stage '{stage.op.name}' (axis "
                    f"'{stage.attach_ivar.var.name}' of stage '{stage.attach_stage.op.name}') in the loop nest; "
                    f"is '{stage.attach_stage.op.name}' itself inlined or not computed?")
        else:
            raise LoweringError(f"stage {stage.op.name} has unsupported attach type {stage.attach_type}")
    if body is None:
        body = S.Evaluate(tir_op.const(0, "int32"))
    var_value = {}
    for stage in sch.stages:
        for iv, attr in stage.iter_var_attrs.items():
            if attr.bind_thread is not None and attr.bind_thread.var is not iv.var:
                var_value[iv.var] = attr.bind_thread.var
    return _PostProc(var_value)(body)


__all__ = ["schedule_ops", "make_loop_nest", "merge_nest", "Node"]
