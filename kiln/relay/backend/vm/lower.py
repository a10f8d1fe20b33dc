"""Lowering of primitive functions whose tensors have ``Any`` dimensions (one kernel for every size).

Each ``Any`` dimension of a parameter becomes a fresh ``te.var`` (``any_dim0``, ...); the ops' computes build
their output shapes as expressions of those variables, and the C kernel receives the variables' values at
call time (docs/abi.md: implicit shape variables). Static functions lower exactly as in the graph path.
"""
from __future__ import annotations

import numpy as np

from ..te_compiler import TECompiler, _ScheduleBuilder, _type_of
from .... import te
from ....target import Target
from ....ir.type import TensorType, TupleType
from ...op.shape_func import get_shape_func
from ....error import LoweringError, KilnError


class _SymbolicBuilder(_ScheduleBuilder):
    """A schedule builder whose parameters may have symbolic (``Any``) dimensions."""

    def __init__(self, target):
        super().__init__(target)
        self._nvars = 0

    def param_shape(self, ty, where: str) -> tuple:
        shape = []
        for d in ty.shape:
            v = getattr(d, "value", d)
            if isinstance(v, (int, np.integer)):
                shape.append(int(v))
            else:
                shape.append(te.var(f"any_dim{self._nvars}", "int64"))
                self._nvars += 1
        return tuple(shape)

    @staticmethod
    def check_result_shape(ty, where: str) -> None:
        return None


class SymbolicTECompiler(TECompiler):
    """The TE compiler with symbolic-shape parameters (used by the VM compiler)."""

    builder_cls = _SymbolicBuilder


def _generic_keys(target):
    """The same target with only the ``generic`` key: the op strategies and schedules it dispatches to are
    TOPI's generic ones, which accept symbolic extents (used where a target-specific schedule needs static
    sizes)."""
    import re
    return Target(re.sub(r" -keys=\S+", "", str(target)) + " -keys=generic")


def _has_symbolic(tensors) -> bool:
    return any(not isinstance(getattr(d, "value", d), (int, np.integer)) for t in tensors for d in t.shape)


def _dim_value(d):
    v = getattr(d, "value", d)
    return int(v) if isinstance(v, (int, np.integer)) else d


def symbolic_out_type(call, inputs):
    """The call's type with its Any dims replaced by the op's shape function traced over the inputs' dims."""
    ty = _type_of(call)
    if not ty.is_dynamic():
        return ty
    fn, data_dependent = get_shape_func(call.op.name)
    if data_dependent:  # the VM computes these shapes on the host: the kernel binds them from its outputs
        fields = ty.fields if isinstance(ty, TupleType) else (ty,)
        fresh: list = []

        def dims(t, k):
            out = []
            for a, d in enumerate(t.shape):
                v = _dim_value(d)
                if not isinstance(v, int):  # outputs of one op share their unknown extents (topk values/indices)
                    while len(fresh) <= a:
                        fresh.append(te.var(f"out_dim{len(fresh)}", "int64"))
                    v = fresh[a]
                out.append(v)
            return tuple(out)
        out = [TensorType(dims(f, k), f.dtype) for k, f in enumerate(fields)]
        return TupleType(out) if isinstance(ty, TupleType) else out[0]
    shapes = fn(call.attrs, [tuple(_dim_value(d) for d in t.shape) for t in inputs], None)
    fields = ty.fields if isinstance(ty, TupleType) else (ty,)
    if len(shapes) != len(fields):
        raise LoweringError(f"the shape function of {call.op.name} gave {len(shapes)} shapes for "
                            f"{len(fields)} outputs")
    out = [TensorType(tuple(_dim_value(d) for d in s), f.dtype) for s, f in zip(shapes, fields)]
    return TupleType(out) if isinstance(ty, TupleType) else out[0]


def _symbolic_visit_call(self, call):
    inputs = []
    for a in call.args:
        inputs.extend(self.visit(a))
    if not _has_symbolic(inputs) and not _type_of(call).is_dynamic():
        return _ScheduleBuilder.visit_call(self, call)
    # the computes read their out_type: give them the traced shapes instead of Any
    saved = call._checked_type_
    call._checked_type_ = symbolic_out_type(call, inputs)
    try:
        try:
            return _ScheduleBuilder.visit_call(self, call)
        except (KilnError, TypeError, ValueError):  # a schedule that needs static sizes: take the generic one
            real = self.target
            self.target = _generic_keys(real)
            try:
                return _ScheduleBuilder.visit_call(self, call)
            finally:
                self.target = real
    finally:
        call._checked_type_ = saved


_SymbolicBuilder.visit_call = _symbolic_visit_call
