"""VectorizeLoop: turn ``T.vectorized`` loops into vector expressions, or else into serial loops.

The loop variable becomes ``Ramp(min, 1, lanes)``, loop-invariant operands are broadcast and
loads/stores with a lane-dependent index become vector accesses. An ``if_then_else`` whose lane-dependent
condition guards a load (a padded input) becomes a blend: the guarded load's indices are clamped to element 0 on
the rejected lanes (a gather), and where the condition is a conjunction of inequalities linear in the loop
variable, an iteration whose first and last lanes pass it takes a copy with plain vector loads (the interior of
a padded input; the border keeps the blend). A branch on the loop variable without an else (the guard of a
split that does not divide) becomes one vector under a lane mask (``_Vectorizer._masked_region``). When the body
cannot be expressed lane-parallel without changing its meaning — any other branch on the loop variable, a
store of a lane-dependent value into one location (a reduction), reads of a location another
lane writes, side-effecting calls, nested allocations, loops whose bounds depend on the lane
— the loop is kept as a SERIAL loop instead: vectorization never produces wrong code.

Known limit: stores whose lane index is injective but that overlap *across iterations of an
inner loop* are assumed independent (as in TVM); schedules from TE never produce them.
"""
from __future__ import annotations

from ...arith import Analyzer
from ...runtime.dtype import parse_dtype
from ...ir.node import structural_equal
from .. import expr as E, stmt as S
from .pass_base import PrimFuncPass
from .simplify import simplify_stmt
from ..stmt_functor import StmtExprMutator, StmtExprVisitor, _children, post_order_visit, uses_var, substitute
from ..op import ANY_LANE, LANE_MASKED, _is_one
from .vector_split import as_ramp



class CannotVectorize(Exception):
    """The loop body cannot be vectorized safely; the loop stays serial."""


_PURE_CALLS = {
    "tir.exp", "tir.exp2", "tir.exp10", "tir.log", "tir.log2", "tir.log10", "tir.log1p", "tir.expm1",
    "tir.sqrt", "tir.rsqrt", "tir.sin", "tir.cos", "tir.tan", "tir.sinh", "tir.cosh", "tir.tanh",
    "tir.asin", "tir.acos", "tir.atan", "tir.asinh", "tir.acosh", "tir.atanh", "tir.erf", "tir.sigmoid",
    "tir.floor", "tir.ceil", "tir.trunc", "tir.round", "tir.nearbyint", "tir.fabs", "tir.abs",
    "tir.isnan", "tir.isinf", "tir.isfinite", "tir.pow", "tir.fmod", "tir.atan2", "tir.popcount",
    "tir.bitwise_and", "tir.bitwise_or", "tir.bitwise_xor", "tir.bitwise_not", "tir.shift_left",
    "tir.shift_right", "tir.reinterpret", "tir.hypot", "tir.copysign", "tir.nextafter",
}

# ``call_pure_extern`` helpers that are lane-wise and have a vector form in the C backend
# (kiln.target.c_support.register_vector_extern_helper): a call of one is widened like a pure intrinsic
VECTORIZABLE_EXTERNS: set = set()


def register_vectorizable_extern(name: str) -> None:
    """Let the vectorizer widen ``call_pure_extern(name, ...)`` (the function must be lane-wise)."""
    VECTORIZABLE_EXTERNS.add(name)


def _vectorizable_extern(e) -> bool:
    return (e.op == "tir.call_pure_extern" and e.args and isinstance(e.args[0], E.StringImm)
            and e.args[0].value in VECTORIZABLE_EXTERNS)


def _vec_dtype(dtype: str, lanes: int) -> str:
    return str(parse_dtype(dtype).element_of().with_lanes(lanes))


def _lanes(e) -> int:
    return parse_dtype(e.dtype).lanes


_INT_DIVISIONS = (E.Div, E.Mod, E.FloorDiv, E.FloorMod)


