"""deduce_bound: for which values of ``var`` does a condition hold (for every value of the
relaxed variables)? Used by loop partitioning to find the guard-free middle of a loop."""
from __future__ import annotations

from ..tir import expr as E, op as _op
from .simplify import Simplifier, _is_index_dtype
from .analyzer import Analyzer
from .int_set import IntSet, IntervalSet, IntSetEvaluator, neg_inf, pos_inf, is_neg_inf, is_pos_inf, intersect
from ..tir.stmt_functor import uses_var


def deduce_bound(var: E.Var, cond, hint_map: dict | None = None, relax_map: dict | None = None,
                 analyzer=None) -> IntervalSet:
    """The interval of ``var`` on which ``cond`` is true for all values of the variables in
    ``relax_map`` (Var -> Range/IntSet). Conjunctions intersect; an undecidable condition gives
    the empty set (nothing can be promised)."""
    ana = analyzer if analyzer is not None else Analyzer()
    for v, r in (hint_map or {}).items():
        if v not in ana.var_subst and v not in ana.var_ranges:
            ana.bind(v, r if not isinstance(r, IntervalSet) else r, allow_override=True)
    cond = _op.convert(cond)
    return _deduce(var, cond, relax_map or {}, ana)


def _deduce(var, cond, relax_map, ana) -> IntervalSet:
    if isinstance(cond, E.Call) and cond.op == "tir.likely":
        return _deduce(var, cond.args[0], relax_map, ana)
    if isinstance(cond, E.And):
        return intersect([_deduce(var, cond.a, relax_map, ana), _deduce(var, cond.b, relax_map, ana)], ana)
    if isinstance(cond, E.IntImm):
        return IntSet.everything() if cond.value else IntSet.nothing()
    if isinstance(cond, E.GT):
        cond, kind = E.LT(cond.b, cond.a), "LT"
    elif isinstance(cond, E.GE):
        cond, kind = E.LE(cond.b, cond.a), "LE"
    elif isinstance(cond, E.LT):
        kind = "LT"
    elif isinstance(cond, E.LE):
        kind = "LE"
    elif isinstance(cond, E.EQ):
        kind = "EQ"
    else:
        return IntSet.nothing()
    if not _is_index_dtype(cond.a.dtype):
        return IntSet.nothing()
    simp = Simplifier(ana)
    d = simp.finish(simp.lin(cond.a).iadd(simp.lin(cond.b), -1))   # cond: d <kind> 0
    vkey = simp.key(var)
    term = d.terms.get(vkey)
    if term is None:
        return IntSet.nothing()
    coeff = term[1]
    rest = d.copy()
    del rest.terms[vkey]
    rest_expr = simp.norm(rest)
    if uses_var(rest_expr, var):
        return IntSet.nothing()
    # the worst case of `rest` over the relaxed variables
    ev = IntSetEvaluator(simp, relax_map)
    rlo, rhi = ev.eval(rest_expr)
    dtype = cond.a.dtype
    if kind == "EQ":
        if rlo is rhi and not is_neg_inf(rlo):
            # coeff*var == -rest: only a point, when divisible
            val = simp.simplify(E.FloorDiv(simp.simplify(E.Sub(E.IntImm(dtype, 0), rlo)), E.IntImm(dtype, coeff))) \
                if abs(coeff) != 1 else simp.simplify(E.Mul(E.Sub(E.IntImm(dtype, 0), rlo), E.IntImm(dtype, coeff)))
            if abs(coeff) == 1:
                return IntervalSet(val, val)
        return IntSet.nothing()
    # need coeff*var + r (<|<=) 0 for every r in [rlo, rhi]: the binding case is r = rhi
    if is_pos_inf(rhi):
        return IntSet.nothing()
    bound_v = simp.simplify(E.Sub(E.IntImm(dtype, 0), rhi))   # coeff*var (<|<=) -rhi
    if kind == "LT":
        bound_v = simp.simplify(E.Sub(bound_v, E.IntImm(dtype, 1)))  # coeff*var <= -rhi - 1
    c = abs(coeff)
    if coeff > 0:
        hi = simp.simplify(E.FloorDiv(bound_v, E.IntImm(dtype, c))) if c != 1 else bound_v
        return IntervalSet(neg_inf, hi)
    # -c*var <= B  <=>  var >= ceil(-B / c)
    nb = simp.simplify(E.Sub(E.IntImm(dtype, 0), bound_v))
    lo = simp.simplify(E.FloorDiv(E.Add(nb, E.IntImm(dtype, c - 1)), E.IntImm(dtype, c))) if c != 1 else nb
    return IntervalSet(lo, pos_inf)
