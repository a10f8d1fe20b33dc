"""StorageFlatten: multi-dimensional buffers become flat 1-d buffers over the same memory.

* ``BufferRealize`` of an intermediate tensor becomes ``Allocate`` of ``prod(extents)``
  elements plus a ``DeclBuffer`` of the flat view; accesses subtract the realized region's
  minimum and are linearized row-major over its extents.
* Every other multi-dimensional buffer (function parameters, declared views) is accessed
  through a flat 1-d buffer sharing its data variable; the index is its row-major (or
  strided) offset plus ``elem_offset``. As in TVM 0.13, ``buffer_map`` keeps the original
  N-d buffers (they describe the arguments); the body uses their flattened views.
"""
from __future__ import annotations

from ...error import LoweringError
from ...arith import Analyzer
from ...runtime.dtype import parse_dtype
from .. import expr as E
from .. import stmt as S
from .. import op as _op
from ..buffer import Buffer
from ..stmt_functor import StmtExprMutator
from .pass_base import PrimFuncPass

#: bytes a ``tir.prefetch`` call covers (StorageFlatten's region prefetches, InjectPrefetch's spread ones)
CACHE_LINE_BYTES = 64


class _Realized:
    __slots__ = ("flat", "mins", "extents")

    def __init__(self, flat, mins, extents):
        self.flat, self.mins, self.extents = flat, mins, extents


