"""InjectPrefetch: ``prefetch_scope`` attributes become ``Prefetch`` statements (TVM's ``tir.transform.InjectPrefetch``).

``Stage.prefetch(tensor, var, offset)`` makes TE lowering put ``AttrStmt(buffer, "prefetch_scope", offset, body)``
just inside the loop of ``var``. Here the attribute becomes ``SeqStmt([Prefetch(buffer, region), body])``, where
``region`` is what the loads of ``buffer`` in ``body`` touch in iteration ``var + offset``: the loops and lets
inside ``body`` relaxed over their ranges, the loop variable shifted by ``offset``. The region is clamped to the
buffer (its shape, or the realized bounds of an intermediate), so it never names an element outside the
allocation; where it may miss the buffer altogether (the last ``offset`` iterations) the Prefetch is guarded by
``if`` the region meets the buffer. A prefetch at a vectorized loop is hoisted in front of that loop and covers
every lane's iteration ``+ offset``. Runs before StorageFlatten, which turns each ``Prefetch`` into one
``tir.prefetch`` call per cache line.
"""
from __future__ import annotations

from ...arith import Analyzer, IntSet, eval_set, union
from ...arith.int_set import _is_inf
from .. import expr as E
from .. import stmt as S
from .. import op as _op
from ..stmt_functor import StmtExprMutator, StmtExprVisitor, substitute, uses_var
from .pass_base import PrimFuncPass

PREFETCH_SCOPE = "prefetch_scope"


class _Touched(StmtExprVisitor):
    """The per-dimension union of the index sets with which ``body`` loads ``buffer`` (loops and lets inside
    ``body`` relaxed; variables bound outside it stay symbolic)."""

    def __init__(self, buffer, ana):
        self.buffer, self.ana = buffer, ana
        self.dom: dict = {}
        self.sets = None

    def visit_For(self, s):
        lo = eval_set(s.min, self.dom, self.ana)
        hi = eval_set(s.min + s.extent - 1, self.dom, self.ana)
        self.dom[s.loop_var] = IntSet.interval(lo.min_value, hi.max_value)
        yield s.min
        yield s.extent
        yield s.body

    def visit_LetStmt(self, s):
        self.dom[s.var] = eval_set(s.value, self.dom, self.ana)
        yield s.value
        yield s.body

    def visit_BufferLoad(self, e):
        if e.buffer is self.buffer:
            sets = [eval_set(i, self.dom, self.ana) for i in e.indices]
            if self.sets is None:
                self.sets = sets
            else:
                self.sets = [union([a, b], self.ana) for a, b in zip(self.sets, sets)]
        for i in e.indices:
            self.visit(i)


