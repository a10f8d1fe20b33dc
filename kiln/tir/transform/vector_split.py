"""Vector helpers shared by the C backend's lowering (PromoteRegisters) and its printer.

``split_store`` splits vector stores wider than the machine's SIMD registers into register-wide
pieces: GCC lowers generic vectors wider than the hardware's poorly (through the stack), so a
``C[ramp(b, 1, 32)] = ...`` on AVX2 becomes four stores of 8 lanes each. Each piece takes the
matching lanes of every subexpression (Ramp, Broadcast, loads, elementwise ops). A store is split
only when it is safe: every load of the stored buffer in the value reads exactly the stored lanes.
"""
from __future__ import annotations

from ...ir.node import structural_equal
from ...runtime.dtype import parse_dtype
from .. import expr as E
from .. import stmt as S
from ..stmt_functor import StmtExprVisitor


def as_ramp(e):
    """``e`` as a Ramp when it is one up to adding/multiplying broadcast scalars, else None."""
    if isinstance(e, E.Ramp):
        return e
    if isinstance(e, (E.Add, E.Sub)):
        ra, rb = as_ramp(e.a), as_ramp(e.b)
        if ra is not None and isinstance(e.b, E.Broadcast):
            base = ra.base + e.b.value if isinstance(e, E.Add) else ra.base - e.b.value
            return E.Ramp(base, ra.stride, ra.lanes)
        if rb is not None and isinstance(e.a, E.Broadcast) and isinstance(e, E.Add):
            return E.Ramp(e.a.value + rb.base, rb.stride, rb.lanes)
        if ra is not None and rb is not None and isinstance(e, E.Add):
            return E.Ramp(ra.base + rb.base, ra.stride + rb.stride, ra.lanes)
    if isinstance(e, E.Mul):
        ra = as_ramp(e.a)
        if ra is not None and isinstance(e.b, E.Broadcast):
            return E.Ramp(ra.base * e.b.value, ra.stride * e.b.value, ra.lanes)
        rb = as_ramp(e.b)
        if rb is not None and isinstance(e.a, E.Broadcast):
            return E.Ramp(rb.base * e.a.value, rb.stride * e.a.value, rb.lanes)
    return None


class _CannotSlice(Exception):
    pass


_ELEMENTWISE_CALLS_EXCLUDED = {"tir.tvm_call_packed", "tir.call_extern", "tir.call_pure_extern", "tir.reinterpret",
                               "tir.tvm_call_packed_lowered"}


def slice_lanes(e, start: int, n: int):
    """Lanes ``[start, start + n)`` of vector expression ``e`` as an ``n``-lane expression."""
    dt = parse_dtype(e.dtype)
    if dt.lanes == 1:
        return e
    if isinstance(e, E.Ramp):
        base = e.base if start == 0 else e.base + e.stride * start
        return E.Ramp(base, e.stride, n) if n > 1 else base
    if isinstance(e, E.Broadcast):
        return E.Broadcast(e.value, n) if n > 1 else e.value
    if isinstance(e, E.BufferLoad):
        return E.BufferLoad(e.buffer, [slice_lanes(i, start, n) for i in e.indices])
    if isinstance(e, E.BinaryOpExpr):
        return type(e)(slice_lanes(e.a, start, n), slice_lanes(e.b, start, n))
    if isinstance(e, E.Not):
        return E.Not(slice_lanes(e.a, start, n))
    if isinstance(e, E.Select):
        return E.Select(slice_lanes(e.condition, start, n), slice_lanes(e.true_value, start, n),
                        slice_lanes(e.false_value, start, n))
    if isinstance(e, E.Cast):
        return E.Cast(_lanes(e.dtype, n), slice_lanes(e.value, start, n))
    if isinstance(e, E.Call) and e.op == "tir.call_pure_extern" and e.args and isinstance(e.args[0], E.StringImm):
        from .vectorize import VECTORIZABLE_EXTERNS  # lane-wise helpers (registered by their C code's owner)
        if e.args[0].value in VECTORIZABLE_EXTERNS:
            return E.Call(_lanes(e.dtype, n), e.op, [e.args[0]] + [slice_lanes(a, start, n) for a in e.args[1:]])
    if isinstance(e, E.Call) and isinstance(e.op, str) and e.op not in _ELEMENTWISE_CALLS_EXCLUDED:
        args = [slice_lanes(a, start, n) if isinstance(a, E.PrimExpr) else a for a in e.args]
        return E.Call(_lanes(e.dtype, n), e.op, args)
    if isinstance(e, E.Let) and parse_dtype(e.value.dtype).lanes == 1:
        return E.Let(e.var, e.value, slice_lanes(e.body, start, n))
    raise _CannotSlice(type(e).__name__)


def _lanes(dtype: str, n: int) -> str:
    dt = parse_dtype(dtype)
    return str(dt.with_lanes(n)) if n > 1 else str(dt.element_of())


class _LoadsOf(StmtExprVisitor):
    def __init__(self, data):
        self.data = data
        self.indices: list = []

    def visit_BufferLoad(self, e):
        if e.buffer.data is self.data:
            self.indices.append(e.indices)
        self.generic_visit(e)


def split_store(store: S.BufferStore, max_lanes: int):
    """The store as a list of at-most-``max_lanes``-wide stores, or None to keep it as it is."""
    lanes = parse_dtype(store.value.dtype).lanes
    idx_lanes = max(parse_dtype(i.dtype).lanes for i in store.indices)
    if lanes <= max_lanes or idx_lanes != lanes or max_lanes < 2:
        return None
    loads = _LoadsOf(store.buffer.data)
    loads(store.value)
    for idx in loads.indices:
        if not structural_equal(list(idx), list(store.indices)):
            return None
    pieces = []
    try:
        for start in range(0, lanes, max_lanes):
            n = min(max_lanes, lanes - start)
            pieces.append(S.BufferStore(store.buffer, slice_lanes(store.value, start, n),
                                        [slice_lanes(i, start, n) for i in store.indices]))
    except _CannotSlice:
        return None
    return pieces