class _Vectorizer:
    """Rewrites one loop body with ``var`` replaced by ``Ramp(min, 1, lanes)``."""

    def __init__(self, var: E.Var, vmin, lanes: int):
        self.var = var
        self.lanes = lanes
        self.ramp = E.Ramp(vmin, E.IntImm(var.dtype, 1), lanes)
        self.vmap: dict = {}
        self._cache: dict = {}   # id(expr) -> (expr, vectorized expr)
        self._masked = False     # inside a lane-masked region (nested lane-dependent branches stay scalar)

    # -- expressions ---------------------------------------------------------------------
    def bcast(self, e):
        if _lanes(e) == self.lanes:
            return e
        if _lanes(e) != 1:
            raise CannotVectorize(f"mixed vector widths ({e.dtype} in a {self.lanes}-lane loop)")
        return E.Broadcast(e, self.lanes)

    def expr(self, e):
        """Vectorize ``e``. Operator nodes below it are done children-first from a work list
        (results cached by node until a binding changes ``vmap``), so depth costs no stack."""
        hit = self._cache.get(id(e))
        if hit is not None:
            return hit[1]
        stack = [(e, False)]
        while stack:
            n, ready = stack.pop()
            if id(n) in self._cache:
                continue
            if ready:
                self._cache[id(n)] = (n, self._expr1(n))
                continue
            stack.append((n, True))
            for k in _operands(n):
                if id(k) not in self._cache:
                    stack.append((k, False))
        return self._cache[id(e)][1]

    def _bind(self, var, new_var):
        self.vmap[var] = new_var
        self._cache = {}

    def _expr1(self, e):
        if isinstance(e, E.Var):
            if e is self.var:
                return self.ramp
            return self.vmap.get(e, e)
        if isinstance(e, (E.IntImm, E.FloatImm, E.StringImm)):
            return e
        if isinstance(e, (E.Ramp, E.Broadcast, E.Shuffle)):
            if uses_var(e, self.var) or _lanes(e) > 1:
                raise CannotVectorize("the body already has vector expressions")
            return e
        meth = getattr(self, "e_" + type(e).__name__, None)
        if meth is not None:
            return meth(e)
        if isinstance(e, E.BinaryOpExpr):
            a, b = self.expr(e.a), self.expr(e.b)
            if _lanes(a) == 1 and _lanes(b) == 1:
                return e if (a is e.a and b is e.b) else type(e)(a, b)
            r = _affine_ramp(type(e), a, b)
            if r is not None:
                return r
            return type(e)(self.bcast(a), self.bcast(b))
        if uses_var(e, self.var):
            raise CannotVectorize(f"cannot vectorize {type(e).__name__}")
        return e

    def e_Not(self, e):
        a = self.expr(e.a)
        return e if a is e.a else E.Not(a)

    def e_Cast(self, e):
        v = self.expr(e.value)
        if _lanes(v) == 1:
            return e if v is e.value else E.Cast(e.dtype, v)
        to, frm = _int_bits(e.dtype), _int_bits(v.base.dtype) if isinstance(v, E.Ramp) else None
        if isinstance(v, E.Ramp) and to is not None and frm is not None and to >= frm:
            # int64(ramp(b, s)) -> ramp(int64(b), int64(s)): the lanes are the scalar code's values, and a ramp
            # stays a contiguous access (an int64 index over symbolic extents, VM kernels) instead of a gather
            return E.Ramp(E.Cast(e.dtype, v.base), E.Cast(e.dtype, v.stride), v.lanes)
        return E.Cast(_vec_dtype(e.dtype, self.lanes), v)

    def e_Select(self, e):
        c, t, f = self.expr(e.condition), self.expr(e.true_value), self.expr(e.false_value)
        if max(_lanes(c), _lanes(t), _lanes(f)) == 1:
            return e if (c, t, f) == (e.condition, e.true_value, e.false_value) else E.Select(c, t, f)
        return E.Select(self.bcast(c), self.bcast(t), self.bcast(f))

    def e_Let(self, e):
        v = self.expr(e.value)
        if _lanes(v) > 1:
            nv = E.Var(e.var.name, v.dtype)
            self._bind(e.var, nv)
            return E.Let(nv, v, self.expr(e.body))
        body = self.expr(e.body)
        if _lanes(body) > 1 or v is not e.value or body is not e.body:
            return E.Let(e.var, v, body)
        return e

    def e_BufferLoad(self, e):
        idx = [self.expr(i) for i in e.indices]
        if all(_lanes(i) == 1 for i in idx):
            return e if all(a is b for a, b in zip(idx, e.indices)) else E.BufferLoad(e.buffer, idx)
        return E.BufferLoad(e.buffer, [self.bcast(i) for i in idx])

    def e_Call(self, e):
        if e.op == "tir.if_then_else":
            c = self.expr(e.args[0])
            if _lanes(c) > 1:
                # every lane evaluates both branches: a load or an integer division that the condition
                # guards gets a safe operand on the lanes where its branch is not taken, then a blend
                t = self.expr(_guard_branch(e.args[1], e.args[0]))
                f = self.expr(_guard_branch(e.args[2], E.Not(e.args[0])))
                return E.Select(c, self.bcast(t), self.bcast(f))
            t, f = self.expr(e.args[1]), self.expr(e.args[2])
            if _lanes(t) == 1 and _lanes(f) == 1:
                return e if (c, t, f) == tuple(e.args) else E.Call(e.dtype, e.op, [c, t, f])
            return E.Call(_vec_dtype(e.dtype, self.lanes), e.op, [c, self.bcast(t), self.bcast(f)])
        if e.op == "tir.likely":
            c = self.expr(e.args[0])
            return e if c is e.args[0] else E.Call(c.dtype, e.op, [c])
        if _vectorizable_extern(e):
            args = [self.expr(a) for a in e.args[1:]]
            if all(_lanes(a) == 1 for a in args):
                return e if all(a is b for a, b in zip(args, e.args[1:])) else E.Call(e.dtype, e.op,
                                                                                      [e.args[0]] + args)
            return E.Call(_vec_dtype(e.dtype, self.lanes), e.op, [e.args[0]] + [self.bcast(a) for a in args])
        args = [self.expr(a) for a in e.args]
        if all(_lanes(a) == 1 for a in args):
            if e.op not in _PURE_CALLS and uses_var(e, self.var):
                raise CannotVectorize(f"call {e.op} depends on the loop variable")
            return e if all(a is b for a, b in zip(args, e.args)) else E.Call(e.dtype, e.op, args)
        if e.op not in _PURE_CALLS:
            raise CannotVectorize(f"call {e.op} cannot be vectorized")
        return E.Call(_vec_dtype(e.dtype, self.lanes), e.op, [self.bcast(a) for a in args])

    # -- statements ----------------------------------------------------------------------
    def stmt(self, s):
        meth = getattr(self, "s_" + type(s).__name__, None)
        if meth is None:
            raise CannotVectorize(f"cannot vectorize a {type(s).__name__}")
        return meth(s)

    def s_SeqStmt(self, s):
        return S.SeqStmt([self.stmt(x) for x in s.seq])

    def s_BufferStore(self, s):
        value = self.expr(s.value)
        idx = [self.expr(i) for i in s.indices]
        if all(_lanes(i) == 1 for i in idx):
            if _lanes(value) > 1:
                raise CannotVectorize("a lane-dependent value is stored into one location (a reduction)")
            return S.BufferStore(s.buffer, value, idx)
        return S.BufferStore(s.buffer, self.bcast(value), [self.bcast(i) for i in idx])

    def s_IfThenElse(self, s):
        c = self.expr(s.condition)
        if _lanes(c) > 1:
            return self._masked_region(s, c)
        return S.IfThenElse(c, self.stmt(s.then_case),
                            self.stmt(s.else_case) if s.else_case is not None else None)

    def _masked_region(self, s, c):
        """A branch on the loop variable with no else (the guarded last vector of a split whose factor does not
        divide the extent: ``if likely(i_outer * 16 + i < n)``): the body vectorized under a lane mask, its vector
        loads and stores contiguous so that each becomes one masked access (one ``vmaskmov`` / AVX-512 masked
        move) instead of a scalar loop of up to lanes - 1 iterations. Lanes outside the mask compute on zeros
        and are never stored; a load at a lane-invariant index runs only when some lane is on, as in the
        scalar loop. Anything else (an else branch, nested lane branches, gathers or scatters, whose lanes off
        the mask may index out of bounds) keeps the loop serial."""
        if s.else_case is not None or self._masked:
            raise CannotVectorize("a branch depends on the loop variable")
        if isinstance(c, E.Call) and c.op == "tir.likely":
            c = c.args[0]
        reads = []
        post_order_visit(c, lambda n: reads.append(n) if isinstance(n, E.BufferLoad) else None)
        if reads:  # the scalar code may read them only where an earlier part of the condition held
            raise CannotVectorize("a branch on the loop variable reads memory")
        self._masked = True
        try:
            body = self.stmt(s.then_case)
        finally:
            self._masked = False
        bad = []

        def check(n):
            if isinstance(n, (E.BufferLoad, S.BufferStore)):
                idx = n.indices[0] if len(n.indices) == 1 else None
                ramp = as_ramp(idx) if idx is not None and _lanes(idx) > 1 else None
                if idx is None or _lanes(idx) > 1 and (ramp is None or not _is_one(ramp.stride)
                                                       or ramp.lanes != self.lanes):
                    bad.append(n)
            elif isinstance(n, (S.Allocate, S.For, S.IfThenElse)):
                bad.append(n)
            elif isinstance(n, _INT_DIVISIONS) and not parse_dtype(n.dtype).is_float and _lanes(n.b) > 1 \
                    and not isinstance(n.b, E.Broadcast):
                bad.append(n)  # an integer division by a lane that is off (a zero) would trap
        post_order_visit(body, check)
        if bad:
            raise CannotVectorize("a masked branch holds an access that is not one contiguous vector")
        mask = self.bcast(c)

        class Mask(StmtExprMutator):
            def visit_BufferLoad(self, e):
                if _lanes(e) > 1:
                    return E.Call(e.dtype, LANE_MASKED, [e, mask])
                return e

            def visit_BufferStore(self, st):
                if _lanes(st.value) > 1:
                    return S.BufferStore(st.buffer, E.Call(st.value.dtype, LANE_MASKED, [self.visit(st.value), mask]),
                                         st.indices)
                return S.BufferStore(st.buffer, self.visit(st.value), st.indices)
        return S.IfThenElse(E.Call("bool", ANY_LANE, [mask]), Mask()(body))

    def s_For(self, s):
        if uses_var(s.min, self.var) or uses_var(s.extent, self.var):
            raise CannotVectorize("an inner loop's bounds depend on the loop variable")
        return s.with_fields(body=self.stmt(s.body))

    def s_LetStmt(self, s):
        v = self.expr(s.value)
        if _lanes(v) > 1:
            nv = E.Var(s.var.name, v.dtype)
            self._bind(s.var, nv)
            return S.LetStmt(nv, v, self.stmt(s.body))
        return S.LetStmt(s.var, v, self.stmt(s.body))

    def s_AttrStmt(self, s):
        if isinstance(s.value, E.PrimExpr) and uses_var(s.value, self.var):
            raise CannotVectorize("an attribute depends on the loop variable")
        return s.with_fields(body=self.stmt(s.body))

    def s_Evaluate(self, s):
        if not (isinstance(s.value, E.IntImm)):
            raise CannotVectorize("an evaluated call has side effects")
        return s

    def s_AssertStmt(self, s):
        c = self.expr(s.condition)
        if _lanes(c) > 1:
            raise CannotVectorize("an assertion depends on the loop variable")
        return S.AssertStmt(c, s.message, self.stmt(s.body))


