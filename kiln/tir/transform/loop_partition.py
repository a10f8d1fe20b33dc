"""LoopPartition: split a loop whose body is guarded by ``likely(cond(loop_var))`` into a
guard-free middle part and guarded head/tail parts.

For each loop, the first ``likely`` condition that depends on the loop variable is solved for
it (``arith.deduce_bound``, with the variables of loops nested between the two relaxed over
their ranges): on the resulting interval the condition holds for every inner iteration, so
there the guard is replaced by ``True`` and removed. Outside it the original body runs.
Constant-extent loops are partitioned only with ``partition_const_loop`` (as in TVM).
"""
from __future__ import annotations

from ...arith import Analyzer, deduce_bound, is_neg_inf, is_pos_inf
from .. import expr as E
from .. import stmt as S
from .. import op as _op
from ..stmt_functor import StmtExprMutator, StmtExprVisitor, uses_var, post_order_visit
from .pass_base import PrimFuncPass, _config, shape_var_bounds
from .unroll import _Renamer


class _Candidate:
    def __init__(self, call, relax):
        self.call = call        # the likely(...) Call node
        self.relax = relax      # Var -> Range of loops between the partitioned loop and the guard


def _find_candidates(body, var, done):
    out = []

    class V(StmtExprVisitor):
        def __init__(self):
            self.loops = {}
            self.lets = set()

        def visit_For(self, s):
            self.visit(s.min)
            self.visit(s.extent)
            ok = not (uses_var(s.min, var) or uses_var(s.extent, var))
            if ok:
                self.loops[s.loop_var] = E.Range.from_min_extent(s.min, s.extent)
            else:
                self.lets.add(s.loop_var)
            yield s.body  # statement visitors are generators: nesting costs no stack
            self.loops.pop(s.loop_var, None)

        def visit_AttrStmt(self, s):
            # a thread launched inside the loop is defined there: relax it over its extent like an
            # inner loop (never let the deduced bound, which is evaluated outside, mention it)
            if s.attr_key in ("thread_extent", "virtual_thread") and isinstance(s.node, E.IterVar):
                self.visit(s.value)
                tvar = s.node.var
                if uses_var(s.value, var):
                    self.lets.add(tvar)
                else:
                    self.loops[tvar] = E.Range.from_min_extent(_op.const(0, s.value.dtype), s.value)
                yield s.body
                self.loops.pop(tvar, None)
                return
            yield from self.generic_visit_iter(s)

        def visit_LetStmt(self, s):
            while isinstance(s, S.LetStmt):  # a chain in a loop
                self.visit(s.value)
                self.lets.add(s.var)
                s = s.body
            yield s

        def visit_Let(self, e):
            self.visit(e.value)
            self.lets.add(e.var)
            yield e.body

        def visit_Allocate(self, s):
            self.lets.add(s.buffer_var)
            yield from self.generic_visit_iter(s)

        def visit_Call(self, e):
            if e.op == "tir.likely" and id(e) not in done and uses_var(e, var) \
                    and not uses_var(e, lambda v: v in self.lets):
                out.append(_Candidate(e, dict(self.loops)))
            self.generic_visit(e)

    V()(body)
    return out


class _ReplaceCall(StmtExprMutator):
    def __init__(self, target, value):
        self.target, self.value = target, value

    def visit_Call(self, e):
        if e is self.target:
            return self.value
        return self.generic_visit(e)

    def visit_IfThenElse(self, s):
        s = yield from self.generic_visit_iter(s)
        if isinstance(s.condition, E.IntImm):
            if s.condition.value:
                return s.then_case
            return s.else_case if s.else_case is not None else S.Evaluate(0)
        return s


