"""qnn.add, qnn.subtract, qnn.mul and qnn.concatenate: relations, references, lowering (TVM's definitions).

add / subtract requantize both operands to the output's scale and zero point (int32), combine them and
saturate; mul multiplies the zero-point-shifted operands in int32 and requantizes the product, whose scale is
``lhs_scale * rhs_scale`` (float32); concatenate requantizes each input to the output's parameters.
"""
from __future__ import annotations

import numpy as np

from ....error import TypeInferenceError
from ....ir.op import OpPattern, register_op_attr
from ....ir.type import TensorType
from ...op import op_attrs as OA
from ...op._define import define_op
from ...op.type_relations import broadcast_shape, tensor_arg, tuple_arg
from ...transform._util import op_call
from . import arith, attrs as A
from ._common import (QUANTIZED_DTYPES, axis_of, check_dtype, check_qparam, requantize_expr,
                      resolve_rounding, saturate_cast, shift_zp)
from ...expr import const, Tuple, TupleGetItem
from ...op.transform import _concat_rel

_ARGS = ("lhs", "rhs", "lhs_scale", "lhs_zero_point", "rhs_scale", "rhs_zero_point", "output_scale",
         "output_zero_point")


def _binary_rel(name):
    def rel(arg_types, attrs):
        lhs = tensor_arg(arg_types, 0, "lhs")
        rhs = tensor_arg(arg_types, 1, "rhs")
        check_dtype(name, "lhs", lhs, QUANTIZED_DTYPES)
        if rhs.dtype != lhs.dtype:
            raise TypeInferenceError(f"{name}: lhs and rhs must have the same dtype, got {lhs.dtype} and {rhs.dtype}")
        for k, (pname, dtype) in enumerate(zip(_ARGS[2:], ("float32", "int32") * 3)):
            check_qparam(name, arg_types, 2 + k, pname, dtype)
        axis_of(name, attrs.lhs_axis, len(lhs.shape))
        axis_of(name, attrs.rhs_axis, len(rhs.shape))
        return TensorType(broadcast_shape(lhs.shape, rhs.shape), lhs.dtype)
    return rel


def _to_output_int32(x, s, z, os, oz, axis):
    return arith.requantize(x, s, z, os, oz, "int32", resolve_rounding("None"), axis).astype(np.int64)


def _add_sub_ref(sign):
    def ref(a, i, t):
        lhs = _to_output_int32(i[0], i[2], i[3], i[6], i[7], a.lhs_axis)
        rhs = _to_output_int32(i[1], i[4], i[5], i[6], i[7], a.rhs_axis)
        out = lhs + rhs - np.int64(i[7]) if sign > 0 else lhs - rhs + np.int64(i[7])
        lo, hi = arith.qrange(t.dtype)
        return np.clip(out, lo, hi).astype(t.dtype)
    return ref


def _add_sub_lower(sign):
    def lower(a, args, ts):
        lhs = requantize_expr(args[0], ts[0], args[2], ts[2], args[3], ts[3], args[6], ts[6], args[7], ts[7],
                              "int32", "None", a.lhs_axis)
        rhs = requantize_expr(args[1], ts[1], args[4], ts[4], args[5], ts[5], args[6], ts[6], args[7], ts[7],
                              "int32", "None", a.rhs_axis)
        if sign > 0:
            out = op_call("subtract", [op_call("add", [lhs, rhs]), args[7]])
        else:
            out = op_call("add", [op_call("subtract", [lhs, rhs]), args[7]])
        return saturate_cast(out, ts[0].dtype)
    return lower


def _mul_ref(a, i, t):
    nl, nr = np.ndim(i[0]), np.ndim(i[1])
    lhs = np.asarray(i[0], np.int64) - arith._per_channel(np.asarray(i[3], np.int64), nl, a.lhs_axis)
    rhs = np.asarray(i[1], np.int64) - arith._per_channel(np.asarray(i[5], np.int64), nr, a.rhs_axis)
    prod = (lhs * rhs).astype(np.int32)
    scale = np.float32(i[2]) * np.float32(i[4])
    return arith.requantize(prod, scale, 0, i[6], i[7], t.dtype, resolve_rounding("None"))


