"""TensorComputeOp: a tensor intrinsic called inside ``te.compute`` (TVM's ``intrin(A[i, 0:16], ..., reduce_axis=k)``).

``te.compute((M // 16, 16), lambda i: vadd(A[i, 0:16], B[i, 0:16]))`` computes each 16-element row by the
intrinsic: the lambda's variables are the op's outer axes, the trailing dimensions of the shape are the
intrinsic's output. Each tensor argument is a region (an index or a ``lo:hi`` slice per dimension; dimensions left
out are whole) bound to the intrinsic's buffer for that input; the output's region is the row of the outer axes.
With ``reduce_axis=`` the intrinsic must be a split reduction: ``reduce_reset`` runs before the reduction loops,
``reduce_update`` inside them. Scalar arguments are passed for the intrinsic's ``scalar_params``.

When the call is regular (constant region and intrinsic shapes that match, distinct tensors, sliced dimensions
last), kiln builds a ComputeOp (:class:`TensorizedComputeOp`) whose body is the intrinsic's compute body over the
regions, its loops ordered (outer axes, reduce_axis, the intrinsic's axes) and tensorized at the first of the
intrinsic's axes: the stage is scheduled like any other (split/reorder/parallel/pragma of the outer axes,
compute_at, exact bound inference) and lowered by Stage.tensorize. Otherwise (an intrinsic with symbolic shapes
bound by the call, one tensor passed twice) it is an opaque stage (:class:`OpaqueTensorComputeOp`, an ExternOp
whose statement is the loop nest with ``buffer_bind_scope`` attributes): bound inference takes its inputs whole
and its loops cannot be scheduled. Both are ``te.TensorComputeOp``.
"""
from __future__ import annotations

from ..arith import Analyzer
from ..error import KilnError
from ..tir import expr as E
from ..tir import op as tir_op
from ..tir import stmt as S
from ..tir.buffer import decl_buffer
from ..tir.stmt_functor import StmtExprMutator, substitute
from .tensor import ComputeOp, ExternOp, Tensor, TensorSlice
from .tensor_intrin import BindRegion


class TensorIntrinCall:
    """What ``intrin(*args, reduce_axis=...)`` returns inside a ``te.compute`` lambda."""

    def __init__(self, intrin, tensors, regions, reduce_axis, scalar_inputs):
        self.intrin, self.tensors, self.regions = intrin, list(tensors), list(regions)
        self.reduce_axis, self.scalar_inputs = list(reduce_axis), list(scalar_inputs)


def _region(arg) -> tuple:
    """(tensor, [Range per dimension]) of a tensor argument of an intrinsic call."""
    if isinstance(arg, Tensor):
        t, indices = arg, ()
    else:
        t, indices = arg.tensor, arg.indices
    region = []
    for d, idx in enumerate(indices):
        if isinstance(idx, slice):
            if idx.step not in (None, 1):
                raise KilnError(f"tensor intrinsic call: slice {idx} of {t.name} has a step; only lo:hi is allowed")
            lo = tir_op.convert(0 if idx.start is None else idx.start)
            hi = tir_op.convert(t.shape[d] if idx.stop is None else idx.stop)
            region.append(E.Range.from_min_extent(lo, Analyzer().simplify(tir_op.sub(hi, lo))))
        else:
            idx = idx.var if isinstance(idx, E.IterVar) else tir_op.convert(idx)
            region.append(E.Range.from_min_extent(idx, tir_op.const(1, "int32")))
    for d in range(len(indices), len(t.shape)):
        region.append(E.Range.from_min_extent(tir_op.const(0, t.shape[d].dtype), t.shape[d]))
    return t, region


