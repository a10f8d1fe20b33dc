"""Modular sets: every value of ``e`` equals ``coeff * k + base`` for some integer ``k``.

``coeff == 0`` means ``e`` is exactly ``base``; ``coeff == 1`` (base 0) means nothing is known.
Used to prove alignment (e.g. a vector load starts at a multiple of the lane count).
"""
from __future__ import annotations

from math import gcd

from ..ir.node import Node
from ..runtime.dtype import parse_dtype


class ModularSet(Node):
    """TVM's ``arith.ModularSet``: the set ``{coeff * k + base}``."""

    _fields = ("coeff", "base")

    def __init__(self, coeff: int, base: int):
        coeff = abs(int(coeff))
        base = int(base)
        if coeff:
            base %= coeff
        self.coeff, self.base = coeff, base

    def astext(self) -> str:
        return f"ModularSet(coeff={self.coeff}, base={self.base})"


_EVERYTHING = (1, 0)


def _norm(c, b):
    c = abs(c)
    return (c, b % c if c else b)


def _add(a, b):
    c = gcd(a[0], b[0])
    return _norm(c, a[1] + b[1])


def _neg(a):
    return _norm(a[0], -a[1])


def _mul(a, b):
    # (c1 k + b1)(c2 l + b2) = c1c2 kl + c1 b2 k + c2 b1 l + b1 b2
    c = gcd(gcd(a[0] * b[0], a[0] * b[1]), b[0] * a[1])
    return _norm(c, a[1] * b[1])


class ModularSetAnalyzer:
    """Bottom-up modular set analysis; ``var_info`` maps Var -> (coeff, base)."""

    def __init__(self, var_info: dict, var_subst: dict | None = None):
        self.var_info = var_info
        self.var_subst = var_subst or {}

    def analyze(self, e) -> tuple:
        meth = getattr(self, "m_" + type(e).__name__, None)
        if meth is None:
            return _EVERYTHING
        return meth(e)

    def m_IntImm(self, e):
        return (0, e.value)

    def m_Var(self, v):
        info = self.var_info.get(v)
        if info is not None:
            return info
        sub = self.var_subst.get(v)
        if sub is not None:
            return self.analyze(sub)
        return _EVERYTHING

    m_SizeVar = m_Var

    def m_Add(self, e):
        return _add(self.analyze(e.a), self.analyze(e.b))

    def m_Sub(self, e):
        return _add(self.analyze(e.a), _neg(self.analyze(e.b)))

    def m_Mul(self, e):
        return _mul(self.analyze(e.a), self.analyze(e.b))

    def _div(self, e, floor: bool):
        a, b = self.analyze(e.a), self.analyze(e.b)
        if b[0] == 0 and b[1] > 0:
            c = b[1]
            if a[0] == 0:
                return (0, a[1] // c) if floor else _EVERYTHING
            if a[0] % c == 0 and floor:
                return _norm(a[0] // c, a[1] // c)
        return _EVERYTHING

    def m_FloorDiv(self, e):
        if not parse_dtype(e.dtype).is_integral:
            return _EVERYTHING
        return self._div(e, True)

    def m_FloorMod(self, e):
        if not parse_dtype(e.dtype).is_integral:
            return _EVERYTHING
        a, b = self.analyze(e.a), self.analyze(e.b)
        if b[0] == 0 and b[1] > 0:
            c = b[1]
            g = gcd(a[0], c)
            return _norm(g, a[1] % c) if g else (0, a[1] % c)
        return _EVERYTHING

    def m_Min(self, e):
        a, b = self.analyze(e.a), self.analyze(e.b)
        return _norm(gcd(gcd(a[0], b[0]), a[1] - b[1]), a[1])

    m_Max = m_Min

    def m_Select(self, e):
        a, b = self.analyze(e.true_value), self.analyze(e.false_value)
        return _norm(gcd(gcd(a[0], b[0]), a[1] - b[1]), a[1])

    def m_Let(self, e):
        old = self.var_info.get(e.var)
        self.var_info[e.var] = self.analyze(e.value)
        try:
            return self.analyze(e.body)
        finally:
            if old is None:
                self.var_info.pop(e.var, None)
            else:
                self.var_info[e.var] = old

    def m_Call(self, e):
        if e.op in ("tir.shift_left",):
            a, b = self.analyze(e.args[0]), self.analyze(e.args[1])
            if b[0] == 0 and 0 <= b[1] < 62:
                return _mul(a, (0, 1 << b[1]))
        return _EVERYTHING