def _mul_lower(a, args, ts):
    lhs = shift_zp(args[0], ts[0], args[3], ts[3], a.lhs_axis)
    rhs = shift_zp(args[1], ts[1], args[5], ts[5], a.rhs_axis)
    prod = op_call("multiply", [lhs, rhs])
    shape = broadcast_shape(ts[0].shape, ts[1].shape)
    scale = op_call("multiply", [args[2], args[4]])
    s_t = TensorType((), "float32")
    return requantize_expr(prod, TensorType(shape, "int32"), scale, s_t, const(0, "int32"), TensorType((), "int32"),
                           args[6], ts[6], args[7], ts[7], ts[0].dtype, "None", -1)


for _name, _ref, _lower, _rel in (("qnn.add", _add_sub_ref(1), _add_sub_lower(1), "QnnAddRel"),
                                  ("qnn.subtract", _add_sub_ref(-1), _add_sub_lower(-1), "QnnSubtractRel"),
                                  ("qnn.mul", _mul_ref, _mul_lower, "QnnMulRel")):
    define_op(_name, num_inputs=8, args=_ARGS, attrs=A.BroadcastAttrs, rel=_binary_rel(_name), rel_name=_rel,
              pattern=OpPattern.OPAQUE, level=11, reference=_ref)
    register_op_attr(_name, "FTVMQnnCanonicalize", _lower)


# -- concatenate ----------------------------------------------------------------------------------------
def concatenate_rel(arg_types, attrs):
    fields = tuple_arg(arg_types, 0, "data")
    scales = tuple_arg(arg_types, 1, "input_scales")
    zps = tuple_arg(arg_types, 2, "input_zero_points")
    if len(scales) != len(fields) or len(zps) != len(fields):
        raise TypeInferenceError(f"qnn.concatenate: {len(fields)} inputs but {len(scales)} scales and "
                                 f"{len(zps)} zero points (one of each per input)")
    for k, f in enumerate(fields):
        check_dtype("qnn.concatenate", f"input {k}", f, QUANTIZED_DTYPES)
        check_qparam("qnn.concatenate", list(scales), k, f"input_scales[{k}]", "float32")
        check_qparam("qnn.concatenate", list(zps), k, f"input_zero_points[{k}]", "int32")
    check_qparam("qnn.concatenate", arg_types, 3, "output_scale", "float32")
    check_qparam("qnn.concatenate", arg_types, 4, "output_zero_point", "int32")
    return _concat_rel([arg_types[0]], attrs)


def _concat_ref(a, i, t):
    parts = [arith.requantize(x, s, z, i[3], i[4], t.dtype, resolve_rounding("None"))
             for x, s, z in zip(i[0], i[1], i[2])]
    return np.concatenate(parts, axis=a.axis)


def _concat_lower(a, args, ts):

    def field(e, k):
        return e.fields[k] if isinstance(e, Tuple) else TupleGetItem(e, k)
    parts = []
    for k, ft in enumerate(ts[0].fields):
        parts.append(requantize_expr(field(args[0], k), ft, field(args[1], k), ts[1].fields[k], field(args[2], k),
                                     ts[2].fields[k], args[3], ts[3], args[4], ts[4], ft.dtype, "None", -1))
    return op_call("concatenate", [Tuple(parts)], axis=a.axis)


define_op("qnn.concatenate", num_inputs=5,
          args=("data", "input_scales", "input_zero_points", "output_scale", "output_zero_point"),
          attrs=OA.ConcatenateAttrs, rel=concatenate_rel, rel_name="QnnConcatenateRel", pattern=OpPattern.OPAQUE,
          level=11, reference=_concat_ref)
register_op_attr("qnn.concatenate", "FTVMQnnCanonicalize", _concat_lower)
