"""Provable shape equality over unknown (``Any``) dims, for passes that must know two ``?`` are the same.

Relay types only say ``?``: ``(?, 256)`` of a dense output and ``(?, 256)`` of a residual may or may not be
the same size at run time. :class:`SymbolicShapes` gives every tensor of an expression a symbolic shape with
``symbolic_reshape._Sym`` (static dims as ints, one variable per unknown dim of a free variable, the ops'
shape functions traced over them, shape arithmetic of the exporters evaluated) and compares two shapes
dim by dim; unknown dims of unrelated origin never compare equal. Built lazily (only when asked about a
type with unknown dims), once per expression.
"""
from __future__ import annotations

from ..expr_functor import post_order_visit
from ._util import is_op, static_shape, tensor_type


class SymbolicShapes:
    """Shapes of the nodes under ``body`` (a function body; its free variables get fresh symbols)."""

    def __init__(self, body, params=()):
        self.body = body
        self.params = list(params)
        self._sym = None

    def _symbolic(self):
        if self._sym is None:
            from .symbolic_reshape import _Sym
            sym = _Sym()
            for p in self.params:
                sym.shape_of(p)

            def visit(e):
                if is_op(e, "equal"):  # where(equal(shape, -1), ..) of the exporters' reshape targets
                    sym.visit_equal(e)
                else:
                    sym.visit(e)
            post_order_visit(self.body, visit)
            self._sym = sym
        return self._sym

    def of(self, e):
        """``e``'s shape as a tuple (ints, or ``tir`` expressions for unknown dims), None for a non-tensor."""
        s = static_shape(e)
        if s is not None:
            return s
        t = tensor_type(e)
        if t is None:
            return None
        sym = self._symbolic()
        s = sym.shape.get(id(e))
        if s is None:
            s = sym.shape_of(e)  # a free variable: fresh symbols, remembered
        if not isinstance(s, tuple) or (s and isinstance(s[0], str)) or len(s) != len(t.shape):
            return None
        return s

    def same(self, a, b) -> bool:
        """Whether two shapes (from :meth:`of`) are provably equal for every run-time size."""
        if a is None or b is None or len(a) != len(b):
            return False
        if all(isinstance(x, int) for x in a) and all(isinstance(y, int) for y in b):
            return tuple(a) == tuple(b)
        sym = self._symbolic()
        return all(sym.equal(x, y) for x, y in zip(a, b))
