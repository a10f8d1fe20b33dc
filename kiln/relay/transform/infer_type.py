"""The InferType pass and InferTypeLocal."""
from __future__ import annotations

from ...transform.pass_base import ModulePass, register_pass
from .type_infer import infer_expr, infer_module


def InferType() -> ModulePass:  # noqa: N802 (TVM's name)
    """Infer the type of every Relay expression in the module (``expr.checked_type`` afterwards)."""
    return ModulePass(lambda mod, ctx: infer_module(mod), 0, "InferType")


def InferTypeLocal(expr):  # noqa: N802
    """The type of one expression (its free variables must be annotated)."""
    return infer_expr(expr).checked_type


register_pass("InferType", InferType)
