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

    # visitors of nesting nodes are generators (``yield`` a child to visit it): nesting costs no stack
    def visit_For(self, s):
        self.visit(s.min)
        self.visit(s.extent)
        self._define(s.loop_var)
        yield s.body

    def visit_LetStmt(self, s):
        while isinstance(s, S.LetStmt):  # a chain in a loop
            self.visit(s.value)
            self._define(s.var)
            s = s.body
        yield s

    def visit_Let(self, e):
        self.visit(e.value)
        self._define(e.var)
        yield e.body

    def visit_Allocate(self, s):
        for x in s.extents:
            self.visit(x)
        self._define(s.buffer_var)
        yield s.body

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
        yield s.body

    def visit_AttrStmt(self, s):
        if s.attr_key in ("thread_extent", "virtual_thread") and isinstance(s.node, E.IterVar):
            self._define(s.node.var)
        self.visit(s.value)
        yield s.body

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
            def generic_visit_iter(self, n):  # a generator for every node: any depth
                if isinstance(n, _FLOP_NODES + (E.Call,)) and isinstance(n, E.PrimExpr):
                    dt = parse_dtype(n.dtype)
                    if dt.element_of().is_float and not (isinstance(n, E.Call) and n.op in
                                                         ("tir.if_then_else", "tir.likely")):
                        count[0] += dt.lanes
                yield from StmtExprVisitor.generic_visit_iter(self, n)
        V()(e)
        return count[0]

    def stmt_flops(root) -> int:
        # children first from an explicit stack (any nesting depth); each open node combines its
        # children's counts: sum (SeqStmt), extent * body (For), max (IfThenElse), value + body (LetStmt)
        out: list = []
        todo = [(root, out)]
        opened = []  # (node, its children's counts, the list its own count goes to), parents first
        while todo:
            s, dest = todo.pop()
            if s is None:
                dest.append(0)
            elif isinstance(s, (S.BufferStore, S.Evaluate)):
                dest.append(expr_flops(s.value))
            elif isinstance(s, (S.SeqStmt, S.For, S.IfThenElse, S.LetStmt)) or hasattr(s, "body"):
                if isinstance(s, S.For) and not isinstance(s.extent, E.IntImm):
                    raise KilnError("estimate_tir_flops needs constant loop extents")
                res: list = []
                opened.append((s, res, dest))
                kids = (s.seq if isinstance(s, S.SeqStmt) else [s.then_case, s.else_case]
                        if isinstance(s, S.IfThenElse) else [s.body])
                todo.extend((k, res) for k in kids)
            else:
                dest.append(0)
        for s, res, dest in reversed(opened):
            if isinstance(s, S.For):
                val = s.extent.value * res[0]
            elif isinstance(s, S.IfThenElse):
                val = max(res)
            elif isinstance(s, S.LetStmt):
                val = expr_flops(s.value) + res[0]
            else:
                val = sum(res)
            dest.append(val)
        return out[0]

    return stmt_flops(node)
