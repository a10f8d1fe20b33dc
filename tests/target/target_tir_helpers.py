"""Helpers for building small lowered PrimFuncs by hand and compiling them with the C backend."""
from __future__ import annotations

from kiln import tir
from kiln.tir import expr as E, stmt as S
from kiln.target import Target
from kiln.target.build_c import build_c_module
from kiln.tir.transform import LowerIntrin


def buf(name, shape, dtype="float32"):
    """(handle param, flat buffer) for a function argument."""
    b = tir.decl_buffer(list(shape), dtype, name)
    return tir.Var(name, "handle"), b


def prim(name, params, body, noalias=True, attrs=None):
    """A PrimFunc from [(handle, buffer) | Var] params and a body."""
    plist, bmap = [], {}
    for p in params:
        if isinstance(p, tuple):
            plist.append(p[0])
            bmap[p[0]] = p[1]
        else:
            plist.append(p)
    a = {"global_symbol": name, "tir.noalias": noalias}
    a.update(attrs or {})
    return tir.PrimFunc(plist, body, buffer_map=bmap, attrs=a)


def build(*funcs, target="llvm"):
    """Compile as ``kiln.build`` does after lowering: the target's intrinsic rules (LowerIntrin), then the C
    backend (which only prints what it is handed)."""
    lower = LowerIntrin(Target(target))
    return build_c_module({f.attrs["global_symbol"]: lower(f) for f in funcs}, target)


def vector_loop(n, lanes, make_store, kind=S.ForKind.SERIAL):
    """A loop over [0, n) in vectors of ``lanes`` plus a scalar tail; ``make_store(index)`` builds
    the store for an index (a Ramp or a scalar)."""
    if lanes == 1:
        v = tir.Var("i", "int32")
        return S.For(v, 0, n, kind, make_store(v))
    main = n // lanes
    stmts = []
    if main:
        v = tir.Var("i_outer", "int32")
        stmts.append(S.For(v, 0, main, kind, make_store(E.Ramp(v * lanes, tir.const(1), lanes))))
    if n % lanes:
        t = tir.Var("i_tail", "int32")
        stmts.append(S.For(t, main * lanes, n - main * lanes, S.ForKind.SERIAL, make_store(t)))
    return S.SeqStmt(stmts) if len(stmts) > 1 else stmts[0]
