"""Integer sets: symbolic intervals ``[min_value, max_value]`` (inclusive) and their evaluation.

``eval_set(expr, dom_map)`` bounds the values ``expr`` takes when each variable of ``dom_map``
ranges over its set; other variables stay symbolic. Endpoints may be ``pos_inf`` /
``neg_inf`` (unbounded). This is what bound inference and loop partitioning build on.
"""
from __future__ import annotations

from ..runtime.dtype import parse_dtype
from ..tir import expr as E, op as _op
from ..ir.node import Node, structural_equal
from ..error import KilnError
from ..tir.stmt_functor import uses_var
from .simplify import Simplifier


class SymbolicLimit(Node):
    """``pos_inf`` / ``neg_inf``: an unbounded interval end."""

    _fields = ("sign",)

    def __init__(self, sign: int):
        self.sign = sign

    def astext(self) -> str:
        return "pos_inf" if self.sign > 0 else "neg_inf"


pos_inf = SymbolicLimit(1)
neg_inf = SymbolicLimit(-1)


def is_pos_inf(x) -> bool:
    return x is pos_inf


def is_neg_inf(x) -> bool:
    return x is neg_inf


def _is_inf(x) -> bool:
    return isinstance(x, SymbolicLimit)


class IntSet(Node):
    """Base of integer sets (TVM's ``arith.IntSet``); kiln's only kind is :class:`IntervalSet`."""

    @staticmethod
    def interval(min_value, max_value) -> "IntervalSet":
        return IntervalSet(min_value, max_value)

    @staticmethod
    def single_point(point) -> "IntervalSet":
        p = _op.convert(point)
        return IntervalSet(p, p)

    @staticmethod
    def vector(vec) -> "IntervalSet":
        """The set of the lanes of a vector expression (a Ramp or a Broadcast)."""
        return eval_set(_op.convert(vec), {})

    @staticmethod
    def everything() -> "IntervalSet":
        return IntervalSet(neg_inf, pos_inf)

    @staticmethod
    def nothing() -> "IntervalSet":
        return IntervalSet(pos_inf, neg_inf)

    @staticmethod
    def from_range(r) -> "IntervalSet":
        from .analyzer import Analyzer
        ana = Analyzer()
        return IntervalSet(ana.simplify(r.min), ana.simplify(r.min + r.extent - 1))


class IntervalSet(IntSet):
    """``[min_value, max_value]`` with PrimExpr (or infinite) ends."""

    _fields = ("min_value", "max_value")

    def __init__(self, min_value, max_value):
        self.min_value = min_value if _is_inf(min_value) else _op.convert(min_value)
        self.max_value = max_value if _is_inf(max_value) else _op.convert(max_value)

    def is_nothing(self) -> bool:
        if is_pos_inf(self.min_value) or is_neg_inf(self.max_value):
            return True
        lo, hi = self.min_value, self.max_value
        return isinstance(lo, E.IntImm) and isinstance(hi, E.IntImm) and lo.value > hi.value

    is_empty = is_nothing

    def is_everything(self) -> bool:
        return is_neg_inf(self.min_value) and is_pos_inf(self.max_value)

    def is_single_point(self) -> bool:
        if _is_inf(self.min_value) or _is_inf(self.max_value):
            return False
        if self.min_value is self.max_value:
            return True
        return structural_equal(self.min_value, self.max_value)

    def point_value(self):
        return self.min_value

    def has_upper_bound(self) -> bool:
        return not _is_inf(self.max_value)

    def has_lower_bound(self) -> bool:
        return not _is_inf(self.min_value)

    def is_bounded(self) -> bool:
        return self.has_lower_bound() and self.has_upper_bound()

    def cover_range(self, max_range=None) -> E.Range:
        """The Range covering this set (TVM's ``IntSet::CoverRange``): a set that is unbounded at
        either end is covered by ``max_range`` as a whole."""
        from .analyzer import Analyzer
        if not self.is_bounded():
            if max_range is None:
                raise KilnError(f"cannot cover the unbounded set {self} with a Range (no max_range given)")
            return max_range
        ana = Analyzer()
        lo, hi = self.min_value, self.max_value
        return E.Range.from_min_extent(ana.simplify(lo), ana.simplify(hi - lo + 1))

    def match_range(self, r: E.Range, analyzer=None) -> bool:
        """Whether this set is exactly the Range ``r`` (provably, under ``analyzer``)."""
        if not self.is_bounded():
            return False
        from .analyzer import Analyzer
        ana = analyzer if analyzer is not None else Analyzer()
        return ana.can_prove_equal(self.min_value, r.min) and \
            ana.can_prove_equal(self.max_value, _op.sub(_op.add(r.min, r.extent), 1))

    def union(self, other) -> "IntervalSet":
        return union([self, other])

    def intersect(self, other) -> "IntervalSet":
        return intersect([self, other])

    def astext(self) -> str:
        return f"IntervalSet[{self.min_value}, {self.max_value}]"


