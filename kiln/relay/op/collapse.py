"""``collapse_sum_to`` (TVM's ``relay.collapse_sum_to``): sum ``data`` down to a given shape, undoing numpy
broadcasting (the shape-argument sibling of ``collapse_sum_like``).

As in TVM the target shape is the op's second argument, a constant int tensor, and is also kept in the
attrs (``InitOpAttrs.shape``), which the type relation reads; kiln shapes are static, so a computed shape is
refused.
"""
from __future__ import annotations

import numpy as np

from ...error import TypeInferenceError
from ...ir.op import Op, OpPattern
from ...ir.type import TensorType
from ..expr import Call, Constant, const
from . import op_attrs as A
from ._define import define_op, topi_compute
from .type_relations import shape_text, tensor_arg
from ...topi.shape_ops import collapse_axes

__all__ = ["collapse_sum_to"]


def _collapse_sum_to_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    shape_t = tensor_arg(arg_types, 1, "shape")
    if len(shape_t.shape) != 1 or not str(shape_t.dtype).startswith(("int", "uint")):
        raise TypeInferenceError(f"collapse_sum_to: shape must be a 1-d int tensor, got {shape_text(shape_t.shape)} "
                                 f"{shape_t.dtype}")
    if attrs is None or attrs.shape is None:
        raise TypeInferenceError("collapse_sum_to: the target shape must be a constant (kiln shapes are static)")
    target = tuple(attrs.shape)
    if any(not isinstance(d, int) for d in t.shape):
        raise TypeInferenceError(f"collapse_sum_to: data {shape_text(t.shape)} must have a static shape")
    collapse_axes(tuple(t.shape), target, "collapse_sum_to", TypeInferenceError)
    return TensorType(target, t.dtype)


def _collapse_sum_to_ref(attrs, inputs, out_type):
    x = inputs[0]
    axes = collapse_axes(x.shape, tuple(out_type.shape))
    return np.sum(x, axis=tuple(axes)).reshape(out_type.shape) if axes else x.copy()


define_op("collapse_sum_to", num_inputs=2, args=("data", "shape"), attrs=A.InitOpAttrs, rel=_collapse_sum_to_rel,
          rel_name="CollapseSumTo", pattern=OpPattern.COMM_REDUCE, reference=_collapse_sum_to_ref, level=10,
          compute=topi_compute("collapse_sum", "collapse_sum_to", lambda a, i, t: [i[0], list(t.shape)]))


def collapse_sum_to(data, shape):
    """Sum ``data`` to ``shape`` (a tuple/list of ints or a constant int tensor), undoing broadcasting."""
    if isinstance(shape, Constant):
        values = [int(v) for v in shape.numpy().reshape(-1)]
        shape_expr = shape
    elif isinstance(shape, (list, tuple, np.ndarray)):
        values = [int(v) for v in shape]
        shape_expr = const(np.array(values, dtype="int32"), "int32")
    else:
        raise TypeInferenceError("collapse_sum_to: shape must be a tuple of ints or a constant; a computed shape "
                                 "(dynamic collapse) is not supported in kiln")
    op = Op.get("collapse_sum_to")
    return Call(op, [data, shape_expr], op.make_attrs(shape=values))
