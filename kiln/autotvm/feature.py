"""Program features for cost models (TVM's ``autotvm.feature``), read from the lowered loop nest.

"itervar" features describe every loop of the lowered PrimFunc (outermost first): its extent, nesting
depth, the product of enclosing and nested extents, its kind (serial / parallel / vectorized / unrolled /
thread-bound), and for every buffer accessed inside it (buffers sorted by name) the access stride along
the loop, the number of accesses, and how much reuse the loop carries. "curve" features sample, per
buffer, how the memory footprint grows with the loop depth. Values are log2(1 + x) when ``take_log``.
"""
from __future__ import annotations

import math

import numpy as np

from ..error import KilnError
from ..tir import expr as E, stmt as S
from ..tir.stmt_functor import StmtExprVisitor
from .. import lower

_KINDS = ("serial", "parallel", "vectorized", "unrolled", "thread")


def _lower(sch, args):
    lowered = lower(sch, args, simple_mode=True)
    if hasattr(lowered, "functions"):
        funcs = list(lowered.functions.values()) if isinstance(lowered.functions, dict) else list(lowered.functions)
        if not funcs:
            raise KilnError("lowered module has no function")
        return funcs[0]
    return lowered


def _const(e, default=None):
    if isinstance(e, (int, float)):
        return e
    if isinstance(e, (E.IntImm, E.FloatImm)):
        return e.value
    return default


def _coef(e, var) -> float | None:
    """Coefficient of ``var`` in ``e`` if ``e`` is affine in it (floordiv/mod give None = unknown)."""
    if e is var:
        return 1
    if isinstance(e, (E.IntImm, E.FloatImm, E.StringImm)) or isinstance(e, E.Var):
        return 0
    if isinstance(e, E.Cast):
        return _coef(e.value, var)
    if isinstance(e, (E.Add, E.Sub)):
        a, b = _coef(e.a, var), _coef(e.b, var)
        if a is None or b is None:
            return None
        return a + b if isinstance(e, E.Add) else a - b
    if isinstance(e, E.Mul):
        ca, cb = _const(e.a), _const(e.b)
        if cb is not None:
            a = _coef(e.a, var)
            return None if a is None else a * cb
        if ca is not None:
            b = _coef(e.b, var)
            return None if b is None else b * ca
        return None if (_uses(e.a, var) or _uses(e.b, var)) else 0
    if isinstance(e, E.Ramp):
        return _coef(e.base, var)
    if isinstance(e, E.Broadcast):
        return _coef(e.value, var)
    return None if _uses(e, var) else 0


class _UseFinder(StmtExprVisitor):
    def __init__(self, var):
        self.var = var
        self.found = False

    def visit_Var(self, node):
        if node is self.var:
            self.found = True


def _uses(e, var) -> bool:
    f = _UseFinder(var)
    f.visit(e)
    return f.found


class _Access:
    __slots__ = ("buffer", "indices")

    def __init__(self, buffer, indices):
        self.buffer, self.indices = buffer, list(indices)


class _Loop:
    __slots__ = ("var", "extent", "kind", "depth", "topdown", "accesses", "children", "bottomup")

    def __init__(self, var, extent, kind, depth, topdown):
        self.var, self.extent, self.kind, self.depth, self.topdown = var, extent, kind, depth, topdown
        self.accesses: list = []
        self.children: list = []
        self.bottomup = extent


class _LoopCollector(StmtExprVisitor):
    """Builds the loop tree and records buffer accesses under every enclosing loop."""

    def __init__(self):
        self.loops: list = []
        self.stack: list = []

    def _loop(self, var, extent, kind: str, body) -> None:
        """Enter a loop of ``extent`` iterations over ``var`` (under the innermost open one), visit ``body``."""
        extent = _const(extent, 1) or 1
        top = (self.stack[-1].topdown if self.stack else 1) * extent
        loop = _Loop(var, extent, kind, len(self.stack), top)
        if self.stack:
            self.stack[-1].children.append(loop)
        self.loops.append(loop)
        self.stack.append(loop)
        self.visit(body)
        self.stack.pop()
        loop.bottomup = extent * max([c.bottomup for c in loop.children] or [1])

    def visit_For(self, node):
        kind = {S.ForKind.SERIAL: "serial", S.ForKind.PARALLEL: "parallel", S.ForKind.VECTORIZED: "vectorized",
                S.ForKind.UNROLLED: "unrolled"}.get(node.kind, "thread")
        self._loop(node.loop_var, node.extent, kind, node.body)

    def visit_AttrStmt(self, node):
        # thread_extent / virtual_thread attrs bind an IterVar: treat as a thread-bound loop
        if node.attr_key in ("thread_extent", "virtual_thread") and hasattr(node.node, "var"):
            self._loop(node.node.var, node.value, "thread", node.body)
            return
        self.generic_visit(node)

    def _record(self, buffer, indices):
        acc = _Access(buffer, indices)
        for loop in self.stack:
            loop.accesses.append(acc)

    def visit_BufferLoad(self, node):
        self._record(node.buffer, node.indices)
        self.generic_visit(node)

    def visit_BufferStore(self, node):
        self._record(node.buffer, node.indices)
        self.generic_visit(node)

    def visit_ProducerLoad(self, node):
        self._record(node.producer, node.indices)
        self.generic_visit(node)

    def visit_ProducerStore(self, node):
        self._record(node.producer, node.indices)
        self.generic_visit(node)


