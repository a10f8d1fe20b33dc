"""PromoteRegisters: small constant-indexed allocations become a set of registers (scalar replacement).

A register-tiled accumulator (GEMM/conv micro-kernel) is an allocation of a few vectors, every
access at a constant index once the tile loops are unrolled. Declared as a C array, gcc keeps it in
memory half the time (copies and spills around every FMA); declared as one C variable per vector it
stays in registers. LLVM's scalar replacement does this for TVM; kiln's C backend gets it from this
pass, run right before code generation because it must see the stores as the printer will (split to
the target's SIMD width, ``split_store``).

The pass rewrites such an ``Allocate`` to ``n`` slots of one vector (or scalar) type, every access to
``slot[k]``, and marks it with the annotation ``kiln.registers``; the C printer declares the slots
as local variables ``name_r0 .. name_r{n-1}``.

A row whose vector is no machine vector is accessed in pieces of two widths: AVX-512's 24-channel NCHW24c
block is a 16-lane and an 8-lane piece per pixel (the printer splits a 24-lane store at 64 bytes). When every
access is one of a set of disjoint constant pieces, each width gets its own allocation of slots
(``name`` for the widest, ``name_w8`` ...), so the pieces are registers of their own types. Pieces that
overlap (a 16-lane access over two 8-lane ones) keep the array.
"""
from __future__ import annotations

from ...runtime.dtype import parse_dtype
from .. import expr as E
from .. import stmt as S
from ..buffer import Buffer
from ..op import convert
from ..stmt_functor import StmtExprMutator, StmtExprVisitor
from .pass_base import PrimFuncPass
from .vector_split import as_ramp, split_store

REGISTERS_ATTR = "kiln.registers"   # Allocate annotation: hold the slots in local variables
MAX_PROMOTED_SLOTS = 64             # more live vectors than this would spill anyway
MAX_PROMOTED_BYTES = 32 * 1024      # only allocations the C backend would put on the stack


def _is_int_const(e, value=None) -> bool:
    return isinstance(e, E.IntImm) and (value is None or e.value == value)


def _flat_index(buf: Buffer, indices):
    """The flat element index of an access, or None when the access is of an unusual form."""
    if not _is_int_const(buf.elem_offset, 0) or (len(indices) != 1 and len(indices) != len(buf.shape)):
        return None
    try:
        return buf.offset_of(indices) if len(indices) == len(buf.shape) else indices[0]
    except Exception:  # noqa: BLE001 - unusual buffer: keep the array
        return None


def _slot_base(index):
    """(constant element index, lanes) of a scalar or contiguous vector access, or None."""
    lanes = parse_dtype(index.dtype).lanes
    if lanes == 1:
        base = index
    else:
        ramp = as_ramp(index)
        if ramp is None or not _is_int_const(ramp.stride, 1):
            return None
        base = ramp.base
    return (base.value, lanes) if isinstance(base, E.IntImm) else None


class _Accesses:
    """What is known of the accesses to one allocation: the constant pieces ``(base, lanes)`` accessed, and
    ``ok`` while every access is promotable."""

    def __init__(self, elem_dtype: str):
        self.elem_dtype = elem_dtype
        self.pieces: set = set()
        self.ok = True

    def layout(self):
        """``{width: sorted bases}`` of the slots, or None when the pieces cannot be registers: one width, every
        base a multiple of it (slot ``base // width``); or several widths whose pieces are disjoint."""
        if not self.ok or not self.pieces:
            return None
        widths = {lanes for _, lanes in self.pieces}
        if len(widths) == 1:
            (w,) = widths
            if any(base % w for base, _ in self.pieces):
                return None
            return {w: sorted(base for base, _ in self.pieces)}
        end = None
        for base, lanes in sorted(self.pieces):
            if end is not None and base < end:
                return None   # overlapping pieces of different widths: one value in two registers
            end = base + lanes
        out: dict = {}
        for base, lanes in sorted(self.pieces):
            out.setdefault(lanes, []).append(base)
        return out


class _PromotableAccesses(StmtExprVisitor):
    """For every candidate allocation of a body, in one walk: whether every access to it (stores split
    as the printer splits them) is a scalar access at a constant index, or a contiguous vector access
    at a constant base, all of one width ``w`` and aligned to it, with the buffer's address never
    taken. Then slot ``index // w`` can be one variable."""

    def __init__(self, max_vector_bytes: int):
        self.max_vector_bytes = max_vector_bytes
        self.states: dict = {}  # buffer_var -> _Accesses

    def visit_Allocate(self, s):
        count = _constant_count(s)
        elem = parse_dtype(s.dtype).element_of()
        if not (s.annotations.get(REGISTERS_ATTR) or count is None or elem.is_bool or
                count * elem.itemsize > MAX_PROMOTED_BYTES or count > MAX_PROMOTED_SLOTS * 16):
            self.states[s.buffer_var] = _Accesses(str(elem))
        for x in s.extents:  # not buffer_var: its definition is no use of the address
            self.visit(convert(x))
        if s.condition is not None:
            self.visit(s.condition)
        yield s.body  # a generator: nested allocations cost no stack

    def _note(self, buf, indices):
        st = self.states.get(buf.data)
        if st is None or not st.ok:
            return
        index = None
        if str(parse_dtype(buf.dtype).element_of()) == st.elem_dtype:
            index = _flat_index(buf, indices)
        found = _slot_base(index) if index is not None else None
        if found is None:
            st.ok = False
            return
        st.pieces.add(found)

    def visit_Var(self, v):
        st = self.states.get(v)
        if st is not None:
            st.ok = False

    def visit_BufferLoad(self, e):
        self._note(e.buffer, e.indices)
        for i in e.indices:
            self.visit(i)

    def visit_BufferStore(self, s):
        for piece in _pieces(s, self.max_vector_bytes):
            self._note(piece.buffer, piece.indices)
            self.visit(piece.value)
            for i in piece.indices:
                self.visit(i)


