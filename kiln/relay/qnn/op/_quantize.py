"""qnn.quantize, qnn.dequantize, qnn.requantize and the simulated (float-in, float-out) variants:
type relations, numpy references and their lowering to integer Relay ops."""
from __future__ import annotations

import numpy as np

from ....error import TypeInferenceError
from ....ir.op import OpPattern, register_op_attr
from ....ir.type import TensorType
from ...op._define import define_op
from ...op.type_relations import tensor_arg
from ...transform._util import op_call
from . import arith, attrs as A
from ._common import (QUANTIZED_DTYPES, axis_of, channels_on, check_dtype, check_qparam, const_value,
                      dequantize_expr, quantize_expr, requantize_expr, resolve_rounding)

SQNN_DTYPE_TO_CODE = {"disable": 0, "int8": 1, "uint8": 2, "int32": 3}
SQNN_CODE_TO_DTYPE = {v: k for k, v in SQNN_DTYPE_TO_CODE.items()}


def _params(op, arg_types, first: int, data: TensorType, axis: int, names=("scale", "zero_point")):
    ndim = len(data.shape)
    ax = axis_of(op, axis, ndim)
    ch = channels_on(data, ax) if ndim else None
    check_qparam(op, arg_types, first, names[0], "float32", ch)
    check_qparam(op, arg_types, first + 1, names[1], "int32", ch)
    return ax


# -- quantize -------------------------------------------------------------------------------------------
def quantize_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    check_dtype("qnn.quantize", "data", data, ("float32", "float16", "float64"))
    if attrs.out_dtype not in ("int8", "uint8", "int16", "uint16", "int32"):
        raise TypeInferenceError(f"qnn.quantize: out_dtype must be int8, uint8, int16, uint16 or int32, "
                                 f"got {attrs.out_dtype}")
    _params("qnn.quantize", arg_types, 1, data, attrs.axis, ("output_scale", "output_zero_point"))
    return TensorType(data.shape, attrs.out_dtype)


define_op("qnn.quantize", num_inputs=3, args=("data", "output_scale", "output_zero_point"), attrs=A.QuantizeAttrs,
          rel=quantize_rel, rel_name="QuantizeRel", pattern=OpPattern.OPAQUE, level=11,
          reference=lambda a, i, t: arith.quantize(i[0], i[1], i[2], t.dtype, a.axis))
register_op_attr("qnn.quantize", "FTVMQnnCanonicalize",
                 lambda a, args, ts: quantize_expr(args[0], ts[0], args[1], ts[1], args[2], ts[2], a.out_dtype,
                                                   a.axis))


# -- dequantize -----------------------------------------------------------------------------------------
def dequantize_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    check_dtype("qnn.dequantize", "data", data, QUANTIZED_DTYPES)
    _params("qnn.dequantize", arg_types, 1, data, attrs.axis, ("input_scale", "input_zero_point"))
    return TensorType(data.shape, attrs.out_dtype or "float32")


def _dequantize_lower(a, args, ts):
    out = dequantize_expr(args[0], ts[0], args[1], ts[1], args[2], ts[2], a.axis)
    return out if a.out_dtype in ("", "float32") else op_call("cast", [out], dtype=a.out_dtype)


define_op("qnn.dequantize", num_inputs=3, args=("data", "input_scale", "input_zero_point"),
          attrs=A.DequantizeAttrs, rel=dequantize_rel, rel_name="DequantizeRel", pattern=OpPattern.OPAQUE,
          level=11, reference=lambda a, i, t: arith.dequantize(i[0], i[1], i[2], a.axis))
register_op_attr("qnn.dequantize", "FTVMQnnCanonicalize", _dequantize_lower)


# -- requantize -----------------------------------------------------------------------------------------
def requantize_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    check_dtype("qnn.requantize", "data", data, QUANTIZED_DTYPES)
    if attrs.out_dtype not in QUANTIZED_DTYPES:
        raise TypeInferenceError(f"qnn.requantize: out_dtype must be one of {', '.join(QUANTIZED_DTYPES)}, "
                                 f"got {attrs.out_dtype}")
    if attrs.rounding not in ("None",) + arith.ROUNDINGS:
        raise TypeInferenceError(f"qnn.requantize: rounding must be UPWARD or TONEAREST, got {attrs.rounding!r}")
    ndim = len(data.shape)
    ax = axis_of("qnn.requantize", attrs.axis, ndim)
    ch = channels_on(data, ax) if ndim else None
    check_qparam("qnn.requantize", arg_types, 1, "input_scale", "float32", ch)
    check_qparam("qnn.requantize", arg_types, 2, "input_zero_point", "int32", ch)
    check_qparam("qnn.requantize", arg_types, 3, "output_scale", "float32", ch)
    check_qparam("qnn.requantize", arg_types, 4, "output_zero_point", "int32", ch)
    return TensorType(data.shape, attrs.out_dtype)


