"""Small integer analysis used by bound inference: linear simplification and interval sets.

Bound inference needs three things of index expressions: fold linear arithmetic so that
``(i_o*64 + 63) - i_o*64 + 1`` becomes ``64`` (loop extents and realize regions must be
constants whenever they can be), evaluate the interval an expression covers when some of its
variables range over intervals, and prove simple inequalities. This module does exactly
that, conservatively: anything it cannot analyse is unbounded (and then the whole tensor is
used), and anything it cannot prove is treated as unknown (and then a guard is kept).
"""
from __future__ import annotations

from ..ir.node import structural_equal, structural_hash
from ..runtime.dtype import parse_dtype
from ..tir import expr as E
from ..tir import op as tir_op
from ..tir.stmt_functor import StmtExprVisitor


# --------------------------------------------------------------------------------------------
# linear canonical form
# --------------------------------------------------------------------------------------------
class _Linear:
    """``sum(coef * atom) + const`` over atoms (vars and non-linear sub-expressions)."""

    __slots__ = ("terms", "const", "dtype")

    def __init__(self, dtype):
        self.terms: dict = {}  # key -> [atom, coef]
        self.const = 0
        self.dtype = dtype

    def add_atom(self, atom, coef):
        if coef == 0:
            return
        key = _atom_key(atom)
        for entry in self.terms.setdefault(key, []):
            if entry[0] is atom or structural_equal(entry[0], atom):
                entry[1] += coef
                return
        self.terms[key].append([atom, coef])

    def add(self, other, scale=1):
        self.const += other.const * scale
        for entries in other.terms.values():
            for atom, coef in entries:
                self.add_atom(atom, coef * scale)

    def items(self):
        for entries in self.terms.values():
            for atom, coef in entries:
                if coef != 0:
                    yield atom, coef

    def is_const(self):
        return not any(True for _ in self.items())

    def to_expr(self):
        dt = self.dtype
        out = None
        for atom, coef in self.items():
            if coef == 1:
                term, neg = atom, False
            elif coef == -1:
                term, neg = atom, True
            elif coef > 0:
                term, neg = E.Mul(atom, tir_op.const(coef, dt)), False
            else:
                term, neg = E.Mul(atom, tir_op.const(-coef, dt)), True
            if out is None:
                out = E.Sub(tir_op.const(0, dt), term) if neg else term
            else:
                out = E.Sub(out, term) if neg else E.Add(out, term)
        if out is None:
            return tir_op.const(self.const, dt)
        if self.const > 0:
            out = E.Add(out, tir_op.const(self.const, dt))
        elif self.const < 0:
            out = E.Sub(out, tir_op.const(-self.const, dt))
        return out


def _atom_key(atom):
    if isinstance(atom, E.Var):
        return ("v", id(atom))
    return ("e", structural_hash(atom))


def _is_int(e) -> bool:
    dt = parse_dtype(e.dtype)
    return dt.lanes == 1 and dt.is_integral and not dt.is_bool


