"""Constant integer bounds of expressions: every value of ``e`` lies in ``[min_value, max_value]``.

Bounds are plain Python ints; ``POS_INF`` / ``NEG_INF`` stand for "unbounded" and absorb
arithmetic (``POS_INF + 1 == POS_INF``). Variables get their bounds from the analyzer (loop
ranges, constraints) or else from their dtype (SizeVar: non-negative).
"""
from __future__ import annotations

from ..ir.node import Node
from ..runtime.dtype import parse_dtype
from ..tir import expr as E

POS_INF = (1 << 63) - 1
NEG_INF = -POS_INF


class ConstIntBound(Node):
    """The result of :meth:`Analyzer.const_int_bound` (TVM's ``arith.ConstIntBound``)."""

    POS_INF = POS_INF
    NEG_INF = NEG_INF
    _fields = ("min_value", "max_value")

    def __init__(self, min_value: int, max_value: int):
        self.min_value = _clamp(min_value)
        self.max_value = _clamp(max_value)

    def is_const(self) -> bool:
        return self.min_value == self.max_value

    def astext(self) -> str:
        lo = "-inf" if self.min_value == NEG_INF else str(self.min_value)
        hi = "+inf" if self.max_value == POS_INF else str(self.max_value)
        return f"ConstIntBound[{lo}, {hi}]"


def _clamp(v: int) -> int:
    if v >= POS_INF:
        return POS_INF
    if v <= NEG_INF:
        return NEG_INF
    return int(v)


def _is_inf(v):
    return v == POS_INF or v == NEG_INF


def add_b(a, b):
    """Interval sum of two (lo, hi) pairs."""
    lo = NEG_INF if a[0] == NEG_INF or b[0] == NEG_INF else _clamp(a[0] + b[0])
    hi = POS_INF if a[1] == POS_INF or b[1] == POS_INF else _clamp(a[1] + b[1])
    return lo, hi


def neg_b(a):
    return (_clamp(-a[1]), _clamp(-a[0]))


def _mul_v(x, y):
    if x == 0 or y == 0:
        return 0
    if _is_inf(x) or _is_inf(y):
        return POS_INF if (x > 0) == (y > 0) else NEG_INF
    return _clamp(x * y)


def mul_b(a, b):
    vals = [_mul_v(x, y) for x in a for y in b]
    return min(vals), max(vals)


def scale_b(a, c: int):
    return mul_b(a, (c, c))


def _fdiv_v(x, c):
    if _is_inf(x):
        return x if c > 0 else -x
    return x // c


def floordiv_b(a, b):
    """Bound of floordiv(a, b) when b's bound excludes zero (else unbounded)."""
    if b[0] <= 0 <= b[1]:
        return NEG_INF, POS_INF
    vals = [_fdiv_v(x, y) if not _is_inf(y) else 0 for x in a for y in b]
    # dividing by an unbounded divisor tends to 0 or +-1
    if _is_inf(b[0]) or _is_inf(b[1]):
        vals += [-1 if a[0] < 0 else 0, 0 if a[1] <= 0 else 1]
        vals.extend([_fdiv_v(x, y) for x in a for y in b if not _is_inf(y)])
    return min(vals), max(vals)


def truncdiv_b(a, b):
    if b[0] <= 0 <= b[1]:
        return NEG_INF, POS_INF

    def tdiv(x, y):
        if _is_inf(y):
            return 0
        if _is_inf(x):
            return x if y > 0 else -x
        q = abs(x) // abs(y)
        return q if (x >= 0) == (y >= 0) else -q
    vals = [tdiv(x, y) for x in a for y in b]
    return min(vals), max(vals)


def floormod_b(a, b):
    """Bound of floormod(a, b)."""
    if b[0] > 0:
        hi = b[1] - 1 if not _is_inf(b[1]) else POS_INF
        if a[0] >= 0 and a[1] <= hi and a[1] < b[0]:
            return a
        if a[0] >= 0:
            return 0, min(hi, a[1])
        return 0, hi
    if b[1] < 0:
        lo = b[0] + 1 if not _is_inf(b[0]) else NEG_INF
        return lo, 0
    return NEG_INF, POS_INF


def truncmod_b(a, b):
    m = max(abs(b[0]), abs(b[1]))
    if _is_inf(m):
        lim = POS_INF
    else:
        lim = m - 1
    if a[0] >= 0:
        return 0, min(lim, a[1])
    if a[1] <= 0:
        return max(-lim, a[0]), 0
    return max(-lim, a[0]), min(lim, a[1])


def union_b(a, b):
    return min(a[0], b[0]), max(a[1], b[1])


def dtype_bound(dtype: str):
    dt = parse_dtype(dtype)
    if dt.is_bool:
        return 0, 1
    if dt.is_int:
        return _clamp(-(1 << (dt.bits - 1))), _clamp((1 << (dt.bits - 1)) - 1)
    if dt.is_uint:
        return 0, _clamp((1 << dt.bits) - 1)
    return NEG_INF, POS_INF