def _buffer_name(buf) -> str:
    return str(getattr(buf, "name", None) or getattr(getattr(buf, "op", None), "name", None) or id(buf))


def _row_major_strides(buf) -> list:
    shape = list(getattr(buf, "shape", []) or [])
    strides, acc = [], 1
    for dim in reversed(shape):
        strides.append(acc)
        acc *= _const(dim, 1) or 1
    return list(reversed(strides))


def _stride_along(acc: _Access, var) -> float:
    strides = _row_major_strides(acc.buffer)
    if len(strides) != len(acc.indices):
        strides = [1] * len(acc.indices)
    total = 0.0
    for idx, st in zip(acc.indices, strides):
        c = _coef(idx, var)
        if c is None:  # non-affine: count it as a non-unit stride
            c = 1 if _uses(idx, var) else 0
            st = max(st, 2)
        total += abs(c) * st
    return total


def _loop_features(loop: _Loop, subtree_vars: list) -> dict:
    """Per-buffer (stride, count, reuse) for one loop."""
    per_buf: dict = {}
    for acc in loop.accesses:
        per_buf.setdefault(_buffer_name(acc.buffer), []).append(acc)
    out = {}
    for name, accs in per_buf.items():
        stride = min(_stride_along(a, loop.var) for a in accs)
        count = len(accs) * loop.bottomup
        # reuse: product of extents of loops (this one and nested) whose variable no access depends on
        reuse = 1
        for lv, ext in subtree_vars:
            if not any(_uses_any(a, lv) for a in accs):
                reuse *= ext
        out[name] = (stride, count, reuse)
    return out


def _uses_any(acc: _Access, var) -> bool:
    return any(_uses(i, var) for i in acc.indices)


def _subtree(loop: _Loop) -> list:
    out = [(loop.var, loop.extent)]
    for c in loop.children:
        out.extend(_subtree(c))
    return out


def get_itervar_feature(sch, args, take_log: bool = False) -> list:
    """Structured itervar features: one list per loop, ``[("_itervar_", name), ("_attr_", length,
    nest_level, topdown, bottomup, *kind one-hot), (buffer, stride, count, reuse), ...]``."""
    func = _lower(sch, args)
    collector = _LoopCollector()
    collector.visit(func.body)
    trans = (lambda x: math.log2(x + 1)) if take_log else (lambda x: x)
    ret = []
    for loop in collector.loops:
        row = [("_itervar_", getattr(loop.var, "name", str(loop.var)))]
        onehot = [1 if loop.kind == k else 0 for k in _KINDS]
        row.append(("_attr_", trans(loop.extent), loop.depth, trans(loop.topdown), trans(loop.bottomup), *onehot))
        feats = _loop_features(loop, _subtree(loop))
        for name in sorted(feats):
            stride, count, reuse = feats[name]
            row.append((name, trans(stride), trans(count), trans(reuse)))
        ret.append(row)
    return ret


def flatten_itervar_feature(fea) -> np.ndarray:
    """The numeric parts of :func:`get_itervar_feature` as one float32 vector."""
    flat = []
    for row in fea:
        for pair in row[1:]:
            flat.extend(pair[1:])
    return np.array(flat, dtype=np.float32)


def get_itervar_feature_flatten(sch, args, take_log: bool = True) -> np.ndarray:
    """Itervar features of a schedule as one float32 vector."""
    return flatten_itervar_feature(get_itervar_feature(sch, args, take_log))


def get_buffer_curve_sample_flatten(sch, args, sample_n: int = 30) -> np.ndarray:
    """Per buffer (sorted by name), the log footprint (distinct elements touched) of one iteration of the
    loop at each depth of the deepest nest, resampled to ``sample_n`` points."""
    func = _lower(sch, args)
    collector = _LoopCollector()
    collector.visit(func.body)
    roots = [l for l in collector.loops if l.depth == 0]
    # the deepest chain of loops (outermost first)
    chain: list = []

    def deepest(loop):
        best = [loop]
        for c in loop.children:
            cand = [loop] + deepest(c)
            if len(cand) > len(best):
                best = cand
        return best

    for r in roots:
        cand = deepest(r)
        if len(cand) > len(chain):
            chain = cand
    if not chain:
        return np.zeros(0, dtype=np.float32)
    names = sorted({_buffer_name(a.buffer) for a in chain[0].accesses})
    out = []
    for name in names:
        curve = []
        for d in range(len(chain)):
            accs = [a for a in chain[d].accesses if _buffer_name(a.buffer) == name]
            footprint = 1
            for loop in chain[d:]:
                if any(_uses_any(a, loop.var) for a in accs):
                    footprint *= loop.extent
            curve.append(math.log2(footprint + 1))
        xs = np.linspace(0, len(curve) - 1, sample_n)
        out.extend(np.interp(xs, np.arange(len(curve)), curve))
    return np.array(out, dtype=np.float32)


def get_flatten_name(fea) -> list:
    """Names of the entries of :func:`flatten_itervar_feature` (for inspecting a model)."""
    names = []
    for row in fea:
        var = row[0][1]
        for pair in row[1:]:
            if pair[0] == "_attr_":
                names += [f"{var}.{n}" for n in ("length", "nest_level", "topdown", "bottomup", *_KINDS)]
            else:
                names += [f"{var}.{pair[0]}.{n}" for n in ("stride", "count", "reuse")]
    return names