def _operands(e) -> tuple:
    """The operands `_Vectorizer` visits before ``e`` itself (none for Let, whose body depends
    on the binding, nor for leaves and existing vector nodes)."""
    if isinstance(e, E.BinaryOpExpr):
        return (e.a, e.b)
    if isinstance(e, E.Not):
        return (e.a,)
    if isinstance(e, E.Cast):
        return (e.value,)
    if isinstance(e, E.Select):
        return (e.condition, e.true_value, e.false_value)
    if isinstance(e, E.Call):
        return tuple(e.args)
    if isinstance(e, E.BufferLoad):
        return tuple(e.indices)
    return ()


def _safe_to_evaluate(e, allow_loads: bool = False) -> bool:
    """No memory access or call that could fault or have effects (``allow_loads``: loads already
    guarded, only calls and divisions count)."""
    bad = []

    class V(StmtExprVisitor):
        def visit_BufferLoad(self, n):
            if not allow_loads:
                bad.append(n)
            self.generic_visit(n)

        def visit_Call(self, n):
            if n.op not in _PURE_CALLS and n.op not in ("tir.likely", "tir.if_then_else") \
                    and not _vectorizable_extern(n):
                bad.append(n)
            self.generic_visit(n)

        def visit_Div(self, n):
            if parse_dtype(n.dtype).element_of().is_integral and not (
                    allow_loads and (_nonzero_const(n.b) or isinstance(n.b, E.Select))):
                bad.append(n)
            self.generic_visit(n)

        visit_Mod = visit_FloorDiv = visit_FloorMod = visit_Div

    V()(e)
    return not bad