# --------------------------------------------------------------------------------------------
# endpoint arithmetic
# --------------------------------------------------------------------------------------------
def _to_interval(v, simp):
    """Normalize a dom_map value (Range, IntSet, (lo, hi) tuple or expr) into a (lo, hi) pair."""
    if isinstance(v, E.Range):
        return simp.simplify(v.min), simp.simplify(E.Sub(_op.add(v.min, v.extent), E.IntImm(v.extent.dtype, 1))
                                                    if v.min.dtype == v.extent.dtype
                                                    else _op.sub(_op.add(v.min, v.extent), 1))
    if isinstance(v, IntervalSet):
        return v.min_value, v.max_value
    if isinstance(v, tuple):
        return v
    v = _op.convert(v)
    return v, v


class IntSetEvaluator:
    """Evaluates expressions to (lo, hi) endpoint pairs given a domain map."""

    def __init__(self, simplifier, dom_map: dict):
        self.s = simplifier
        self.dom = {k: _to_interval(v, simplifier) for k, v in dom_map.items()}

    def eval(self, e):
        if isinstance(e, (int, float)):
            c = _op.convert(e)
            return c, c
        meth = getattr(self, "v_" + type(e).__name__, None)
        if meth is None:
            return self._opaque(e)
        lo, hi = meth(e)
        if not _is_inf(lo):
            lo = self.s.simplify(lo)
        if not _is_inf(hi):
            hi = self.s.simplify(hi)
        return lo, hi

    def _depends(self, e) -> bool:
        if not self.dom:
            return False
        return uses_var(e, lambda v: v in self.dom)

    def _opaque(self, e):
        if self._depends(e):
            dt = parse_dtype(e.dtype)
            if dt.is_bool or dt.element_of().is_bool:
                return E.IntImm("bool", 0), E.IntImm("bool", 1)
            return neg_inf, pos_inf
        return e, e

    def v_IntImm(self, e):
        return e, e

    v_FloatImm = v_IntImm

    def v_Var(self, v):
        r = self.dom.get(v)
        if r is None:
            return v, v
        return r

    v_SizeVar = v_Var

    def v_Add(self, e):
        a, b = self.eval(e.a), self.eval(e.b)
        return _add(a[0], b[0]), _add(a[1], b[1])

    def v_Sub(self, e):
        a, b = self.eval(e.a), self.eval(e.b)
        return _sub(a[0], b[1]), _sub(a[1], b[0])

    def _sign(self, x):
        if isinstance(x, (E.IntImm, E.FloatImm)):
            return (x.value > 0) - (x.value < 0)
        lo, hi = self.s.bound(x)
        if lo >= 0:
            return 1 if lo > 0 else 2   # 2: non-negative
        if hi <= 0:
            return -1 if hi < 0 else -2
        return None

    def v_Mul(self, e):
        a, b = self.eval(e.a), self.eval(e.b)
        if _is_point(a) and _is_point(b):
            return E.Mul(a[0], b[0]) if a[0].dtype == b[0].dtype else _op.mul(a[0], b[0]), \
                   E.Mul(a[0], b[0]) if a[0].dtype == b[0].dtype else _op.mul(a[0], b[0])
        if not _is_point(b) and _is_point(a):
            a, b = b, a
        if _is_point(b):
            s = self._sign(b[0])
            if s == 0:
                return b
            if s is not None and s > 0:
                return _mul(a[0], b[0]), _mul(a[1], b[0])
            if s is not None and s < 0:
                return _mul(a[1], b[0]), _mul(a[0], b[0])
        ends = (a[0], a[1], b[0], b[1])
        if all(isinstance(x, E.IntImm) for x in ends):
            # both operands range over constant intervals: the product's extremes are at the corners
            prods = [x.value * y.value for x in ends[:2] for y in ends[2:]]
            return E.IntImm(e.dtype, min(prods)), E.IntImm(e.dtype, max(prods))
        return self._everything(e)

    def _everything(self, e):
        return neg_inf, pos_inf

    def _div_by_const(self, e, cls):
        a, b = self.eval(e.a), self.eval(e.b)
        if _is_point(a) and _is_point(b):
            return cls(a[0], b[0]), cls(a[0], b[0])
        if _is_point(b) and isinstance(b[0], E.IntImm) and b[0].value != 0:
            c = b[0]
            if cls in (E.Div,) and not self._nonneg(a[0]):
                if c.value > 0:
                    return _div(a[0], c, cls), _div(a[1], c, cls)
                return self._everything(e)
            if c.value > 0:
                return _div(a[0], c, cls), _div(a[1], c, cls)
            return _div(a[1], c, cls), _div(a[0], c, cls)
        if _is_point(b):
            # a divisor known non-negative (a SizeVar extent) is positive wherever the division is evaluated
            # (division by zero is undefined), so the bounds of a fused index split by run-time extents hold
            s = self._sign(b[0])
            if s in (1, 2) and self._nonneg(a[0]):
                # a >= 0, b > 0: [a.min // b, a.max // b]
                return _div_sym(a[0], b[0], cls), _div_sym(a[1], b[0], cls)
        return self._everything(e)

    def _nonneg(self, x):
        if _is_inf(x):
            return False
        return self.s.bound(x)[0] >= 0

    def v_FloorDiv(self, e):
        return self._div_by_const(e, E.FloorDiv)

    def v_Div(self, e):
        if parse_dtype(e.dtype).is_float:
            return self._opaque(e)
        return self._div_by_const(e, E.Div)

    def _mod(self, e, cls):
        a, b = self.eval(e.a), self.eval(e.b)
        if _is_point(a) and _is_point(b):
            return cls(a[0], b[0]), cls(a[0], b[0])
        if _is_point(b) and isinstance(b[0], E.IntImm) and b[0].value > 0:
            c = b[0]
            if cls is E.Mod and not self._nonneg(a[0]):
                return E.IntImm(e.dtype, -(c.value - 1)), E.IntImm(e.dtype, c.value - 1)
            if not _is_inf(a[0]) and not _is_inf(a[1]):
                qa = self.s.simplify(E.FloorDiv(a[0], c))
                qb = self.s.simplify(E.FloorDiv(a[1], c))
                if self.s.same(qa, qb):
                    return self.s.simplify(E.FloorMod(a[0], c)), self.s.simplify(E.FloorMod(a[1], c))
            return E.IntImm(e.dtype, 0), E.IntImm(e.dtype, c.value - 1)
        if _is_point(b) and self._sign(b[0]) in (1, 2) and (cls is E.FloorMod or self._nonneg(a[0])):
            return E.IntImm(e.dtype, 0), _sub(b[0], E.IntImm(e.dtype, 1))
        return self._everything(e)

    def v_FloorMod(self, e):
        return self._mod(e, E.FloorMod)

    def v_Mod(self, e):
        if parse_dtype(e.dtype).is_float:
            return self._opaque(e)
        return self._mod(e, E.Mod)

    def v_Min(self, e):
        a, b = self.eval(e.a), self.eval(e.b)
        return _min(a[0], b[0]), _min(a[1], b[1])

    def v_Max(self, e):
        a, b = self.eval(e.a), self.eval(e.b)
        return _max(a[0], b[0]), _max(a[1], b[1])

    def v_Select(self, e):
        t, f = self.eval(e.true_value), self.eval(e.false_value)
        return _min(t[0], f[0]), _max(t[1], f[1])

    def v_Call(self, e):
        if e.op == "tir.if_then_else":
            t, f = self.eval(e.args[1]), self.eval(e.args[2])
            return _min(t[0], f[0]), _max(t[1], f[1])
        return self._opaque(e)

    def v_Cast(self, e):
        a = self.eval(e.value)
        src, dst = parse_dtype(e.value.dtype), parse_dtype(e.dtype)
        if src.is_integral and dst.is_integral and not dst.is_bool and not src.is_bool:
            # integer -> integer: cast both ends (as TVM does; index casts never wrap in valid code)
            return (a[0] if _is_inf(a[0]) else _op.cast(a[0], e.dtype),
                    a[1] if _is_inf(a[1]) else _op.cast(a[1], e.dtype))
        if _is_point(a):
            return _op.cast(a[0], e.dtype), _op.cast(a[0], e.dtype)
        return self._opaque(e)

    def v_Let(self, e):
        old = self.dom.get(e.var)
        self.dom[e.var] = self.eval(e.value)
        try:
            return self.eval(e.body)
        finally:
            if old is None:
                self.dom.pop(e.var, None)
            else:
                self.dom[e.var] = old

    def v_Ramp(self, e):
        base = self.eval(e.base)
        stride = e.stride
        if isinstance(stride, E.IntImm):
            span = E.IntImm(stride.dtype, stride.value * (e.lanes - 1))
            if stride.value >= 0:
                return base[0], _add(base[1], span)
            return _add(base[0], span), base[1]
        return self._everything(e)

    def v_Broadcast(self, e):
        return self.eval(e.value)


