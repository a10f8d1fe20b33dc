"""``dyn.full``, ``dyn.zeros``, ``dyn.ones``: tensors whose shape is a run-time value."""
from __future__ import annotations

import numpy as np

from ....error import TypeInferenceError
from ....ir.type import TensorType
from ....runtime.dtype import dtype_str
from .. import op_attrs as A
from ..type_relations import tensor_arg
from ._common import any_shape, call, define_dyn_op, operand_length
from .... import te, tir

__all__ = ["full", "zeros", "ones"]


def _ints(v):
    return [int(x) for x in np.asarray(v).reshape(-1)]


def _full_rel(arg_types, attrs):
    fill = tensor_arg(arg_types, 0, "fill_value")
    if fill.shape not in ((), (1,)):
        raise TypeInferenceError("dyn.full: fill_value must be a scalar")
    n = operand_length(arg_types, 1, "shape", "dyn.full")
    return TensorType(any_shape(n), attrs.dtype or fill.dtype)


def _full_compute(attrs, inputs, out_type):
    fill = inputs[0]
    dtype = str(out_type.dtype)

    def f(*i):
        v = fill(*([0] * len(fill.shape)))
        return tir.cast(v, dtype) if v.dtype != dtype else v
    return [te.compute(list(out_type.shape), f, name="T_dyn_full")]


define_dyn_op("dyn.full", args=("fill_value", "shape"), attrs=A.InitOpAttrs, rel=_full_rel,
              reference=lambda a, i, t: np.full(_ints(i[1]), np.asarray(i[0]).reshape(-1)[0]),
              compute=_full_compute)


def _init_rel(name):
    def rel(arg_types, attrs):
        return TensorType(any_shape(operand_length(arg_types, 0, "shape", name)), attrs.dtype or "float32")
    return rel


def _const_compute(value):
    def compute(attrs, inputs, out_type):
        return [te.compute(list(out_type.shape), lambda *i: tir.const(value, str(out_type.dtype)),
                           name="T_dyn_full")]
    return compute


for _name, _value in (("dyn.zeros", 0), ("dyn.ones", 1)):
    define_dyn_op(_name, args=("shape",), attrs=A.InitOpAttrs, rel=_init_rel(_name),
                  reference=(lambda v: lambda a, i, t: np.full(_ints(i[0]), v))(_value),
                  compute=_const_compute(_value))


def full(fill_value, shape, dtype=""):
    return call("dyn.full", [fill_value, shape], dtype=dtype_str(dtype) if dtype else "")


def zeros(shape, dtype="float32"):
    return call("dyn.zeros", [shape], dtype=dtype_str(dtype))


def ones(shape, dtype="float32"):
    return call("dyn.ones", [shape], dtype=dtype_str(dtype))
