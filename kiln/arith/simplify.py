"""The integer simplifier: canonical linear forms plus rewrite rules.

Scalar integer expressions are brought into a *linear sum* ``c0 + sum(coeff_i * atom_i)``
where atoms are the non-linear parts (variables, divisions, min/max, loads, ...) themselves
simplified. Like terms combine (``x*2 + x -> x*3``, ``(a + b) - a -> b``), divisions and
modulos by constants split off the exactly divisible part and drop what bounds prove to be
in range (``(io*64 + ii) // 64 -> io`` when ``0 <= ii < 64``), and ``(x // c) * c + x % c``
recombines into ``x``. Comparisons are decided from constant bounds of the difference of
their sides (and, when loop ranges are symbolic, from symbolic interval bounds); min/max
pick a side when its order is provable. Everything else (floats, booleans, vectors) gets
constant folding and local rules. The simplifier assumes index arithmetic does not overflow,
as TVM's does.
"""
from __future__ import annotations

from math import gcd

from ..runtime.dtype import parse_dtype
from ..tir import expr as E, op as _op
from ..tir.buffer import Buffer
from .const_int_bound import (ConstIntBoundAnalyzer, POS_INF, NEG_INF, add_b, scale_b)
from ..tir.stmt_functor import substitute, _rebuild


def _is_index_dtype(dtype: str) -> bool:
    dt = parse_dtype(dtype)
    return dt.lanes == 1 and (dt.is_int or dt.is_uint)


def _imm(dtype, value):
    return E.IntImm(dtype, value)


_OPERATOR_TYPES = frozenset((E.Add, E.Sub, E.Mul, E.Div, E.Mod, E.FloorDiv, E.FloorMod, E.Min, E.Max, E.EQ, E.NE,
                             E.LT, E.LE, E.GT, E.GE, E.And, E.Or, E.Not, E.Cast, E.Select, E.Call))


def _operator_operands(e) -> list:
    out = []
    for f in e._fields:
        v = getattr(e, f)
        if type(v) in _OPERATOR_TYPES:
            out.append(v)
        elif isinstance(v, list):
            out.extend(x for x in v if type(x) in _OPERATOR_TYPES)
    return out


_LIN_OPS = frozenset((E.Add, E.Sub, E.Mul))


def _key_children(e) -> list:
    """The composite nodes a structural key of ``e`` is built from (leaves need no visit)."""
    if not (isinstance(e, E.PrimExpr) or isinstance(e, E.Range)) or isinstance(e, (E.Var, E.IntImm, E.FloatImm)):
        return []
    out = []
    todo = [getattr(e, f) for f in e._fields]
    while todo:
        v = todo.pop()
        if isinstance(v, (list, tuple)):
            todo.extend(v)
        elif (isinstance(v, (E.PrimExpr, E.Range)) and not isinstance(v, (E.Var, E.IntImm, E.FloatImm))):
            out.append(v)
    return out


class LinearSum:
    """``const + sum(coeff * atom)``; ``terms`` maps an atom's structural key to [atom, coeff]."""

    __slots__ = ("terms", "const", "dtype")

    def __init__(self, dtype: str, const: int = 0, terms=None):
        self.dtype = dtype
        self.const = const
        self.terms = dict(terms) if terms else {}

    def copy(self) -> "LinearSum":
        return LinearSum(self.dtype, self.const, {k: [a, c] for k, (a, c) in self.terms.items()})

    @property
    def is_const(self) -> bool:
        return not self.terms

    def add_term(self, key, atom, coeff: int):
        if coeff == 0:
            return
        t = self.terms.get(key)
        if t is None:
            self.terms[key] = [atom, coeff]
        else:
            t[1] += coeff
            if t[1] == 0:
                del self.terms[key]

    def iadd(self, other: "LinearSum", scale: int = 1) -> "LinearSum":
        self.const += other.const * scale
        for k, (a, c) in other.terms.items():
            self.add_term(k, a, c * scale)
        return self

    def scaled(self, c: int) -> "LinearSum":
        if c == 0:
            return LinearSum(self.dtype)
        return LinearSum(self.dtype, self.const * c, {k: [a, v * c] for k, (a, v) in self.terms.items()})

    def coeff_gcd(self) -> int:
        g = 0
        for _, c in self.terms.values():
            g = gcd(g, c)
        return g


