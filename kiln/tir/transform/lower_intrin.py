"""LowerIntrin: rewrite TIR intrinsic calls with the rules registered for the build's target.

A rule is registered with ``kiln.ir.register_intrin_lowering(op, target, f=rule)`` (op attribute
``<target kind>.FLowerIntrinsic``); the target kind's rule is tried first, then the ``default`` one.
A rule returning a new expression replaces the call (and that expression is lowered again, so rules
may chain); returning the call unchanged keeps it for the code generator. The default rules (math
intrinsics -> C library calls) are in ``intrin_rule.py``; float ``%``, floordiv and floormod are
rewritten into the ``fmod`` / ``floor`` intrinsics first, so they reach the rules too.
"""
from __future__ import annotations

from ...error import LoweringError
from ...runtime.dtype import parse_dtype
from .. import expr as E
from ..stmt_functor import StmtExprMutator
from .pass_base import PrimFuncPass
from ...ir.op import _OPS

_MAX_REWRITES = 32  # a rule chain longer than this is a cycle


def _rule_for(op_name: str, keys: tuple):
    op = _OPS.get(str(op_name))
    if op is None:
        return None
    for key in keys:
        rule = op.get_attr(key)
        if rule is not None:
            return rule
    return None


class _IntrinLowerer(StmtExprMutator):
    def __init__(self, keys: tuple):
        self.keys = keys

    # float %, floordiv and floormod are C library calls (fmod, floor) on every kiln target
    def visit_Mod(self, e):
        e = self.generic_visit(e)
        if isinstance(e, E.Mod) and parse_dtype(e.dtype).is_float:
            return self.visit_Call(E.Call(e.dtype, "tir.fmod", [e.a, e.b]))
        return e

    def visit_FloorDiv(self, e):
        e = self.generic_visit(e)
        if isinstance(e, E.FloorDiv) and parse_dtype(e.dtype).is_float:
            return self.visit_Call(E.Call(e.dtype, "tir.floor", [E.Div(e.a, e.b)]))
        return e

    def visit_FloorMod(self, e):
        e = self.generic_visit(e)
        if isinstance(e, E.FloorMod) and parse_dtype(e.dtype).is_float:
            floor = self.visit_Call(E.Call(e.dtype, "tir.floor", [E.Div(e.a, e.b)]))
            return E.Sub(e.a, E.Mul(floor, e.b))
        return e

    def visit_Call(self, e):
        e = self.generic_visit(e)
        for _ in range(_MAX_REWRITES):
            if not isinstance(e, E.Call):
                return e
            rule = _rule_for(e.op, self.keys)
            if rule is None:
                return e
            new = rule(e)
            if new is None or new is e:
                return e
            if not isinstance(new, E.PrimExpr):
                raise LoweringError(f"the intrinsic lowering rule for {e.op} ({self.keys[0]}) returned "
                                    f"{type(new).__name__} {new!r}; it must return a PrimExpr")
            if new.dtype != e.dtype:
                raise LoweringError(f"the intrinsic lowering rule for {e.op} ({self.keys[0]}) changed the dtype "
                                    f"from {e.dtype} to {new.dtype}")
            e = self.generic_visit(new)
        raise LoweringError(f"intrinsic lowering of {e.op} did not settle after {_MAX_REWRITES} rewrites "
                            f"(rules that rewrite into each other?)")


def _target_kind(target) -> str | None:
    if target is None:
        return None
    if isinstance(target, str):
        from ...target import Target
        target = Target(target)
    return target.kind.name


def LowerIntrin(target=None) -> PrimFuncPass:  # noqa: N802  (TVM's pass name)
    """Lower intrinsic calls by the registered rules of ``target``'s kind (or of each PrimFunc's
    ``"target"`` attribute, or the current ``Target``), falling back to the ``default`` rules."""

    from ...target import vector_math as _vector_math  # noqa: F401  (registers the float32 erf / tanh rules)

    def pass_func(func, mod, ctx):
        tgt = target
        if tgt is None:
            tgt = func.attrs.get("target") if func.attrs else None
        if tgt is None:
            from ...target import Target
            tgt = Target.current(allow_none=True)
        kind = _target_kind(tgt)
        keys = (f"{kind}.FLowerIntrinsic", "default.FLowerIntrinsic") if kind else ("default.FLowerIntrinsic",)
        body = _IntrinLowerer(keys)(func.body)
        return func if body is func.body else func.with_body(body)

    return PrimFuncPass(pass_func, 0, "tir.LowerIntrin")