def _linearize(e):
    """The linear form of an integer expression (children of atoms simplified)."""
    lin = _Linear(e.dtype)
    if isinstance(e, E.IntImm):
        lin.const = e.value
    elif isinstance(e, E.Add):
        lin.add(_linearize(e.a))
        lin.add(_linearize(e.b))
    elif isinstance(e, E.Sub):
        lin.add(_linearize(e.a))
        lin.add(_linearize(e.b), -1)
    elif isinstance(e, E.Mul):
        la, lb = _linearize(e.a), _linearize(e.b)
        if la.is_const():
            lin.add(lb, la.const)
        elif lb.is_const():
            lin.add(la, lb.const)
        else:
            lin.add_atom(E.Mul(la.to_expr(), lb.to_expr()), 1)
    elif isinstance(e, (E.FloorDiv, E.FloorMod)):
        la, lb = _linearize(e.a), _linearize(e.b)
        if lb.is_const() and lb.const > 0:
            c = lb.const
            if la.is_const():
                lin.const = la.const // c if isinstance(e, E.FloorDiv) else la.const % c
                return lin
            if all(coef % c == 0 for _, coef in la.items()):
                # (c*x + k) // c == x + k // c ; (c*x + k) % c == k % c
                if isinstance(e, E.FloorDiv):
                    for atom, coef in la.items():
                        lin.add_atom(atom, coef // c)
                    lin.const = la.const // c
                else:
                    lin.const = la.const % c
                return lin
        cls = type(e)
        lin.add_atom(cls(la.to_expr(), lb.to_expr()), 1)
    elif isinstance(e, (E.Min, E.Max)):
        la, lb = _linearize(e.a), _linearize(e.b)
        diff = _Linear(e.dtype)
        diff.add(la)
        diff.add(lb, -1)
        if diff.is_const():
            pick_a = (diff.const <= 0) if isinstance(e, E.Min) else (diff.const >= 0)
            return la if pick_a else lb
        lin.add_atom(type(e)(la.to_expr(), lb.to_expr()), 1)
    else:
        lin.add_atom(e, 1)
    return lin


def simplify(e):
    """Canonicalize linear integer arithmetic in ``e`` (other expressions are returned as is)."""
    e = tir_op.convert(e)
    if not isinstance(e, E.PrimExpr) or not _is_int(e):
        return e
    return _linearize(e).to_expr()


def const_value(e):
    """The integer value of ``e`` after simplification, or None."""
    e = simplify(e)
    return e.value if isinstance(e, E.IntImm) else None


# --------------------------------------------------------------------------------------------
# interval sets
# --------------------------------------------------------------------------------------------
class IntSet:
    """The closed interval ``[min, max]``; ``None`` bounds are -inf / +inf."""

    __slots__ = ("min", "max")

    def __init__(self, lo, hi):
        self.min = simplify(lo) if lo is not None else None
        self.max = simplify(hi) if hi is not None else None

    @staticmethod
    def point(e) -> "IntSet":
        return IntSet(e, e)

    @staticmethod
    def from_range(r) -> "IntSet":
        return IntSet(r.min, r.min + r.extent - 1)

    @staticmethod
    def everything() -> "IntSet":
        return IntSet(None, None)

    def is_point(self) -> bool:
        return self.min is not None and self.max is not None and (
            self.min is self.max or structural_equal(self.min, self.max))

    def is_bounded(self) -> bool:
        return self.min is not None and self.max is not None

    def match_range(self, r) -> bool:
        if not self.is_bounded():
            return False
        return _same(self.min, r.min) and _same(self.max, r.min + r.extent - 1)

    def cover_range(self, default):
        """The Range ``[min, max]``, or ``default`` when unbounded."""
        if not self.is_bounded():
            return default
        return E.Range.from_min_extent(self.min, simplify(self.max - self.min + 1))

    def __repr__(self):
        return f"IntSet[{self.min}, {self.max}]"


def _same(a, b) -> bool:
    d = const_value(tir_op.sub(a, b))
    return d == 0


def union(sets):
    """The smallest interval covering all ``sets`` (symbolic bounds kept as min/max exprs)."""
    sets = list(sets)
    if not sets:
        return IntSet.everything()
    lo, hi = sets[0].min, sets[0].max
    for s in sets[1:]:
        lo = None if lo is None or s.min is None else _pick(lo, s.min, True)
        hi = None if hi is None or s.max is None else _pick(hi, s.max, False)
    return IntSet(lo, hi)


def _pick(a, b, want_min):
    d = const_value(tir_op.sub(a, b))
    if d is not None:
        return (a if d <= 0 else b) if want_min else (a if d >= 0 else b)
    return tir_op.min(a, b) if want_min else tir_op.max(a, b)


def _uses_any(e, dom) -> bool:
    found = []

    class _V(StmtExprVisitor):
        def visit_Var(self, v):
            if v in dom:
                found.append(v)

    _V()(e)
    return bool(found)


def eval_set(e, dom: dict) -> IntSet:
    """The interval ``e`` covers when each Var in ``dom`` ranges over its IntSet."""
    e = tir_op.convert(e)
    if not dom or not _uses_any(e, dom):
        return IntSet.point(e)
    return _eval(e, dom)


def _const(v, dt):
    return tir_op.const(v, dt)


def _eval(e, dom) -> IntSet:
    if isinstance(e, E.Var):
        s = dom.get(e)
        return s if s is not None else IntSet.point(e)
    if isinstance(e, (E.IntImm,)):
        return IntSet.point(e)
    if not _uses_any(e, dom):
        return IntSet.point(e)
    if isinstance(e, E.Add):
        a, b = _eval(e.a, dom), _eval(e.b, dom)
        return IntSet(_opt(tir_op.add, a.min, b.min), _opt(tir_op.add, a.max, b.max))
    if isinstance(e, E.Sub):
        a, b = _eval(e.a, dom), _eval(e.b, dom)
        return IntSet(_opt(tir_op.sub, a.min, b.max), _opt(tir_op.sub, a.max, b.min))
    if isinstance(e, E.Mul):
        a, b = _eval(e.a, dom), _eval(e.b, dom)
        return _mul(a, b)
    if isinstance(e, (E.FloorDiv, E.Div)):
        a, b = _eval(e.a, dom), _eval(e.b, dom)
        c = const_value(b.min) if b.is_point() else None
        if c is not None and c > 0:
            fn = tir_op.floordiv if isinstance(e, E.FloorDiv) else tir_op.truncdiv
            return IntSet(_opt(fn, a.min, b.min), _opt(fn, a.max, b.min))
        return IntSet.everything()
    if isinstance(e, (E.FloorMod, E.Mod)):
        a, b = _eval(e.a, dom), _eval(e.b, dom)
        c = const_value(b.min) if b.is_point() else None
        if c is not None and c > 0:
            lo_c, hi_c = (const_value(a.min) if a.min is not None else None,
                          const_value(a.max) if a.max is not None else None)
            if lo_c is not None and hi_c is not None and lo_c >= 0 and lo_c // c == hi_c // c:
                return IntSet(_const(lo_c % c, e.dtype), _const(hi_c % c, e.dtype))
            if isinstance(e, E.FloorMod) or (lo_c is not None and lo_c >= 0):
                return IntSet(_const(0, e.dtype), _const(c - 1, e.dtype))
            return IntSet(_const(-(c - 1), e.dtype), _const(c - 1, e.dtype))
        return IntSet.everything()
    if isinstance(e, (E.Min, E.Max)):
        a, b = _eval(e.a, dom), _eval(e.b, dom)
        fn = tir_op.min if isinstance(e, E.Min) else tir_op.max
        if isinstance(e, E.Min):
            lo = None if a.min is None or b.min is None else _pick(a.min, b.min, True)
            hi = a.max if b.max is None else b.max if a.max is None else _pick(a.max, b.max, True)
        else:
            lo = a.min if b.min is None else b.min if a.min is None else _pick(a.min, b.min, False)
            hi = None if a.max is None or b.max is None else _pick(a.max, b.max, False)
        del fn
        return IntSet(lo, hi)
    if isinstance(e, E.Cast) and _is_int(e) and _is_int(e.value):
        a = _eval(e.value, dom)
        return IntSet(_opt(lambda x: tir_op.cast(x, e.dtype), a.min),
                      _opt(lambda x: tir_op.cast(x, e.dtype), a.max))
    if isinstance(e, E.Select):
        return union([_eval(e.true_value, dom), _eval(e.false_value, dom)])
    if isinstance(e, E.Call) and e.op == "tir.if_then_else":
        return union([_eval(e.args[1], dom), _eval(e.args[2], dom)])
    if isinstance(e, E.Let):
        from ..tir.stmt_functor import substitute
        return _eval(substitute(e.body, {e.var: e.value}), dom)
    return IntSet.everything()


def _opt(fn, *args):
    if any(a is None for a in args):
        return None
    return fn(*args)


def _mul(a: IntSet, b: IntSet) -> IntSet:
    if b.is_point() and const_value(b.min) is not None:
        c = const_value(b.min)
        lo, hi = _opt(tir_op.mul, a.min, b.min), _opt(tir_op.mul, a.max, b.min)
        return IntSet(lo, hi) if c >= 0 else IntSet(hi, lo)
    if a.is_point() and const_value(a.min) is not None:
        return _mul(b, a)
    if a.is_point() and b.is_point():
        return IntSet.point(tir_op.mul(a.min, b.min))
    vals = [const_value(x) if x is not None else None for x in (a.min, a.max, b.min, b.max)]
    if all(v is not None for v in vals):
        prods = [vals[0] * vals[2], vals[0] * vals[3], vals[1] * vals[2], vals[1] * vals[3]]
        dt = a.min.dtype
        return IntSet(_const(min(prods), dt), _const(max(prods), dt))
    return IntSet.everything()


# --------------------------------------------------------------------------------------------
# proving
# --------------------------------------------------------------------------------------------
def can_prove_nonneg(e, dom: dict | None = None) -> bool:
    """Whether ``e >= 0`` for every value of the variables in ``dom``."""
    v = const_value(e)
    if v is not None:
        return v >= 0
    if dom:
        s = eval_set(simplify(e), dom)
        if s.min is not None:
            lo = const_value(s.min)
            if lo is not None:
                return lo >= 0
    return False


def can_prove_lt(a, b, dom: dict | None = None) -> bool:
    """Whether ``a < b`` always holds."""
    return can_prove_nonneg(tir_op.sub(tir_op.sub(b, a), 1), dom)


def can_prove_le(a, b, dom: dict | None = None) -> bool:
    return can_prove_nonneg(tir_op.sub(b, a), dom)


def can_prove_equal(a, b) -> bool:
    return const_value(tir_op.sub(a, b)) == 0


def is_one(e) -> bool:
    return const_value(e) == 1 if _is_int(tir_op.convert(e)) else False


def is_zero(e) -> bool:
    return const_value(e) == 0 if _is_int(tir_op.convert(e)) else False


def ceil_div(a, b):
    """``ceil(a / b)`` simplified (exact when provably divisible)."""
    la = _linearize(tir_op.convert(a))
    bv = const_value(b)
    if bv is not None and bv > 0 and all(c % bv == 0 for _, c in la.items()) and la.const % bv == 0:
        return simplify(tir_op.floordiv(a, b))
    return simplify(tir_op.floordiv(tir_op.add(a, tir_op.sub(b, 1)), b))
