"""``nn.contrib_dense_pack`` (TVM's op of that name): dense with a weight packed as ``NC{bn}n``.

AlterOpLayout rewrites ``nn.dense`` into it on CPU targets (the weight becomes ``[ceil(N/bn), K, bn]``, zero-padded
when ``bn`` does not divide N; ``units`` keeps the real output width). Its implementation is a target's: the
strategy ``dense_pack_strategy`` has a ``"cpu"`` registration (``relay/op/strategy/x86.py``) and no generic one.
"""
from __future__ import annotations

import numpy as np

from ....error import TypeInferenceError
from ....ir.attrs import Attrs, Field
from ....ir.op import Op, OpPattern
from ....ir.type import TensorType
from ....runtime.dtype import dtype_str
from ...expr import Call
from .._define import define_op
from ..type_relations import shape_text, tensor_arg

__all__ = ["contrib_dense_pack"]


def _dtype_or_empty(value) -> str:
    return "" if value in (None, "") else dtype_str(value)


class DensePackAttrs(Attrs):
    type_key = "relay.attrs.DensePackAttrs"
    fields = {"units": Field(None, lambda v: None if v is None else int(v)), "out_dtype": Field("", _dtype_or_empty),
              "weight_layout": "NC"}


def _dense_pack_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    weight = tensor_arg(arg_types, 1, "weight")
    if len(weight.shape) == 4 and len(data.shape) == 2:
        # TVM's int8 form, weight_layout NC{bn}n4c: [N/bn, K/4, bn, 4] (the x86 int8 dense), or kiln's NC{bn}n2c
        # int16 form [N/bn, K/2, bn, 2] (the exact x86 int8 dense without VNNI, dense_int16.x86)
        nb, k4, bn, four = (int(d) for d in weight.shape)
        if four not in (2, 4) or k4 * four != int(data.shape[1]):
            raise TypeInferenceError(f"nn.contrib_dense_pack: expects data [M, K] and an NC{{bn}}n4c weight "
                                     f"[N/bn, K/4, bn, 4] (or NC{{bn}}n2c [N/bn, K/2, bn, 2]), got "
                                     f"{shape_text(data.shape)} and {shape_text(weight.shape)}")
        units = nb * bn if attrs.units is None else int(attrs.units)
        if not nb * bn - bn < units <= nb * bn:
            raise TypeInferenceError(f"nn.contrib_dense_pack: units={units} does not fit the NC{{bn}}n4c weight "
                                     f"{shape_text(weight.shape)} (its last panel may pad at most {bn - 1} rows)")
        return TensorType((data.shape[0], units), attrs.out_dtype or data.dtype)
    if len(data.shape) != 2 or len(weight.shape) != 3 or int(data.shape[1]) != int(weight.shape[1]):
        raise TypeInferenceError(f"nn.contrib_dense_pack: expects data [M, K] and a packed weight [N/bn, K, bn], got "
                                 f"{shape_text(data.shape)} and {shape_text(weight.shape)}")
    n_pad = int(weight.shape[0]) * int(weight.shape[2])
    units = n_pad if attrs.units is None else int(attrs.units)
    if not n_pad - int(weight.shape[2]) < units <= n_pad:
        raise TypeInferenceError(f"nn.contrib_dense_pack: units={units} does not fit the packed weight "
                                 f"{shape_text(weight.shape)} (its last panel may pad at most "
                                 f"{int(weight.shape[2]) - 1} rows)")
    return TensorType((data.shape[0], units), attrs.out_dtype or data.dtype)


def _dense_pack_ref(attrs, inputs, out_type):
    data, w = inputs
    if w.ndim == 4:  # NC{bn}n4c / NC{bn}n2c -> [N, K]
        nb, k4, bn, kc = w.shape
        w = w.transpose(0, 2, 1, 3).reshape(nb * bn, k4 * kc)
        units = nb * bn if attrs.units is None else int(attrs.units)
        dt = out_type.dtype
        return np.matmul(data.astype(dt), w[:units].astype(dt).T)
    nb, k, bn = w.shape
    units = nb * bn if attrs.units is None else int(attrs.units)
    weight = w.transpose(0, 2, 1).reshape(nb * bn, k)[:units]
    dt = out_type.dtype
    return np.matmul(data.astype(dt), weight.astype(dt).T)


define_op("nn.contrib_dense_pack", num_inputs=2, args=("data", "weight"), attrs=DensePackAttrs, rel=_dense_pack_rel,
          rel_name="DensePack", pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=_dense_pack_ref, level=10)


def contrib_dense_pack(data, weight, units=None, out_dtype="", weight_layout="NC"):
    """``relay.nn.contrib_dense_pack``: dense with a weight packed as ``NC{bn}n`` (``[N/bn, K, bn]``)."""
    op = Op.get("nn.contrib_dense_pack")
    return Call(op, [data, weight], op.make_attrs(units=units, out_dtype=out_dtype, weight_layout=weight_layout))