def _guard_branch(e, cond):
    """``e`` (one branch of an ``if_then_else`` on ``cond``) made safe to evaluate where ``cond`` is false:
    each load's indices become ``select(cond, index, 0)`` (element 0 of a buffer with a constant, nonzero
    shape: always in bounds) and each integer divisor ``select(cond, divisor, 1)``. The branch's value on
    those lanes is discarded by the blend. Raises CannotVectorize for what cannot be made safe (a call
    with effects, a load of a buffer whose shape is not a positive constant)."""
    if _safe_to_evaluate(e):
        return e

    class G(StmtExprMutator):
        def visit_BufferLoad(self, n):
            n = self.generic_visit(n)
            if not all(isinstance(d, E.IntImm) and d.value > 0 for d in n.buffer.shape):
                raise CannotVectorize(f"a guarded load of {n.buffer.name}, whose shape is not constant")
            return E.BufferLoad(n.buffer, [i if isinstance(i, E.IntImm)
                                           else E.Select(cond, i, E.IntImm(i.dtype, 0)) for i in n.indices])

        def visit_Div(self, n):
            n = self.generic_visit(n)
            if parse_dtype(n.dtype).element_of().is_integral and not _nonzero_const(n.b):
                return type(n)(n.a, E.Select(cond, n.b, E.IntImm(n.b.dtype, 1)))
            return n

        visit_Mod = visit_FloorDiv = visit_FloorMod = visit_Div

    out = G()(e)
    if not _safe_to_evaluate(out, allow_loads=True):
        raise CannotVectorize("if_then_else on the loop variable guards a call with effects")
    return out


