"""Structural checks on Relay graphs."""
from __future__ import annotations

from ...error import RelayError
from ..expr import Call, Function, If, Let, Tuple, TupleGetItem, Var
from ..expr_functor import post_order_visit


def count_nodes(expr) -> int:
    """Number of distinct nodes reachable from ``expr`` (shared subgraphs counted once)."""
    n = [0]

    def visit(_):
        n[0] += 1

    post_order_visit(expr, visit)
    return n[0]


def well_formed(expr) -> bool:
    """True when every variable is bound at most once (TVM's ``relay.analysis.well_formed``)."""
    counts: dict = {}

    def visit(node):
        if isinstance(node, Function):
            for p in node.params:
                counts[p] = counts.get(p, 0) + 1
        elif isinstance(node, Let):
            counts[node.var] = counts.get(node.var, 0) + 1

    post_order_visit(expr, visit)
    return all(c == 1 for c in counts.values())


def check_basic_block_normal_form(expr) -> None:
    """Raise unless ``expr`` is well formed (kiln keeps no scoping beyond that)."""
    if not well_formed(expr):
        raise RelayError("expression is not well formed: a variable is bound more than once")


def edge_counts(root) -> dict:
    """Compound node -> number of references to it from nodes reachable from ``root`` (plus one for root).

    A node whose count inside a sub-scope (an if branch, a function body) equals its count in the whole
    program is used only in that scope, so printers and ANF can bind it there.
    """
    counts: dict = {root: 1}

    def visit(node):
        for f in node._fields:
            if (isinstance(node, Function) and f == "params") or (isinstance(node, Let) and f == "var"):
                continue
            child = getattr(node, f, None)
            if f == "clauses":  # a Match: its clauses' right-hand sides are its children
                child = tuple(clause.rhs for clause in child)
            for c in (child if isinstance(child, tuple) else (child,)):
                if isinstance(c, (Call, Tuple, TupleGetItem, If, Function, Let)) or type(c).__name__ == "Match":
                    counts[c] = counts.get(c, 0) + 1

    post_order_visit(root, visit)
    return counts
