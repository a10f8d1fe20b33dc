"""Constructors of the QNN ops (TVM's ``relay.qnn.op``), with TVM's argument order and names.

Scales and zero points are Relay expressions (usually constants); plain Python numbers and numpy arrays are
accepted too and become float32 / int32 constants.
"""
from __future__ import annotations

import numpy as np

from ....ir.op import Op
from ...expr import Call, Expr, Tuple, TupleWrapper, const
from ...op.nn.nn import get_pad_tuple2d
from . import _binary, _fixed_point, _nn, _quantize  # noqa: F401 (registers the ops)
from ._quantize import SQNN_DTYPE_TO_CODE

__all__ = ["quantize", "dequantize", "requantize", "simulated_quantize", "simulated_dequantize", "conv2d",
           "conv2d_transpose", "dense", "batch_matmul", "add", "subtract", "mul", "concatenate", "leaky_relu",
           "sigmoid", "tanh", "hardswish", "avg_pool2d"]


def _call(name, args, **attrs):
    op = Op.get(name)
    return Call(op, list(args), op.make_attrs(**attrs) if op.attrs_type is not None else None)


def _scale(v):
    return v if isinstance(v, Expr) else const(np.asarray(v, dtype="float32"))


def _zp(v):
    return v if isinstance(v, Expr) else const(np.asarray(v, dtype="int32"))


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def quantize(data, output_scale, output_zero_point, axis=-1, out_dtype="int8"):
    """``clip(round(data / output_scale) + output_zero_point)`` as ``out_dtype``."""
    return _call("qnn.quantize", [data, _scale(output_scale), _zp(output_zero_point)], axis=axis,
                 out_dtype=out_dtype)


def dequantize(data, input_scale, input_zero_point, axis=-1, out_dtype="float32"):
    """``(data - input_zero_point) * input_scale`` in float32."""
    return _call("qnn.dequantize", [data, _scale(input_scale), _zp(input_zero_point)], axis=axis,
                 out_dtype=out_dtype)


def requantize(data, input_scale, input_zero_point, output_scale, output_zero_point, axis=-1, rounding="None",
               compute_dtype="None", out_dtype="int8"):
    """Re-express a quantized tensor with new scale / zero point (fixed-point arithmetic, ``rounding``
    UPWARD or TONEAREST; "None" takes the PassContext's ``relay.qnn.default_rounding``, UPWARD by default)."""
    return _call("qnn.requantize", [data, _scale(input_scale), _zp(input_zero_point), _scale(output_scale),
                                    _zp(output_zero_point)], axis=axis, rounding=rounding,
                 compute_dtype=compute_dtype, out_dtype=out_dtype)


def simulated_quantize(data, output_scale, output_zero_point, axis=-1, out_dtype="int8"):
    """quantize, kept in float32 (out_dtype "disable" passes data through)."""
    code = out_dtype if isinstance(out_dtype, Expr) else const(SQNN_DTYPE_TO_CODE[str(out_dtype)], "int32")
    return _call("qnn.simulated_quantize", [data, code, _scale(output_scale), _zp(output_zero_point)], axis=axis)


def simulated_dequantize(data, input_scale, input_zero_point, axis=-1, in_dtype="int8"):
    """dequantize of float32 data holding quantized values."""
    code = in_dtype if isinstance(in_dtype, Expr) else const(SQNN_DTYPE_TO_CODE[str(in_dtype)], "int32")
    return _call("qnn.simulated_dequantize", [data, code, _scale(input_scale), _zp(input_zero_point)], axis=axis)


def conv2d(data, kernel, input_zero_point, kernel_zero_point, input_scale, kernel_scale, kernel_size, channels,
           strides=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, data_layout="NCHW", kernel_layout="OIHW",
           out_layout="", out_dtype="int32"):
    """Quantized conv2d: int32 output with scale ``input_scale * kernel_scale`` and zero point 0."""
    return _call("qnn.conv2d", [data, kernel, _zp(input_zero_point), _zp(kernel_zero_point), _scale(input_scale),
                                _scale(kernel_scale)],
                 strides=_pair(strides), padding=get_pad_tuple2d(padding), dilation=_pair(dilation), groups=groups,
                 channels=channels, kernel_size=None if kernel_size is None else _pair(kernel_size),
                 data_layout=data_layout, kernel_layout=kernel_layout, out_layout=out_layout, out_dtype=out_dtype)


def conv2d_transpose(data, weight, input_zero_point, kernel_zero_point, input_scale, kernel_scale, strides=(1, 1),
                     padding=(0, 0), dilation=(1, 1), groups=1, channels=None, kernel_size=None,
                     data_layout="NCHW", kernel_layout="IOHW", out_layout="", output_padding=(0, 0),
                     out_dtype="int32"):
    """Quantized conv2d_transpose (int32 output)."""
    return _call("qnn.conv2d_transpose", [data, weight, _zp(input_zero_point), _zp(kernel_zero_point),
                                          _scale(input_scale), _scale(kernel_scale)],
                 strides=_pair(strides), padding=get_pad_tuple2d(padding), dilation=_pair(dilation), groups=groups,
                 channels=channels, kernel_size=None if kernel_size is None else _pair(kernel_size),
                 data_layout=data_layout, kernel_layout=kernel_layout, out_layout=out_layout,
                 output_padding=_pair(output_padding), out_dtype=out_dtype)


