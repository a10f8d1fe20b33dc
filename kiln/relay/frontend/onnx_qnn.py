"""ONNX converters for quantized models (TVM's QNN mapping of the ONNX frontend): QuantizeLinear,
DequantizeLinear, DynamicQuantizeLinear, QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger, and ONNX
Runtime's com.microsoft contrib ops QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu,
QLinearGlobalAveragePool, QLinearAveragePool, QLinearSoftmax, QLinearConcat, QGemm.

Quantized values stay integers: each op becomes a ``relay.qnn`` op, which ``relay.build`` lowers to integer
Relay ops. Requantization uses kiln's default rounding (UPWARD, TVM's), where ONNX Runtime rounds half to
even: results can differ by one quantization step at exact ties.
"""
from __future__ import annotations

import numpy as np

from .. import op as _op
from ..op import nn as _nn
from ..qnn import op as _qnn
from .onnx_ops_nn import _spatial_attrs, auto_pads
from .onnx_common import const, onnx_op, onnx_dtype

#: ONNX Runtime's contrib domain (its quantizer's QOperator format emits QLinearAdd, QGemm, ... there)
MS_DOMAIN = "com.microsoft"


# -- quantization parameters ----------------------------------------------------------------------------------
def _scale(ctx, s):
    v = ctx.value(s)
    if v is not None:
        return const(np.asarray(v, dtype="float32"))
    return _op.cast(s, "float32") if ctx.dtype(s) != "float32" else s


def _zp(ctx, zp):
    if zp is None:
        return const(np.int32(0))
    v = ctx.value(zp)
    if v is not None:
        return const(np.asarray(v).astype("int32"))
    return _op.cast(zp, "int32")


def _is_per_tensor(ctx, t) -> bool:
    return t is None or int(np.prod(ctx.shape(t), dtype=np.int64)) == 1


def _scalar(ctx, t, what):
    """A per-tensor parameter as a scalar expression (shape (1,) reshaped to ())."""
    if t is None:
        return None
    if not _is_per_tensor(ctx, t):
        raise ctx.unsupported(f"a per-channel {what}")
    return _op.reshape(t, []) if ctx.shape(t) != () else t


def _axis(ctx, attr, x, default=1):
    return int(attr.get("axis", default)) % max(ctx.ndim(x), 1)


def _qdtype(ctx, zp, attr, default="uint8"):
    if zp is not None:
        return ctx.dtype(zp)
    if int(attr.get("output_dtype", 0) or 0):
        return onnx_dtype(attr["output_dtype"], ctx.where)
    return default


@onnx_op("QuantizeLinear", since=10)
def _quantize_linear(inputs, attr, ctx):
    x, scale = inputs[0], inputs[1]
    zp = inputs[2] if len(inputs) > 2 else None
    if int(attr.get("block_size", 0)):
        raise ctx.unsupported("blocked quantization (block_size)")
    out_dtype = _qdtype(ctx, zp, attr)
    if out_dtype not in ("uint8", "int8", "uint16", "int16"):
        raise ctx.unsupported(f"quantization to {out_dtype}")
    if ctx.dtype(x) != "float32":
        x = _op.cast(x, "float32")
    return _qnn.quantize(x, _scale(ctx, scale), _zp(ctx, zp), axis=_axis(ctx, attr, x), out_dtype=out_dtype)


@onnx_op("DequantizeLinear", since=10)
def _dequantize_linear(inputs, attr, ctx):
    x, scale = inputs[0], inputs[1]
    zp = inputs[2] if len(inputs) > 2 else None
    if int(attr.get("block_size", 0)):
        raise ctx.unsupported("blocked dequantization (block_size)")
    if ctx.dtype(x) not in ("uint8", "int8", "uint16", "int16", "int32"):
        raise ctx.unsupported(f"dequantization of {ctx.dtype(x)}")
    out = _qnn.dequantize(x, _scale(ctx, scale), _zp(ctx, zp), axis=_axis(ctx, attr, x))
    out_dt = ctx.dtype(scale)
    return _op.cast(out, out_dt) if out_dt != "float32" else out