def make_intrin_call(intrin, args, reduce_axis=None) -> TensorIntrinCall:
    tensors, regions, scalars = [], [], []
    for a in args:
        if isinstance(a, E.ProducerLoad):  # A[i, j] fully indexed: a region of one element
            a = TensorSlice(a.producer, a.indices)
        if isinstance(a, (TensorSlice, Tensor)):
            t, r = _region(a)
            tensors.append(t)
            regions.append(r)
        else:
            scalars.append(tir_op.convert(a))
    if reduce_axis is None:
        reduce_axis = []
    elif not isinstance(reduce_axis, (list, tuple)):
        reduce_axis = [reduce_axis]
    if len(tensors) != len(intrin.inputs):
        raise KilnError(f"tensor intrinsic {intrin.name} takes {len(intrin.inputs)} tensor arguments, got "
                        f"{len(tensors)}")
    if len(scalars) != len(intrin.scalar_params):
        raise KilnError(f"tensor intrinsic {intrin.name} takes {len(intrin.scalar_params)} scalar arguments "
                        f"(its scalar_params), got {len(scalars)}")
    return TensorIntrinCall(intrin, tensors, regions, reduce_axis, scalars)


class TensorComputeOp:
    """What ``te.compute`` builds for a tensor intrinsic call: :class:`TensorizedComputeOp` (schedulable) or
    :class:`OpaqueTensorComputeOp` (see the module doc). ``intrin`` is the intrinsic."""


class _NotComposable(Exception):
    """The call cannot be written as a tensorized ComputeOp (the opaque op is used)."""


class _ToRegions(StmtExprMutator):
    """The intrinsic's body over the call's tensors: ``x_k[idx]`` -> ``T_k[lead mins, trailing mins + idx]``."""

    def __init__(self, inputs, tensors, regions):
        self.map = {id(x): (t, r) for x, t, r in zip(inputs, tensors, regions)}

    def visit_ProducerLoad(self, e):
        hit = self.map.get(id(e.producer))
        if hit is None:
            return e
        t, region = hit
        idx = [self.visit(i) for i in e.indices]
        lead = len(region) - len(idx)
        out = [r.min for r in region[:lead]]
        out += [tir_op.add(r.min, i) if not (isinstance(r.min, E.IntImm) and r.min.value == 0) else i
                for r, i in zip(region[lead:], idx)]
        return E.ProducerLoad(t, out)


def _compose(name, tag, attrs, axis, call, shape):
    """The TensorizedComputeOp of ``call`` (raises _NotComposable when it is not regular)."""
    intrin, ana = call.intrin, Analyzer()
    iop = intrin.op
    if iop.num_outputs != 1 or len(set(map(id, call.tensors))) != len(call.tensors):
        raise _NotComposable()

    def const_equal(a, b):
        return isinstance(a, E.IntImm) and isinstance(b, E.IntImm) and a.value == b.value

    for t, region, x in zip(call.tensors, call.regions, intrin.inputs):
        lead = len(region) - len(x.shape)
        if lead < 0 or not all(const_equal(r.extent, tir_op.const(1, "int32")) for r in region[:lead]) or \
                not all(const_equal(ana.simplify(r.extent), d) for r, d in zip(region[lead:], x.shape)):
            raise _NotComposable()
    out_dims = shape[len(axis):]
    if len(out_dims) != len(iop.axis) or not all(const_equal(a, iv.dom.extent) for a, iv in zip(out_dims, iop.axis)):
        raise _NotComposable()
    body = iop.body[0]
    if call.reduce_axis and not isinstance(body, E.Reduce):
        raise KilnError(f"compute {name}: reduce_axis is given but the intrinsic {intrin.name} is not a reduction")
    inner = [E.IterVar(E.Range.from_min_extent(tir_op.const(0, d.dtype), d), E.Var(f"ax{k}", d.dtype),
                       E.IterVar.DataPar) for k, d in enumerate(out_dims)]
    inner_red = [E.IterVar(iv.dom, E.Var(iv.var.name, iv.var.dtype), E.IterVar.CommReduce) for iv in iop.reduce_axis]
    vmap = {iv.var: n.var for iv, n in zip(iop.axis, inner)}
    vmap.update({iv.var: n.var for iv, n in zip(iop.reduce_axis, inner_red)})
    vmap.update({p: v for p, v in zip(intrin.scalar_params, call.scalar_inputs)})
    to_regions = _ToRegions(intrin.inputs, call.tensors, call.regions)

    def conv(e):
        return substitute(to_regions(e), vmap)

    if isinstance(body, E.Reduce):
        cond = conv(body.condition) if body.condition is not None else None
        body = E.Reduce(body.combiner, [conv(x) for x in body.source], list(call.reduce_axis) + inner_red, cond,
                        body.value_index, [conv(x) for x in body.init] if body.init else None)
    else:
        body = conv(body)
    return TensorizedComputeOp(name, tag, attrs, list(axis) + inner, [body], intrin, len(axis),
                               len(call.reduce_axis), call)


