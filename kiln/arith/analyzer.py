"""Analyzer: the façade over kiln's integer analyses (TVM's ``tvm.arith.Analyzer``).

It holds what is known about variables — constant bounds, symbolic ranges, substitutions and
known-true conditions — and answers simplification, bound and proof queries under that
knowledge. ``bind`` and ``constraint_scope`` are how loop passes tell it about the loop nest.
"""
from __future__ import annotations

from contextlib import contextmanager

from ..error import KilnError
from ..tir import expr as E, op as _op
from .const_int_bound import ConstIntBound, ConstIntBoundAnalyzer, POS_INF, NEG_INF
from .modular_set import ModularSet, ModularSetAnalyzer
from .simplify import Simplifier, _is_index_dtype
from .int_set import IntSet, IntervalSet, IntSetEvaluator, is_neg_inf, is_pos_inf, eval_set, neg_inf, pos_inf
from ..ir.node import structural_equal


class ProofStrength:
    """How hard :meth:`Analyzer.can_prove` tries (kept for API compatibility)."""
    DEFAULT = 0
    SYMBOLIC_BOUND = 1


class Analyzer:
    """Integer analyses under the current knowledge about variables."""

    def __init__(self):
        self.var_bounds: dict = {}   # Var -> (lo, hi) ints
        self.var_ranges: dict = {}   # Var -> (min_expr, max_expr) inclusive, symbolic
        self.var_subst: dict = {}    # Var -> expr
        self.var_mod: dict = {}      # Var -> (coeff, base)
        self.facts: dict = {}        # structural key of a normalized condition -> bool

    # -- knowledge ------------------------------------------------------------------------------
    def bind(self, var: E.Var, expr, allow_override: bool = False) -> None:
        """Tell the analyzer that ``var`` lies in a Range / IntSet, or equals an expression."""
        if not allow_override and (var in self.var_subst or var in self.var_ranges):
            existing = self.var_ranges.get(var) or self.var_subst.get(var)
            raise KilnError(f"analyzer: variable {var.name!r} is already bound (to {existing}); "
                            "pass allow_override=True to rebind it")
        self.var_subst.pop(var, None)
        if isinstance(expr, E.Range):
            lo = self.simplify(expr.min)
            hi = self.simplify(_op.sub(_op.add(expr.min, expr.extent), 1))
            self._set_range(var, lo, hi)
        elif isinstance(expr, IntervalSet):
            lo = expr.min_value if not is_neg_inf(expr.min_value) else None
            hi = expr.max_value if not is_pos_inf(expr.max_value) else None
            self._set_range(var, lo, hi)
        else:
            expr = self.simplify(_op.convert(expr))
            self.var_subst[var] = expr
            if _is_index_dtype(expr.dtype):
                b = self._cib().bound(expr)
                self.var_bounds[var] = b
            self.var_ranges.pop(var, None)

    def _set_range(self, var, lo, hi):
        cib = self._cib()
        blo = cib.bound(lo)[0] if lo is not None else NEG_INF
        bhi = cib.bound(hi)[1] if hi is not None else POS_INF
        self.var_bounds[var] = (blo, bhi)
        symbolic = (lo is not None and not isinstance(lo, E.IntImm)) or (hi is not None and not isinstance(hi, E.IntImm))
        if symbolic:
            self.var_ranges[var] = (lo if lo is not None else neg_inf, hi if hi is not None else pos_inf)
        else:
            self.var_ranges.pop(var, None)

    def update(self, var: E.Var, info, override: bool = False) -> None:
        """Record a ConstIntBound or ModularSet for ``var`` (intersecting unless ``override``)."""
        if isinstance(info, ConstIntBound):
            new = (info.min_value, info.max_value)
            old = self.var_bounds.get(var)
            if old is not None and not override:
                new = (max(old[0], new[0]), min(old[1], new[1]))
            self.var_bounds[var] = new
        elif isinstance(info, ModularSet):
            self.var_mod[var] = (info.coeff, info.base)
        else:
            raise KilnError(f"analyzer.update expects a ConstIntBound or ModularSet, got {type(info).__name__}")

    @contextmanager
    def constraint_scope(self, constraint):
        """Within the ``with`` block, ``constraint`` is assumed true."""
        saved = (dict(self.var_bounds), dict(self.var_ranges), dict(self.facts))
        try:
            self._assume(_op.convert(constraint))
            yield
        finally:
            self.var_bounds, self.var_ranges, self.facts = saved

    def _assume(self, cond):
        """Record ``cond`` (and each conjunct of it) as a fact. Conjunctions are taken apart from a work list:
        a condition built by folding hundreds of terms with ``And`` costs no interpreter stack."""
        todo = [self.simplify(cond)]  # simplified once: its conjuncts are simplified already
        while todo:
            cond = todo.pop()
            if isinstance(cond, E.Call) and cond.op == "tir.likely":
                cond = cond.args[0]
            if isinstance(cond, E.And):
                todo.append(cond.b)
                todo.append(cond.a)  # a first, as the recursive form did
                continue
            if not isinstance(cond, E.IntImm):
                self._assume_atom(cond)

    def _assume_atom(self, cond):
        simp = Simplifier(self)
        self.facts[simp.key(cond)] = True
        neg = self.simplify(E.Not(cond)) if cond.dtype == "bool" else None
        if neg is not None and not isinstance(neg, E.IntImm):
            self.facts[simp.key(neg)] = False
        # tighten variable bounds from `var op const` and `var op expr`
        if isinstance(cond, (E.LT, E.LE, E.EQ)) and _is_index_dtype(cond.a.dtype):
            a, b = cond.a, cond.b
            delta = 1 if isinstance(cond, E.LT) else 0
            cib = self._cib()
            if isinstance(a, E.Var):
                hi = cib.bound(b)[1]
                if hi != POS_INF:
                    self._tighten(a, NEG_INF, hi - delta)
                if not isinstance(b, E.IntImm):
                    self._tighten_symbolic(a, None, self.simplify(b - delta))
                if isinstance(cond, E.EQ):
                    lo = cib.bound(b)[0]
                    self._tighten(a, lo, POS_INF)
            if isinstance(b, E.Var):
                lo = cib.bound(a)[0]
                if lo != NEG_INF:
                    self._tighten(b, lo + delta, POS_INF)
                if not isinstance(a, E.IntImm):
                    self._tighten_symbolic(b, self.simplify(a + delta), None)

    def _tighten(self, var, lo, hi):
        old = self.var_bounds.get(var)
        if old is None:
            old = self._cib().bound(var)
        self.var_bounds[var] = (max(old[0], lo), min(old[1], hi))

    def _tighten_symbolic(self, var, lo, hi):
        old = self.var_ranges.get(var)
        if old is None:
            b = self.var_bounds.get(var)
            old = (E.IntImm(var.dtype, b[0]) if b and b[0] != NEG_INF else neg_inf,
                   E.IntImm(var.dtype, b[1]) if b and b[1] != POS_INF else pos_inf)
        new_lo = old[0] if lo is None else lo
        new_hi = old[1] if hi is None else hi
        self.var_ranges[var] = (new_lo, new_hi)

    def _cib(self) -> ConstIntBoundAnalyzer:
        return ConstIntBoundAnalyzer(self.var_bounds, self.var_subst)

    # -- queries ---------------------------------------------------------------------------------
    def simplify(self, expr, steps: int = 2):
        """Simplify an expression (canonical linear form + rewrite rules)."""
        return Simplifier(self).simplify(_op.convert(expr))

    def rewrite_simplify(self, expr):
        return self.simplify(expr)

    def canonical_simplify(self, expr):
        return self.simplify(expr)

    def const_int_bound(self, expr) -> ConstIntBound:
        """Constant bounds ``[min_value, max_value]`` of an integer expression."""
        expr = _op.convert(expr)
        simp = Simplifier(self)
        lo, hi = simp.bound(expr)
        if _is_index_dtype(expr.dtype):
            s = simp.finish(simp.lin(expr))
            lo2, hi2 = simp.sum_bound(s)
            lo, hi = max(lo, lo2), min(hi, hi2)
        return ConstIntBound(lo, hi)

    def modular_set(self, expr) -> ModularSet:
        expr = _op.convert(expr)
        c, b = ModularSetAnalyzer(dict(self.var_mod), self.var_subst).analyze(expr)
        return ModularSet(c, b)

    def can_prove(self, cond, strength=ProofStrength.DEFAULT) -> bool:
        """Whether ``cond`` is provably true under the current knowledge."""
        r = self.simplify(cond)
        return isinstance(r, E.IntImm) and r.value != 0

    def can_prove_equal(self, lhs, rhs) -> bool:
        lhs, rhs = _op.convert(lhs), _op.convert(rhs)
        if lhs is rhs:
            return True
        if _is_index_dtype(lhs.dtype) and _is_index_dtype(rhs.dtype):
            d = self.simplify(_op.sub(lhs, rhs))
            return isinstance(d, E.IntImm) and d.value == 0
        return structural_equal(self.simplify(lhs), self.simplify(rhs))

    def can_prove_greater_equal(self, expr, lower_bound: int) -> bool:
        return self.const_int_bound(expr).min_value >= lower_bound or self.can_prove(_op.convert(expr) >= lower_bound)

    def can_prove_less(self, expr, upper_bound: int) -> bool:
        return self.const_int_bound(expr).max_value < upper_bound or self.can_prove(_op.convert(expr) < upper_bound)

    def int_set(self, expr, dom_map: dict | None = None) -> IntervalSet:
        """The interval ``expr`` ranges over when the vars of ``dom_map`` range over theirs."""
        return eval_set(expr, dom_map or {}, analyzer=self)