@onnx_op("DynamicQuantizeLinear", since=11)
def _dynamic_quantize_linear(inputs, attr, ctx):
    """uint8 quantization with scale and zero point from the tensor's range (which always includes 0)."""
    x = inputs[0]
    zero = const(np.float32(0))
    lo = _op.minimum(zero, _op.min(x))
    hi = _op.maximum(zero, _op.max(x))
    scale = _op.divide(_op.subtract(hi, lo), const(np.float32(255)))
    zp_f = _op.clip(_op.round(_op.subtract(zero, _op.divide(lo, scale))), 0.0, 255.0)
    zp = _op.cast(zp_f, "int32")
    y = _qnn.quantize(x, scale, zp, out_dtype="uint8")
    return [y, scale, _op.cast(zp_f, "uint8")]


# -- convolution and matrix products ---------------------------------------------------------------------------
def _conv_attrs(ctx, attr, x, w):
    xshape, wshape = ctx.shape(x), ctx.shape(w)
    if len(xshape) != 4:
        raise ctx.unsupported(f"a quantized convolution with {len(xshape) - 2} spatial dimensions (2-D only)")
    kernel = list(attr.get("kernel_shape", wshape[2:]))
    strides, dilations = _spatial_attrs(ctx, attr, 2, kernel)
    begins, ends = auto_pads(ctx, attr, xshape[2:], kernel, strides, dilations)
    return dict(kernel_size=kernel, channels=wshape[0], strides=strides, dilation=dilations,
                padding=(begins[0], begins[1], ends[0], ends[1]), groups=int(attr.get("group", 1)))


@onnx_op("QLinearConv", since=10)
def _q_linear_conv(inputs, attr, ctx):
    x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp = inputs[:8]
    b = inputs[8] if len(inputs) > 8 else None
    x_s, x_zp = _scalar(ctx, x_s, "input scale"), _scalar(ctx, x_zp, "input zero point")
    x_scale, w_scale = _scale(ctx, x_s), _scale(ctx, w_s)
    y = _qnn.conv2d(x, w, _zp(ctx, x_zp), _zp(ctx, w_zp), x_scale, w_scale, **_conv_attrs(ctx, attr, x, w))
    if b is not None:
        y = _nn.bias_add(y, _op.cast(b, "int32") if ctx.dtype(b) != "int32" else b, axis=1)
    out_dtype = ctx.dtype(x) if y_zp is None else ctx.dtype(y_zp)
    return _qnn.requantize(y, _op.multiply(x_scale, w_scale), const(np.int32(0)),
                           _scale(ctx, _scalar(ctx, y_s, "output scale")),
                           _zp(ctx, _scalar(ctx, y_zp, "output zero point")), axis=1, out_dtype=out_dtype)


@onnx_op("ConvInteger", since=10)
def _conv_integer(inputs, attr, ctx):
    x, w = inputs[0], inputs[1]
    x_zp = inputs[2] if len(inputs) > 2 else None
    w_zp = inputs[3] if len(inputs) > 3 else None
    one = const(np.float32(1))
    return _qnn.conv2d(x, w, _zp(ctx, _scalar(ctx, x_zp, "input zero point")), _zp(ctx, w_zp), one, one,
                       **_conv_attrs(ctx, attr, x, w))


def _int_matmul(ctx, a, b, a_zp, b_zp, a_scale, b_scale):
    """``(a - a_zp) @ (b - b_zp)`` in int32 with numpy matmul shapes; returns (result, per-column axis or None)."""
    ashape, bshape = ctx.shape(a), ctx.shape(b)
    if len(bshape) == 2 and len(ashape) >= 2:
        k, n = bshape
        a2 = _op.reshape(a, [-1, k]) if len(ashape) != 2 else a
        y = _qnn.dense(a2, _op.transpose(b, [1, 0]), a_zp, b_zp, a_scale, b_scale, units=n)
        return (_op.reshape(y, list(ashape[:-1]) + [n]) if len(ashape) != 2 else y), len(ashape) - 1
    if len(ashape) == 3 and len(bshape) == 3:
        y = _qnn.batch_matmul(a, _op.transpose(b, [0, 2, 1]), a_zp, b_zp, a_scale, b_scale)
        return y, None
    raise ctx.unsupported(f"a quantized MatMul of shapes {ashape} x {bshape} (kiln has [..., K] x [K, N] and "
                          "batched 3-D x 3-D)")


