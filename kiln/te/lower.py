"""Lowering a TE schedule to a TIR PrimFunc (the entry point used by ``kiln.lower``).

    normalize -> infer_bound -> schedule_ops -> tensors to buffers -> PrimFunc

The PrimFunc takes one handle parameter per tensor argument (bound through ``buffer_map`` to a
compact Buffer whose shape may hold symbolic variables) and the Var itself for scalar
arguments. Intermediate tensors are materialized with ``BufferRealize`` over the region the
bound inference found (relative to their attach point), and every access is a
multi-dimensional ``BufferLoad``/``BufferStore``; StorageFlatten turns those into flat Allocates.
"""
from __future__ import annotations

from ..error import LoweringError
from ..runtime.dtype import parse_dtype
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.buffer import Buffer, decl_buffer
from ..tir.function import PrimFunc
from ..tir.assert_message import message_key
from ..tir.stmt_functor import StmtExprMutator
from .bound import infer_bound
from .schedule import Schedule, kInlinedAlready
from .schedule_ops import schedule_ops
from .tensor import ExternOp, PlaceholderOp, Tensor
from ..tir import op as tir_op


VIEW_OF_INPUT = "kiln.view_of_input"
"""ExternOp attr: the op's output is a view of input ``attrs[VIEW_OF_INPUT]`` (same memory, no copy)."""


def _is_zero(e) -> bool:
    return isinstance(e, E.IntImm) and e.value == 0