def _nonzero_const(e) -> bool:
    return isinstance(e, E.IntImm) and e.value not in (0, -1)


def _lane_guards(body, var) -> dict:
    """id -> call of each ``if_then_else`` whose condition depends on ``var`` and whose taken branch
    is not safe to evaluate on every lane (it reads memory or divides)."""
    found = {}

    class V(StmtExprVisitor):
        def visit_Call(self, n):
            if n.op == "tir.if_then_else" and uses_var(n.args[0], var) and not _safe_to_evaluate(n.args[1]):
                found[id(n)] = n
            self.generic_visit(n)

    V()(body)
    return found


def _bound_vars(body) -> set:
    """ids of the variables that ``body`` binds itself (inner loops, lets)."""
    out = set()

    class V(StmtExprVisitor):
        def visit_For(self, n):
            out.add(id(n.loop_var))
            self.generic_visit(n)

        def visit_LetStmt(self, n):
            out.add(id(n.var))
            self.generic_visit(n)

        def visit_Let(self, n):
            out.add(id(n.var))
            self.generic_visit(n)

    V()(body)
    return out


def _conjuncts(c) -> list:
    out, stack = [], [c]
    while stack:
        x = stack.pop()
        if isinstance(x, E.And):
            stack += [x.a, x.b]
        elif isinstance(x, E.Call) and x.op == "tir.likely":
            stack.append(x.args[0])
        else:
            out.append(x)
    return out