def _requantize_ref(a, i, t):
    return arith.requantize(i[0], i[1], i[2], i[3], i[4], t.dtype, resolve_rounding(a.rounding), a.axis)


define_op("qnn.requantize", num_inputs=5,
          args=("data", "input_scale", "input_zero_point", "output_scale", "output_zero_point"),
          attrs=A.RequantizeAttrs, rel=requantize_rel, rel_name="RequantizeRel", pattern=OpPattern.OPAQUE,
          level=11, reference=_requantize_ref)
register_op_attr("qnn.requantize", "FTVMQnnCanonicalize",
                 lambda a, args, ts: requantize_expr(args[0], ts[0], args[1], ts[1], args[2], ts[2], args[3], ts[3],
                                                     args[4], ts[4], a.out_dtype, a.rounding, a.axis))


# -- simulated_quantize / simulated_dequantize ----------------------------------------------------------
def _sim_rel(name):
    def rel(arg_types, attrs):
        data = tensor_arg(arg_types, 0, "data")
        check_dtype(name, "data", data, ("float32",))
        dt = tensor_arg(arg_types, 1, "dtype code")
        if len(dt.shape) != 0 or dt.dtype != "int32":
            raise TypeInferenceError(f"{name}: the dtype argument must be an int32 scalar code "
                                     f"({SQNN_DTYPE_TO_CODE}), got {dt.astext()}")
        ndim = len(data.shape)
        ax = axis_of(name, attrs.axis, ndim)
        ch = channels_on(data, ax) if ndim else None
        check_qparam(name, arg_types, 2, "scale", "float32", ch)
        check_qparam(name, arg_types, 3, "zero_point", "int32", ch)
        return TensorType(data.shape, "float32")
    return rel


def _code(value, name):
    code = int(np.asarray(value))
    if code not in SQNN_CODE_TO_DTYPE:
        raise TypeInferenceError(f"{name}: unknown dtype code {code} (expected one of {SQNN_DTYPE_TO_CODE})")
    return SQNN_CODE_TO_DTYPE[code]


def _sim_quantize_ref(a, i, t):
    dtype = _code(i[1], "qnn.simulated_quantize")
    if dtype == "disable":
        return np.asarray(i[0], np.float32)
    return arith.quantize(i[0], i[2], i[3], dtype, a.axis).astype(np.float32)


def _sim_dequantize_ref(a, i, t):
    dtype = _code(i[1], "qnn.simulated_dequantize")
    if dtype == "disable":
        return np.asarray(i[0], np.float32)
    return arith.dequantize(np.round(np.asarray(i[0])).astype(np.int64), i[2], i[3], a.axis)


def _sim_lower(quant: bool):
    name = "qnn.simulated_quantize" if quant else "qnn.simulated_dequantize"

    def lower(a, args, ts):
        code = const_value(args[1])
        if code is None:
            raise TypeInferenceError(f"{name}: the dtype code must be a constant to lower the op")
        dtype = _code(code, name)
        if dtype == "disable":
            return args[0]
        if quant:
            q = quantize_expr(args[0], ts[0], args[2], ts[2], args[3], ts[3], dtype, a.axis)
            return op_call("cast", [q], dtype="float32")
        ints = op_call("cast", [op_call("round", [args[0]])], dtype="int32")
        return dequantize_expr(ints, TensorType(ts[0].shape, "int32"), args[2], ts[2], args[3], ts[3], a.axis)
    return lower


define_op("qnn.simulated_quantize", num_inputs=4, args=("data", "out_dtype", "output_scale", "output_zero_point"),
          attrs=A.SimulatedQuantizeAttrs, rel=_sim_rel("qnn.simulated_quantize"), rel_name="SimulatedQuantizeRel",
          pattern=OpPattern.OPAQUE, level=11, reference=_sim_quantize_ref)
register_op_attr("qnn.simulated_quantize", "FTVMQnnCanonicalize", _sim_lower(True))
define_op("qnn.simulated_dequantize", num_inputs=4, args=("data", "in_dtype", "input_scale", "input_zero_point"),
          attrs=A.SimulatedQuantizeAttrs, rel=_sim_rel("qnn.simulated_dequantize"),
          rel_name="SimulatedDequantizeRel", pattern=OpPattern.OPAQUE, level=11, reference=_sim_dequantize_ref)
register_op_attr("qnn.simulated_dequantize", "FTVMQnnCanonicalize", _sim_lower(False))