def dense(data, weight, input_zero_point, kernel_zero_point, input_scale, kernel_scale, units, out_dtype="int32"):
    """Quantized dense (``data @ weight.T``, int32 output)."""
    return _call("qnn.dense", [data, weight, _zp(input_zero_point), _zp(kernel_zero_point), _scale(input_scale),
                               _scale(kernel_scale)], units=units, out_dtype=out_dtype)


def batch_matmul(x, y, x_zero_point, y_zero_point, x_scale, y_scale, out_dtype="int32"):
    """Quantized batch_matmul (``x @ y^T`` per batch, int32 output)."""
    return _call("qnn.batch_matmul", [x, y, _zp(x_zero_point), _zp(y_zero_point), _scale(x_scale), _scale(y_scale)],
                 out_dtype=out_dtype, transpose_a=False, transpose_b=True)


def _binary(name, lhs, rhs, lhs_scale, lhs_zero_point, rhs_scale, rhs_zero_point, output_scale,
            output_zero_point, lhs_axis, rhs_axis):
    return _call(name, [lhs, rhs, _scale(lhs_scale), _zp(lhs_zero_point), _scale(rhs_scale), _zp(rhs_zero_point),
                        _scale(output_scale), _zp(output_zero_point)], lhs_axis=lhs_axis, rhs_axis=rhs_axis)


def add(lhs, rhs, lhs_scale, lhs_zero_point, rhs_scale, rhs_zero_point, output_scale, output_zero_point,
        lhs_axis=-1, rhs_axis=-1):
    """Quantized addition with broadcasting."""
    return _binary("qnn.add", lhs, rhs, lhs_scale, lhs_zero_point, rhs_scale, rhs_zero_point, output_scale,
                   output_zero_point, lhs_axis, rhs_axis)


def subtract(lhs, rhs, lhs_scale, lhs_zero_point, rhs_scale, rhs_zero_point, output_scale, output_zero_point,
             lhs_axis=-1, rhs_axis=-1):
    """Quantized subtraction with broadcasting."""
    return _binary("qnn.subtract", lhs, rhs, lhs_scale, lhs_zero_point, rhs_scale, rhs_zero_point, output_scale,
                   output_zero_point, lhs_axis, rhs_axis)


def mul(lhs, rhs, lhs_scale, lhs_zero_point, rhs_scale, rhs_zero_point, output_scale, output_zero_point,
        lhs_axis=-1, rhs_axis=-1):
    """Quantized multiplication with broadcasting."""
    return _binary("qnn.mul", lhs, rhs, lhs_scale, lhs_zero_point, rhs_scale, rhs_zero_point, output_scale,
                   output_zero_point, lhs_axis, rhs_axis)


def _tuple(values, conv):
    if isinstance(values, TupleWrapper):
        return values.astuple()
    if isinstance(values, Expr):
        return values
    return Tuple([conv(v) for v in values])


def concatenate(data, input_scales, input_zero_points, output_scale, output_zero_point, axis):
    """Concatenate quantized tensors, requantizing each to the output's scale and zero point."""
    data = list(data) if isinstance(data, (list, tuple)) else data
    if isinstance(data, list) and not data:
        raise ValueError("qnn.concatenate requires a non-empty list of tensors")
    return _call("qnn.concatenate", [_tuple(data, lambda v: v), _tuple(input_scales, _scale),
                                     _tuple(input_zero_points, _zp), _scale(output_scale), _zp(output_zero_point)],
                 axis=int(axis))


def leaky_relu(x, alpha, input_scale, input_zero_point, output_scale, output_zero_point):
    """Quantized leaky ReLU."""
    return _call("qnn.leaky_relu", [x, _scale(input_scale), _zp(input_zero_point), _scale(output_scale),
                                    _zp(output_zero_point)], alpha=float(alpha))


def _unary(name, x, scale, zero_point, output_scale, output_zero_point):
    return _call(name, [x, _scale(scale), _zp(zero_point), _scale(output_scale), _zp(output_zero_point)])


def sigmoid(x, scale, zero_point, output_scale, output_zero_point):
    """Quantized sigmoid (dequantize, sigmoid, quantize)."""
    return _unary("qnn.sigmoid", x, scale, zero_point, output_scale, output_zero_point)


def tanh(x, scale, zero_point, output_scale, output_zero_point):
    """Quantized tanh (dequantize, tanh, quantize)."""
    return _unary("qnn.tanh", x, scale, zero_point, output_scale, output_zero_point)


def hardswish(x, scale, zero_point, output_scale, output_zero_point):
    """Quantized hardswish (dequantize, x * relu6(x + 3) / 6, quantize)."""
    return _unary("qnn.hardswish", x, scale, zero_point, output_scale, output_zero_point)


def avg_pool2d(data, input_scale, input_zero_point, output_scale, output_zero_point, pool_size, strides, padding,
               dilation, ceil_mode=False, count_include_pad=True, layout="NCHW", out_layout=""):
    """Quantized 2-D average pooling."""
    return _call("qnn.avg_pool2d", [data, _scale(input_scale), _zp(input_zero_point), _scale(output_scale),
                                    _zp(output_zero_point)],
                 pool_size=_pair(pool_size), strides=_pair(strides), padding=get_pad_tuple2d(padding),
                 dilation=_pair(dilation), ceil_mode=ceil_mode, count_include_pad=count_include_pad, layout=layout,
                 out_layout=out_layout)