class Simplifier:
    """One simplification session over an :class:`~kiln.arith.Analyzer`'s knowledge."""

    def __init__(self, analyzer, depth: int = 0):
        self.an = analyzer
        self.depth = depth
        self.memo: dict = {}
        self.keys: dict = {}
        self.done: dict = {}
        self.cib = ConstIntBoundAnalyzer(analyzer.var_bounds, analyzer.var_subst)

    # ---------------------------------------------------------------------------------------
    # structural keys
    # ---------------------------------------------------------------------------------------
    def key(self, e):
        hit = self.keys.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        if _key_children(e):
            # children first from a work list: a deep sum's key costs no interpreter stack
            keys = self.keys
            stack = [(e, False)]
            while stack:
                n, ready = stack.pop()
                h = keys.get(id(n))
                if h is not None and h[0] is n:
                    continue
                if ready:
                    self._key1(n)
                    continue
                stack.append((n, True))
                for c in _key_children(n):
                    h = keys.get(id(c))
                    if h is None or h[0] is not c:
                        stack.append((c, False))
            return keys[id(e)][1]
        return self._key1(e)

    def _key1(self, e):
        if isinstance(e, E.Var) or isinstance(e, Buffer):
            k = ("V", id(e))
        elif isinstance(e, E.IntImm):
            k = ("I", e.dtype, e.value)
        elif isinstance(e, E.FloatImm):
            k = ("F", e.dtype, e.value)
        elif isinstance(e, E.PrimExpr) or isinstance(e, E.Range):
            parts = [type(e).__name__, getattr(e, "dtype", None)]
            for f in e._fields:
                parts.append(self._key_value(getattr(e, f)))
            k = tuple(parts)
        else:
            k = ("O", id(e))
        self.keys[id(e)] = (e, k)
        return k

    def _key_value(self, v):
        if isinstance(v, (list, tuple)):
            return tuple(self._key_value(x) for x in v)
        if isinstance(v, (E.PrimExpr, Buffer, E.Range)):
            return self.key(v)
        if isinstance(v, (int, float, str, bool)) or v is None:
            return v
        self.keys.setdefault(id(v), (v, ("O", id(v))))
        return ("O", id(v))

    def same(self, a, b) -> bool:
        return a is b or self.key(a) == self.key(b)

    def _mark(self, e):
        self.done[id(e)] = e
        return e

    # ---------------------------------------------------------------------------------------
    # entry
    # ---------------------------------------------------------------------------------------
    def simplify(self, e):
        if not isinstance(e, E.PrimExpr):
            return e
        hit = self.done.get(id(e))
        if hit is e:
            return e
        hit = self.memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        if type(e) in _OPERATOR_TYPES:
            self._operands_first(e)
        if _is_index_dtype(e.dtype):
            r = self.norm(self.finish(self.lin(e)))
        else:
            r = self._simplify_other(e)
        self.memo[id(e)] = (e, r)
        self._mark(r)
        return r

    def _operands_first(self, root) -> None:
        """Simplify the non-index operator nodes below ``root`` children-first from a work list, so the
        recursive rules below find them memoized: a deep float or boolean expression, or a long
        if_then_else chain, costs no interpreter stack. (Index sums go through ``lin``.)"""
        memo, done = self.memo, self.done
        stack = [(root, iter(_operator_operands(root)))]
        seen = set()
        while stack:
            node, it = stack[-1]
            for c in it:
                if id(c) in seen or done.get(id(c)) is c:
                    continue
                hit = memo.get(id(c))
                if hit is not None and hit[0] is c:
                    continue
                seen.add(id(c))
                stack.append((c, iter(_operator_operands(c))))
                break
            else:
                stack.pop()
                if stack and not _is_index_dtype(node.dtype):
                    self.simplify(node)

    # ---------------------------------------------------------------------------------------
    # linear sums
    # ---------------------------------------------------------------------------------------
    def lin(self, e) -> LinearSum:
        """The linear sum of ``e`` (a fresh object). Add/Sub/Mul nests are walked post-order with an
        explicit stack, so a sum of thousands of terms costs no interpreter stack."""
        if type(e) not in _LIN_OPS:
            return self._lin_leaf(e)
        todo = [(e, False)]
        vals: list = []
        while todo:
            n, ready = todo.pop()
            t = type(n)
            if not ready:
                if t in _LIN_OPS:
                    todo.append((n, True))
                    todo.append((n.b, False))
                    todo.append((n.a, False))
                else:
                    vals.append(self._lin_leaf(n))
                continue
            lb = vals.pop()
            la = vals.pop()
            if t is E.Add:
                vals.append(la.iadd(lb))
            elif t is E.Sub:
                vals.append(la.iadd(lb, -1))
            elif la.is_const:
                vals.append(lb.scaled(la.const))
            elif lb.is_const:
                vals.append(la.scaled(lb.const))
            else:
                ea, eb = self.norm(self.finish(la)), self.norm(self.finish(lb))
                vals.append(self._atom_sum(self._mark(E.Mul(ea, eb))))
        return vals[0]

    def _lin_leaf(self, e) -> LinearSum:
        if type(e) is E.IntImm:
            return LinearSum(e.dtype, e.value)
        s = self.atom(e)
        if type(s) is E.IntImm:
            return LinearSum(e.dtype, s.value)
        if type(s) in (E.Add, E.Sub, E.Mul):
            return self.lin(s)
        return self._atom_sum(s)

    def _atom_sum(self, atom) -> LinearSum:
        ls = LinearSum(atom.dtype)
        ls.add_term(self.key(atom), atom, 1)
        return ls

    def norm(self, ls: LinearSum):
        dtype = ls.dtype
        pos = [(a, c) for a, c in ls.terms.values() if c > 0]
        neg = [(a, -c) for a, c in ls.terms.values() if c < 0]
        const = ls.const

        def term(a, c):
            return a if c == 1 else self._mark(E.Mul(a, _imm(dtype, c)))

        res = None
        for a, c in pos:
            t = term(a, c)
            res = t if res is None else self._mark(E.Add(res, t))
        if res is None and neg:
            if const > 0:
                res = _imm(dtype, const)
                const = 0
            else:
                a, c = neg.pop(0)
                res = self._mark(E.Mul(a, _imm(dtype, -c)))
        for a, c in neg:
            res = self._mark(E.Sub(res, term(a, c)))
        if res is None:
            return _imm(dtype, const)
        if const > 0:
            res = self._mark(E.Add(res, _imm(dtype, const)))
        elif const < 0:
            res = self._mark(E.Sub(res, _imm(dtype, -const)))
        return res

    def finish(self, ls: LinearSum) -> LinearSum:
        """Recombine division/modulo pairs: ``(x//c)*c + x%c -> x`` and ``(x//c)*c - x -> -(x%c)``."""
        changed = True
        rounds = 0
        while changed and rounds < 8:
            changed = False
            rounds += 1
            divs = {}
            mods = {}
            for k, (a, c) in ls.terms.items():
                if type(a) in (E.FloorDiv, E.FloorMod) and type(a.b) is E.IntImm and a.b.value > 0:
                    (divs if type(a) is E.FloorDiv else mods)[(self.key(a.a), a.b.value)] = (k, a, c)
            for dk, (k1, fd, c1) in divs.items():
                m = mods.get(dk)
                cval = dk[1]
                if m is not None:
                    k2, fm, c2 = m
                    if c1 == c2 * cval:
                        del ls.terms[k1]
                        del ls.terms[k2]
                        ls.iadd(self.lin(fd.a), c2)
                        changed = True
                        break
                if c1 % cval == 0:
                    k = c1 // cval
                    x = self.lin(fd.a)
                    if x.terms and all(
                        (t := ls.terms.get(xk)) is not None and t[1] == -k * xc for xk, (_, xc) in x.terms.items()
                    ):
                        del ls.terms[k1]
                        ls.iadd(x, k)
                        fm = self.simplify(E.FloorMod(fd.a, fd.b))
                        ls.iadd(self.lin(fm), -k)
                        changed = True
                        break
            if not changed:
                changed = self._finish_symbolic(ls)
        return ls

    def _finish_symbolic(self, ls: LinearSum) -> bool:
        """``(x//y)*y*c + (x%y)*c -> x*c`` for a run-time divisor ``y`` (floor division, any ``y != 0``): the
        index of a loop fused over run-time extents, unravelled and raveled again, is the loop variable."""
        mods = {}
        for k, (a, c) in ls.terms.items():
            if type(a) is E.FloorMod and type(a.b) is not E.IntImm:
                mods[(self.key(a.a), self.key(a.b))] = (k, a, c)
        if not mods:
            return False
        for k1, (a, c1) in ls.terms.items():
            if type(a) is not E.Mul:
                continue
            for fd, y in ((a.a, a.b), (a.b, a.a)):
                if type(fd) is E.FloorDiv and self.same(fd.b, y):
                    m = mods.get((self.key(fd.a), self.key(y)))
                    if m is not None and m[2] == c1:
                        del ls.terms[k1]
                        del ls.terms[m[0]]
                        ls.iadd(self.lin(fd.a), c1)
                        return True
        return False

    # ---------------------------------------------------------------------------------------
    # bounds
    # ---------------------------------------------------------------------------------------
    def bound(self, e):
        if isinstance(e, LinearSum):
            return self.sum_bound(e)
        return self.cib.bound(e)

    def sum_bound(self, ls: LinearSum):
        total = (ls.const, ls.const)
        used = set()
        items = list(ls.terms.items())
        # floordiv(X + d, c) - floordiv(X, c) is within [floor(d/c), ceil(d/c)]
        for i, (k1, (a1, c1)) in enumerate(items):
            if k1 in used or type(a1) is not E.FloorDiv or type(a1.b) is not E.IntImm or a1.b.value <= 0:
                continue
            for k2, (a2, c2) in items[i + 1:]:
                if k2 in used or c2 != -c1 or type(a2) is not E.FloorDiv or type(a2.b) is not E.IntImm \
                        or a2.b.value != a1.b.value:
                    continue
                d = self.lin(a1.a).iadd(self.lin(a2.a), -1)
                if not d.is_const:
                    continue
                cv = a1.b.value
                lo, hi = d.const // cv, -((-d.const) // cv)
                total = add_b(total, scale_b((lo, hi), c1))
                used.add(k1)
                used.add(k2)
                break
        for k, (a, c) in items:
            if k in used:
                continue
            total = add_b(total, scale_b(self.cib.bound(a), c))
            if total == (NEG_INF, POS_INF):
                break
        return total

    def sym_bound(self, ls: LinearSum):
        """Bounds of a sum after replacing variables by their symbolic ranges (one level)."""
        if self.depth > 0 or not self.an.var_ranges:
            return None
        dom = {}
        for a, _ in ls.terms.values():
            self._collect_ranged_vars(a, dom)
        if not dom:
            return None
        from .int_set import IntSetEvaluator, is_neg_inf, is_pos_inf
        sub = Simplifier(self.an, self.depth + 1)
        ev = IntSetEvaluator(sub, dom)
        lo_e, hi_e = ev.eval(self.norm(ls))
        lo = NEG_INF if is_neg_inf(lo_e) else sub.sum_bound(sub.finish(sub.lin(sub.simplify(lo_e))))[0]
        hi = POS_INF if is_pos_inf(hi_e) else sub.sum_bound(sub.finish(sub.lin(sub.simplify(hi_e))))[1]
        return lo, hi

    def _collect_ranged_vars(self, e, dom):
        if isinstance(e, E.Var):
            r = self.an.var_ranges.get(e)
            if r is not None:
                dom[e] = r
            return
        if isinstance(e, E.PrimExpr):
            for f in e._fields:
                v = getattr(e, f)
                if isinstance(v, E.PrimExpr):
                    self._collect_ranged_vars(v, dom)
                elif isinstance(v, list):
                    for x in v:
                        if isinstance(x, E.PrimExpr):
                            self._collect_ranged_vars(x, dom)

    # ---------------------------------------------------------------------------------------
    # atoms (non-linear integer expressions)
    # ---------------------------------------------------------------------------------------
    def atom(self, e):
        hit = self.done.get(id(e))
        if hit is e:
            return e
        hit = self.memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        meth = getattr(self, "a_" + type(e).__name__, None)
        r = meth(e) if meth is not None else self._rebuild_children(e)
        self.memo[id(e)] = (e, r)
        return self._mark(r)

    def a_Var(self, v):
        sub = self.an.var_subst.get(v)
        if sub is not None:
            return self.simplify(sub)
        return v

    a_SizeVar = a_Var

    def _split(self, ls: LinearSum, c: int):
        """(quotient, remainder) sums with ``ls == c * q + r`` and no term of r divisible by c."""
        q, r = LinearSum(ls.dtype), LinearSum(ls.dtype)
        for k, (a, v) in ls.terms.items():
            if v % c == 0:
                q.add_term(k, a, v // c)
            else:
                r.add_term(k, a, v)
        q.const, r.const = ls.const // c, ls.const % c
        return q, r

    def _floordiv_sum(self, ls: LinearSum, c: int) -> LinearSum:
        """floordiv(ls, c) for a constant c > 0, as a linear sum."""
        dtype = ls.dtype
        q, r = self._split(ls, c)
        if r.is_const:
            return q
        lo, hi = self.sum_bound(r)
        if lo != NEG_INF and hi != POS_INF and lo // c == hi // c:
            q.const += lo // c
            return q
        # r = g*r1 + r2 with 0 <= r2 < g and g | c  =>  floordiv(r, c) = floordiv(r1, c/g)
        for g in sorted({gcd(v, c) for _, v in r.terms.values()}, reverse=True):
            if g <= 1:
                continue
            r1, r2 = self._split(r, g)
            lo2, hi2 = self.sum_bound(r2)
            if lo2 >= 0 and hi2 < g:
                return q.iadd(self._floordiv_sum(r1, c // g))
        g = gcd(c, gcd(r.coeff_gcd(), r.const))
        if g > 1:
            r = LinearSum(dtype, r.const // g, {k: [a, v // g] for k, (a, v) in r.terms.items()})
            c //= g
        if r.const == 0 and len(r.terms) == 1:
            (a, v), = r.terms.values()
            if v == 1 and type(a) is E.FloorDiv and type(a.b) is E.IntImm and a.b.value > 0:
                inner = self.simplify(E.FloorDiv(a.a, _imm(dtype, a.b.value * c)))
                return q.iadd(self.lin(inner))
        atom = self._mark(E.FloorDiv(self.norm(r), _imm(dtype, c)))
        return q.iadd(self._atom_sum(atom))

    def _floormod_sum(self, ls: LinearSum, c: int) -> LinearSum:
        dtype = ls.dtype
        _, r = self._split(ls, c)
        if r.is_const:
            return r
        lo, hi = self.sum_bound(r)
        if lo != NEG_INF and hi != POS_INF and lo // c == hi // c:
            r.const -= (lo // c) * c
            return r
        for g in sorted({gcd(v, c) for _, v in r.terms.values()}, reverse=True):
            if g <= 1:
                continue
            r1, r2 = self._split(r, g)
            lo2, hi2 = self.sum_bound(r2)
            if lo2 >= 0 and hi2 < g:
                return self._floormod_sum(r1, c // g).scaled(g).iadd(r2)
        g = gcd(c, gcd(r.coeff_gcd(), r.const))
        if g > 1:
            r = LinearSum(dtype, r.const // g, {k: [a, v // g] for k, (a, v) in r.terms.items()})
            return self._floormod_sum(r, c // g).scaled(g)
        if r.const == 0 and len(r.terms) == 1:
            (a, v), = r.terms.values()
            if v == 1 and type(a) is E.FloorMod and type(a.b) is E.IntImm and a.b.value % c == 0:
                inner = self.simplify(E.FloorMod(a.a, _imm(dtype, c)))
                return self.lin(inner)
        atom = self._mark(E.FloorMod(self.norm(r), _imm(dtype, c)))
        return self._atom_sum(atom)

    def a_FloorDiv(self, e):
        la = self.finish(self.lin(e.a))
        b = self.simplify(e.b)
        if type(b) is E.IntImm:
            c = b.value
            if c == 0:
                return E.FloorDiv(self.norm(la), b)
            if la.is_const:
                return _imm(e.dtype, la.const // c)
            if c > 0:
                return self.norm(self._floordiv_sum(la, c))
        a = self.norm(la)
        if self.same(a, b):
            bb = self.bound(b)
            if bb[0] > 0 or bb[1] < 0:
                return _imm(e.dtype, 1)
        return E.FloorDiv(a, b)

    def a_FloorMod(self, e):
        la = self.finish(self.lin(e.a))
        b = self.simplify(e.b)
        if type(b) is E.IntImm:
            c = b.value
            if c == 0:
                return E.FloorMod(self.norm(la), b)
            if la.is_const:
                return _imm(e.dtype, la.const % c)
            if c > 0:
                return self.norm(self._floormod_sum(la, c))
        a = self.norm(la)
        if self.same(a, b):
            return _imm(e.dtype, 0)
        return E.FloorMod(a, b)

    def _trunc(self, e, floor_cls, fold):
        a, b = self.simplify(e.a), self.simplify(e.b)
        if type(a) is E.IntImm and type(b) is E.IntImm and b.value != 0:
            return _imm(e.dtype, fold(a.value, b.value))
        if type(b) is E.IntImm and b.value > 0:
            if self.bound(a)[0] >= 0:
                return self.atom(floor_cls(a, b))
            if b.value == 1:
                return a if floor_cls is E.FloorDiv else _imm(e.dtype, 0)
        return type(e)(a, b)

    def a_Div(self, e):
        def tdiv(x, y):
            q = abs(x) // abs(y)
            return q if (x >= 0) == (y >= 0) else -q
        return self._trunc(e, E.FloorDiv, tdiv)

    def a_Mod(self, e):
        def tmod(x, y):
            r = abs(x) % abs(y)
            return r if x >= 0 else -r
        return self._trunc(e, E.FloorMod, tmod)

    def _minmax(self, e, is_min: bool):
        a, b = self.simplify(e.a), self.simplify(e.b)
        if type(a) is E.IntImm and type(b) is E.IntImm:
            v = min(a.value, b.value) if is_min else max(a.value, b.value)
            return _imm(e.dtype, v)
        if self.same(a, b):
            return a
        d = self.finish(self.lin(a).iadd(self.lin(b), -1))
        lo, hi = self.sum_bound(d)
        if (lo, hi) == (NEG_INF, POS_INF) or (lo < 0 < hi):
            sb = self.sym_bound(d)
            if sb is not None:
                lo, hi = max(lo, sb[0]), min(hi, sb[1])
        if hi <= 0:
            return a if is_min else b
        if lo >= 0:
            return b if is_min else a
        cls = E.Min if is_min else E.Max
        # min(min(x, c1), c2) -> min(x, min(c1, c2))
        if type(a) is cls and type(a.b) is E.IntImm and type(b) is E.IntImm:
            v = min(a.b.value, b.value) if is_min else max(a.b.value, b.value)
            return self.atom(cls(a.a, _imm(e.dtype, v)))
        if type(a) is E.IntImm and type(b) is not E.IntImm:
            a, b = b, a
        return cls(a, b)

    def a_Min(self, e):
        return self._minmax(e, True)

    def a_Max(self, e):
        return self._minmax(e, False)

    def a_Select(self, e):
        cond = self.simplify(e.condition)
        if type(cond) is E.IntImm:
            return self.simplify(e.true_value if cond.value else e.false_value)
        t, f = self.simplify(e.true_value), self.simplify(e.false_value)
        if self.same(t, f):
            return t
        return E.Select(cond, t, f)

    def a_Cast(self, e):
        v = self.simplify(e.value)
        if type(v) in (E.IntImm, E.FloatImm):
            return _op.cast(v, e.dtype)
        if v.dtype == e.dtype:
            return v
        return E.Cast(e.dtype, v) if v is not e.value else e

    def a_Let(self, e):
        """A let, and the lets nested in its body, in a loop (no stack per level): each value is
        simplified and its bound known while the rest is simplified; a constant or variable value is
        substituted instead. Rebuilt inside out, unchanged lets kept."""
        chain, saved = [], []
        bounds = self.an.var_bounds
        try:
            while type(e) is E.Let:
                v = self.simplify(e.value)
                if type(v) in (E.IntImm, E.FloatImm) or isinstance(v, E.Var):
                    e = substitute(e.body, {e.var: v})
                    continue
                saved.append((e.var, bounds.get(e.var)))
                if _is_index_dtype(v.dtype):
                    bounds[e.var] = self.bound(v)
                chain.append((e, v))
                e = e.body
            body = self.simplify(e)
        finally:
            for var, old in reversed(saved):
                if old is None:
                    bounds.pop(var, None)
                else:
                    bounds[var] = old
        for let, v in reversed(chain):
            if not (v is let.value and body is let.body):
                let = E.Let(let.var, v, body)
            body = let
        return body

    def a_Call(self, e):
        name = e.op
        if name == "tir.if_then_else":
            cond = self.simplify(e.args[0])
            if type(cond) is E.IntImm:
                return self.simplify(e.args[1] if cond.value else e.args[2])
            t, f = self.simplify(e.args[1]), self.simplify(e.args[2])
            if self.same(t, f):
                return t
            return E.Call(e.dtype, name, [cond, t, f])
        if name == "tir.likely":
            c = self.simplify(e.args[0])
            if type(c) is E.IntImm:
                return c
            return e if c is e.args[0] else E.Call(e.dtype, name, [c])
        args = [self.simplify(a) for a in e.args]
        if all(type(a) is E.IntImm for a in args) and name in _INT_FOLD and _is_index_dtype(e.dtype):
            try:
                v = _INT_FOLD[name](*[a.value for a in args])
            except (ValueError, ZeroDivisionError):
                v = None
            if v is not None:
                return E.IntImm(e.dtype, _wrap(v, e.dtype))
        if all(a is b for a, b in zip(args, e.args)):
            return e
        return E.Call(e.dtype, name, args)

    def _rebuild_children(self, e):
        changes = {}
        for f in e._fields:
            v = getattr(e, f)
            if isinstance(v, E.PrimExpr):
                nv = self.simplify(v)
                if nv is not v:
                    changes[f] = nv
            elif isinstance(v, list) and v and isinstance(v[0], E.PrimExpr):
                nv = [self.simplify(x) for x in v]
                if any(x is not y for x, y in zip(nv, v)):
                    changes[f] = nv
        if not changes:
            return e
        return _rebuild(e, changes)

    # ---------------------------------------------------------------------------------------
    # booleans, floats and vectors
    # ---------------------------------------------------------------------------------------
    def _simplify_other(self, e):
        dt = parse_dtype(e.dtype)
        if dt.lanes > 1:
            return self._vector(e)
        meth = getattr(self, "r_" + type(e).__name__, None)
        if meth is not None:
            return meth(e)
        if type(e) in (E.Select, E.Call, E.Let, E.Cast):
            return self.atom(e)
        return self._fold_generic(e)

    def _fold_generic(self, e):
        builder = _BUILDERS.get(type(e))
        if builder is not None and isinstance(e, E.BinaryOpExpr):
            a, b = self.simplify(e.a), self.simplify(e.b)
            if type(a) in (E.IntImm, E.FloatImm) and type(b) in (E.IntImm, E.FloatImm):
                if isinstance(e, (E.Div, E.FloorDiv, E.Mod, E.FloorMod)) and b.value == 0:
                    return type(e)(a, b)
                r = builder(a, b)
                if type(r) is E.FloatImm:
                    return E.FloatImm(r.dtype, _round_float(r.value, r.dtype))
                return r
            if a is e.a and b is e.b:
                return e
            return type(e)(a, b)
        return self._rebuild_children(e)

    # comparisons -------------------------------------------------------------------------------
    def _cmp(self, e, kind, swap):
        a, b = self.simplify(e.a), self.simplify(e.b)
        if swap:
            a, b = b, a
        if not _is_index_dtype(a.dtype):
            if type(a) in (E.IntImm, E.FloatImm) and type(b) in (E.IntImm, E.FloatImm):
                return _const_bool(_PYCMP[kind](a.value, b.value))
            if a is (e.b if swap else e.a) and b is (e.a if swap else e.b):
                return e
            return _CMP_CLS[kind](a, b) if not swap else _CMP_CLS[_SWAP_NAME[kind]](b, a)
        d = self.finish(self.lin(a).iadd(self.lin(b), -1))
        if d.is_const:
            return _const_bool(_PYCMP[kind](d.const, 0))
        decided = self._decide(kind, self.sum_bound(d))
        if decided is None:
            sb = self.sym_bound(d)
            if sb is not None:
                decided = self._decide(kind, sb)
        if decided is not None:
            return _const_bool(decided)
        r = self._build_cmp(kind, d)
        if type(r) is E.IntImm:
            return r
        fact = self.an.facts.get(self.key(r))
        if fact is not None:
            return _const_bool(fact)
        return r

    @staticmethod
    def _decide(kind, b):
        lo, hi = b
        if kind == "LT":
            if hi < 0:
                return True
            if lo >= 0:
                return False
        elif kind == "LE":
            if hi <= 0:
                return True
            if lo > 0:
                return False
        elif kind == "EQ":
            if lo == hi == 0:
                return True
            if hi < 0 or lo > 0:
                return False
        elif kind == "NE":
            if lo == hi == 0:
                return False
            if hi < 0 or lo > 0:
                return True
        return None

    def _build_cmp(self, kind, d: LinearSum):
        dtype = d.dtype
        g = d.coeff_gcd()
        k = d.const
        if g > 1:
            if kind == "LT":
                k = k // g
            elif kind == "LE":
                k = -((-k) // g)
            else:
                if k % g:
                    return _const_bool(kind == "NE")
                k = k // g
            d = LinearSum(dtype, k, {kk: [a, v // g] for kk, (a, v) in d.terms.items()})
        pos = LinearSum(dtype)
        neg = LinearSum(dtype)
        for kk, (a, v) in d.terms.items():
            if v > 0:
                pos.add_term(kk, a, v)
            else:
                neg.add_term(kk, a, -v)
        cls = _CMP_CLS[kind]
        if pos.is_const:
            lhs = _imm(dtype, k)
            rhs = self.norm(neg)
            if kind in ("EQ", "NE"):
                return cls(rhs, lhs)
            return cls(lhs, rhs)
        neg.const = -k
        return cls(self.norm(pos), self.norm(neg))

    def r_LT(self, e):
        return self._cmp(e, "LT", False)

    def r_LE(self, e):
        return self._cmp(e, "LE", False)

    def r_GT(self, e):
        return self._cmp(e, "LT", True)

    def r_GE(self, e):
        return self._cmp(e, "LE", True)

    def r_EQ(self, e):
        return self._cmp(e, "EQ", False)

    def r_NE(self, e):
        return self._cmp(e, "NE", False)

    def r_And(self, e):
        return self._and_or(e, absorbing=False)

    def r_Or(self, e):
        return self._and_or(e, absorbing=True)

    def _and_or(self, e, absorbing: bool):
        """``And`` (whose absorbing constant is false) or ``Or`` (true): a constant side either
        decides the result or drops out; equal sides merge."""
        a = self.simplify(e.a)
        if type(a) is E.IntImm and bool(a.value) == absorbing:
            return a
        b = self.simplify(e.b)
        if type(a) is E.IntImm:
            return b
        if type(b) is E.IntImm:
            return b if bool(b.value) == absorbing else a
        if self.same(a, b):
            return a
        if a is e.a and b is e.b:
            return e
        return type(e)(a, b)

    def r_Not(self, e):
        a = self.simplify(e.a)
        if type(a) is E.IntImm:
            return _const_bool(not a.value)
        t = type(a)
        if t is E.Not:
            return a.a
        if t is E.LT:
            return self.simplify(E.LE(a.b, a.a))
        if t is E.LE:
            return self.simplify(E.LT(a.b, a.a))
        if t is E.EQ:
            return self.simplify(E.NE(a.a, a.b))
        if t is E.NE:
            return self.simplify(E.EQ(a.a, a.b))
        return e if a is e.a else E.Not(a)

    # vectors ------------------------------------------------------------------------------------
    def _vector(self, e):
        t = type(e)
        if t is E.Ramp:
            base, stride = self.simplify(e.base), self.simplify(e.stride)
            if type(stride) is E.IntImm and stride.value == 0:
                return E.Broadcast(base, e.lanes)
            if base is e.base and stride is e.stride:
                return e
            return E.Ramp(base, stride, e.lanes)
        if t is E.Broadcast:
            v = self.simplify(e.value)
            return e if v is e.value else E.Broadcast(v, e.lanes)
        if isinstance(e, E.BinaryOpExpr):
            return self._vector_binary(e)
        if t is E.Not:
            a = self.simplify(e.a)
            if type(a) is E.Broadcast:
                return E.Broadcast(self.simplify(E.Not(a.value)), a.lanes)
            return e if a is e.a else E.Not(a)
        if t is E.Select:
            c = self.simplify(e.condition)
            if type(c) is E.Broadcast and type(c.value) is E.IntImm:
                return self.simplify(e.true_value if c.value.value else e.false_value)
            tv, fv = self.simplify(e.true_value), self.simplify(e.false_value)
            if type(c) is E.Broadcast and type(tv) is E.Broadcast and type(fv) is E.Broadcast:
                return E.Broadcast(self.simplify(E.Select(c.value, tv.value, fv.value)), e.lanes)
            return E.Select(c, tv, fv)
        if t is E.Cast:
            v = self.simplify(e.value)
            if type(v) is E.Broadcast:
                return E.Broadcast(self.simplify(_op.cast(v.value, str(parse_dtype(e.dtype).element_of()))),
                                   parse_dtype(e.dtype).lanes)
            return e if v is e.value else E.Cast(e.dtype, v)
        if t is E.Call and e.op == "tir.if_then_else":
            c = self.simplify(e.args[0])
            if type(c) is E.Broadcast and type(c.value) is E.IntImm:
                return self.simplify(e.args[1] if c.value.value else e.args[2])
            if type(c) is E.IntImm:
                return self.simplify(e.args[1] if c.value else e.args[2])
        return self._rebuild_children(e)

    def _vector_binary(self, e):
        t = type(e)
        a, b = self.simplify(e.a), self.simplify(e.b)
        ta, tb = type(a), type(b)
        lanes = parse_dtype(e.dtype).lanes
        if ta is E.Broadcast and tb is E.Broadcast:
            return E.Broadcast(self.simplify(t(a.value, b.value)), lanes)
        if t in (E.Add, E.Sub):
            if ta is E.Ramp and tb is E.Broadcast:
                return E.Ramp(self.simplify(t(a.base, b.value)), a.stride, a.lanes)
            if ta is E.Broadcast and tb is E.Ramp:
                stride = b.stride if t is E.Add else self.simplify(E.Sub(_zero_like(b.stride), b.stride))
                return self._vector(E.Ramp(self.simplify(t(a.value, b.base)), stride, b.lanes))
            if ta is E.Ramp and tb is E.Ramp:
                return self._vector(E.Ramp(self.simplify(t(a.base, b.base)), self.simplify(t(a.stride, b.stride)),
                                           a.lanes))
        if t is E.Mul and _is_index_dtype(str(parse_dtype(e.dtype).element_of())):
            if ta is E.Ramp and tb is E.Broadcast:
                return self._vector(E.Ramp(self.simplify(E.Mul(a.base, b.value)),
                                           self.simplify(E.Mul(a.stride, b.value)), a.lanes))
            if ta is E.Broadcast and tb is E.Ramp:
                return self._vector(E.Ramp(self.simplify(E.Mul(b.base, a.value)),
                                           self.simplify(E.Mul(b.stride, a.value)), b.lanes))
        if t in (E.FloorDiv, E.FloorMod, E.Div, E.Mod) and ta is E.Ramp and tb is E.Broadcast \
                and type(b.value) is E.IntImm and b.value.value > 0 and type(a.stride) is E.IntImm \
                and a.stride.value >= 0:
            c = b.value.value
            if t in (E.Div, E.Mod) and self.bound(a.base)[0] < 0:
                return t(a, b)
            rem = self.simplify(E.FloorMod(a.base, b.value))
            lo, hi = self.bound(rem)
            if lo >= 0 and hi != POS_INF and hi + a.stride.value * (a.lanes - 1) < c:
                if t in (E.FloorDiv, E.Div):
                    return E.Broadcast(self.simplify(E.FloorDiv(a.base, b.value)), a.lanes)
                return E.Ramp(rem, a.stride, a.lanes)
        if isinstance(e, E.CmpExpr) and {ta, tb} <= {E.Ramp, E.Broadcast}:
            kind = {E.LT: "LT", E.LE: "LE", E.GT: "GT", E.GE: "GE", E.EQ: "EQ", E.NE: "NE"}[t]
            if kind in ("LT", "LE", "GT", "GE"):
                firsts = (self._lane(a, 0), self._lane(b, 0))
                lasts = (self._lane(a, lanes - 1), self._lane(b, lanes - 1))
                r0 = self.simplify(t(*firsts))
                r1 = self.simplify(t(*lasts))
                if type(r0) is E.IntImm and type(r1) is E.IntImm and r0.value == r1.value \
                        and self._lanes_linear(a) and self._lanes_linear(b):
                    return E.Broadcast(r0, lanes)
        if a is e.a and b is e.b:
            return e
        return t(a, b)

    @staticmethod
    def _lanes_linear(v):
        return type(v) is E.Broadcast or (type(v) is E.Ramp and type(v.stride) is E.IntImm)

    def _lane(self, v, i):
        if type(v) is E.Broadcast:
            return v.value
        return E.Add(v.base, E.Mul(v.stride, _imm(v.stride.dtype, i))) if i else v.base


def _zero_like(e):
    return _imm(e.dtype, 0)


def _wrap(v, dtype):
    dt = parse_dtype(dtype)
    bits = dt.bits
    v &= (1 << bits) - 1
    if dt.is_int and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def _round_float(v, dtype):
    """Round a folded constant to its dtype's precision (float32 folding must not keep doubles)."""
    try:
        return float(parse_dtype(dtype).numpy_dtype().type(v))
    except Exception:
        return v


def _const_bool(v):
    return E.IntImm("bool", 1 if v else 0)


_PYCMP = {
    "LT": lambda x, y: x < y, "LE": lambda x, y: x <= y, "EQ": lambda x, y: x == y, "NE": lambda x, y: x != y,
    "GT": lambda x, y: x > y, "GE": lambda x, y: x >= y,
}
_CMP_CLS = {"LT": E.LT, "LE": E.LE, "EQ": E.EQ, "NE": E.NE, "GT": E.GT, "GE": E.GE}
_SWAP_NAME = {"LT": "GT", "LE": "GE", "EQ": "EQ", "NE": "NE", "GT": "LT", "GE": "LE"}

_BUILDERS = {
    E.Add: _op.add, E.Sub: _op.sub, E.Mul: _op.mul, E.Div: _op.div, E.Mod: _op.truncmod,
    E.FloorDiv: _op.floordiv, E.FloorMod: _op.floormod, E.Min: _op.min, E.Max: _op.max,
}

_INT_FOLD = {
    "tir.bitwise_and": lambda a, b: a & b,
    "tir.bitwise_or": lambda a, b: a | b,
    "tir.bitwise_xor": lambda a, b: a ^ b,
    "tir.shift_left": lambda a, b: a << b if 0 <= b < 64 else None,
    "tir.shift_right": lambda a, b: a >> b if 0 <= b < 64 else None,
    "tir.abs": abs,
}