class LoopPartitioner(StmtExprMutator):
    def __init__(self, partition_const_loop: bool = False, known_bounds: dict | None = None):
        self.partition_const_loop = partition_const_loop
        self.known_bounds = dict(known_bounds or {})
        self.outer = {}     # enclosing loop var -> Range
        self.done = set()   # ids of likely() calls already used for a partition
        self.keep = []

    def visit_PrimExpr(self, e):  # statements only
        return e

    def _analyzer(self):
        ana = Analyzer()
        ana.var_bounds.update(self.known_bounds)
        for v, r in self.outer.items():
            ana.bind(v, r, allow_override=True)
        return ana

    # statement visitors are generators (``yield`` a child to visit it): nesting costs no stack

    def _loop_visit(self, s):
        self.outer[s.loop_var] = E.Range.from_min_extent(s.min, s.extent)
        try:
            body = yield s.body
        finally:
            self.outer.pop(s.loop_var, None)
        return s if body is s.body else s.with_fields(body=body)

    def visit_For(self, s):
        if isinstance(s.extent, E.IntImm) and not self.partition_const_loop:
            return (yield from self._loop_visit(s))
        if s.kind == S.ForKind.THREAD_BINDING:
            return (yield from self._loop_visit(s))
        var = s.loop_var
        ana = self._analyzer()
        for cand in _find_candidates(s.body, var, self.done):
            interval = deduce_bound(var, cand.call.args[0], relax_map=cand.relax, analyzer=ana)
            if interval.is_nothing() or interval.is_everything():
                continue
            return (yield from self._split(s, cand, interval, ana))
        return (yield from self._loop_visit(s))

    def _split(self, s, cand, interval, ana):
        self.done.add(id(cand.call))
        self.keep.append(cand.call)
        var = s.loop_var
        begin = s.min
        end = ana.simplify(s.min + s.extent)
        # [begin, mid_lo) ++ [mid_lo, mid_hi) ++ [mid_hi, end) must tile [begin, end) exactly, even
        # when some parts are empty, hence the clamps (the simplifier drops the provable ones).
        if is_neg_inf(interval.min_value):
            mid_lo = begin
        else:
            mid_lo = ana.simplify(_op.min(_op.max(begin, interval.min_value), _op.max(end, begin)))
        if is_pos_inf(interval.max_value):
            mid_hi = end
        else:
            mid_hi = ana.simplify(_op.max(_op.min(end, interval.max_value + 1), mid_lo))
        parts = []
        guarded = s.body
        main_body = _ReplaceCall(cand.call, _op.const(True))(s.body)

        def make(lo, hi, body, fresh):
            ext = ana.simplify(hi - lo)
            if isinstance(ext, E.IntImm) and ext.value <= 0:
                return None
            loop_var = E.Var(var.name, var.dtype) if fresh else var
            if fresh:
                body = _Renamer({var: loop_var})(body)
            return s.with_fields(loop_var=loop_var, min=lo, extent=ext, body=body)

        pre = make(begin, mid_lo, guarded, True)
        main = make(mid_lo, mid_hi, main_body, False)
        post = make(mid_hi, end, guarded, True)
        for p in (pre, post):
            if p is not None:
                self._mark_done(p)
        for p in (pre, main, post):
            if p is not None:
                parts.append((yield p) if p is main else (yield from self._loop_visit(p)))
        if not parts:
            return S.Evaluate(0)
        return parts[0] if len(parts) == 1 else S.SeqStmt(parts)

    def _mark_done(self, stmt):
        def visit(n):
            if isinstance(n, E.Call) and n.op == "tir.likely":
                self.done.add(id(n))
                self.keep.append(n)
        post_order_visit(stmt, visit)

    def visit_AttrStmt(self, s):
        if s.attr_key in ("thread_extent", "virtual_thread") and isinstance(s.node, E.IterVar):
            self.outer[s.node.var] = E.Range.from_min_extent(0, s.value)
            try:
                return (yield from self.generic_visit_iter(s))
            finally:
                self.outer.pop(s.node.var, None)
        return (yield from self.generic_visit_iter(s))


def LoopPartition(partition_const_loop: bool | None = None) -> PrimFuncPass:  # noqa: N802
    """Partition loops guarded by ``likely`` conditions (config ``tir.LoopPartition``:
    ``{"partition_const_loop": bool}``)."""
    def run(func, mod=None, ctx=None):
        cfg = _config("tir.LoopPartition")
        pcl = partition_const_loop if partition_const_loop is not None else cfg.get("partition_const_loop", False)
        body = LoopPartitioner(bool(pcl), shape_var_bounds(func))(func.body)
        return func if body is func.body else func.with_body(body)
    return PrimFuncPass(run, 0, "tir.LoopPartition")
