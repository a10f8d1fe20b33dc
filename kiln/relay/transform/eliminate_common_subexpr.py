"""EliminateCommonSubexpr: merge identical op calls (same op, same attrs, same arguments) and identical
tuple field accesses, so each value is computed once.

Arguments count as the same when they are the same node after rewriting, or equal scalar constants.
Stateful ops are never merged; ``fskip(expr) -> bool`` excludes more. A call found inside an if branch
or a nested function is not reused outside it.
"""
from __future__ import annotations

import numpy as np

from ...ir.node import structural_equal
from ...ir.op import Op
from ...transform.pass_base import register_pass
from ..expr import Call, Constant, Function, If, TupleGetItem
from ..expr_functor import NonPrimitiveMutator
from ._util import typed_function_pass


def _same_arg(a, b) -> bool:
    if a is b:
        return True
    if isinstance(a, Constant) and isinstance(b, Constant):
        va, vb = a.numpy(), b.numpy()
        return va.ndim == 0 and vb.ndim == 0 and va.dtype == vb.dtype and bool(np.array_equal(va, vb))
    return False


class CommonSubexprEliminator(NonPrimitiveMutator):
    def __init__(self, fskip=None):
        super().__init__()
        self.fskip = fskip
        self.scopes: list = [{}]  # key (op or tuple expr) -> list of candidate exprs

    def _lookup(self, key):
        for scope in reversed(self.scopes):
            yield from scope.get(key, ())

    def _record(self, key, expr):
        self.scopes[-1].setdefault(key, []).append(expr)

    def _in_scope(self, visit, node):
        self.scopes.append({})
        saved = self.memo_map
        self.memo_map = dict(saved)
        try:
            return visit(node)
        finally:
            self.scopes.pop()
            self.memo_map = saved

    def visit_if(self, i):
        cond = self.visit(i.cond)
        tb = self._in_scope(self.visit, i.true_branch)
        fb = self._in_scope(self.visit, i.false_branch)
        if cond is i.cond and tb is i.true_branch and fb is i.false_branch:
            return i
        return If(cond, tb, fb, i.span)

    def visit_non_primitive_function(self, fn):
        body = self._in_scope(self.visit, fn.body)
        if body is fn.body:
            return fn
        return Function(fn.params, body, fn.ret_type, fn.type_params, fn.attrs, fn.span)

    def visit_call(self, call):
        new = super().visit_call(call)
        op = new.op
        if not new.args or not isinstance(op, Op) or op.get_attr("TOpIsStateful") or op.name.startswith("random."):
            return new
        if self.fskip is not None and self.fskip(new):
            return new
        # candidates are keyed by the op and the first argument (identity; any constant for constants,
        # which compare by value): a long chain of one op is not compared against every earlier call
        a0 = new.args[0]
        key = (op, "const" if isinstance(a0, Constant) else id(a0))
        for cand in self._lookup(key):
            if (len(cand.args) == len(new.args) and structural_equal(cand.attrs, new.attrs)
                    and structural_equal(cand.type_args, new.type_args)
                    and all(_same_arg(a, b) for a, b in zip(new.args, cand.args))):
                return cand
        self._record(key, new)
        return new

    def visit_tuple_getitem(self, item):
        new = super().visit_tuple_getitem(item)
        if self.fskip is not None and self.fskip(new):
            return new
        for cand in self._lookup(new.tuple_value):
            if isinstance(cand, TupleGetItem) and cand.index == new.index:
                return cand
        self._record(new.tuple_value, new)
        return new


def eliminate_common_subexpr(expr, fskip=None):
    return CommonSubexprEliminator(fskip).visit(expr)


def EliminateCommonSubexpr(fskip=None):  # noqa: N802 (TVM's name)
    """Merge identical computations (opt level 3). ``fskip(expr)`` returning True keeps ``expr`` apart."""
    return typed_function_pass(lambda f, mod, ctx: eliminate_common_subexpr(f, fskip), 3,
                               "EliminateCommonSubexpr")


register_pass("EliminateCommonSubexpr", EliminateCommonSubexpr)