class _TensorToBuffer(StmtExprMutator):
    """Producer* nodes -> Buffer* nodes; argument tensors use the parameters' buffers."""

    def __init__(self, canon, extern_map):
        self.canon = canon            # Tensor -> the original Tensor it stands for
        self.extern = extern_map      # original Tensor -> Buffer (function arguments)
        self.local: dict = {}         # original Tensor -> Buffer (realized intermediates)
        self.buf_subst: dict = {}     # extern op placeholder Buffer -> real Buffer
        self.var_subst: dict = {}
        self.region_subst: dict = {}  # tensorize buffer -> (intermediate Buffer, region mins, rank)
        self.ptr_delta: dict = {}     # tensorize buffer's data Var -> offset its access_ptr calls add
        self.realize_extents: dict = {}  # realized intermediate Tensor -> extents of its realized region

    def _key(self, t):
        return self.canon.get(t, t)

    def buffer_of(self, t, scope=""):
        key = self._key(t)
        b = self.extern.get(key)
        if b is not None:
            return b
        b = self.local.get(key)
        if b is None and isinstance(key.op, ExternOp) and VIEW_OF_INPUT in key.op.attrs:
            return self._view_buffer(key)
        if b is None:
            if isinstance(key.op, PlaceholderOp):
                raise LoweringError(
                    f"the input tensor '{key.name}' is used by the computation but is not among the arguments "
                    "of the function; add it to the argument list")
            b = decl_buffer(key.shape, key.dtype, name=key.name, scope=scope or "global")
            self.local[key] = b
        return b

    def _view_buffer(self, key):
        """The buffer of an extern op's output that is a view of one of its inputs (attr ``VIEW_OF_INPUT``: its
        index): the input's memory and strides under the output's shape (the op's body only checks that the shapes
        agree, e.g. ``topi.checked_dim``). Registered like an argument's, so nothing is allocated for it."""
        real = self.buffer_of(key.op.inputs[int(key.op.attrs[VIEW_OF_INPUT])])
        if len(real.shape) != len(key.shape):
            raise LoweringError(f"{key.name}: a view of rank {len(key.shape)} over an input of rank {len(real.shape)}")
        b = Buffer(real.data, key.dtype, list(key.shape), list(real.strides) or None, real.elem_offset,
                   name=key.name, scope=real.scope())
        self.extern[key] = b
        return b

    def visit_ProducerRealize(self, s):
        key = self._key(s.producer)
        if key not in self.extern and isinstance(key.op, ExternOp) and VIEW_OF_INPUT in key.op.attrs:
            self._view_buffer(key)  # a view: realized by its input, nothing allocated
        if key in self.extern:
            return self.visit(s.body)
        buf = self.buffer_of(s.producer, s.storage_scope)
        bounds = [E.Range.from_min_extent(self.visit(r.min), self.visit(r.extent)) for r in s.bounds]
        self.realize_extents[key] = [r.extent for r in bounds]
        return S.BufferRealize(buf, bounds, self.visit(s.condition), self.visit(s.body))

    def visit_ProducerStore(self, s):
        buf = self.buffer_of(s.producer)
        return S.BufferStore(buf, self.visit(s.value), [self.visit(i) for i in s.indices])

    def visit_ProducerLoad(self, e):
        buf = self.buffer_of(e.producer)
        return E.BufferLoad(buf, [self.visit(i) for i in e.indices])

    def visit_AttrStmt(self, s):
        if s.attr_key == "extern_scope" and isinstance(s.node, ExternOp):
            op = s.node
            saved = dict(self.buf_subst), dict(self.var_subst)
            for ph, t in zip(op.input_placeholders, op.inputs):
                self._bind(ph, self.buffer_of(t))
            for ph, t in zip(op.output_placeholders, op.outputs):
                self._bind(ph, self.buffer_of(t))
            body = self.visit(s.body)
            self.buf_subst, self.var_subst = saved
            return body
        if s.attr_key == "buffer_bind_scope":
            return self._bind_region(s)
        if s.attr_key in ("prefetch_scope", "prefetch_spread_scope", "prefetch_spread_at") and \
                isinstance(s.node, Tensor):
            key = self._key(s.node)
            buf = self.extern.get(key) or self.local.get(key)
            body = self.visit(s.body)
            if buf is None:  # inlined into its consumers: it has no memory to prefetch
                return body
            return S.AttrStmt(buf, s.attr_key, self.visit(s.value), body)
        return self.generic_visit(s)

    def _bind_region(self, s):
        """A tensorize intrinsic's buffer over a region of a real tensor (``Stage.tensorize``)."""
        b = s.node
        key = self._key(b.tensor)
        if key not in self.extern:
            return self._bind_intermediate(s, key)
        real = self.extern[key]
        if real.strides:
            strides = list(real.strides)
        else:
            strides, acc = [], tir_op.const(1, "int32")
            for d in reversed(real.shape):
                strides.append(acc)
                acc = tir_op.mul(acc, d)
            strides.reverse()
        mins = [self.visit(m) for m in b.mins]
        offset = real.elem_offset
        for m, st in zip(mins, strides):
            offset = tir_op.add(offset, tir_op.mul(m, st))
        ib = b.buffer
        n = len(ib.shape)
        new_strides = strides[len(strides) - n:]
        saved = dict(self.buf_subst), dict(self.var_subst), dict(self.ptr_delta)
        self._bind_shape_vars(b)
        nb = Buffer(real.data, ib.dtype, [self.visit(x) for x in ib.shape], new_strides, offset, name=ib.name,
                    scope=real.scope())
        self.buf_subst[ib] = nb
        self.var_subst[ib.data] = real.data
        if isinstance(ib.elem_offset, E.Var):
            self.var_subst[ib.elem_offset] = offset
        else:  # access_ptr(ib) computed ib.elem_offset + k: move it to the region
            self.ptr_delta[ib.data] = tir_op.sub(offset, ib.elem_offset)
        for sv, real_st in zip(ib.strides, new_strides):
            if isinstance(sv, E.Var):
                self.var_subst[sv] = real_st
        body = self.visit(s.body)
        self.buf_subst, self.var_subst, self.ptr_delta = saved
        return body

    def visit_Call(self, e):
        if e.op == "tir.tvm_access_ptr" and len(e.args) == 5 and isinstance(e.args[1], E.Var):
            data = e.args[1]
            delta = self.ptr_delta.get(data)
            if delta is not None:
                args = [self.visit(a) for a in e.args]
                args[2] = tir_op.add(delta, args[2]) if not _is_zero(args[2]) else delta
                return E.Call(e.dtype, e.op, args)
            for ib, (real, mins, n) in self.region_subst.items():
                if ib.data is data:
                    return self._region_access_ptr(e, ib)
        return self.generic_visit(e)

    def _region_access_ptr(self, e, ib):
        """``access_ptr`` of an intrinsic buffer over an intermediate tensor: the address of the region's first
        element (``address_of``, flattened by StorageFlatten) plus the pointer's offset within the buffer."""
        real, mins, n = self.region_subst[ib]
        off = self.visit(e.args[2])
        if not isinstance(ib.elem_offset, E.Var):
            off = tir_op.sub(off, ib.elem_offset)
        first = E.BufferLoad(real, list(mins))
        addr = E.Call("handle", "tir.address_of", [first])
        return E.Call(e.dtype, e.op, [e.args[0], addr, off, self.visit(e.args[3]), e.args[4]])

    def _bind_shape_vars(self, b) -> None:
        """Symbolic dimensions of an intrinsic buffer take the extents of the region bound to it."""
        if b.extents is None:
            return
        for dim, ext in zip(b.buffer.shape, b.extents):
            if isinstance(dim, E.Var) and dim not in self.var_subst:
                self.var_subst[dim] = self.visit(ext)

    def _bind_intermediate(self, s, key):
        """A region of a realized intermediate tensor: each access ``ib[i...]`` of the intrinsic's buffer becomes
        the multi-dimensional access ``tensor[mins[:-n], mins[-n:] + i...]`` (StorageFlatten then places it in
        the realized region); the intrinsic must index its buffer, not read its data pointer or offset."""
        b = s.node
        ib = b.buffer
        real = self.buffer_of(key)
        mins = [self.visit(m) for m in b.mins]
        n = len(ib.shape)
        if n > len(real.shape):
            raise LoweringError(f"tensorize: intrinsic buffer {ib.name} has more dimensions than '{key.name}'")
        saved = dict(self.region_subst), dict(self.var_subst)
        self.region_subst[ib] = (real, mins, n)
        self._bind_shape_vars(b)
        if isinstance(ib.elem_offset, E.Var):  # access_ptr offsets are taken relative to the region
            self.var_subst[ib.elem_offset] = tir_op.const(0, ib.elem_offset.dtype)
        if any(isinstance(sv, E.Var) for sv in ib.strides):
            # the realized region is stored compact (StorageFlatten): row-major strides over its extents
            extents = self.realize_extents.get(key)
            if extents is None:
                raise LoweringError(f"tensorize: intrinsic buffer {ib.name} has symbolic strides over '{key.name}', "
                                    "whose realized region is not known here")
            acc, strides = tir_op.const(1, "int32"), []
            for ext in reversed(extents[len(extents) - n:]):
                strides.append(acc)
                acc = tir_op.mul(acc, ext)
            for sv, st in zip(ib.strides, reversed(strides)):
                if isinstance(sv, E.Var):
                    self.var_subst[sv] = st
        body = self.visit(s.body)
        self.region_subst, self.var_subst = saved
        return body

    def _region_indices(self, ib, indices):
        real, mins, n = self.region_subst[ib]
        idx = [self.visit(i) for i in indices]
        if len(idx) != n:
            raise LoweringError(f"tensorize: intrinsic buffer {ib.name} is indexed with {len(idx)} indices; kiln maps "
                                f"only full-rank accesses ({n}) onto an intermediate tensor")
        head = list(mins[:len(mins) - n])
        tail = []
        for m, i in zip(mins[len(mins) - n:], idx):
            ln = parse_dtype(i.dtype).lanes
            tail.append(tir_op.add(E.Broadcast(m, ln) if ln > 1 else m, i) if not _is_zero(m) else i)
        return real, head + tail

    def visit_BufferLoad(self, e):
        if e.buffer in self.region_subst:
            real, idx = self._region_indices(e.buffer, e.indices)
            return E.BufferLoad(real, idx)
        return self.generic_visit(e)

    def visit_BufferStore(self, s):
        if s.buffer in self.region_subst:
            real, idx = self._region_indices(s.buffer, s.indices)
            return S.BufferStore(real, self.visit(s.value), idx)
        return self.generic_visit(s)

    def _bind(self, ph, real):
        if len(ph.shape) != len(real.shape):
            raise LoweringError(f"extern buffer {ph.name} has {len(ph.shape)} dims but its tensor has {len(real.shape)}")
        self.buf_subst[ph] = real
        self.var_subst[ph.data] = real.data

    def visit_Buffer(self, b):
        return self.buf_subst.get(b, b)

    def visit_Var(self, v):
        return self.var_subst.get(v, v)

    def visit_IterVar(self, iv):
        return iv