def _linear_in(t, var, ana) -> bool:
    """``t`` does not use ``var``, or is an inequality whose sides differ by a linear function of it
    (monotone: true on every lane of a ramp iff true on its first and last lanes)."""
    if not _safe_to_evaluate(t):
        return False   # a term that reads memory is not hoisted in front of the body
    if not uses_var(t, var):
        return True
    if not isinstance(t, (E.LT, E.LE, E.GT, E.GE)) or _int_bits(t.a.dtype) is None:
        return False
    d = _push_int_casts(t.a - t.b)
    step = ana.simplify(_push_int_casts(_sub_var(d, var, 1)) - d)
    return isinstance(step, E.IntImm)


def _affine_ramp(kind, a, b):
    """``a (+ - *) b`` as one Ramp when both are ramps or scalars (TVM's vectorizer keeps indices affine in the
    lane this way), so that an index built from a ramp stays a contiguous access through later casts."""
    if kind not in (E.Add, E.Sub, E.Mul):
        return None
    if not (isinstance(a, E.Ramp) or _lanes(a) == 1) or not (isinstance(b, E.Ramp) or _lanes(b) == 1):
        return None
    if _int_bits(a.base.dtype if isinstance(a, E.Ramp) else a.dtype) is None or \
            _int_bits(b.base.dtype if isinstance(b, E.Ramp) else b.dtype) is None:
        return None
    lanes = a.lanes if isinstance(a, E.Ramp) else b.lanes
    ab, as_ = (a.base, a.stride) if isinstance(a, E.Ramp) else (a, None)
    bb, bs = (b.base, b.stride) if isinstance(b, E.Ramp) else (b, None)
    if kind is E.Mul:
        if as_ is not None and bs is not None:
            return None   # ramp * ramp is not affine
        stride = as_ * bb if as_ is not None else ab * bs
        return E.Ramp(ab * bb, stride, lanes)
    if as_ is None:
        stride = bs if kind is E.Add else E.Sub(E.IntImm(bs.dtype, 0), bs)
    elif bs is None:
        stride = as_
    else:
        stride = kind(as_, bs)
    return E.Ramp(kind(ab, bb), stride, lanes)


def _int_bits(dtype: str):
    t = parse_dtype(dtype)
    return t.bits if t.is_integral and t.lanes == 1 else None


def _push_int_casts(e):
    """Widening integer casts moved inside +, -, * (``int64(x + 1)`` -> ``int64(x) + 1``), so that the
    difference of an index at lane ``i + 1`` and ``i`` simplifies to a constant when a loop variable is widened
    into an int64 index (kernels over symbolic int64 extents). For index analysis only."""
    if isinstance(e, (E.Add, E.Sub, E.Mul)):
        a, b = _push_int_casts(e.a), _push_int_casts(e.b)
        return e if (a is e.a and b is e.b) else type(e)(a, b)
    if isinstance(e, E.Cast):
        to, frm = _int_bits(e.dtype), _int_bits(e.value.dtype)
        if to is not None and frm is not None and to >= frm:
            v = e.value
            if isinstance(v, E.IntImm):
                return E.IntImm(e.dtype, v.value)
            if isinstance(v, (E.Add, E.Sub, E.Mul)):
                return type(v)(_push_int_casts(E.Cast(e.dtype, v.a)), _push_int_casts(E.Cast(e.dtype, v.b)))
    return e


