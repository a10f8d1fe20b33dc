"""Source spans for the ONNX importer (TVM v0.13's ``relay.frontend.fill_span`` in ``from_onnx``; on unless a
PassContext sets it False).

A node's source name is its ``name``, or ``<op_type>_<n>`` when the model leaves it empty (n counts the unnamed
nodes of that op type in graph order, from 0; subgraphs of If/Loop/Scan share the count). Every Relay
expression the node's conversion creates gets ``Span(SourceName(name), 0, 0, 0, 0)``; a graph input or
initializer (a Var, or a Constant under ``freeze_params``) gets ``<source name of the first node that reads
it>.<its ONNX name>``. Tagging stops at expressions that already have a span (``pytorch_spans.tag``), so what
earlier nodes made keeps theirs. Unlike TVM, the importer does not write the generated names back into the
model's NodeProtos. Spans never take part in structural equality.
"""
from __future__ import annotations

from ..expr import Constant, Var
from .pytorch_spans import fill_span_enabled, make_span, tag

__all__ = ["OnnxSpanNamer", "fill_span_enabled"]  # fill_span_enabled re-exported for the importer


class OnnxSpanNamer:
    """Source names of ONNX nodes, and the span tagging of one node's inputs and outputs."""

    def __init__(self):
        self.counts: dict = {}

    def name(self, node) -> str:
        if node.name:
            return node.name
        n = self.counts.get(node.op_type, -1) + 1
        self.counts[node.op_type] = n
        return f"{node.op_type}_{n}"

    @staticmethod
    def tag_inputs(node, src: str, inputs) -> None:
        """Graph inputs and initializers first read by ``node`` get ``<src>.<their ONNX name>`` (``inputs``: the
        node's input values, in ``node.input`` order)."""
        for name, value in zip(node.input, inputs):
            if name and isinstance(value, (Var, Constant)) and getattr(value, "span", None) is None:
                value.span = make_span(f"{src}.{name}")

    @staticmethod
    def tag_outputs(outs, src: str) -> None:
        span = make_span(src)
        for o in outs:
            if o is not None:
                tag(o, span)
