"""Lowering of primitive functions whose tensors have ``Any`` dimensions (one kernel for every size).

Each ``Any`` dimension of a parameter becomes a fresh ``te.var`` (``any_dim0``, ...); the ops' computes build
their output shapes as expressions of those variables, and the C kernel receives the variables' values at
call time (docs/abi.md: implicit shape variables). Static functions lower exactly as in the graph path.
"""
from __future__ import annotations

import numpy as np

from ..te_compiler import TECompiler, _ScheduleBuilder, _type_of
from .... import te
from ....ir.type import TensorType, TupleType
from ...op.shape_func import get_shape_func
from ...op.nn._any_channels import static_channel_inputs
from ....error import LoweringError


#: dtype of a kernel's unknown-dim variables. int32, as the static build indexes tensors below 2**31 elements:
#: with int64 variables every index of a kernel over them became int64 arithmetic around int32 loop variables
#: (casts the C compiler did not strength-reduce: resnet's stem conv ran 2x its static version at batch 1). The
#: kernel ABI refuses a call whose int32 variable or int32-indexed buffer would overflow (ArgumentError naming
#: the variable), so a tensor of 2**31 elements or more fails clearly instead of computing garbage.
SHAPE_VAR_DTYPE = "int32"


class _SymbolicBuilder(_ScheduleBuilder):
    """A schedule builder whose parameters may have symbolic (``Any``) dimensions. ``dim_classes`` (one id
    per unknown parameter dim, in order; symdims.py) says which of them are the same size: one variable
    per class. Without it every unknown dim is its own variable."""

    def __init__(self, target, dim_classes: tuple | None = None):
        super().__init__(target)
        self._classes = list(dim_classes) if dim_classes is not None else None
        self._next = 0
        self._vars: dict = {}

    def param_shape(self, ty, where: str) -> tuple:
        shape = []
        for d in ty.shape:
            v = getattr(d, "value", d)
            if isinstance(v, (int, np.integer)):
                shape.append(int(v))
                continue
            k = self._next
            self._next += 1
            cls = self._classes[k] if self._classes is not None and k < len(self._classes) else ("own", k)
            var = self._vars.get(cls)
            if var is None:
                var = self._vars[cls] = te.size_var(f"any_dim{len(self._vars)}", SHAPE_VAR_DTYPE)
            shape.append(var)
        return tuple(shape)

    @staticmethod
    def check_result_shape(ty, where: str) -> None:
        return None


class SymbolicTECompiler(TECompiler):
    """The TE compiler with symbolic-shape parameters (used by the VM compiler); a function is lowered once
    per pattern of equal unknown dims among its parameters."""

    builder_cls = _SymbolicBuilder

    def lower(self, func, dim_classes: tuple | None = None):
        self._dim_classes = dim_classes
        return super().lower(func)

    def _cache_key(self, func):
        return (super()._cache_key(func), getattr(self, "_dim_classes", None))

    def make_builder(self):
        return self.builder_cls(self.target, getattr(self, "_dim_classes", None))


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
                        fresh.append(te.size_var(f"out_dim{len(fresh)}", "int64"))
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
        return _ScheduleBuilder.visit_call(self, call, inputs)
    # an unknown extent another operand fixes (a conv's data channels: the weight's) is checked at run time
    inputs = static_channel_inputs(getattr(call.op, "name", ""), call.attrs, inputs)
    # the computes read their out_type: give them the traced shapes instead of Any
    saved = call._checked_type_
    call._checked_type_ = symbolic_out_type(call, inputs)
    try:
        return _ScheduleBuilder.visit_call(self, call, inputs)
    finally:
        call._checked_type_ = saved


_SymbolicBuilder.visit_call = _symbolic_visit_call