def _check_memory_dependencies(body, var, lanes, vmin):
    """Raise CannotVectorize unless every buffer written in ``body`` is accessed, by each lane,
    only at that lane's own location (same index in every load and store, injective in the lane)."""
    stores, loads = {}, {}

    class V(StmtExprVisitor):
        def visit_BufferStore(self, s):
            stores.setdefault(id(s.buffer.data), []).append(s.indices)
            self.generic_visit(s)

        def visit_BufferLoad(self, e):
            loads.setdefault(id(e.buffer.data), []).append(e.indices)
            self.generic_visit(e)

    V()(body)
    ana = Analyzer()
    for data, store_list in stores.items():
        accesses = store_list + loads.get(data, [])
        first = accesses[0]
        if data not in loads and not any(uses_var(i, var) for idx in store_list for i in idx):
            continue   # lane-invariant stores to a buffer that is never read here: idempotent
        for idx in accesses[1:]:
            if not structural_equal(idx, first):
                raise CannotVectorize("a written buffer is accessed at different locations by different lanes")
        # the location must be different for each lane: some index has a nonzero linear stride
        injective = False
        for i in first:
            d = ana.simplify(_push_int_casts(_sub_var(i, var, 1)) - _push_int_casts(i)) if uses_var(i, var) else None
            if isinstance(d, E.IntImm) and d.value != 0:
                injective = True
        if not injective:
            raise CannotVectorize("a written location is shared by several lanes")


def _sub_var(e, var, delta):
    return substitute(e, {var: var + delta})


_MAX_BLENDS = 64     # if_then_else calls a vectorized body may hold (see _count_branches)
_MAX_UNSWITCH = 2   # invariant conditions versioned per vectorized loop (2**k vector bodies)
_MAX_FAST_GUARDS = 8  # guarded accesses an interior fast path may unguard (a padded load has one; a concatenate
                      # of hundreds of inputs has one per input, mutually exclusive: no interior exists)


def _count_branches(body, stop: int) -> int:
    """The ``if_then_else`` calls in ``body``, counted up to ``stop``. A vectorized if_then_else evaluates
    both branches on every lane and blends, each level guarding the loads of the levels below it: a
    concatenate of n inputs (a chain of n - 1 if_then_else) costs O(n**2) to vectorize and n loads per lane
    to run, where the scalar loop does one. Bodies with more than ``_MAX_BLENDS`` stay scalar (a relay
    concatenate of 600 inputs took minutes to build)."""
    count = 0
    stack = [body]
    seen = set()
    while stack and count < stop:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, E.Call) and n.op == "tir.if_then_else":
            count += 1
        stack.extend(_children(n))
    return count


def _invariant_selects(body, var) -> list:
    """Conditions of ``Select`` nodes in ``body`` that do not depend on the loop (``var`` or anything bound
    inside the body) while a branch depends on ``var``: the ``(n == 1) ? 0 : i`` index of a broadcast between
    two run-time extents. Vectorized as they stand they are a gather per vector; see :func:`_unswitch`."""
    bound, conds = {var}, []

    class B(StmtExprVisitor):
        def visit_For(self, st):
            bound.add(st.loop_var)
            yield from self.generic_visit_iter(st)

        def visit_LetStmt(self, st):
            bound.add(st.var)
            yield from self.generic_visit_iter(st)

        def visit_Let(self, e):
            bound.add(e.var)
            return self.generic_visit(e)
    B()(body)

    def free(e) -> bool:
        return not any(uses_var(e, v) for v in bound)

    class V(StmtExprVisitor):
        def visit_Select(self, e):
            if free(e.condition) and (not free(e.true_value) or not free(e.false_value)) and \
                    not any(structural_equal(e.condition, c) for c in conds):
                conds.append(e.condition)
            return self.generic_visit(e)
    V()(body)
    return conds


class _FixSelect(StmtExprMutator):
    def __init__(self, cond, value: bool):
        self.cond, self.value = cond, value

    def visit_Select(self, e):
        if structural_equal(e.condition, self.cond):
            return self.visit(e.true_value if self.value else e.false_value)
        return self.generic_visit(e)


def _unswitch(body, conds):
    """``body`` once per truth assignment of ``conds`` (loop-invariant), under an if/else on them: each
    version reads contiguously or broadcasts, so it vectorizes without gathers."""
    if not conds:
        return [(body, [])]
    out = []
    for value in (True, False):
        fixed = _FixSelect(conds[0], value)(body)
        out += [(b, [(conds[0], value)] + path) for b, path in _unswitch(fixed, conds[1:])]
    return out