def _is_point(p) -> bool:
    return p[0] is p[1] and not _is_inf(p[0])


def _add(x, y):
    if _is_inf(x):
        return x
    if _is_inf(y):
        return y
    return _op.add(x, y)


def _sub(x, y):
    if _is_inf(x):
        return x
    if _is_inf(y):
        return neg_inf if y is pos_inf else pos_inf
    return _op.sub(x, y)


def _mul(x, c):
    if _is_inf(x):
        s = c.value if isinstance(c, (E.IntImm, E.FloatImm)) else 1
        if s == 0:
            return E.IntImm(c.dtype, 0)
        return x if s > 0 else (neg_inf if x is pos_inf else pos_inf)
    return _op.mul(x, c)


def _div(x, c, cls):
    if _is_inf(x):
        neg = isinstance(c, E.IntImm) and c.value < 0
        return x if not neg else (neg_inf if x is pos_inf else pos_inf)
    if x.dtype != c.dtype:
        x, c = _op._match(x, c)
    return cls(x, c)


def _drop_factor(m, b):
    """``m / b`` when ``m`` is a product with the factor ``b`` (the same node), else None."""
    if isinstance(m, E.Mul):
        if m.b is b:
            return m.a
        if m.a is b:
            return m.b
        for k, other in ((0, m.b), (1, m.a)):
            inner = _drop_factor(m.a if k == 0 else m.b, b)
            if inner is not None:
                return E.Mul(inner, other) if k == 0 else E.Mul(other, inner)
    return None