@onnx_op("MatMulInteger", since=10)
def _mat_mul_integer(inputs, attr, ctx):
    a, b = inputs[0], inputs[1]
    a_zp = inputs[2] if len(inputs) > 2 else None
    b_zp = inputs[3] if len(inputs) > 3 else None
    one = const(np.float32(1))
    b_zp = _zp(ctx, b_zp if len(ctx.shape(b)) == 2 or b_zp is None else _scalar(ctx, b_zp, "B zero point"))
    y, _ = _int_matmul(ctx, a, b, _zp(ctx, _scalar(ctx, a_zp, "per-row A zero point")), b_zp, one, one)
    return y


@onnx_op("QLinearMatMul", since=10)
def _q_linear_mat_mul(inputs, attr, ctx):
    a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = inputs[:8]
    a_scale = _scale(ctx, _scalar(ctx, a_s, "A scale"))
    b_scale = _scale(ctx, b_s if len(ctx.shape(b)) == 2 else _scalar(ctx, b_s, "B scale"))
    b_zp_q = _zp(ctx, b_zp if len(ctx.shape(b)) == 2 else _scalar(ctx, b_zp, "B zero point"))
    y, axis = _int_matmul(ctx, a, b, _zp(ctx, _scalar(ctx, a_zp, "A zero point")), b_zp_q, a_scale, b_scale)
    per_col = not _is_per_tensor(ctx, b_s)
    return _qnn.requantize(y, _op.multiply(a_scale, b_scale), const(np.int32(0)),
                           _scale(ctx, _scalar(ctx, y_s, "output scale")),
                           _zp(ctx, _scalar(ctx, y_zp, "output zero point")),
                           axis=axis if per_col and axis is not None else -1, out_dtype=ctx.dtype(y_zp))


# -- ONNX Runtime contrib ops (com.microsoft) ---------------------------------------------------------------
def _qparams(ctx, inputs, start, count):
    out = []
    for k in range(count):
        t = _scalar(ctx, inputs[start + k], "quantization parameter")
        out.append(_scale(ctx, t) if k % 2 == 0 else _zp(ctx, t))
    return out


def _binary(fn):
    def convert(inputs, attr, ctx):
        a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = (list(inputs) + [None] * 8)[:8]
        a_s, a_zp = _qparams(ctx, [a_s, a_zp], 0, 2)
        b_s, b_zp = _qparams(ctx, [b_s, b_zp], 0, 2)
        y_s, y_zp = _qparams(ctx, [y_s, y_zp], 0, 2)
        return fn(a, b, a_s, a_zp, b_s, b_zp, y_s, y_zp)
    return convert


onnx_op("QLinearAdd", since=1, domain=MS_DOMAIN)(_binary(_qnn.add))
onnx_op("QLinearMul", since=1, domain=MS_DOMAIN)(_binary(_qnn.mul))


@onnx_op("QLinearSigmoid", since=1, domain=MS_DOMAIN)
def _q_linear_sigmoid(inputs, attr, ctx):
    x = inputs[0]
    return _qnn.sigmoid(x, *_qparams(ctx, (list(inputs) + [None] * 5)[:5], 1, 4))


@onnx_op("QLinearLeakyRelu", since=1, domain=MS_DOMAIN)
def _q_linear_leaky_relu(inputs, attr, ctx):
    x = inputs[0]
    return _qnn.leaky_relu(x, float(attr.get("alpha", 0.01)), *_qparams(ctx, (list(inputs) + [None] * 5)[:5], 1, 4))


@onnx_op("QLinearGlobalAveragePool", since=1, domain=MS_DOMAIN)
def _q_linear_global_average_pool(inputs, attr, ctx):
    x = inputs[0]
    shape = ctx.shape(x)
    if len(shape) != 4:
        raise ctx.unsupported(f"QLinearGlobalAveragePool on a rank-{len(shape)} tensor (4-D only)")
    channels_last = int(attr.get("channels_last", 0))
    layout = "NHWC" if channels_last else "NCHW"
    hw = shape[1:3] if channels_last else shape[2:]
    return _qnn.avg_pool2d(x, *_qparams(ctx, (list(inputs) + [None] * 5)[:5], 1, 4), pool_size=hw,
                           strides=(1, 1), padding=(0, 0), dilation=(1, 1), layout=layout)