def _canonical_tensors(sch) -> dict:
    canon = {}
    for st in sch.stages:
        if st.op is not st.origin_op:
            for i in range(st.op.num_outputs):
                canon[st.op.output(i)] = st.origin_op.output(i)
    return canon


REQUIRES = "kiln.requires"
"""A compute's attribute: ``[(condition, message), ...]`` that must hold at run time (unknown extents, e.g. two
that must broadcast); each becomes an AssertStmt before the kernel's loops, so a call whose shapes break one fails
with the message instead of reading out of bounds. A message is a string or a ``tir.assert_message`` naming the
run-time extents; it is the only check of these conditions (the executors do not repeat it)."""


def _with_requirements(sch: Schedule, stmt):
    """``stmt`` behind an AssertStmt per run-time condition a stage's op requires (attr ``kiln.requires``:
    ``[(condition, message)]``, e.g. unknown extents that must broadcast): checked once, before any loop."""
    seen = set()
    for st in reversed(sch.stages):
        for cond, msg in st.origin_op.attrs.get(REQUIRES, ()) if hasattr(st.origin_op, "attrs") else ():
            key = (str(cond), message_key(msg) if not isinstance(msg, str) else msg)
            if key not in seen:
                seen.add(key)
                stmt = S.AssertStmt(cond, msg, stmt)
    return stmt


