"""UnrollLoop: replicate the bodies of ``T.unroll`` loops (and, with ``auto_max_step``, of small
serial loops). Variables defined inside a copy get fresh Vars so each copy stays in SSA form."""
from __future__ import annotations

from .. import expr as E
from .. import stmt as S
from ..buffer import Buffer
from ..stmt_functor import StmtExprMutator, substitute
from .pass_base import PrimFuncPass, _config

_INF = float("inf")


class _Renamer(StmtExprMutator):
    """Copies a statement giving every variable (and buffer) it defines a fresh object."""

    def __init__(self, vmap):
        self.vmap = dict(vmap)
        self.bmap = {}

    def visit_Var(self, v):
        return self.vmap.get(v, v)

    def _fresh(self, v):
        nv = E.Var(v.name, v.dtype)
        self.vmap[v] = nv
        return nv

    def _buf(self, b):
        nb = self.bmap.get(id(b))
        if nb is not None:
            return nb
        data = self.vmap.get(b.data)
        if data is None:
            return b
        nb = Buffer(data, b.dtype, b.shape, b.strides, b.elem_offset, b.name, b.data_alignment,
                    b.offset_factor, b.buffer_type, b.scope())
        self.bmap[id(b)] = nb
        return nb

    def visit_For(self, s):
        mn, ext = self.visit(s.min), self.visit(s.extent)
        nv = self._fresh(s.loop_var)
        return s.with_fields(loop_var=nv, min=mn, extent=ext, body=(yield s.body))

    def visit_LetStmt(self, s):
        chain = []
        while isinstance(s, S.LetStmt):  # a chain in a loop
            value = self.visit(s.value)
            chain.append((self._fresh(s.var), value))
            s = s.body
        body = yield s
        for nv, value in reversed(chain):
            body = S.LetStmt(nv, value, body)
        return body

    def visit_Let(self, e):
        value = self.visit(e.value)
        nv = self._fresh(e.var)
        return E.Let(nv, value, (yield e.body))

    def visit_Allocate(self, s):
        extents = [self.visit(x) for x in s.extents]
        nv = self._fresh(s.buffer_var)
        return s.with_fields(buffer_var=nv, extents=extents, body=(yield s.body))

    def visit_DeclBuffer(self, s):
        return S.DeclBuffer(self._buf(s.buffer), (yield s.body))

    def visit_BufferLoad(self, e):
        return E.BufferLoad(self._buf(e.buffer), [self.visit(i) for i in e.indices])

    def visit_BufferStore(self, s):
        return S.BufferStore(self._buf(s.buffer), self.visit(s.value), [self.visit(i) for i in s.indices])


_WRAPPERS = (S.LetStmt, S.AttrStmt, S.Allocate, S.DeclBuffer, S.AssertStmt, S.BufferRealize)


def _steps(s, limit: float = _INF) -> float:
    """How many leaf statements ``s`` executes (inf when a loop extent is not constant, or when the
    count passes ``limit``). Children first from an explicit stack: any depth."""
    root: list = []
    todo = [(s, root)]
    opened = []  # (node, its children's counts, its parent's list), parents before children
    while todo:
        s, out = todo.pop()
        while isinstance(s, _WRAPPERS):
            s = s.body  # wrappers (a let chain) in a loop
        if isinstance(s, (S.SeqStmt, S.IfThenElse)) or (isinstance(s, S.For) and isinstance(s.extent, E.IntImm)):
            res: list = []
            opened.append((s, res, out))
            kids = (s.seq if isinstance(s, S.SeqStmt) else [s.body] if isinstance(s, S.For)
                    else [c for c in (s.then_case, s.else_case) if c is not None])
            todo.extend((k, res) for k in kids)
        else:
            out.append(_INF if isinstance(s, (S.For, S.While)) else 0 if s is None else 1)
    for s, res, out in reversed(opened):
        if isinstance(s, S.SeqStmt):
            val = sum(res)
        elif isinstance(s, S.For):
            val = s.extent.value * res[0]
        else:
            val = max(res) if res else 0
        if val > limit:
            return _INF
        out.append(val)
    return root[0]


