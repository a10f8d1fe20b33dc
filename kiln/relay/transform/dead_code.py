"""DeadCodeElimination: drop let bindings whose variable is never used (optionally inline single uses)."""
from __future__ import annotations

from ...transform.pass_base import register_pass
from ..expr import Function, Let, Var
from ..expr_functor import ExprMutator, post_order_visit
from .function_pass import FunctionPass


def _use_counts(expr) -> dict:
    counts: dict = {}

    def visit(node):
        for f in node._fields:
            child = getattr(node, f, None)
            children = child if isinstance(child, tuple) else (child,)
            for c in children:
                if isinstance(c, Var) and not (isinstance(node, Let) and f == "var") and \
                        not (isinstance(node, Function) and f == "params"):
                    counts[c] = counts.get(c, 0) + 1

    post_order_visit(expr, visit)
    return counts


class _Eliminator(ExprMutator):
    def __init__(self, counts: dict, inline_once: bool):
        super().__init__()
        self.counts = counts
        self.inline_once = inline_once
        self.inlined: dict = {}
        self.changed = False

    def visit_var(self, var):
        return self.inlined.get(var, var)

    def visit_let_binding(self, let):
        uses = self.counts.get(let.var, 0)
        if uses == 0:
            self.changed = True
            return None
        if self.inline_once and uses == 1 and not isinstance(let.value, Function):
            self.changed = True
            self.inlined[let.var] = self.visit(let.value)
            return None
        return super().visit_let_binding(let)


def eliminate_dead_code(expr, inline_once: bool = False):
    while True:
        elim = _Eliminator(_use_counts(expr), inline_once)
        expr = elim.visit(expr)
        if not elim.changed:
            return expr


def DeadCodeElimination(inline_once: bool = False, ignore_impurity: bool = False):  # noqa: N802
    """Remove unused let bindings; with ``inline_once``, substitute bindings used exactly once."""
    return FunctionPass(lambda f, mod, ctx: eliminate_dead_code(f, inline_once), 1, "DeadCodeElimination")


register_pass("DeadCodeElimination", DeadCodeElimination)