def _pieces(store, max_vector_bytes: int) -> list:
    elem_bytes = max(parse_dtype(store.buffer.dtype).itemsize, 1)
    return split_store(store, max_vector_bytes // elem_bytes) or [store]


def _constant_count(s: S.Allocate):
    count = parse_dtype(s.dtype).lanes
    for ext in s.extents:
        ext = convert(ext)
        if not isinstance(ext, E.IntImm):
            return None
        count *= ext.value
    return count


class _Promoter(StmtExprMutator):
    """Rewrites the promotable allocations (found first, in one walk by :class:`_PromotableAccesses`)
    and every access to them to ``slots[k]``, in one more walk: linear in the body at any nesting."""

    def __init__(self, max_vector_bytes: int):
        self.max_vector_bytes = max_vector_bytes
        self.states: dict = {}
        self.promoted: dict = {}  # buffer_var -> (slots Buffer, slot numbering)

    def __call__(self, body):
        acc = _PromotableAccesses(self.max_vector_bytes)
        acc(body)
        self.states = acc.states
        return self.visit(body)

    def visit_Allocate(self, s):
        promoted = self._promote(s)
        if promoted is not None:
            s = promoted
        return (yield from self.generic_visit_iter(s))  # a generator: nesting costs no stack

    def _promote(self, s):
        acc = self.states.get(s.buffer_var)
        layout = acc.layout() if acc is not None else None
        if layout is None or sum(len(b) for b in layout.values()) > MAX_PROMOTED_SLOTS or \
                max(b + w for w, bases in layout.items() for b in bases) > _constant_count(s):
            return None
        elem = parse_dtype(acc.elem_dtype)
        slot_of: dict = {}   # (base, lanes) -> (slots Buffer, k)
        allocs = []
        for w in sorted(layout, reverse=True):
            var = s.buffer_var if not allocs else E.Var(f"{s.buffer_var.name}_w{w}", s.buffer_var.dtype)
            dtype = str(elem.with_lanes(w)) if w > 1 else str(elem)
            slots = Buffer(var, dtype, [len(layout[w])], name=var.name, scope="local")
            for k, base in enumerate(layout[w]):
                slot_of[(base, w)] = (slots, k)
            allocs.append((var, dtype, len(layout[w])))
        self.promoted[s.buffer_var] = slot_of
        body = s.body
        for var, dtype, n in reversed(allocs[1:]):
            body = S.Allocate(var, dtype, [E.IntImm("int32", n)], None, body, {REGISTERS_ATTR: True})
        var, dtype, n = allocs[0]
        return S.Allocate(var, dtype, [E.IntImm("int32", n)], s.condition, body,
                          {**s.annotations, REGISTERS_ATTR: True})

    def _slot(self, slot_of, buf, indices):
        """``(slots Buffer, slot number)`` of an access to a promoted allocation."""
        slots, k = slot_of[_slot_base(_flat_index(buf, indices))]
        return slots, E.IntImm("int32", k)

    def visit_BufferLoad(self, e):
        hit = self.promoted.get(e.buffer.data)
        if hit is not None:
            slots, k = self._slot(hit, e.buffer, e.indices)
            return E.BufferLoad(slots, [k])
        return self.generic_visit(e)

    def visit_BufferStore(self, s):
        if not self.promoted:
            return self.generic_visit(s)
        pieces = _pieces(s, self.max_vector_bytes)
        out = []
        for piece in pieces:
            hit = self.promoted.get(piece.buffer.data)
            if hit is not None:
                value = self.visit(piece.value)
                slots, k = self._slot(hit, piece.buffer, piece.indices)
                width = parse_dtype(slots.dtype).lanes
                if width > 1 and parse_dtype(value.dtype).lanes == 1:
                    value = E.Broadcast(value, width)
                out.append(S.BufferStore(slots, value, [k]))
            else:
                out.append(self.generic_visit(piece))
        if all(o is p for o, p in zip(out, pieces)):
            return s                  # no access to a promoted buffer: leave the store to the printer
        return out[0] if len(out) == 1 else S.SeqStmt(out)


def PromoteRegisters(max_vector_bytes: int = 32) -> PrimFuncPass:  # noqa: N802  (pass naming)
    """Hold small constant-indexed allocations in registers (see the module docstring).
    ``max_vector_bytes``: the target's SIMD register width (stores wider than it are split first)."""

    def pass_func(func, mod, ctx):
        body = _Promoter(max_vector_bytes)(func.body)
        return func if body is func.body else func.with_body(body)

    return PrimFuncPass(pass_func, 0, "tir.PromoteRegisters")
