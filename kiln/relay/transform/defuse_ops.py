"""DefuseOps: the inverse of FuseOps: calls of primitive functions are replaced by their bodies."""
from __future__ import annotations

from ...transform.pass_base import register_pass
from ..expr import Call, Function
from ..expr_functor import ExprMutator
from ._util import typed_function_pass


class _Substitute(ExprMutator):
    def __init__(self, subst: dict):
        super().__init__()
        self.subst = subst

    def visit_var(self, v):
        return self.subst.get(v, v)


class DefuseMutator(ExprMutator):
    def visit_call(self, call):
        new = super().visit_call(call)
        fn = new.op
        if isinstance(fn, Function) and fn.get_attr("Primitive"):
            body = self.visit(fn.body)  # nested primitive calls too
            return _Substitute(dict(zip(fn.params, new.args))).visit(body)
        return new

    def visit_function(self, fn):
        return super().visit_function(fn)


def defuse_ops(func):
    return DefuseMutator().visit(func)


def DefuseOps():  # noqa: N802 (TVM's name)
    """Inline every fused primitive function back into its caller (opt level 0)."""
    return typed_function_pass(lambda f, mod, ctx: defuse_ops(f), 0, "DefuseOps")


register_pass("DefuseOps", DefuseOps)
