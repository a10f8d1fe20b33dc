"""``nn.contrib_batch_matmul_pack`` (a kiln op, no TVM counterpart): ``nn.batch_matmul`` whose ``y`` is packed
``[B, N/16, ceil(K/2), 16, 2]`` (zero-padded), the panels of the exact int16 kernel ``batch_matmul_int16.x86``.

AlterOpLayout rewrites an int16 ``nn.batch_matmul`` with a constant ``y`` (QNN weights) into it on CPU targets, with
the packing as Relay ops that FoldConstant computes once at compile time, so the kernel does not repack ``y`` on
every call (as ``nn.contrib_dense_pack`` does for dense weights). ``units`` keeps the real N. Its implementation
is a target's: the strategy ``batch_matmul_pack_strategy`` has a ``"cpu"`` registration and no generic one.
"""
from __future__ import annotations

import numpy as np

from ....error import TypeInferenceError
from ....ir.attrs import Attrs, Field
from ....ir.op import Op, OpPattern
from ....ir.type import TensorType
from ...expr import Call
from .._define import define_op
from ..type_relations import shape_text, tensor_arg
from ._dense_pack import _dtype_or_empty

__all__ = ["contrib_batch_matmul_pack"]


class BatchMatmulPackAttrs(Attrs):
    type_key = "relay.attrs.BatchMatmulPackAttrs"
    fields = {"units": Field(None, lambda v: None if v is None else int(v)), "out_dtype": Field("", _dtype_or_empty),
              "transpose_a": False}


def _batch_matmul_pack_rel(arg_types, attrs):
    x = tensor_arg(arg_types, 0, "x")
    y = tensor_arg(arg_types, 1, "y")
    if len(x.shape) != 3 or len(y.shape) != 5:
        raise TypeInferenceError(f"nn.contrib_batch_matmul_pack: expects x [B, M, K] and a packed y "
                                 f"[B, N/16, ceil(K/2), 16, 2], got {shape_text(x.shape)} and {shape_text(y.shape)}")
    bx, m, k = (int(d) for d in x.shape)
    if attrs.transpose_a:
        m, k = k, m
    by, nb, kh, bn, two = (int(d) for d in y.shape)
    if two != 2 or not kh * 2 - 2 < k <= kh * 2 or (bx != by and 1 not in (bx, by)):
        raise TypeInferenceError(f"nn.contrib_batch_matmul_pack: x {shape_text(x.shape)} (transpose_a="
                                 f"{bool(attrs.transpose_a)}) and the packed y {shape_text(y.shape)} do not multiply")
    units = nb * bn if attrs.units is None else int(attrs.units)
    if not nb * bn - bn < units <= nb * bn:
        raise TypeInferenceError(f"nn.contrib_batch_matmul_pack: units={units} does not fit the packed y "
                                 f"{shape_text(y.shape)} (its last panel may pad at most {bn - 1} rows)")
    return TensorType((max(bx, by), m, units), attrs.out_dtype or x.dtype)


def _batch_matmul_pack_ref(attrs, inputs, out_type):
    x, y = inputs
    if attrs.transpose_a:
        x = x.transpose(0, 2, 1)
    b, nb, kh, bn, two = y.shape
    units = nb * bn if attrs.units is None else int(attrs.units)
    w = y.transpose(0, 1, 3, 2, 4).reshape(b, nb * bn, kh * two)[:, :units, :x.shape[2]]
    dt = out_type.dtype
    return np.matmul(x.astype(dt), w.astype(dt).transpose(0, 2, 1))


define_op("nn.contrib_batch_matmul_pack", num_inputs=2, args=("x", "y"), attrs=BatchMatmulPackAttrs,
          rel=_batch_matmul_pack_rel, rel_name="BatchMatmulPack", pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
          reference=_batch_matmul_pack_ref, level=10)


def contrib_batch_matmul_pack(x, y, units=None, out_dtype="", transpose_a=False):
    """``relay.nn.contrib_batch_matmul_pack``: batch_matmul with ``y`` packed ``[B, N/16, ceil(K/2), 16, 2]``."""
    op = Op.get("nn.contrib_batch_matmul_pack")
    return Call(op, [x, y], op.make_attrs(units=units, out_dtype=out_dtype, transpose_a=bool(transpose_a)))
