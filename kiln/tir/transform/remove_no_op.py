"""RemoveNoOp: drop statements that do nothing (empty loops, pure evaluations, x[i] = x[i])."""
from __future__ import annotations

from ...ir.node import structural_equal
from .. import expr as E
from .. import stmt as S
from ..stmt_functor import StmtExprMutator, post_order_visit
from .pass_base import PrimFuncPass

_PURE_PREFIX = "tir."
_IMPURE = {"tir.tvm_call_packed", "tir.call_extern", "tir.call_packed", "tir.tvm_call_packed_lowered",
           "tir.ret", "tir.tvm_storage_sync", "tir.call_llvm_intrin", "tir.prefetch"}


def is_no_op(s) -> bool:
    if s is None:
        return True
    if isinstance(s, S.Evaluate):
        return _is_pure(s.value)
    if isinstance(s, S.SeqStmt):  # nested sequences from a work list
        todo = list(s.seq)
        while todo:
            x = todo.pop()
            if isinstance(x, S.SeqStmt):
                todo.extend(x.seq)
            elif not is_no_op(x):
                return False
        return True
    return False


def _is_pure(e) -> bool:
    found = []

    def visit(n):
        if isinstance(n, E.Call) and (n.op in _IMPURE or not str(n.op).startswith(_PURE_PREFIX)):
            found.append(n)
    post_order_visit(e, visit)
    return not found


_NOP = None


def _nop():
    return S.Evaluate(0)


_WRAPPERS = (S.LetStmt, S.AttrStmt, S.Allocate, S.DeclBuffer, S.BufferRealize, S.ProducerRealize)


class NoOpRemover(StmtExprMutator):
    """Statement-level mutator; expressions are left alone."""

    def visit_PrimExpr(self, e):
        return e

    # statement visitors are generators (``yield`` a child to visit it): nesting costs no stack

    def visit_SeqStmt(self, s):
        items = []
        for x in s.seq:
            items.append((yield x))
        kept = [x for x in items if not is_no_op(x)]
        if not kept:
            return _nop()
        if len(kept) == 1:
            return kept[0]
        if len(kept) == len(s.seq) and all(a is b for a, b in zip(kept, s.seq)):
            return s
        return S.SeqStmt(kept)

    def visit_Evaluate(self, s):
        if _is_pure(s.value) and not (isinstance(s.value, E.IntImm) and s.value.value == 0):
            return _nop()
        return s

    def visit_For(self, s):
        body = yield s.body
        if is_no_op(body) or (isinstance(s.extent, E.IntImm) and s.extent.value <= 0):
            return _nop()
        return s if body is s.body else s.with_fields(body=body)

    def visit_While(self, s):
        body = yield s.body
        return s if body is s.body else s.with_fields(body=body)

    def visit_IfThenElse(self, s):
        then_case = yield s.then_case
        else_case = (yield s.else_case) if s.else_case is not None else None
        if else_case is not None and is_no_op(else_case):
            else_case = None
        if is_no_op(then_case) and else_case is None:
            return _nop() if _is_pure(s.condition) else S.Evaluate(s.condition)
        if is_no_op(then_case):
            return S.IfThenElse(E.Not(s.condition), else_case)
        if then_case is s.then_case and else_case is s.else_case:
            return s
        return S.IfThenElse(s.condition, then_case, else_case)

    def _wrapper(self, s):
        chain = []
        while isinstance(s, _WRAPPERS):  # nested wrappers (a let chain) in a loop
            chain.append(s)
            s = s.body
        body = yield s
        for w in reversed(chain):
            body = _nop() if is_no_op(body) else (w if body is w.body else w.with_fields(body=body))
        return body

    visit_LetStmt = visit_AttrStmt = visit_Allocate = visit_DeclBuffer = visit_BufferRealize = _wrapper
    visit_ProducerRealize = _wrapper

    def visit_AssertStmt(self, s):
        body = yield s.body
        return s if body is s.body else s.with_fields(body=body)

    def visit_BufferStore(self, s):
        v = s.value
        if isinstance(v, E.BufferLoad) and v.buffer is s.buffer and structural_equal(v.indices, s.indices):
            return _nop()
        return s


def remove_no_op_stmt(stmt):
    return NoOpRemover()(stmt)


def remove_no_op_func(func, mod=None, ctx=None):
    body = remove_no_op_stmt(func.body)
    return func if body is func.body else func.with_body(body)


def RemoveNoOp() -> PrimFuncPass:  # noqa: N802
    """Remove statements without effect."""
    return PrimFuncPass(remove_no_op_func, 0, "tir.RemoveNoOp")
