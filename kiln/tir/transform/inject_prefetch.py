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

A spread prefetch (``Stage.prefetch(..., spread_over=loop)``: a ``prefetch_spread_scope`` attribute in place of
``prefetch_scope``, and a ``prefetch_spread_at`` attribute of the same buffer just inside ``loop``) is emitted
as ``tir.prefetch`` calls directly: the region, one contiguous span of an argument buffer, is cut into
``offset`` parts of cache lines, part ``var mod offset`` for iteration ``var``, and each part into equal shares,
one per iteration of the loops from the scope down to ``loop``, at the start of ``loop``'s body. Where the
region is not such a span, the marked loop is not inside the scope or the offset is not a positive constant, no
prefetch is emitted (the markers are removed either way).
"""
from __future__ import annotations

from ...arith import Analyzer, IntSet, eval_set, union
from ...arith.int_set import _is_inf
from .. import expr as E
from .. import stmt as S
from .. import op as _op
from ...runtime.dtype import parse_dtype
from ..stmt_functor import StmtExprMutator, StmtExprVisitor, substitute, uses_var
from .pass_base import PrimFuncPass
from .storage_flatten import CACHE_LINE_BYTES

PREFETCH_SCOPE = "prefetch_scope"
PREFETCH_SPREAD_SCOPE = "prefetch_spread_scope"
PREFETCH_SPREAD_AT = "prefetch_spread_at"


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
        if s.attr_key == PREFETCH_SPREAD_SCOPE:
            body = yield s.body
            return self._spread(s.node, s.value, s.body, body)
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

    def _spread(self, buf, offset, inner, body):
        """``body`` (the transformed ``inner``) with the spread prefetch of ``buf`` put at the start of the loop
        marked for it, or without it where it does not apply (module doc)."""
        found = self._region(buf, offset, inner)
        var, binding = self.scopes[-1] if self.scopes else (None, None)
        if found is None or not isinstance(offset, E.IntImm) or offset.value < 1 or found[2] is not None \
                or not isinstance(binding, S.For) or buf.strides or self.realized.get(id(buf)) is not None:
            return body
        region, cond, _ = found
        ana = Analyzer()
        shape = list(buf.shape)
        # one span: the dimensions before the first that may be wider than one index are one index wide (or
        # empty, where `cond` fails), those after it whole
        first = next((d for d, r in enumerate(region) if not ana.can_prove(r.extent <= 1)), len(region) - 1)
        if not all(ana.can_prove_equal(region[d].min, 0) and ana.can_prove_equal(region[d].extent, shape[d])
                   for d in range(first + 1, len(region))):
            return body  # not one contiguous span
        length = region[first].extent
        for d in range(first + 1, len(region)):
            length = length * shape[d]
        per_line = max(CACHE_LINE_BYTES // max(parse_dtype(buf.dtype).itemsize, 1), 1)
        lines = ana.simplify(_op.floordiv(length + (per_line - 1), per_line))
        start = buf.offset_of([r.min for r in region])
        part = ana.simplify(_op.floormod(var - binding.min, offset))
        return _ShareAt(buf, start, lines, per_line, part, offset.value, cond)(body)

    def _prefetch(self, buf, offset, body):
        """(Prefetch, the vectorized For to hoist it in front of or None); (None, None) where nothing is read
        or the region is unbounded (data-dependent indices)."""
        found = self._region(buf, offset, body)
        if found is None:
            return None, None
        region, cond, hoist_to = found
        stmt = S.Prefetch(buf, region)
        return (stmt if cond is None else S.IfThenElse(cond, stmt)), hoist_to

    def _region(self, buf, offset, body):
        """(region clamped to the buffer, the condition that it meets the buffer or None, the vectorized For to
        hoist a prefetch in front of or None); None where nothing is read or the region is unbounded."""
        if not self.scopes or buf.scope().startswith("local"):
            return None
        ana = Analyzer()  # knows the enclosing loops' ranges: clamps that always hold fold away
        for v, b in self.scopes:
            if isinstance(b, S.For):
                ana.bind(v, E.Range.from_min_extent(b.min, b.extent), allow_override=True)
        t = _Touched(buf, ana)
        t(body)
        if t.sets is None:
            return None
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
                return None
            lo = substitute(st.min_value, {var: shifted})
            hi = substitute(st.max_value, {var: shifted})
            if relax:
                lo, hi = eval_set(lo, relax, ana).min_value, eval_set(hi, relax, ana).max_value
                if _is_inf(lo) or _is_inf(hi):
                    return None
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
            return None  # no iteration ever reads inside the buffer there (offset past the loop's end)
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
            return None
        return region, cond, hoist_to


class _ShareAt(StmtExprMutator):
    """Replaces the (first) ``prefetch_spread_at`` marker of ``buf`` by the spread prefetch followed by the marked
    body: of the ``lines`` cache lines from element ``start`` of ``buf``, part ``part`` of ``parts``, the share of
    this iteration of the enclosing loops inside the scope (those of constant extent starting at 0, linearized
    outer to inner)."""

    def __init__(self, buf, start, lines, per_line, part, parts, cond):
        self.buf, self.start, self.lines, self.per_line = buf, start, lines, per_line
        self.part, self.parts, self.cond = part, parts, cond
        self.loops = []
        self.done = False

    def visit_For(self, s):
        self.loops.append(s)
        body = yield s.body
        self.loops.pop()
        return s if body is s.body else S.For(s.loop_var, s.min, s.extent, s.kind, body, s.thread_binding,
                                              s.annotations)

    def visit_AttrStmt(self, s):
        if s.attr_key != PREFETCH_SPREAD_AT or s.node is not self.buf or self.done:
            return (yield from self.generic_visit_iter(s))
        self.done = True
        body = yield s.body
        ana = Analyzer()
        share, shares = _op.const(0, "int32"), 1
        for loop in self.loops:
            if isinstance(loop.extent, E.IntImm) and ana.can_prove_equal(loop.min, 0):
                share = share * loop.extent.value + loop.loop_var
                shares *= loop.extent.value
        t = self.part * shares + share
        total = self.parts * shares
        lo = ana.simplify(_op.floordiv(t * self.lines, total))
        hi = ana.simplify(_op.floordiv((t + 1) * self.lines, total))
        line = E.Var(f"{self.buf.name}.pf_line", lo.dtype)
        ptr = E.Call("handle", "tir.tvm_access_ptr",
                     [E.Call(self.buf.dtype, "tir.type_annotation", []), self.buf.data,
                      ana.simplify(self.start + line * self.per_line), _op.const(1), _op.const(1)])
        # locality 2: into the caches below L1, the data is read a whole task later
        call = S.Evaluate(E.Call("int32", "tir.prefetch", [ptr, _op.const(0), _op.const(2), _op.const(1)]))
        stmt = S.For(line, lo, ana.simplify(hi - lo), S.ForKind.SERIAL, call)
        if self.cond is not None:
            stmt = S.IfThenElse(self.cond, stmt)
        return S.SeqStmt([stmt, body])


class _DropMarkers(StmtExprMutator):
    """Removes ``prefetch_spread_at`` markers no spread prefetch consumed."""

    def visit_AttrStmt(self, s):
        if s.attr_key != PREFETCH_SPREAD_AT:
            return (yield from self.generic_visit_iter(s))
        return (yield s.body)


def inject_prefetch_func(func, mod=None, ctx=None):
    body = _DropMarkers()(_Injector()(func.body))
    return func if body is func.body else func.with_body(body)


def InjectPrefetch() -> PrimFuncPass:  # noqa: N802
    """``prefetch_scope`` attributes (``Stage.prefetch``) become ``Prefetch`` statements of the region the next
    iterations read."""
    return PrimFuncPass(inject_prefetch_func, 0, "tir.InjectPrefetch")
