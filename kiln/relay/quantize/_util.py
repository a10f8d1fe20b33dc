"""Helpers of the quantize rules: forwarding a call with new arguments, constant checks, scalars."""
from __future__ import annotations

import numpy as np

from ...error import InternalError
from ..analysis.vars import free_vars
from ..expr import Call, Constant, Var


def forward_op(ref_call: Call, args) -> Call:
    """``ref_call``'s op and attrs applied to ``args``."""
    return Call(ref_call.op, list(args), ref_call.attrs, ref_call.type_args, ref_call.span)


def check_constant(expr) -> bool:
    """Whether ``expr`` depends on no variable (a constant or an expression of constants)."""
    if isinstance(expr, Constant):
        return True
    if isinstance(expr, Var):
        return False
    return not free_vars(expr)


def scalar_of(expr) -> float:
    """The value of a scalar Constant (a scale or clip bound after calibration)."""
    if not isinstance(expr, Constant) or expr.numpy().size != 1:
        raise InternalError(f"relay.quantize expected a scalar constant here (run calibrate before realize), "
                            f"got {type(expr).__name__}")
    return float(expr.numpy().reshape(()))


def const(value, dtype: str) -> Constant:
    return Constant(np.array(value, dtype=dtype))
