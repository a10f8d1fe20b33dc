"""Module-level passes on global functions: RemoveUnusedFunctions and Inline."""
from __future__ import annotations

from ...error import RelayError
from ...ir.expr import GlobalVar
from ...ir.module import IRModule
from ...transform.pass_base import ModulePass, register_pass
from ..expr import Call, Function, Var
from ..expr_functor import ExprMutator, post_order_visit


def _called_globals(expr) -> list:
    found: dict = {}

    def visit(node):
        if isinstance(node, GlobalVar):
            found.setdefault(node.name_hint, None)

    post_order_visit(expr, visit)
    return list(found)


def remove_unused_functions(mod: IRModule, entry_functions=None) -> IRModule:
    entries = list(entry_functions or ["main"])
    keep: set = set()
    stack = [e for e in entries if e in mod]
    while stack:
        name = stack.pop()
        if name in keep:
            continue
        keep.add(name)
        func = mod[name]
        if isinstance(func, Function):
            stack.extend(n for n in _called_globals(func) if n in mod and n not in keep)
    new = IRModule(attrs=mod.attrs, type_definitions=mod.type_definitions)
    for gv, func in mod.functions.items():
        if gv.name_hint in keep:
            new[gv] = func
    return new


def RemoveUnusedFunctions(entry_functions=None):  # noqa: N802
    """Drop global functions not reachable from the entry functions (default: ``main``)."""
    return ModulePass(lambda mod, ctx: remove_unused_functions(mod, entry_functions), 1, "RemoveUnusedFunctions")


class _Fresh(ExprMutator):
    """Copies a function body with fresh bound variables, substituting parameters by arguments."""

    def __init__(self, subst: dict):
        super().__init__()
        self.subst = dict(subst)

    def visit_var(self, var):
        return self.subst.get(var, var)

    def _fresh(self, v: Var) -> Var:
        nv = Var(v.name_hint, v.type_annotation, v.span)
        self.subst[v] = nv
        return nv

    def visit_let_binding(self, let):
        nv = self._fresh(let.var)
        return nv, self.visit(let.value)

    def visit_function(self, fn):
        params = [self._fresh(p) for p in fn.params]
        return Function(params, self.visit(fn.body), fn.ret_type, fn.type_params, fn.attrs, fn.span)


class _Inliner(ExprMutator):
    def __init__(self, mod: IRModule, inline_names: set):
        super().__init__()
        self.mod = mod
        self.inline_names = inline_names

    def visit_call(self, call):
        op = call.op
        if isinstance(op, GlobalVar) and op.name_hint in self.inline_names:
            callee = self.mod[op.name_hint]
            args = [self.visit(a) for a in call.args]
            if len(args) != len(callee.params):
                raise RelayError(f"@{op.name_hint} takes {len(callee.params)} arguments, called with {len(args)}")
            body = _Fresh(dict(zip(callee.params, args))).visit(callee.body)
            return self.visit(body)
        return super().visit_call(call)


def inline_functions(mod: IRModule) -> IRModule:
    names = set()
    for gv, f in mod.functions.items():
        if isinstance(f, Function) and f.get_attr("Inline") and gv.name_hint not in _called_globals(f.body):
            names.add(gv.name_hint)
    if not names:
        return mod
    new = IRModule(attrs=mod.attrs, type_definitions=mod.type_definitions)
    for gv, f in mod.functions.items():
        if isinstance(f, Function):
            f = _Inliner(mod, names).visit(f)
        new[gv] = f
    # drop inlined functions nobody calls any more
    still_called = set()
    for gv, f in new.functions.items():
        if isinstance(f, Function):
            still_called.update(_called_globals(f.body))
    for name in names:
        if name not in still_called and name != "main":
            new.remove(name)
    return new


def Inline():  # noqa: N802
    """Inline calls to global functions marked ``Inline=1`` (then drop them if no call remains)."""
    return ModulePass(lambda mod, ctx: inline_functions(mod), 1, "Inline")


register_pass("RemoveUnusedFunctions", RemoveUnusedFunctions)
register_pass("Inline", Inline)