def _div_sym(x, b, cls):
    """An endpoint divided by a positive run-time ``b``: ``0 // b`` is 0, ``(P*b) // b`` is ``P`` and
    ``(P*b - 1) // b`` is ``P - 1`` (the last value of a loop over ``P*b`` fused iterations), else the quotient."""
    if not _is_inf(x) and isinstance(b, E.Var):
        if isinstance(x, E.IntImm) and x.value == 0:
            return x
        m, k = x, 0
        if isinstance(x, E.Sub) and isinstance(x.b, E.IntImm):
            m, k = x.a, x.b.value
        elif isinstance(x, E.Add) and isinstance(x.b, E.IntImm):
            m, k = x.a, -x.b.value
        if k in (0, 1):
            q = _drop_factor(m, b)
            if q is not None:
                return q if k == 0 else _op.sub(q, 1)
    return _div(x, b, cls)


def _min(x, y):
    if x is neg_inf or y is neg_inf:
        return neg_inf
    if x is pos_inf:
        return y
    if y is pos_inf:
        return x
    return _op.min(x, y)


def _max(x, y):
    if x is pos_inf or y is pos_inf:
        return pos_inf
    if x is neg_inf:
        return y
    if y is neg_inf:
        return x
    return _op.max(x, y)


# --------------------------------------------------------------------------------------------
# public functions
# --------------------------------------------------------------------------------------------
def eval_set(expr, dom_map: dict, analyzer=None) -> IntervalSet:
    """The interval of values ``expr`` takes when each Var in ``dom_map`` ranges over its
    Range / IntSet (TVM's ``arith.EvalSet``)."""
    from .analyzer import Analyzer
    ana = analyzer if analyzer is not None else Analyzer()
    simp = Simplifier(ana)
    ev = IntSetEvaluator(simp, dom_map or {})
    lo, hi = ev.eval(_op.convert(expr))
    return IntervalSet(lo, hi)


def union(sets, analyzer=None) -> IntervalSet:
    """The smallest interval containing every set."""
    from .analyzer import Analyzer
    ana = analyzer if analyzer is not None else Analyzer()
    sets = [s for s in sets if not s.is_nothing()]
    if not sets:
        return IntSet.nothing()
    lo, hi = sets[0].min_value, sets[0].max_value
    for s in sets[1:]:
        lo = _min(lo, s.min_value)
        hi = _max(hi, s.max_value)
    return IntervalSet(lo if _is_inf(lo) else ana.simplify(lo), hi if _is_inf(hi) else ana.simplify(hi))


def intersect(sets, analyzer=None) -> IntervalSet:
    """The intersection of intervals."""
    from .analyzer import Analyzer
    ana = analyzer if analyzer is not None else Analyzer()
    if not sets:
        return IntSet.everything()
    lo, hi = sets[0].min_value, sets[0].max_value
    for s in sets[1:]:
        lo = s.min_value if is_neg_inf(lo) else (lo if is_neg_inf(s.min_value) else _max(lo, s.min_value))
        hi = s.max_value if is_pos_inf(hi) else (hi if is_pos_inf(s.max_value) else _min(hi, s.max_value))
    return IntervalSet(lo if _is_inf(lo) else ana.simplify(lo), hi if _is_inf(hi) else ana.simplify(hi))