class BufferFlattener(StmtExprMutator):
    def __init__(self, cache_line: int = CACHE_LINE_BYTES):
        self.cache_line = int(cache_line)
        self.ana = Analyzer()
        self.flat: dict = {}       # id(buffer) -> flat Buffer (parameters and views)
        self.realized: dict = {}   # id(buffer) -> _Realized
        self.keep = []

    def _simp(self, e):
        return self.ana.simplify(e)

    def flat_buffer(self, b: Buffer) -> Buffer:
        hit = self.flat.get(id(b))
        if hit is not None:
            return hit
        if len(b.shape) == 1 and not b.strides and _is_zero(b.elem_offset):
            flat = b
        else:
            if b.strides:
                size = _op.const(1, b.shape[0].dtype if b.shape else "int32")
                for dim, st in zip(b.shape, b.strides):
                    size = size + (dim - 1) * st
            else:
                size = _prod(b.shape)
            size = self._simp(size + b.elem_offset) if not _is_zero(b.elem_offset) else self._simp(size)
            flat = Buffer(b.data, b.dtype, [size], None, None, b.name, b.data_alignment, b.offset_factor,
                          b.buffer_type, b.scope())
        self.flat[id(b)] = flat
        self.keep.append(b)
        return flat

    def _access(self, b: Buffer, indices):
        r = self.realized.get(id(b))
        if r is not None:
            if len(indices) != len(r.extents):
                raise LoweringError(f"buffer {b.name} is realized with {len(r.extents)} dimensions "
                                    f"but accessed with {len(indices)} indices")
            indices = _widen(indices, r.flat.shape[0])
            offset = None
            for idx, mn, ext in zip(indices, r.mins, r.extents):
                rel = idx if _is_zero(mn) else idx - mn
                offset = rel if offset is None else offset * ext + rel
            if offset is None:
                offset = _op.const(0)
            return r.flat, [self._simp(offset)]
        flat = self.flat_buffer(b)
        if flat is b:
            return b, list(indices)
        return flat, [self._simp(b.offset_of(_widen(indices, flat.shape[0])))]

    def visit_BufferLoad(self, e):
        indices = [self.visit(i) for i in e.indices]
        buf, idx = self._access(e.buffer, indices)
        if buf is e.buffer and all(a is b for a, b in zip(idx, e.indices)):
            return e
        return E.BufferLoad(buf, idx)

    def visit_BufferStore(self, s):
        value = self.visit(s.value)
        indices = [self.visit(i) for i in s.indices]
        buf, idx = self._access(s.buffer, indices)
        if buf is s.buffer and value is s.value and all(a is b for a, b in zip(idx, s.indices)):
            return s
        return S.BufferStore(buf, value, idx)

    def visit_BufferRealize(self, s):
        b = s.buffer
        mins = [self._simp(self.visit(r.min)) for r in s.bounds]
        extents = [self._simp(self.visit(r.extent)) for r in s.bounds]
        if not s.bounds:
            extents = [self._simp(x) for x in b.shape]
            mins = [_op.const(0, x.dtype) for x in extents]
        size = self._simp(_prod(extents)) if extents else _op.const(1)
        flat = Buffer(b.data, b.dtype, [size], None, None, b.name, b.data_alignment, b.offset_factor,
                      b.buffer_type, b.scope())
        self.realized[id(b)] = _Realized(flat, mins, extents)
        self.keep.append(b)
        body = yield s.body  # statement visitors are generators: nesting costs no stack
        cond = self.visit(s.condition) if s.condition is not None else _op.const(True)
        annotations = {} if b.scope() == "global" else {"storage_scope": b.scope()}
        return S.Allocate(b.data, b.dtype, [size], cond, S.DeclBuffer(flat, body), annotations)

    def visit_AttrStmt(self, s):
        if s.attr_key == "realize_scope":
            return (yield s.body)
        if s.attr_key == "buffer_bind_scope":
            raise LoweringError("StorageFlatten does not support buffer_bind_scope (tensorize with buffer "
                                "binding) yet")
        return (yield from self.generic_visit_iter(s))

    def visit_Allocate(self, s):
        body = yield s.body
        extents = [self.visit(x) for x in s.extents]
        if len(extents) > 1:
            extents = [self._simp(_prod(extents))]
        if body is s.body and all(a is b for a, b in zip(extents, s.extents)) and len(extents) == len(s.extents):
            return s
        return s.with_fields(body=body, extents=extents)

    def visit_DeclBuffer(self, s):
        flat = self.flat_buffer(s.buffer)
        body = yield s.body
        if flat is s.buffer and body is s.body:
            return s
        return S.DeclBuffer(flat, body)

    def visit_Call(self, e):
        """``tvm_access_ptr`` of a tensorize region of an intermediate tensor carries ``address_of`` the region's
        first element (kiln.te.lower); flattened, it becomes the usual (data, element offset) form."""
        args = [self.visit(a) for a in e.args]
        if e.op == "tir.tvm_access_ptr" and isinstance(args[1], E.Call) and args[1].op == "tir.address_of":
            load = args[1].args[0]
            if isinstance(load, E.BufferLoad) and len(load.indices) == 1:
                off = args[2]
                base = load.indices[0]
                args = [args[0], load.buffer.data, self._simp(base if _is_zero(off) else base + off)] + args[3:]
        if all(a is b for a, b in zip(args, e.args)):
            return e
        return E.Call(e.dtype, e.op, args)

    def visit_Prefetch(self, s):
        """A region prefetch becomes loops of ``tir.prefetch(tvm_access_ptr(...), 0, 3, 1)`` (read, keep in all
        cache levels), one call per cache line: the innermost dimensions the region covers whole are one
        contiguous span with the first partial dimension; the outer dimensions are loops. The region must lie in
        the buffer (InjectPrefetch clamps it); an extent that may be zero guards the whole prefetch."""
        b = s.buffer
        mins = [self._simp(self.visit(r.min)) for r in s.bounds]
        exts = [self._simp(self.visit(r.extent)) for r in s.bounds]
        if not mins:
            return S.Evaluate(0)
        r = self.realized.get(id(b))
        full_mins = r.mins if r is not None else [_op.const(0, d.dtype) for d in b.shape]
        full_exts = r.extents if r is not None else list(b.shape)
        elem_bytes = max(parse_dtype(b.dtype).itemsize, 1)
        per_line = max(self.cache_line // elem_bytes, 1)
        if b.strides and r is None:  # a strided view: only the innermost dimension, if its stride is 1
            j = len(mins) - 1
            if not self.ana.can_prove_equal(b.strides[-1], 1):
                per_line = 1
        else:
            j = len(mins) - 1
            while j > 0 and self.ana.can_prove_equal(mins[j], full_mins[j]) and \
                    self.ana.can_prove_equal(exts[j], full_exts[j]):
                j -= 1
        span = exts[j]
        for d in range(j + 1, len(mins)):
            span = span * exts[d]
        span = self._simp(span)
        dt = mins[0].dtype
        # a loop per outer dimension, none where the region is one index wide
        outer = [None if self.ana.can_prove_equal(exts[d], 1) else E.Var(f"{b.name}.pf{d}", dt) for d in range(j)]
        idx = [mins[d] if outer[d] is None else (outer[d] + mins[d] if not _is_zero(mins[d]) else outer[d])
               for d in range(j)] + mins[j:]
        flat, (start,) = self._access(b, idx)
        line = E.Var(f"{b.name}.line", start.dtype)

        def call(offset):
            ptr = E.Call("handle", "tir.tvm_access_ptr", [E.Call(flat.dtype, "tir.type_annotation", []), flat.data,
                                                          self._simp(offset), _op.const(1), _op.const(1)])
            return S.Evaluate(E.Call("int32", "tir.prefetch", [ptr, _op.const(0), _op.const(3), _op.const(1)]))

        last = _op.const(1, span.dtype)
        nlines = self._simp(_op.floordiv(span - last, per_line) + last)
        body = call(start + line * per_line) if not self.ana.can_prove_equal(nlines, 1) else call(start)
        if not self.ana.can_prove_equal(nlines, 1):
            body = S.For(line, _op.const(0, nlines.dtype), nlines, S.ForKind.SERIAL, body)
        if per_line > 1 and not self.ana.can_prove_equal(span, 1):
            # the last element's line, where the span does not start on a line boundary
            body = S.SeqStmt([body, call(start + span - last)])
        for d in reversed(range(j)):
            if outer[d] is not None:
                body = S.For(outer[d], _op.const(0, dt), exts[d], S.ForKind.SERIAL, body)
        maybe_empty = [e for e in exts if not self.ana.can_prove(e > 0)]
        if maybe_empty:
            cond = maybe_empty[0] > 0
            for e in maybe_empty[1:]:
                cond = _op.all(cond, e > 0)
            body = S.IfThenElse(cond, body)
        return body

    def visit_ProducerRealize(self, s):
        raise LoweringError("StorageFlatten got a ProducerRealize: TE tensors must be turned into buffers "
                            "(BufferRealize/BufferStore) before flattening")

    visit_ProducerStore = visit_ProducerRealize


def _prod(dims):
    dims = list(dims)
    if dims and all(isinstance(d, E.IntImm) for d in dims):
        # constant shapes: the element count in Python ints (an int32 product of 65536 x 32769 wraps
        # negative), as int64 when it does not fit the dims' type
        total = 1
        for d in dims:
            total *= d.value
        dt = dims[0].dtype
        return _op.const(total, "int64" if total > _INT32_MAX and dt != "int64" else dt)
    out = None
    for d in dims:
        out = d if out is None else out * d
    return out if out is not None else _op.const(1)


def _is_zero(e) -> bool:
    return isinstance(e, E.IntImm) and e.value == 0


def flatten_func(func, mod=None, ctx=None, cache_line: int = CACHE_LINE_BYTES):
    f = BufferFlattener(cache_line)
    for b in func.buffer_map.values():
        f.flat_buffer(b)
    body = f(func.body)
    return func if body is func.body else func.with_body(body)


def StorageFlatten(cache_line_size: int = CACHE_LINE_BYTES, create_bound_attribute: bool = False) -> PrimFuncPass:  # noqa: N802
    """Flatten multi-dimensional buffer accesses and turn realizations into allocations (``Prefetch`` regions
    into one ``tir.prefetch`` per ``cache_line_size`` bytes)."""
    return PrimFuncPass(lambda f, *a: flatten_func(f, *a, cache_line=cache_line_size), 0, "tir.StorageFlatten")


def FlattenBuffer() -> PrimFuncPass:  # noqa: N802
    """Alias of StorageFlatten (TVM's name on the TensorIR path)."""
    return PrimFuncPass(flatten_func, 0, "tir.FlattenBuffer")


_INT32_MAX = 2 ** 31 - 1


def _widen(indices, size):
    """Indices cast to int64 when the flat buffer holds more elements than int32 can count (a constant
    size past 2^31 - 1): the row-major offset of int32 loop variables would overflow (issue 15, defect
    2 for constant shapes; symbolic shapes are checked at call time instead, docs/robustness.md)."""
    if not (isinstance(size, E.IntImm) and size.value > _INT32_MAX):
        return indices
    return [i if i.dtype == "int64" or not _is_int(i.dtype) else E.Cast("int64", i) for i in indices]


def _is_int(dtype: str) -> bool:
    return dtype.startswith("int") or dtype.startswith("uint")
