"""Which variables an expression uses, binds, or leaves free."""
from __future__ import annotations

from ...ir.type import FuncType, TypeVar, Type
from ...ir.node import Node
from ..expr import Function, Let, Var
from ..expr_functor import post_order_visit
from ..adt import pattern_vars


def _collect(expr):
    """(vars in first-use order, vars bound somewhere) for an expression."""
    seen: dict = {}
    bound: dict = {}

    def visit(node):
        if isinstance(node, Var):
            seen.setdefault(node, None)
        elif isinstance(node, Function):
            for p in node.params:
                bound.setdefault(p, None)
        elif isinstance(node, Let):
            bound.setdefault(node.var, None)
        elif type(node).__name__ == "Match":
            for clause in node.clauses:
                for v in pattern_vars(clause.lhs):
                    bound.setdefault(v, None)

    post_order_visit(expr, visit)
    return seen, bound


def free_vars(expr) -> list:
    """Variables used but not bound in ``expr``, in order of first appearance (post-order)."""
    seen, bound = _collect(expr)
    return [v for v in seen if v not in bound]


def bound_vars(expr) -> list:
    """Variables bound (as function parameters or by let) in ``expr``."""
    _, bound = _collect(expr)
    return list(bound)


def all_vars(expr) -> list:
    """Every variable of ``expr``: bound ones first, then the free ones."""
    seen, bound = _collect(expr)
    out = list(bound)
    out += [v for v in seen if v not in bound]
    return out


def _type_vars_of_types(types, out: dict, bound: dict) -> None:
    def walk(t):
        if isinstance(t, TypeVar):
            out.setdefault(t, None)
            return
        if isinstance(t, FuncType):
            for tp in t.type_params:
                bound.setdefault(tp, None)
        if isinstance(t, Node):
            for f in t._fields:
                walk(getattr(t, f))
        elif isinstance(t, (list, tuple)):
            for x in t:
                walk(x)
    for t in types:
        walk(t)


def _type_vars(expr):
    used: dict = {}
    bound: dict = {}
    if isinstance(expr, Type):
        _type_vars_of_types([expr], used, bound)
        return used, bound
    types = []

    def visit(node):
        if isinstance(node, Var) and node.type_annotation is not None:
            types.append(node.type_annotation)
        elif isinstance(node, Function):
            for tp in node.type_params:
                bound.setdefault(tp, None)
            if node.ret_type is not None:
                types.append(node.ret_type)
        elif hasattr(node, "type_args"):
            types.extend(node.type_args)

    post_order_visit(expr, visit)
    _type_vars_of_types(types, used, bound)
    return used, bound


def free_type_vars(expr) -> list:
    used, bound = _type_vars(expr)
    return [t for t in used if t not in bound]


def bound_type_vars(expr) -> list:
    _, bound = _type_vars(expr)
    return list(bound)


def all_type_vars(expr) -> list:
    used, bound = _type_vars(expr)
    return list(bound) + [t for t in used if t not in bound]