@onnx_op("QLinearConcat", since=1, domain=MS_DOMAIN)
def _q_linear_concat(inputs, attr, ctx):
    y_s, y_zp = _qparams(ctx, inputs, 0, 2)
    rest = inputs[2:]
    if len(rest) % 3:
        raise ctx.error(f"QLinearConcat takes (X, X_scale, X_zero_point) triples after Y's parameters, got "
                        f"{len(rest)} inputs")
    xs, scales, zps = [], [], []
    for k in range(0, len(rest), 3):
        xs.append(rest[k])
        s, z = _qparams(ctx, rest, k + 1, 2)
        scales.append(s)
        zps.append(z)
    axis = int(attr["axis"]) % ctx.ndim(xs[0])
    return _qnn.concatenate(xs, scales, zps, y_s, y_zp, axis=axis)


@onnx_op("QGemm", since=1, domain=MS_DOMAIN)
def _q_gemm(inputs, attr, ctx):
    """``alpha * A' B' + C`` on quantized A and B; C is int32 at scale ``alpha * a_scale * b_scale``; the output
    is requantized when y_scale is given, else dequantized to float32."""
    a, a_s, a_zp, b, b_s, b_zp = inputs[:6]
    c, y_s, y_zp = (list(inputs[6:]) + [None] * 3)[:3]
    if int(attr.get("transA", 0)):
        a = _op.transpose(a, [1, 0])
    b_nk = b if int(attr.get("transB", 0)) else _op.transpose(b, [1, 0])
    n = ctx.shape(b)[0] if int(attr.get("transB", 0)) else ctx.shape(b)[1]
    a_scale = _scale(ctx, _scalar(ctx, a_s, "A scale"))
    b_scale = _scale(ctx, b_s)
    acc = _qnn.dense(a, b_nk, _zp(ctx, _scalar(ctx, a_zp, "A zero point")), _zp(ctx, b_zp), a_scale, b_scale,
                     units=n)
    if c is not None:
        acc = _op.add(acc, _op.cast(c, "int32") if ctx.dtype(c) != "int32" else c)
    scale = _op.multiply(_op.multiply(a_scale, b_scale), const(np.float32(attr.get("alpha", 1.0))))
    axis = 1 if not _is_per_tensor(ctx, b_s) else -1
    if y_s is None:
        return _qnn.dequantize(acc, scale, const(np.int32(0)), axis=axis)
    return _qnn.requantize(acc, scale, const(np.int32(0)), _scale(ctx, _scalar(ctx, y_s, "output scale")),
                           _zp(ctx, _scalar(ctx, y_zp, "output zero point")), axis=axis,
                           out_dtype=ctx.dtype(y_zp) if y_zp is not None else "uint8")


@onnx_op("QLinearAveragePool", since=1, domain=MS_DOMAIN)
def _q_linear_average_pool(inputs, attr, ctx):
    x = inputs[0]
    shape = ctx.shape(x)
    if len(shape) != 4:
        raise ctx.unsupported(f"QLinearAveragePool on a rank-{len(shape)} tensor (4-D only)")
    channels_last = int(attr.get("channels_last", 0))
    spatial = shape[1:3] if channels_last else shape[2:]
    kernel = list(attr["kernel_shape"])
    strides = list(attr.get("strides", [1, 1]))
    begins, ends = auto_pads(ctx, attr, spatial, kernel, strides, [1, 1])
    return _qnn.avg_pool2d(x, *_qparams(ctx, (list(inputs) + [None] * 5)[:5], 1, 4), pool_size=kernel,
                           strides=strides, padding=(begins[0], begins[1], ends[0], ends[1]), dilation=(1, 1),
                           ceil_mode=bool(attr.get("ceil_mode", 0)),
                           count_include_pad=bool(attr.get("count_include_pad", 0)),
                           layout="NHWC" if channels_last else "NCHW")


@onnx_op("QLinearSoftmax", since=1, domain=MS_DOMAIN)
def _q_linear_softmax(inputs, attr, ctx):
    """dequantize, softmax on ``axis`` (opset >= 13 semantics: one axis), quantize."""
    x = inputs[0]
    if int(attr.get("opset", 13)) < 13:
        raise ctx.unsupported("QLinearSoftmax with opset < 13 (coerced-to-2-D) semantics")
    x_s, x_zp, y_s, y_zp = _qparams(ctx, (list(inputs) + [None] * 5)[:5], 1, 4)
    axis = int(attr.get("axis", -1)) % ctx.ndim(x)
    y = _nn.softmax(_qnn.dequantize(x, x_s, x_zp), axis=axis)
    return _qnn.quantize(y, y_s, y_zp, out_dtype=ctx.dtype(x))
