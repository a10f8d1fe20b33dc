"""Forward rewriting with temporary expressions (TVM's ``ForwardRewrite`` and ``TempExpr``).

The three quantize passes (partition, annotate, realize) walk the graph producers first and ask a
per-op rule, registered as an op attribute (``FQPartitionRewrite``, ``FQAnnotateRewrite``,
``FQRealizeRewrite``), to rewrite each call given its already rewritten arguments. A rule may return a
TempExpr: a value with extra facts (its annotation kind, its integer scale) that only the next rule
reads. Wherever a value reaches an op without a rule, a tuple projection, or the function result,
the TempExpr is turned back into a plain expression by its ``realize()``.
"""
from __future__ import annotations

from typing import Callable

from ...ir.expr import RelayExpr
from ...ir.op import Op
from ..analysis.graph import edge_counts
from ..expr import Call, Function, If, Tuple, TupleGetItem
from ..expr_functor import ExprMutator


class TempExpr(RelayExpr):
    """A rewrite-time value; never part of a finished graph (``realize()`` gives the real expression)."""

    _fields = ()

    def realize(self) -> RelayExpr:
        raise NotImplementedError(f"{type(self).__name__}.realize")


def realize_temp(expr):
    """``expr`` with every TempExpr (also inside tuples) replaced by its realization."""
    if isinstance(expr, TempExpr):
        return realize_temp(expr.realize())
    if isinstance(expr, Tuple) and any(isinstance(f, (TempExpr, Tuple)) for f in expr.fields):
        fields = [realize_temp(f) for f in expr.fields]
        if all(a is b for a, b in zip(fields, expr.fields)):
            return expr
        return Tuple(fields, expr.span)
    return expr


class ForwardRewriter(ExprMutator):
    """Rewrites calls with the op attribute ``attr_name``; see the module docstring."""

    def __init__(self, attr_name: str, fcontext: Callable | None = None,
                 fmulti_ref_trigger: Callable | None = None, ref_counts: dict | None = None):
        super().__init__()
        self.attr_name = attr_name
        self.fcontext = fcontext
        self.fmulti_ref_trigger = fmulti_ref_trigger
        self.ref_counts = ref_counts or {}

    def _arg(self, ref, post):
        if self.fmulti_ref_trigger is not None and self.ref_counts.get(ref, 0) > 1:
            return self.fmulti_ref_trigger(post)
        return post

    def _real(self, e):
        return realize_temp(self.visit(e))

    def visit_tuple(self, t):
        fields = [self._arg(f, self.visit(f)) for f in t.fields]
        if all(a is b for a, b in zip(fields, t.fields)):
            return t
        return Tuple(fields, t.span)

    def visit_call(self, call):
        frewrite = call.op.get_attr(self.attr_name) if isinstance(call.op, Op) else None
        op = self.visit(call.op) if not isinstance(call.op, Op) else call.op
        args = []
        for a in call.args:
            new = self._arg(a, self.visit(a))
            args.append(realize_temp(new) if frewrite is None else new)
        if frewrite is not None:
            res = frewrite(call, args, self.fcontext(call) if self.fcontext is not None else None)
            if res is not None:
                return res
            args = [realize_temp(a) for a in args]
        if op is call.op and all(a is b for a, b in zip(args, call.args)):
            return call
        return Call(op, args, call.attrs, call.type_args, call.span)

    def visit_tuple_getitem(self, t):
        tup = self._real(t.tuple_value)
        return t if tup is t.tuple_value else TupleGetItem(tup, t.index, t.span)

    def visit_let_binding(self, let):
        return let.var, self._real(let.value)

    def visit_let_body(self, body):
        return self._real(body)

    def visit_if(self, i):
        c, t, f = self._real(i.cond), self._real(i.true_branch), self._real(i.false_branch)
        if c is i.cond and t is i.true_branch and f is i.false_branch:
            return i
        return If(c, t, f, i.span)

    def visit_function(self, fn):
        body = self._real(fn.body)
        if body is fn.body:
            return fn
        return Function(fn.params, body, fn.ret_type, fn.type_params, fn.attrs, fn.span)


def forward_rewrite(expr, attr_name: str, fcontext: Callable | None = None,
                    fmulti_ref_trigger: Callable | None = None):
    """Rewrite ``expr`` (a Function or an expression) with the rules registered under ``attr_name``."""
    counts = edge_counts(expr) if fmulti_ref_trigger is not None else None
    rewriter = ForwardRewriter(attr_name, fcontext, fmulti_ref_trigger, counts)
    return realize_temp(rewriter.visit(expr))