class TensorizedComputeOp(ComputeOp, TensorComputeOp):
    """A tensor intrinsic call as a ComputeOp whose stage starts tensorized (see the module doc)."""

    def __init__(self, name, tag, attrs, axis, body, intrin, n_outer, n_outer_reduce, call):
        super().__init__(name, tag, attrs, axis, body)
        self.intrin, self.n_outer, self.n_outer_reduce = intrin, n_outer, n_outer_reduce
        self.regions, self.scalar_inputs = call.regions, call.scalar_inputs

    def setup_stage(self, stage) -> None:
        """Order the loops (outer axes, outer reductions, the intrinsic's axes and reductions) and tensorize at
        the intrinsic's first loop (called when the schedule makes the stage)."""
        outer, inner = self.axis[:self.n_outer], self.axis[self.n_outer:]
        red_outer, red_inner = self.reduce_axis[:self.n_outer_reduce], self.reduce_axis[self.n_outer_reduce:]
        order = outer + red_outer + inner + red_inner
        sch, stage.attach_sch = stage.attach_sch, None  # not user primitives: keep them out of the record
        try:
            stage.reorder(*order)
            stage.tensorize((inner + red_inner)[0], self.intrin)
        finally:
            stage.attach_sch = sch


class OpaqueTensorComputeOp(ExternOp, TensorComputeOp):
    """A stage computing its output tile by tile with a tensor intrinsic, opaque to the schedule (module doc)."""

    def __init__(self, name, tag, attrs, axis, reduce_axis, intrin, inputs, regions, scalar_inputs, shape, dtype):
        in_bufs = [decl_buffer(t.shape, t.dtype, name=t.name) for t in inputs]
        out_buf = decl_buffer(shape, dtype, name=name)
        super().__init__(name, tag, attrs, inputs, in_bufs, [out_buf], S.Evaluate(tir_op.const(0, "int32")))
        self.axis, self.reduce_axis = list(axis), list(reduce_axis)
        self.intrin, self.regions, self.scalar_inputs = intrin, list(regions), list(scalar_inputs)
        self.body = self._make_body()

    def replace_inputs(self, vmap: dict) -> "OpaqueTensorComputeOp":
        new_inputs = [vmap.get(t, t) for t in self.inputs]
        if all(a is b for a, b in zip(new_inputs, self.inputs)):
            return self
        out = self.output(0)
        return OpaqueTensorComputeOp(self.name, self.tag, self.attrs, self.axis, self.reduce_axis, self.intrin,
                               new_inputs, self.regions, self.scalar_inputs, out.shape, out.dtype)

    def _bind(self, buf, t, region, bound: dict) -> BindRegion:
        """Bind intrinsic buffer ``buf`` to ``region`` of ``t``: its dimensions match the region's last ones (the
        others have extent 1); a symbolic dimension of the buffer takes the region's extent."""
        ana, n = Analyzer(), len(buf.shape)
        if n > len(region):
            raise KilnError(f"compute {self.name}: intrinsic buffer {buf.name} has {n} dimensions, the region of "
                            f"{t.name} {len(region)}")
        lead = len(region) - n
        for d, r in enumerate(region):
            want = buf.shape[d - lead] if d >= lead else tir_op.const(1, "int32")
            if isinstance(want, E.Var) and d >= lead:
                want = bound.setdefault(want, r.extent)
            if not ana.can_prove_equal(r.extent, want):
                raise KilnError(f"compute {self.name}: the region of {t.name} has extent {r.extent} in dimension {d}; "
                                f"the intrinsic's buffer {buf.name} needs {want} (an index is extent 1; the sliced "
                                "dimensions must be the last ones)")
        return BindRegion(buf, t, [r.min for r in region], [r.extent for r in region[lead:]])

    def _binds(self):
        intrin, bound = self.intrin, {}
        binds = [self._bind(intrin.buffers[k], t, region, bound)
                 for k, (t, region) in enumerate(zip(self.inputs, self.regions))]
        out = self.output(0)
        one = tir_op.const(1, "int32")
        region = [E.Range.from_min_extent(iv.var, one) for iv in self.axis] + \
                 [E.Range.from_min_extent(tir_op.const(0, s.dtype), s) for s in out.shape[len(self.axis):]]
        return binds, self._bind(intrin.buffers[len(self.inputs)], out, region, bound)

    def _make_body(self):
        intrin = self.intrin
        smap = {p: v for p, v in zip(intrin.scalar_params, self.scalar_inputs)}
        sub = (lambda st: substitute(st, smap) if smap else st)
        in_binds, out_bind = self._binds()

        def bind(stmt, binds):
            for b in reversed(binds):
                stmt = S.AttrStmt(b, "buffer_bind_scope", tir_op.const(0, "int32"), stmt)
            return stmt

        def loops(ivs, body):
            for iv in reversed(ivs):
                body = S.For(iv.var, iv.dom.min, iv.dom.extent, S.ForKind.SERIAL, body)
            return body

        if not self.reduce_axis:
            if intrin.body is None:
                raise KilnError(f"compute {self.name}: intrinsic {intrin.name} has no body")
            return loops(self.axis, bind(sub(intrin.body), in_binds + [out_bind]))
        if intrin.reduce_init is None or intrin.reduce_update is None:
            raise KilnError(f"compute {self.name}: with reduce_axis the intrinsic {intrin.name} must give "
                            "(body, reduce_reset, reduce_update)")
        init = bind(sub(intrin.reduce_init), [out_bind])
        update = loops(self.reduce_axis, bind(sub(intrin.reduce_update), in_binds + [out_bind]))
        return loops(self.axis, S.seq(init, update))


