"""PrimFunc: a TIR function, the unit that code generation turns into one C symbol."""
from __future__ import annotations

from ..ir.node import Node
from .printer import func_to_str


class PrimFunc(Node):
    """A low-level function: parameters (Vars; handles bind Buffers via ``buffer_map``) and a body.

    ``attrs`` holds e.g. ``global_symbol`` (the exported name) and ``tir.noalias``.
    """

    _fields = ("params", "buffer_map", "body", "ret_type", "attrs")
    _def_fields = ("params", "buffer_map")

    def __init__(self, params, body, ret_type=None, buffer_map=None, attrs=None):
        self.params = list(params)
        self.body = body
        self.ret_type = ret_type
        self.buffer_map = dict(buffer_map or {})
        self.attrs = dict(attrs or {})

    def with_attr(self, key, value=None) -> "PrimFunc":
        attrs = dict(self.attrs)
        if isinstance(key, dict):
            attrs.update(key)
        else:
            attrs[key] = value
        return self.with_fields(attrs=attrs)

    def with_body(self, body) -> "PrimFunc":
        return self.with_fields(body=body)

    def astext(self) -> str:
        return func_to_str(self)

    def script(self) -> str:
        return self.astext()