class ConstIntBoundAnalyzer:
    """Computes (lo, hi) bounds bottom-up; ``var_bounds`` maps Var -> (lo, hi)."""

    def __init__(self, var_bounds: dict, var_subst: dict | None = None):
        self.var_bounds = var_bounds
        self.var_subst = var_subst if var_subst is not None else {}
        self.memo: dict = {}

    def bound(self, e) -> tuple:
        if isinstance(e, int):
            return e, e
        hit = self.memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        meth = getattr(self, "b_" + type(e).__name__, None)
        r = meth(e) if meth is not None else self._default(e)
        dt = getattr(e, "dtype", "int32")
        try:
            dlo, dhi = dtype_bound(str(parse_dtype(dt).element_of()))
            r = (max(r[0], dlo), min(r[1], dhi))
        except Exception:
            pass
        self.memo[id(e)] = (e, r)
        return r

    def _default(self, e):
        dt = getattr(e, "dtype", None)
        if dt is None or dt == "handle":
            return NEG_INF, POS_INF
        return dtype_bound(str(parse_dtype(dt).element_of()))

    def b_IntImm(self, e):
        return e.value, e.value

    def b_FloatImm(self, e):
        return NEG_INF, POS_INF

    def b_Var(self, v):
        b = self.var_bounds.get(v)
        if b is None:
            sub = self.var_subst.get(v)
            if sub is not None:
                return self.bound(sub)
            if isinstance(v, E.SizeVar):
                return 0, dtype_bound(v.dtype)[1]
            return self._default(v)
        return b

    b_SizeVar = b_Var

    def b_Add(self, e):
        return add_b(self.bound(e.a), self.bound(e.b))

    def b_Sub(self, e):
        return add_b(self.bound(e.a), neg_b(self.bound(e.b)))

    def b_Mul(self, e):
        return mul_b(self.bound(e.a), self.bound(e.b))

    def b_FloorDiv(self, e):
        if parse_dtype(e.dtype).element_of().is_float:
            return self._default(e)
        return floordiv_b(self.bound(e.a), self.bound(e.b))

    def b_FloorMod(self, e):
        if parse_dtype(e.dtype).element_of().is_float:
            return self._default(e)
        return floormod_b(self.bound(e.a), self.bound(e.b))

    def b_Div(self, e):
        if parse_dtype(e.dtype).element_of().is_float:
            return self._default(e)
        return truncdiv_b(self.bound(e.a), self.bound(e.b))

    def b_Mod(self, e):
        if parse_dtype(e.dtype).element_of().is_float:
            return self._default(e)
        return truncmod_b(self.bound(e.a), self.bound(e.b))

    def b_Min(self, e):
        a, b = self.bound(e.a), self.bound(e.b)
        return min(a[0], b[0]), min(a[1], b[1])

    def b_Max(self, e):
        a, b = self.bound(e.a), self.bound(e.b)
        return max(a[0], b[0]), max(a[1], b[1])

    def b_Select(self, e):
        return union_b(self.bound(e.true_value), self.bound(e.false_value))

    def b_Cast(self, e):
        src = self.bound(e.value)
        dst = self._default(e)
        if parse_dtype(e.value.dtype).element_of().is_float:
            return dst
        if src[0] >= dst[0] and src[1] <= dst[1]:
            return src
        return dst

    def b_Let(self, e):
        old = self.var_bounds.get(e.var)
        self.var_bounds[e.var] = self.bound(e.value)
        try:
            return self.bound(e.body)
        finally:
            if old is None:
                self.var_bounds.pop(e.var, None)
            else:
                self.var_bounds[e.var] = old

    def b_Ramp(self, e):
        base = self.bound(e.base)
        last = add_b(base, scale_b(self.bound(e.stride), e.lanes - 1))
        return union_b(base, last)

    def b_Broadcast(self, e):
        return self.bound(e.value)

    def b_Call(self, e):
        name = e.op[4:] if isinstance(e.op, str) and e.op.startswith("tir.") else e.op
        if name == "if_then_else":
            return union_b(self.bound(e.args[1]), self.bound(e.args[2]))
        if name == "likely":
            return self.bound(e.args[0])
        if name == "bitwise_and":
            a, b = self.bound(e.args[0]), self.bound(e.args[1])
            if a[0] >= 0 and b[0] >= 0:
                return 0, min(a[1], b[1])
            if b[0] >= 0:
                return 0, b[1]
            if a[0] >= 0:
                return 0, a[1]
        if name == "shift_right":
            a, b = self.bound(e.args[0]), self.bound(e.args[1])
            if a[0] >= 0 and b[0] >= 0 and not _is_inf(b[1]) and b[1] < 64:
                return a[0] >> b[1], a[1] >> b[0] if not _is_inf(a[1]) else POS_INF
        if name == "shift_left":
            a, b = self.bound(e.args[0]), self.bound(e.args[1])
            if a[0] >= 0 and b[0] >= 0 and not _is_inf(b[1]) and b[1] < 62 and not _is_inf(a[1]):
                return a[0] << b[0], _clamp(a[1] << b[1])
        if name == "abs":
            a = self.bound(e.args[0])
            if a[0] >= 0:
                return a
            if a[1] <= 0:
                return neg_b(a)
            return 0, max(-a[0], a[1])
        if name == "popcount":
            return 0, parse_dtype(e.dtype).bits
        return self._default(e)

    def _cmp(self, e):
        return 0, 1

    b_EQ = b_NE = b_LT = b_LE = b_GT = b_GE = b_And = b_Or = b_Not = _cmp