class LoopVectorizer(StmtExprMutator):
    def __init__(self, enable: bool = True):
        self.enable = enable

    def visit_PrimExpr(self, e):  # statements only
        return e

    def visit_For(self, s):
        body = yield s.body  # a generator: nested loops cost no stack
        if s.kind != S.ForKind.VECTORIZED:
            return s if body is s.body else s.with_fields(body=body)
        serial = s.with_fields(body=body, kind=S.ForKind.SERIAL)
        if not self.enable or not isinstance(s.extent, E.IntImm) or s.extent.value < 1:
            return serial
        lanes = s.extent.value
        if lanes == 1:
            return substitute(body, {s.loop_var: s.min})
        if _count_branches(body, _MAX_BLENDS + 1) > _MAX_BLENDS:
            return serial
        conds = _invariant_selects(body, s.loop_var)
        if not conds or len(conds) > _MAX_UNSWITCH:
            conds = []
        try:
            _check_memory_dependencies(body, s.loop_var, lanes, s.min)
            versions = []
            for b, _ in _unswitch(body, conds):
                out = _Vectorizer(s.loop_var, s.min, lanes).stmt(b)
                versions.append(simplify_stmt(self._interior_fast_path(b, s, lanes, out)))
        except CannotVectorize:
            return serial
        return self._branch(conds, versions)

    def _branch(self, conds, versions):
        if not conds:
            return versions[0]
        half = len(versions) // 2
        return S.IfThenElse(conds[0], self._branch(conds[1:], versions[:half]),
                            self._branch(conds[1:], versions[half:]))

    @staticmethod
    def _interior_fast_path(body, s, lanes, guarded):
        """Where every lane-dependent guard of a memory access is linear in the loop variable (a padded
        input's bounds test), an iteration whose first and last lane pass the guards takes a copy of the
        body with the guarded branches unguarded (contiguous vector loads instead of blended gathers)."""
        guards = _lane_guards(body, s.loop_var)
        if not guards or len(guards) > _MAX_FAST_GUARDS:
            return guarded
        inner = _bound_vars(body)
        if any(uses_var(call.args[0], lambda v: id(v) in inner) for call in guards.values()):
            return guarded   # the test would sit outside the body, where the condition's variables are unbound
        ana = Analyzer()
        tests = []
        for call in guards.values():
            terms = _conjuncts(call.args[0])
            if not all(_linear_in(t, s.loop_var, ana) for t in terms):
                return guarded
            last = s.min + (lanes - 1)
            lane_dependent = False
            for t in terms:
                if uses_var(t, s.loop_var):
                    lane_dependent = True
                    tests += [substitute(t, {s.loop_var: s.min}), substitute(t, {s.loop_var: last})]
                else:
                    tests.append(t)   # the whole condition must hold, lane-invariant terms included
            if not lane_dependent:
                return guarded
        test = tests[0]
        for t in tests[1:]:
            test = E.And(test, t)

        class Take(StmtExprMutator):
            def visit_Call(self, n):
                n2 = self.generic_visit(n)
                return n2.args[1] if id(n) in guards else n2

        fast = _Vectorizer(s.loop_var, s.min, lanes).stmt(Take()(body))
        return S.IfThenElse(test, fast, guarded)


def vectorize_func(func, mod=None, ctx=None, enable=True):
    body = LoopVectorizer(enable)(func.body)
    return func if body is func.body else func.with_body(body)


def VectorizeLoop(enable: bool = True) -> PrimFuncPass:  # noqa: N802
    """Vectorize ``T.vectorized`` loops (``enable=False`` turns them into serial loops)."""
    def run(func, mod=None, ctx=None):
        en = enable
        if ctx is not None and ctx.get_config("tir.disable_vectorize", False):
            en = False
        return vectorize_func(func, mod, ctx, en)
    return PrimFuncPass(run, 0, "tir.VectorizeLoop")
