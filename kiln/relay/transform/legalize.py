"""Legalize (TVM's ``relay.transform.Legalize``): replace op calls by the expressions their legalization
function returns.

For every call of an op with the attribute ``legalize_map_attr_name`` (default ``FTVMLegalize``), the
function is called as ``f(attrs, new_args, arg_types)``, ``arg_types`` being the types of the arguments followed
by the call's own type (from the typed module); a returned Relay expression replaces the call, ``None`` keeps
it. Fused (``Primitive``) functions are left alone. ``relay.build`` and ``relay.vm.compile`` run it right after
the QNN legalization and before SimplifyInference, at opt level 1, as TVM's pass prefix does; a module without
a call of an op that has the attribute is returned unchanged (no type inference), so ordinary models pay nothing.
"""
from __future__ import annotations

from ...ir.expr import RelayExpr
from ...ir.op import Op
from ...transform.pass_base import ModulePass, register_pass
from ..expr import Call, Function
from ..expr_functor import NonPrimitiveMutator, post_order_visit
from ._util import typed_function_pass

__all__ = ["Legalize"]


class _Legalizer(NonPrimitiveMutator):
    def __init__(self, attr_name: str):
        super().__init__()
        self.attr_name = attr_name

    def visit_call(self, call):
        new = super().visit_call(call)
        if not isinstance(new.op, Op):
            return new
        fn = new.op.get_attr(self.attr_name)
        if fn is None:
            return new
        types = [getattr(a, "_checked_type_", None) for a in call.args] + [getattr(call, "_checked_type_", None)]
        out = fn(new.attrs, list(new.args), types)
        if out is None:
            return new
        if not isinstance(out, RelayExpr):
            raise TypeError(f"{self.attr_name} of {new.op.name} returned {type(out).__name__}; expected a Relay "
                            "expression or None")
        return out


def _has_legalizable(mod, attr_name: str) -> bool:
    found = []

    def visit(e):
        if not found and isinstance(e, Call) and isinstance(e.op, Op) and e.op.get_attr(attr_name) is not None:
            found.append(e)
    for func in mod.functions.values():
        if isinstance(func, Function) and not func.get_attr("Primitive"):
            post_order_visit(func, visit)
            if found:
                return True
    return False


def Legalize(legalize_map_attr_name: str = "FTVMLegalize"):  # noqa: N802 (TVM's name)
    """The Legalize pass (opt level 1, as TVM)."""
    typed = typed_function_pass(lambda f, mod, ctx: _Legalizer(legalize_map_attr_name).visit(f), 1, "Legalize")

    def run(mod, ctx):
        if not _has_legalizable(mod, legalize_map_attr_name):
            return mod
        return typed._run(mod, ctx)  # noqa: SLF001 (the typed pass's body, without a second instrument call)
    return ModulePass(run, 1, "Legalize")


register_pass("Legalize", Legalize)