class LoopUnroller(StmtExprMutator):
    def __init__(self, auto_max_step=0, auto_max_depth=8, auto_max_extent=0, explicit_unroll=True):
        self.auto_max_step = auto_max_step
        self.auto_max_depth = auto_max_depth
        self.auto_max_extent = auto_max_extent
        self.explicit_unroll = explicit_unroll

    def visit_PrimExpr(self, e):  # statements only
        return e

    # pragma key -> (the setting it overrides inside its body, how to read the value)
    _PRAGMAS = {"pragma_auto_unroll_max_step": ("auto_max_step", int),
                "pragma_unroll_explicit": ("explicit_unroll", bool)}

    def visit_AttrStmt(self, s):
        pragma = self._PRAGMAS.get(s.attr_key)
        if pragma is None:
            return (yield from self.generic_visit_iter(s))
        setting, read = pragma
        old = getattr(self, setting)
        setattr(self, setting, read(s.value.value) if isinstance(s.value, E.IntImm) else old)
        try:
            return (yield s.body)
        finally:
            setattr(self, setting, old)

    def visit_For(self, s):
        body = yield s.body  # a generator: nested loops cost no stack
        const = isinstance(s.extent, E.IntImm) and isinstance(s.min, E.IntImm)
        unroll = False
        if const and s.kind == S.ForKind.UNROLLED:
            unroll = True
        elif const and s.kind == S.ForKind.SERIAL and (self.auto_max_step > 0 or self.auto_max_extent > 0):
            # both measures stop early past their limits: a deep nest costs no more than a shallow one
            depth = _depth(body, self.auto_max_depth) + 1
            if depth <= self.auto_max_depth:
                if self.auto_max_step > 0 and s.extent.value * _steps(body, self.auto_max_step) <= self.auto_max_step:
                    unroll = True
                if self.auto_max_extent > 0 and s.extent.value <= self.auto_max_extent:
                    unroll = True
        if not unroll:
            return s if body is s.body else s.with_fields(body=body)
        if not self.explicit_unroll:
            return s.with_fields(body=body, kind=S.ForKind.UNROLLED)
        n = s.extent.value
        if n <= 0:
            return S.Evaluate(0)
        copies = []
        for i in range(n):
            val = E.IntImm(s.loop_var.dtype, s.min.value + i)
            if i == 0:
                copies.append(substitute(body, {s.loop_var: val}))
            else:
                copies.append(_Renamer({s.loop_var: val})(body))
        return copies[0] if n == 1 else S.SeqStmt(copies)


def _depth(s, limit: float = _INF) -> int:
    """The most For loops nested on one path through ``s`` (an explicit stack: a let chain is deep);
    stops at ``limit`` + 1."""
    best = 0
    stack = [(s, 0)]
    while stack:
        s, d = stack.pop()
        if isinstance(s, S.For):
            best = max(best, d + 1)
            if best > limit:
                return best
            stack.append((s.body, d + 1))
        elif isinstance(s, S.SeqStmt):
            stack.extend((x, d) for x in s.seq)
        elif isinstance(s, (S.LetStmt, S.AttrStmt, S.Allocate, S.DeclBuffer, S.AssertStmt)):
            stack.append((s.body, d))
        elif isinstance(s, S.IfThenElse):
            stack.append((s.then_case, d))
            if s.else_case is not None:
                stack.append((s.else_case, d))
    return best


def UnrollLoop(auto_max_step: int | None = None, auto_max_depth: int | None = None,  # noqa: N802
               auto_max_extent: int | None = None, explicit_unroll: bool | None = None,
               unroll_local_access: bool = False) -> PrimFuncPass:
    """Unroll ``T.unroll`` loops with constant extent; options (or the PassContext config
    ``tir.UnrollLoop``) enable automatic unrolling of small serial loops."""
    def run(func, mod=None, ctx=None):
        cfg = _config("tir.UnrollLoop")
        u = LoopUnroller(
            auto_max_step if auto_max_step is not None else cfg.get("auto_max_step", 0),
            auto_max_depth if auto_max_depth is not None else cfg.get("auto_max_depth", 8),
            auto_max_extent if auto_max_extent is not None else cfg.get("auto_max_extent", 0),
            explicit_unroll if explicit_unroll is not None else cfg.get("explicit_unroll", True))
        body = u(func.body)
        return func if body is func.body else func.with_body(body)
    return PrimFuncPass(run, 0, "tir.UnrollLoop")
