"""Function metadata (docs/abi.md): argument names, kinds, dtypes, shapes, outputs, shape vars."""
from __future__ import annotations

from ..error import LoweringError
from ..tir import expr as E
from ..tir.stmt_functor import StmtExprVisitor


def implicit_shape_vars(func) -> list:
    """Variables in parameter buffers' shapes that are not parameters themselves, in first-use order."""
    params = {id(p) for p in func.params}
    seen: dict = {}
    for p in func.params:
        buf = func.buffer_map.get(p)
        if buf is None:
            continue
        for dim in buf.shape:
            for v in _vars_of(dim):
                if id(v) not in params and id(v) not in seen:
                    seen[id(v)] = v
    return list(seen.values())


def _vars_of(expr) -> list:
    found: list = []

    class _V(StmtExprVisitor):
        def visit_Var(self, v):
            if all(v is not f for f in found):
                found.append(v)

    _V()(expr)
    return found


_PY_OPS = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.FloorDiv: "//", E.FloorMod: "%"}


def shape_entry(dim, name_of):
    """An int, a variable name, or ``{"expr": "..."}`` for a composite extent."""
    if isinstance(dim, E.IntImm):
        return int(dim.value)
    if isinstance(dim, E.Var):
        return name_of(dim)
    return {"expr": py_expr(dim, name_of)}


def py_expr(e, name_of) -> str:
    if isinstance(e, E.IntImm):
        return str(int(e.value))
    if isinstance(e, E.Var):
        return name_of(e)
    if isinstance(e, E.Cast) and (e.dtype.startswith("int") or e.dtype.startswith("uint")):
        return py_expr(e.value, name_of)
    op = _PY_OPS.get(type(e))
    if op is not None:
        return f"({py_expr(e.a, name_of)} {op} {py_expr(e.b, name_of)})"
    if isinstance(e, (E.Min, E.Max)):
        fn = "min" if isinstance(e, E.Min) else "max"
        return f"{fn}({py_expr(e.a, name_of)}, {py_expr(e.b, name_of)})"
    raise LoweringError(
        f"buffer shape expression `{e}` uses {type(e).__name__}; shapes may only use + - * // % min max "
        "of integers and variables"
    )


class _StoredBuffers(StmtExprVisitor):
    def __init__(self):
        self.stored: set = set()

    def visit_BufferStore(self, s):
        self.stored.add(id(s.buffer.data))
        self.generic_visit(s)


def function_metadata(func, symbol: str, name_of) -> dict:
    """The metadata dict of one kernel; ``name_of(var)`` gives the C/metadata name of a variable."""
    stored = _StoredBuffers()
    stored(func.body)
    args = []
    for p in func.params:
        buf = func.buffer_map.get(p)
        if buf is not None:
            entry = {"name": buf.name, "kind": "buffer", "dtype": buf.dtype,
                     "shape": [shape_entry(d, name_of) for d in buf.shape]}
            if id(buf.data) in stored.stored:
                entry["output"] = True
        elif p.dtype == "handle":
            entry = {"name": name_of(p), "kind": "handle", "dtype": "handle"}
        else:
            entry = {"name": name_of(p), "kind": "scalar", "dtype": p.dtype}
        args.append(entry)
    shape_vars = implicit_shape_vars(func)
    meta = {"name": symbol, "args": args, "shape_vars": [name_of(v) for v in shape_vars]}
    if shape_vars:  # the C type each one is read into: the runtime checks the bound values fit it
        meta["var_dtypes"] = {name_of(v): str(v.dtype) for v in shape_vars}
    return meta
