"""Structural queries over TIR: free variables, well-formedness, FLOP estimates."""
from __future__ import annotations

from ...error import KilnError
from ...ir.node import structural_equal
from ...runtime.dtype import parse_dtype
from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc
from ..stmt_functor import StmtExprVisitor


def expr_deep_equal(lhs, rhs) -> bool:
    """Whether two expressions are structurally equal with free variables compared by identity."""
    return structural_equal(lhs, rhs)


class _DefUse(StmtExprVisitor):
    def __init__(self, defined):
        self.defined = set(id(v) for v in defined)
        self.undefined = []
        self.seen = set()
        self.redefined = []

    def _define(self, v):
        if id(v) in self.defined:
            self.redefined.append(v)
        self.defined.add(id(v))

    def visit_Var(self, v):
        if id(v) not in self.defined and id(v) not in self.seen:
            self.seen.add(id(v))
            self.undefined.append(v)

    visit_SizeVar = visit_Var

    def visit_For(self, s):
        self.visit(s.min)
        self.visit(s.extent)
        self._define(s.loop_var)
        self.visit(s.body)

    def visit_LetStmt(self, s):
        while isinstance(s, S.LetStmt):  # a chain in a loop
            self.visit(s.value)
            self._define(s.var)
            s = s.body
        self.visit(s)

    def visit_Let(self, e):
        self.visit(e.value)
        self._define(e.var)
        self.visit(e.body)

    def visit_Allocate(self, s):
        for x in s.extents:
            self.visit(x)
        self._define(s.buffer_var)
        self.visit(s.body)

    def _buffer(self, b):
        for x in list(b.shape) + list(b.strides) + [b.elem_offset, b.data]:
            self.visit(x)

    def visit_BufferLoad(self, e):
        self._buffer(e.buffer)
        for i in e.indices:
            self.visit(i)

    def visit_BufferStore(self, s):
        self._buffer(s.buffer)
        self.visit(s.value)
        for i in s.indices:
            self.visit(i)

    def visit_BufferRealize(self, s):
        self._define(s.buffer.data)
        for r in s.bounds:
            self.visit(r.min)
            self.visit(r.extent)
        self.visit(s.body)

    def visit_AttrStmt(self, s):
        if s.attr_key in ("thread_extent", "virtual_thread") and isinstance(s.node, E.IterVar):
            self._define(s.node.var)
        self.visit(s.value)
        self.visit(s.body)

    def visit_Reduce(self, e):
        for iv in e.axis:
            self.defined.add(id(iv.var))
        self.generic_visit(e)


def undefined_vars(node, defs=None) -> list:
    """Variables used in ``node`` (a Stmt or PrimExpr) that it does not define, in order of use."""
    v = _DefUse(defs or [])
    v(node)
    return v.undefined


def verify_well_formed(func: PrimFunc, assert_mode: bool = True) -> bool:
    """Every variable is defined before use and defined only once (SSA)."""
    defined = list(func.params)
    for b in func.buffer_map.values():
        defined.append(b.data)
        for d in list(b.shape) + list(b.strides) + [b.elem_offset]:
            if isinstance(d, E.Var):
                defined.append(d)
    v = _DefUse(defined)
    v(func.body)
    problems = []
    if v.undefined:
        problems.append("undefined variables: " + ", ".join(x.name for x in v.undefined))
    if v.redefined:
        problems.append("variables defined more than once: " + ", ".join(x.name for x in v.redefined))
    if problems and assert_mode:
        raise KilnError("PrimFunc is not well formed: " + "; ".join(problems))
    return not problems


_FLOP_NODES = (E.Add, E.Sub, E.Mul, E.Div, E.Mod, E.FloorDiv, E.FloorMod, E.Min, E.Max)


def estimate_tir_flops(node) -> int:
    """Floating-point operations executed by a PrimFunc/Stmt with constant loop extents
    (each float arithmetic node or math call counts once per lane)."""
    if isinstance(node, PrimFunc):
        node = node.body

    def expr_flops(e) -> int:
        count = [0]

        class V(StmtExprVisitor):
            def generic_visit(self, n):
                if isinstance(n, _FLOP_NODES + (E.Call,)) and isinstance(n, E.PrimExpr):
                    dt = parse_dtype(n.dtype)
                    if dt.element_of().is_float and not (isinstance(n, E.Call) and n.op in
                                                         ("tir.if_then_else", "tir.likely")):
                        count[0] += dt.lanes
                StmtExprVisitor.generic_visit(self, n)
        V()(e)
        return count[0]

    def stmt_flops(s) -> int:
        if s is None:
            return 0
        if isinstance(s, S.SeqStmt):
            return sum(stmt_flops(x) for x in s.seq)
        if isinstance(s, S.For):
            if not isinstance(s.extent, E.IntImm):
                raise KilnError("estimate_tir_flops needs constant loop extents")
            return s.extent.value * stmt_flops(s.body)
        if isinstance(s, S.BufferStore):
            return expr_flops(s.value)
        if isinstance(s, S.Evaluate):
            return expr_flops(s.value)
        if isinstance(s, S.IfThenElse):
            return max(stmt_flops(s.then_case), stmt_flops(s.else_case))
        if isinstance(s, S.LetStmt):
            return expr_flops(s.value) + stmt_flops(s.body)
        if hasattr(s, "body"):
            return stmt_flops(s.body)
        return 0

    return stmt_flops(node)
