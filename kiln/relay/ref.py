"""Mutable reference cells (TVM's ``relay.RefCreate``, ``RefRead``, ``RefWrite``).

``RefCreate(v)`` makes a cell of type ``RefType(type of v)``, ``RefRead(r)`` reads it, ``RefWrite(r, v)`` stores
into it and returns the empty tuple. The debug interpreter runs them; the graph executor compiles dataflow
only and refuses them (as TVM's graph executor does). Type inference, the printer and the interpreter reach
these nodes through the ``_infer_type`` / ``_print_text`` / ``_interpret`` methods below.
"""
from __future__ import annotations

from .expr import ExprWithOp, _check_expr
from ..ir.type import RelayRefType, TupleType, IncompleteType
from ..error import InternalError
from .expr_functor import register_expr_class

RefType = RelayRefType


class RefValue:
    """The interpreter's reference cell: one mutable slot."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self) -> str:
        return f"RefValue({self.value!r})"


class RefCreate(ExprWithOp):
    """``ref(value)``: a new cell holding ``value``."""

    _fields = ("value",)

    def __init__(self, value, span=None):
        self.value = _check_expr(value, "RefCreate value")
        self.span = span

    def _infer_type(self, inf):
        return RelayRefType(inf.infer(self.value))

    def _interpret(self, runner, frame):
        return RefValue(runner.eval(self.value, frame))

    def _print_text(self, atom) -> str:
        return f"ref({atom(self.value)})"


def _ref_value_type(inf, node, ref):
    rt = inf.solver.resolve(inf.infer(ref))
    if isinstance(rt, IncompleteType):
        vt = IncompleteType()
        inf.unify(rt, RelayRefType(vt), node, "the reference's type")
        return vt
    if not isinstance(rt, RelayRefType):
        inf.fail(node, f"expected a reference (RefType), got a value of type {rt.astext() if hasattr(rt, 'astext') else rt}")
    return rt.value


def _cell(runner, frame, ref, what):
    cell = runner.eval(ref, frame)
    if not isinstance(cell, RefValue):
        raise InternalError(f"{what} of a non-reference value {type(cell).__name__}")
    return cell


class RefRead(ExprWithOp):
    """``!ref``: the value the cell holds now."""

    _fields = ("ref",)

    def __init__(self, ref, span=None):
        self.ref = _check_expr(ref, "RefRead reference")
        self.span = span

    def _infer_type(self, inf):
        return _ref_value_type(inf, self, self.ref)

    def _interpret(self, runner, frame):
        return _cell(runner, frame, self.ref, "RefRead").value

    def _print_text(self, atom) -> str:
        return f"!{atom(self.ref)}"


class RefWrite(ExprWithOp):
    """``ref := value``: store ``value`` in the cell; the result is the empty tuple."""

    _fields = ("ref", "value")

    def __init__(self, ref, value, span=None):
        self.ref = _check_expr(ref, "RefWrite reference")
        self.value = _check_expr(value, "RefWrite value")
        self.span = span

    def _infer_type(self, inf):
        vt = _ref_value_type(inf, self, self.ref)
        inf.unify(vt, inf.infer(self.value), self, "the value written and the reference's type")
        return TupleType([])

    def _interpret(self, runner, frame):
        cell = _cell(runner, frame, self.ref, "RefWrite")
        cell.value = runner.eval(self.value, frame)
        return ()

    def _print_text(self, atom) -> str:
        return f"{atom(self.ref)} := {atom(self.value)}"


def _register_visitors() -> None:
    register_expr_class(RefCreate, "visit_ref_create")
    register_expr_class(RefRead, "visit_ref_read")
    register_expr_class(RefWrite, "visit_ref_write")


_register_visitors()

__all__ = ["RefCreate", "RefRead", "RefWrite", "RefType", "RefValue"]