def tensor_compute(name, tag, attrs, shape, axis_names, fcompute, axis=None):
    """``te.compute`` whose lambda returns a TensorIntrinCall (called from :func:`kiln.te.operation.compute`;
    ``fcompute`` is the lambda, or the call it returned over ``axis``)."""
    n_outer = len(axis_names)
    if axis is None:
        axis = [E.IterVar(E.Range.from_min_extent(tir_op.const(0, s.dtype), s), E.Var(nm, s.dtype),
                          E.IterVar.DataPar) for nm, s in zip(axis_names, shape[:n_outer])]
    call = fcompute(*[iv.var for iv in axis]) if callable(fcompute) else fcompute
    if not isinstance(call, TensorIntrinCall):
        raise KilnError(f"compute {name}: fcompute takes {n_outer} argument(s) {list(axis_names)} but the shape has "
                        f"{len(shape)} dimension(s); it must take one index variable per output axis, or fewer and "
                        "return a tensor intrinsic call (intrin(A[i, 0:n], ...)) computing the trailing ones")
    dtype = call.intrin.op.output(0).dtype
    try:
        return _compose(name, tag, attrs, axis, call, shape).output(0)
    except _NotComposable:
        pass
    op = OpaqueTensorComputeOp(name, tag, attrs, axis, call.reduce_axis, call.intrin, call.tensors, call.regions,
                               call.scalar_inputs, shape, dtype)
    return op.output(0)


__all__ = ["TensorComputeOp", "TensorizedComputeOp", "OpaqueTensorComputeOp", "TensorIntrinCall", "make_intrin_call",
           "tensor_compute"]