def schedule_to_primfunc(sch: Schedule, args, name: str = "main", binds=None) -> PrimFunc:
    """Lower ``sch`` to a PrimFunc with parameters ``args`` (Tensors, Buffers or scalar Vars).

    ``binds`` optionally maps a Tensor to the Buffer it should use (e.g. with strides or an
    offset); other tensor arguments get a compact row-major buffer named after the tensor.
    """
    if not isinstance(sch, Schedule):
        raise LoweringError(f"schedule_to_primfunc expects a te.Schedule, got {type(sch).__name__}")
    args = list(args) if isinstance(args, (list, tuple)) else [args]
    binds = dict(binds or {})
    sch = sch.normalize()
    bounds = infer_bound(sch)
    stmt = schedule_ops(sch, bounds)

    params, buffer_map, extern = [], {}, {}
    seen_names = {}
    for a in args:
        if isinstance(a, Tensor):
            if a in extern:
                raise LoweringError(f"tensor '{a.name}' appears twice in the argument list")
            buf = binds.get(a)
            if buf is None:
                buf = decl_buffer(a.shape, a.dtype, name=a.name)
            extern[a] = buf
        elif isinstance(a, Buffer):
            buf = a
        elif isinstance(a, E.Var):
            params.append(a)
            continue
        else:
            raise LoweringError(
                f"arguments must be te.Tensor, tir.Buffer or tir.Var, got {type(a).__name__}: {a!r}")
        pname = buf.name
        count = seen_names.get(pname, 0)
        seen_names[pname] = count + 1
        p = E.Var(pname if count == 0 else f"{pname}_{count}", "handle")
        params.append(p)
        buffer_map[p] = buf
    for t, b in binds.items():
        if isinstance(t, Tensor) and t not in extern:
            extern[t] = b
    for t in extern:
        if isinstance(t.op, ExternOp) and VIEW_OF_INPUT in t.op.attrs:
            raise LoweringError(f"'{t.name}' is a view of another tensor (no memory of its own): it cannot be an "
                                "argument of the function; compute a copy of it instead")
    body = _TensorToBuffer(_canonical_tensors(sch), extern)(_with_requirements(sch, stmt))
    return PrimFunc(params, body, None, buffer_map, {"global_symbol": name, "tir.noalias": True})


def lower_schedule_debug(sch: Schedule):
    """(normalized schedule, bounds, stmt with Producer* nodes): for tests and debugging."""
    sch = sch.normalize()
    bounds = infer_bound(sch)
    return sch, bounds, schedule_ops(sch, bounds)


__all__ = ["schedule_to_primfunc", "lower_schedule_debug", "kInlinedAlready"]
