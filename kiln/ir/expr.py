"""Expression bases shared by the IRs: RelayExpr (with its inferred type) and GlobalVar."""
from __future__ import annotations

from ..error import KilnError
from .node import Node


class BaseExpr(Node):
    """Base of all expressions."""


class RelayExpr(BaseExpr):
    """Base of Relay expressions. ``checked_type`` is set by type inference.

    ``span`` records where the expression came from; it is not part of structural equality.
    """

    span = None
    _checked_type_ = None

    @property
    def checked_type(self):
        ty = self._checked_type_
        if ty is None:
            raise KilnError(
                f"the type of this {type(self).__name__} has not been inferred yet; run "
                "relay.transform.InferType() on the module (or use relay.transform.InferTypeLocal) first"
            )
        return ty

    @property
    def struct_info(self):  # pragma: no cover - Relax name, absent in Relay
        raise AttributeError("struct_info is a Relax concept; Relay exprs have checked_type")


class GlobalVar(RelayExpr):
    """The name of a function in an IRModule (``@main``). Compared by name."""

    _fields = ("name_hint",)

    def __init__(self, name_hint: str, type_annot=None):
        if not isinstance(name_hint, str) or not name_hint:
            raise KilnError(f"GlobalVar needs a non-empty string name, got {name_hint!r}")
        self.name_hint = name_hint
        self.type_annotation = type_annot

    def __call__(self, *args):
        """Call this global function from Relay: ``gv(x, y)`` builds a ``relay.Call``."""
        from ..relay.expr import Call
        return Call(self, list(args))

    def astext(self, *args, **kwargs) -> str:
        return "@" + self.name_hint

    def __repr__(self) -> str:
        return f"GlobalVar({self.name_hint!r})"

    __str__ = __repr__
