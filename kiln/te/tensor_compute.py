"""TensorComputeOp: a tensor intrinsic called inside ``te.compute`` (TVM's ``intrin(A[i, 0:16], ..., reduce_axis=k)``).

``te.compute((M // 16, 16), lambda i: vadd(A[i, 0:16], B[i, 0:16]))`` computes each 16-element row by the
intrinsic: the lambda's variables are the op's outer axes, the trailing dimensions of the shape are the
intrinsic's output. Each tensor argument is a region (an index or a ``lo:hi`` slice per dimension; dimensions left
out are whole) bound to the intrinsic's buffer for that input; the output's region is the row of the outer axes.
With ``reduce_axis=`` the intrinsic must be a split reduction: ``reduce_reset`` runs before the reduction loops,
``reduce_update`` inside them. Scalar arguments are passed for the intrinsic's ``scalar_params``.

kiln builds the op as an opaque stage (an ExternOp subclass whose statement is the loop nest with
``buffer_bind_scope`` attributes, as Stage.tensorize makes), so bound inference takes its inputs whole and its
axes cannot be split or reordered by the schedule (TVM schedules them); code is the same otherwise.
"""
from __future__ import annotations

from ..arith import Analyzer
from ..error import KilnError
from ..tir import expr as E
from ..tir import op as tir_op
from ..tir import stmt as S
from ..tir.buffer import decl_buffer
from ..tir.stmt_functor import substitute
from .tensor import ExternOp, Tensor, TensorSlice
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


class TensorComputeOp(ExternOp):
    """A stage computing its output tile by tile with a tensor intrinsic (see the module doc)."""

    def __init__(self, name, tag, attrs, axis, reduce_axis, intrin, inputs, regions, scalar_inputs, shape, dtype):
        in_bufs = [decl_buffer(t.shape, t.dtype, name=t.name) for t in inputs]
        out_buf = decl_buffer(shape, dtype, name=name)
        super().__init__(name, tag, attrs, inputs, in_bufs, [out_buf], S.Evaluate(tir_op.const(0, "int32")))
        self.axis, self.reduce_axis = list(axis), list(reduce_axis)
        self.intrin, self.regions, self.scalar_inputs = intrin, list(regions), list(scalar_inputs)
        self.body = self._make_body()

    def replace_inputs(self, vmap: dict) -> "TensorComputeOp":
        new_inputs = [vmap.get(t, t) for t in self.inputs]
        if all(a is b for a, b in zip(new_inputs, self.inputs)):
            return self
        out = self.output(0)
        return TensorComputeOp(self.name, self.tag, self.attrs, self.axis, self.reduce_axis, self.intrin,
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
    op = TensorComputeOp(name, tag, attrs, axis, call.reduce_axis, call.intrin, call.tensors, call.regions,
                         call.scalar_inputs, shape, dtype)
    return op.output(0)


__all__ = ["TensorComputeOp", "TensorIntrinCall", "make_intrin_call", "tensor_compute"]
