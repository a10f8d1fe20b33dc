"""Simplify: simplify every expression of a PrimFunc with loop ranges and branch conditions known."""
from __future__ import annotations

from contextlib import contextmanager

from ...arith import Analyzer
from .. import expr as E, stmt as S
from ..stmt_functor import StmtExprMutator, substitute
from .pass_base import PrimFuncPass, shape_var_bounds


class StmtSimplifier(StmtExprMutator):
    """Walks statements, binding loop variables and assuming branch conditions while it
    simplifies the expressions below them."""

    def __init__(self, analyzer: Analyzer | None = None):
        self.ana = analyzer or Analyzer()

    def visit_PrimExpr(self, e):
        return self.ana.simplify(e)

    @contextmanager
    def _scope(self):
        a = self.ana
        saved = (dict(a.var_bounds), dict(a.var_ranges), dict(a.var_subst), dict(a.facts))
        try:
            yield
        finally:
            a.var_bounds, a.var_ranges, a.var_subst, a.facts = saved

    # statement visitors are generators (``yield`` a child to visit it): nesting costs no stack

    def visit_For(self, s):
        mn, ext = self.visit(s.min), self.visit(s.extent)
        if isinstance(ext, E.IntImm) and ext.value <= 0:
            return S.Evaluate(0)
        with self._scope():
            self.ana.bind(s.loop_var, E.Range.from_min_extent(mn, ext), allow_override=True)
            body = yield s.body
        if mn is s.min and ext is s.extent and body is s.body:
            return s
        return s.with_fields(min=mn, extent=ext, body=body)

    def visit_AttrStmt(self, s):
        value = self.visit(s.value) if isinstance(s.value, E.PrimExpr) else s.value
        with self._scope():
            if s.attr_key in ("thread_extent", "virtual_thread") and isinstance(s.node, E.IterVar):
                self.ana.bind(s.node.var, E.Range.from_min_extent(0, value), allow_override=True)
            body = yield s.body
        if value is s.value and body is s.body:
            return s
        return s.with_fields(value=value, body=body)

    def visit_IfThenElse(self, s):
        cond = self.visit(s.condition)
        if isinstance(cond, E.IntImm):
            if cond.value:
                return (yield s.then_case)
            return (yield s.else_case) if s.else_case is not None else S.Evaluate(0)
        with self._scope():
            self.ana._assume(cond)
            then_case = yield s.then_case
        else_case = s.else_case
        if else_case is not None:
            with self._scope():
                self.ana._assume(E.Not(_strip_likely(cond)))
                else_case = yield else_case
        if cond is s.condition and then_case is s.then_case and else_case is s.else_case:
            return s
        return S.IfThenElse(cond, then_case, else_case)

    def visit_LetStmt(self, s):
        # a chain of lets in a loop, in one analyzer scope (nested scopes would each restore what the
        # outer one restores anyway); a constant-valued let is substituted into its body and dropped
        chain = []
        with self._scope():
            while isinstance(s, S.LetStmt):
                value = self.visit(s.value)
                if isinstance(value, (E.IntImm, E.FloatImm)):
                    s = substitute(s.body, {s.var: value})
                    continue
                if isinstance(value, E.PrimExpr) and value.dtype == s.var.dtype:
                    try:
                        self.ana.var_bounds[s.var] = self.ana._cib().bound(value)
                    except Exception:
                        pass
                chain.append((s, value))
                s = s.body
            body = yield s
        for let, value in reversed(chain):
            if not (value is let.value and body is let.body):
                let = S.LetStmt(let.var, value, body)
            body = let
        return body

    def visit_AssertStmt(self, s):
        cond = self.visit(s.condition)
        if isinstance(cond, E.IntImm) and cond.value:
            return (yield s.body)
        with self._scope():
            self.ana._assume(cond)
            body = yield s.body
        if cond is s.condition and body is s.body:
            return s
        return S.AssertStmt(cond, s.message, body)


def _strip_likely(c):
    if isinstance(c, E.Call) and c.op == "tir.likely":
        return c.args[0]
    return c


def simplify_stmt(stmt, analyzer: Analyzer | None = None):
    """Simplify a statement tree (loop variables bound from their For ranges)."""
    return StmtSimplifier(analyzer)(stmt)


def simplify_func(func, mod=None, ctx=None):
    ana = Analyzer()
    ana.var_bounds.update(shape_var_bounds(func))
    body = simplify_stmt(func.body, ana)
    return func if body is func.body else func.with_body(body)


def Simplify() -> PrimFuncPass:  # noqa: N802 - TVM name
    """Simplify expressions of every PrimFunc using loop bounds and branch conditions."""
    return PrimFuncPass(simplify_func, 0, "tir.Simplify")
