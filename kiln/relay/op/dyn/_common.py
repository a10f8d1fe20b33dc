"""Shared pieces of the ``dyn.*`` ops: type rules over run-time shape operands, attrs as JSON, registration."""
from __future__ import annotations

import numpy as np

from ....error import TypeInferenceError
from ....ir.op import Op, OpPattern, register_op_attr
from ....ir.type import TensorType
from ....runtime.vm_shape_funcs import DYN_SHAPE_FUNCS
from ....tir.expr import Any
from ...expr import Call
from .._define import define_op
from ..op import register_shape_func
from ..type_relations import tensor_arg
from .... import tir


def operand_length(arg_types, i: int, name: str, op: str) -> int:
    """The static length of 1-D shape operand ``i`` (the rank it gives the result)."""
    t = tensor_arg(arg_types, i, name)
    if len(t.shape) > 1:
        raise TypeInferenceError(f"{op}: {name} must be a 1-D integer tensor, got shape {tuple(t.shape)}")
    n = t.shape[0] if t.shape else 1
    if not isinstance(n, int):
        raise TypeInferenceError(f"{op}: the length of {name} is unknown, so the rank of the result is unknown")
    if not str(t.dtype).startswith(("int", "uint")):
        raise TypeInferenceError(f"{op}: {name} must be an integer tensor, got dtype {t.dtype}")
    return int(n)


def any_shape(n: int) -> tuple:
    return tuple(Any() for _ in range(n))


def attrs_json(attrs) -> dict:
    """The attribute fields that are JSON values (what the run-time shape function may read)."""
    out = {}
    if attrs is None:
        return out
    for k in type(attrs).fields:
        v = getattr(attrs, k, None)
        if isinstance(v, tuple):
            v = list(v)
        if v is None or isinstance(v, (bool, int, float, str)) or (
                isinstance(v, list) and all(isinstance(x, (bool, int, float, str)) for x in v)):
            out[k] = v
    return out


def _shape_func_adapter(name: str):
    host = DYN_SHAPE_FUNCS[name]

    def shape_func(attrs, inputs, out_ndims):
        return host(attrs_json(attrs), [np.asarray(getattr(v, "numpy", lambda: v)()) for v in inputs])
    shape_func.__name__ = f"shape_func_{name.replace('.', '_')}"
    return shape_func


def define_dyn_op(name: str, *, args, rel, reference, compute, attrs=None, pattern=OpPattern.OPAQUE):
    """Register ``name``: OPAQUE (never fused: the VM runs its data-dependent shape function before the call),
    type relation, numpy reference, TE compute over symbolic output extents, the host shape function."""
    rel.handles_any = True  # an unknown operand length is an error, never probed with stand-in sizes
    op = define_op(name, num_inputs=len(args), args=args, attrs=attrs, rel=rel, pattern=pattern,
                   reference=reference, compute=compute, level=10)
    if op.get_attr("FShapeFunc") is None:
        register_shape_func(name, True, _shape_func_adapter(name))
    return op


def call(name: str, args, **attrs) -> Call:
    op = Op.get(name)
    return Call(op, list(args), op.make_attrs(**attrs) if op.attrs_type is not None else None)


def index_like(i, v):
    """``v`` (an index read from a tensor, or a Python int) in the dtype of loop index ``i``."""
    if isinstance(v, int):
        return v
    return tir.cast(v, i.dtype) if v.dtype != i.dtype else v


def register_host_only(name: str) -> None:
    register_op_attr(name, "TNonComputational", False)
