"""Pattern detection on index expressions (TVM's ``arith.detect_linear_equation`` and
``arith.detect_clip_bound``)."""
from __future__ import annotations

from ..tir import expr as E, op as _op
from ..tir.stmt_functor import uses_var
from .simplify import Simplifier, _is_index_dtype
from .analyzer import Analyzer
from .bound_deduce import _deduce
from .int_set import is_neg_inf, is_pos_inf


def detect_linear_equation(expr, var_list) -> list:
    """``[c_0, ..., c_{n-1}, base]`` with ``expr == sum(c_i * var_i) + base``, or ``[]`` when
    ``expr`` is not linear in the variables with constant coefficients."""
    expr = _op.convert(expr)
    if not _is_index_dtype(expr.dtype):
        return []
    simp = Simplifier(Analyzer())
    s = simp.finish(simp.lin(expr))
    coeffs = []
    rest = s.copy()
    for v in var_list:
        v = _op.convert(v)
        k = simp.key(v)
        t = rest.terms.pop(k, None)
        coeffs.append(E.IntImm(expr.dtype, t[1] if t else 0))
    base = simp.norm(rest)
    for v in var_list:
        if uses_var(base, _op.convert(v)):
            return []
    return coeffs + [base]


def detect_clip_bound(cond, var_list) -> list:
    """``[min_0, max_0, ...]`` bounds of each variable implied by a conjunction of linear
    comparisons (``None`` ends where unbounded), or ``[]`` if the condition has another form."""
    cond = _op.convert(cond)
    ana = Analyzer()
    out = []
    for v in var_list:
        v = _op.convert(v)
        s = _deduce(v, cond, {}, ana)
        if s.is_nothing():
            return []
        out.append(None if is_neg_inf(s.min_value) else s.min_value)
        out.append(None if is_pos_inf(s.max_value) else s.max_value)
    return out
