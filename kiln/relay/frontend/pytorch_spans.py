"""Source spans for the PyTorch importer (TVM's ``relay.frontend.fill_span``, on unless a PassContext turns it off).

Every TorchScript node has a source name ``<kind>_<n>`` (the n-th node of that kind, counting all nodes but
``prim::GetAttr``: the names ``export_renamed_c_graph_path`` writes). The Relay expressions a node's conversion
creates get ``Span(SourceName(name), 0, 0, 0, 0)``; a graph input or parameter gets
``<name of the first node that reads it>.<its name>`` (the input's given name, the parameter's TorchScript value
name such as ``weight``). Tagging stops at expressions that already have a span, so what earlier nodes made keeps
theirs. Spans never take part in structural equality.
"""
from __future__ import annotations

from ...ir.span import Span
from ..expr import Call, Constant, Expr, Function, If, Let, Tuple, TupleGetItem, TupleWrapper, Var


def fill_span_enabled() -> bool:
    from ...transform import PassContext
    ctx = PassContext.current()
    config = (ctx.config if ctx is not None else None) or {}
    return bool(config.get("relay.frontend.fill_span", True))


def make_span(name: str) -> Span:
    return Span(name, 0, 0, 0, 0)


def _children(e):
    if isinstance(e, Call):
        return list(e.args) + ([e.op] if isinstance(e.op, Expr) else [])
    if isinstance(e, Tuple):
        return list(e.fields)
    if isinstance(e, TupleGetItem):
        return [e.tuple_value]
    if isinstance(e, Let):
        return [e.var, e.value, e.body]
    if isinstance(e, If):
        return [e.cond, e.true_branch, e.false_branch]
    if isinstance(e, Function):
        return list(e.params) + [e.body]
    return []


def tag(value, span: Span) -> None:
    """Give ``span`` to every expression in ``value`` (an Expr, a TupleWrapper or a list/tuple of them) that has
    none, not descending below expressions that already have one (iterative: graphs can be deep)."""
    stack = [value]
    seen = set()
    while stack:
        v = stack.pop()
        if isinstance(v, TupleWrapper):
            stack.append(v.tuple_value)
            continue
        if isinstance(v, (list, tuple)) and not isinstance(v, Expr):
            stack.extend(v)
            continue
        if not isinstance(v, (Call, Tuple, TupleGetItem, Let, If, Function, Var, Constant)) or id(v) in seen:
            continue
        seen.add(id(v))
        if getattr(v, "span", None) is not None:
            continue
        v.span = span
        stack.extend(_children(v))


class SpanNamer:
    """Source names of TorchScript nodes, counted per kind in graph order."""

    def __init__(self):
        self.counts: dict = {}

    def name(self, node) -> str | None:
        kind = node.kind()
        if kind == "prim::GetAttr":
            return None
        self.counts[kind] = self.counts.get(kind, -1) + 1
        return f"{kind}_{self.counts[kind]}"