class _Injector(StmtExprMutator):
    def __init__(self):
        self.scopes = []       # enclosing bindings, innermost last: (var, For) or (var, let value)
        self.realized = {}     # id(buffer) -> its realized bounds
        self.hoisted = {}      # id(vectorized For) -> Prefetch statements to put in front of it

    def visit_For(self, s):
        self.scopes.append((s.loop_var, s))
        mn, ext = self.visit(s.min), self.visit(s.extent)
        body = yield s.body
        self.scopes.pop()
        out = s if (mn is s.min and ext is s.extent and body is s.body) else \
            S.For(s.loop_var, mn, ext, s.kind, body, s.thread_binding, s.annotations)
        before = self.hoisted.pop(id(s), None)
        return S.SeqStmt(before + [out]) if before else out

    def visit_LetStmt(self, s):
        value = self.visit(s.value)
        self.scopes.append((s.var, s.value))
        body = yield s.body
        self.scopes.pop()
        return s if (value is s.value and body is s.body) else S.LetStmt(s.var, value, body)

    def visit_BufferRealize(self, s):
        self.realized[id(s.buffer)] = s.bounds
        return (yield from self.generic_visit_iter(s))

    def visit_AttrStmt(self, s):
        if s.attr_key != PREFETCH_SCOPE:
            return (yield from self.generic_visit_iter(s))
        body = yield s.body
        prefetch, hoist_to = self._prefetch(s.node, s.value, s.body)
        if prefetch is None:
            return body
        if hoist_to is not None:
            self.hoisted.setdefault(id(hoist_to), []).append(prefetch)
            return body
        return S.SeqStmt([prefetch, body])

    def _prefetch(self, buf, offset, body):
        """(Prefetch, the vectorized For to hoist it in front of or None); (None, None) where nothing is read
        or the region is unbounded (data-dependent indices)."""
        if not self.scopes or buf.scope().startswith("local"):
            return None, None
        ana = Analyzer()  # knows the enclosing loops' ranges: clamps that always hold fold away
        for v, b in self.scopes:
            if isinstance(b, S.For):
                ana.bind(v, E.Range.from_min_extent(b.min, b.extent), allow_override=True)
        t = _Touched(buf, ana)
        t(body)
        if t.sets is None:
            return None, None
        var, binding = self.scopes[-1]
        if isinstance(binding, S.For):
            loop, shifted = binding, var + offset
        else:  # `let var = min + idx` inside the loop over idx (a loop not starting at 0)
            loop = next((b for _, b in reversed(self.scopes) if isinstance(b, S.For)), None)
            shifted = binding + offset
        relax = {}
        hoist_to = None
        if loop is not None and loop.kind == S.ForKind.VECTORIZED:
            relax[loop.loop_var] = E.Range.from_min_extent(loop.min, loop.extent)
            hoist_to = loop
        bounds = self.realized.get(id(buf))
        mins = [b.min for b in bounds] if bounds else [_op.const(0, d.dtype) for d in buf.shape]
        exts = [b.extent for b in bounds] if bounds else list(buf.shape)
        raw = []
        for st, mn, ext in zip(t.sets, mins, exts):
            if not st.is_bounded() or _is_inf(st.min_value) or _is_inf(st.max_value):
                return None, None
            lo = substitute(st.min_value, {var: shifted})
            hi = substitute(st.max_value, {var: shifted})
            if relax:
                lo, hi = eval_set(lo, relax, ana).min_value, eval_set(hi, relax, ana).max_value
                if _is_inf(lo) or _is_inf(hi):
                    return None, None
            raw.append((ana.simplify(lo), ana.simplify(hi), mn, ana.simplify(mn + ext - 1)))
        # the region meets the buffer where every dimension does; there it is clamped (the clamps simplified
        # under that condition: a block the iteration reads whole keeps its constant extent)
        conds = []
        for lo, hi, mn, mx in raw:
            for c in (lo <= mx, mn <= hi):
                if not ana.can_prove(c):
                    conds.append(c)
        cond = None
        for c in conds:
            cond = c if cond is None else _op.all(cond, c)
        if cond is not None:
            cond = ana.simplify(cond)
        if cond is not None and ana.can_prove(_op.logical_not(cond)):
            return None, None  # no iteration ever reads inside the buffer there (offset past the loop's end)
        # The extent min(hi, mx) - clo + 1 is written min(hi - clo + 1, mx - clo + 1): the same value, but in this
        # form the simplifier proves it positive under `cond` (a constant term and one linear in the loop
        # variable), so StorageFlatten's `if extent > 0` around the lowered prefetch folds away in the pipeline's
        # later Simplify and `cond` is the only guard. Written the other way (min(v*4 + 7, 36) - v*4 - 3) it is not
        # proved, and each iteration tested the region twice. A symbolic bound (min(n - v*2 - 2, 2)) is still not
        # proved from `v*2 <= n - 3`: there the second test stays (correct, one compare per iteration).
        region = []
        with ana.constraint_scope(cond if cond is not None else _op.const(True)):
            for lo, hi, mn, mx in raw:
                clo = ana.simplify(_op.max(lo, mn))
                region.append(E.Range.from_min_extent(clo, ana.simplify(_op.min(hi - clo + 1, mx - clo + 1))))
        if hoist_to is not None and any(uses_var(r.min, hoist_to.loop_var) or uses_var(r.extent, hoist_to.loop_var)
                                        for r in region):
            return None, None
        stmt = S.Prefetch(buf, region)
        return (stmt if cond is None else S.IfThenElse(cond, stmt)), hoist_to


def inject_prefetch_func(func, mod=None, ctx=None):
    body = _Injector()(func.body)
    return func if body is func.body else func.with_body(body)


def InjectPrefetch() -> PrimFuncPass:  # noqa: N802
    """``prefetch_scope`` attributes (``Stage.prefetch``) become ``Prefetch`` statements of the region the next
    iterations read."""
    return PrimFuncPass(inject_prefetch_func, 0, "tir.InjectPrefetch")
