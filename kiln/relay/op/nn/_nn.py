"""Registrations of the dense / normalization / activation nn ops (type relation, pattern, reference)."""
from __future__ import annotations

import math

import numpy as np

from ....error import TypeInferenceError
from ....ir.op import OpPattern
from ....ir.type import TensorType, TupleType
from .. import op_attrs as A
from .._define import define_op
from ..type_relations import dims_compatible, merge_dim, normalize_axis, shape_text, tensor_arg

_P = OpPattern


# -- dense / matmul / batch_matmul ---------------------------------------------------------------------------
def dense_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    weight = tensor_arg(arg_types, 1, "weight")
    if len(data.shape) < 1 or len(weight.shape) != 2:
        raise TypeInferenceError(f"dense: expects data [..., K] and weight [units, K], got {shape_text(data.shape)} "
                                 f"and {shape_text(weight.shape)}")
    # an unknown K on one side is checked at run time (the kernel's K is the static one: docs/vm.md)
    if not dims_compatible(data.shape[-1], weight.shape[1]):
        raise TypeInferenceError(f"dense: data {shape_text(data.shape)} has K={data.shape[-1]} but weight "
                                 f"{shape_text(weight.shape)} has K={weight.shape[1]}")
    if attrs.units is not None and attrs.units != weight.shape[0]:
        raise TypeInferenceError(f"dense: units={attrs.units} but weight {shape_text(weight.shape)} has "
                                 f"{weight.shape[0]} rows")
    return TensorType(data.shape[:-1] + (weight.shape[0],), attrs.out_dtype or data.dtype)


def _acc(x, out_type):
    return x.astype(out_type.dtype) if x.dtype != np.dtype(out_type.dtype) else x


define_op("nn.dense", num_inputs=2, args=("data", "weight"), attrs=A.DenseAttrs, rel=dense_rel, rel_name="Dense",
          pattern=_P.OUT_ELEMWISE_FUSABLE,
          reference=lambda a, i, t: np.matmul(_acc(i[0], t), _acc(i[1], t).T), level=1)


def matmul_rel(arg_types, attrs):
    a = tensor_arg(arg_types, 0, "tensor_a")
    b = tensor_arg(arg_types, 1, "tensor_b")
    if len(b.shape) != 2 or len(a.shape) < 1 or (attrs.transpose_a and len(a.shape) != 2):
        raise TypeInferenceError(f"matmul: expects 2-D operands, got {shape_text(a.shape)} and {shape_text(b.shape)}")
    k_a = a.shape[-2] if attrs.transpose_a else a.shape[-1]
    m = (a.shape[-1],) if attrs.transpose_a else a.shape[:-1]
    k_b, n = (b.shape[1], b.shape[0]) if attrs.transpose_b else (b.shape[0], b.shape[1])
    if k_a != k_b:
        raise TypeInferenceError(f"matmul: reduction dimensions differ: tensor_a {shape_text(a.shape)} "
                                 f"(transpose_a={attrs.transpose_a}) vs tensor_b {shape_text(b.shape)} "
                                 f"(transpose_b={attrs.transpose_b})")
    if attrs.units is not None and attrs.units != n:
        raise TypeInferenceError(f"matmul: units={attrs.units} but tensor_b gives {n}")
    return TensorType(tuple(m) + (n,), attrs.out_dtype or a.dtype)


def _matmul_ref(attrs, inputs, out_type):
    a, b = _acc(inputs[0], out_type), _acc(inputs[1], out_type)
    if attrs.transpose_a:
        a = a.T
    if attrs.transpose_b:
        b = b.T
    return np.matmul(a, b)


define_op("nn.matmul", num_inputs=2, args=("tensor_a", "tensor_b"), attrs=A.MatmulAttrs, rel=matmul_rel,
          rel_name="Matmul", pattern=_P.OUT_ELEMWISE_FUSABLE, reference=_matmul_ref, level=1)


def _is_one(d) -> bool:
    return isinstance(d, int) and d == 1


def batch_matmul_rel(arg_types, attrs):
    x = tensor_arg(arg_types, 0, "tensor_a")
    y = tensor_arg(arg_types, 1, "tensor_b")
    if len(x.shape) != 3 or len(y.shape) != 3:
        raise TypeInferenceError(f"batch_matmul: expects 3-D operands, got {shape_text(x.shape)} and "
                                 f"{shape_text(y.shape)}")
    bx, by = x.shape[0], y.shape[0]
    if not (dims_compatible(bx, by) or bx == 1 or by == 1):
        raise TypeInferenceError(f"batch_matmul: batch sizes {bx} and {by} differ ({shape_text(x.shape)} vs "
                                 f"{shape_text(y.shape)})")
    m, kx = (x.shape[2], x.shape[1]) if attrs.transpose_a else (x.shape[1], x.shape[2])
    n, ky = (y.shape[1], y.shape[2]) if attrs.transpose_b else (y.shape[2], y.shape[1])
    if not dims_compatible(kx, ky):
        raise TypeInferenceError(f"batch_matmul: reduction dimensions differ: {shape_text(x.shape)} "
                                 f"(transpose_a={attrs.transpose_a}) vs {shape_text(y.shape)} "
                                 f"(transpose_b={attrs.transpose_b})")
    # a batch of 1 broadcasts; otherwise the known one of two compatible batch dims (an Any matches anything)
    batch = by if _is_one(bx) else bx if _is_one(by) else merge_dim(bx, by)
    return TensorType((batch, m, n), attrs.out_dtype or x.dtype)


def _batch_matmul_ref(attrs, inputs, out_type):
    x, y = _acc(inputs[0], out_type), _acc(inputs[1], out_type)
    if attrs.transpose_a:
        x = x.transpose(0, 2, 1)
    if attrs.transpose_b:
        y = y.transpose(0, 2, 1)
    return np.matmul(x, y)


define_op("nn.batch_matmul", num_inputs=2, args=("tensor_a", "tensor_b"), attrs=A.BatchMatmulAttrs,
          rel=batch_matmul_rel, rel_name="BatchMatmul", pattern=_P.OUT_ELEMWISE_FUSABLE,
          reference=_batch_matmul_ref, level=10)


# -- bias_add / normalizations -----------------------------------------------------------------------------------
def _channel_vector(arg_types, i, name, channels, data, axis):
    t = tensor_arg(arg_types, i, name)
    if t.shape != (channels,):
        raise TypeInferenceError(f"{name} must have shape ({channels},) to match axis {axis} of the data "
                                 f"{shape_text(data.shape)}, got {shape_text(t.shape)}")
    if t.dtype != data.dtype:
        raise TypeInferenceError(f"{name} has dtype {t.dtype} but the data has {data.dtype}")
    return t


def bias_add_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    axis = normalize_axis(attrs.axis, len(data.shape), "bias_add axis")
    _channel_vector(arg_types, 1, "bias", data.shape[axis], data, axis)
    return TensorType(data.shape, data.dtype)


def _along(vec, ndim, axis):
    shape = [1] * ndim
    shape[axis] = -1
    return vec.reshape(shape)


define_op("nn.bias_add", num_inputs=2, args=("data", "bias"), attrs=A.BiasAddAttrs, rel=bias_add_rel,
          rel_name="BiasAdd", pattern=_P.BROADCAST,
          reference=lambda a, i, t: i[0] + _along(i[1], i[0].ndim, a.axis % i[0].ndim), level=1)


def batch_norm_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    axis = normalize_axis(attrs.axis, len(data.shape), "batch_norm axis")
    c = data.shape[axis]
    for k, name in enumerate(("gamma", "beta", "moving_mean", "moving_var"), start=1):
        _channel_vector(arg_types, k, name, c, data, axis)
    vec = TensorType((c,), data.dtype)
    return TupleType([TensorType(data.shape, data.dtype), vec, vec])


def _batch_norm_ref(attrs, inputs, out_type):
    x, gamma, beta, mean, var = inputs
    axis = attrs.axis % x.ndim
    scale = 1.0 / np.sqrt(var.astype(np.float64) + attrs.epsilon)
    if attrs.scale:
        scale = scale * gamma
    out = (x - _along(mean, x.ndim, axis)) * _along(scale, x.ndim, axis)
    if attrs.center:
        out = out + _along(beta, x.ndim, axis)
    return out, mean, var


define_op("nn.batch_norm", num_inputs=5, args=("data", "gamma", "beta", "moving_mean", "moving_var"),
          attrs=A.BatchNormAttrs, rel=batch_norm_rel, rel_name="BatchNorm", pattern=_P.OUT_ELEMWISE_FUSABLE,
          reference=_batch_norm_ref, level=1)


def axis_norm_rel(what: str):
    """The type relation of a normalization over ``attrs.axis`` with a gamma and a beta per entry of that axis
    (layer_norm, instance_norm): the data's type; ``what`` names the op in errors."""
    def rel(arg_types, attrs):
        data = tensor_arg(arg_types, 0, "data")
        axis = normalize_axis(attrs.axis, len(data.shape), f"{what} axis")
        _channel_vector(arg_types, 1, "gamma", data.shape[axis], data, axis)
        _channel_vector(arg_types, 2, "beta", data.shape[axis], data, axis)
        return TensorType(data.shape, data.dtype)
    return rel


layer_norm_rel = axis_norm_rel("layer_norm")


def _layer_norm_ref(attrs, inputs, out_type):
    x, gamma, beta = inputs
    axis = attrs.axis % x.ndim
    xf = x.astype(np.float64)
    mean = xf.mean(axis=axis, keepdims=True)
    var = xf.var(axis=axis, keepdims=True)
    out = (xf - mean) / np.sqrt(var + attrs.epsilon)
    if attrs.scale:
        out = out * _along(gamma, x.ndim, axis)
    if attrs.center:
        out = out + _along(beta, x.ndim, axis)
    return out


define_op("nn.layer_norm", num_inputs=3, args=("data", "gamma", "beta"), attrs=A.LayerNormAttrs,
          rel=layer_norm_rel, rel_name="LayerNorm", pattern=_P.OPAQUE, reference=_layer_norm_ref, level=1)


def group_norm_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    axis = normalize_axis(attrs.axis, len(data.shape), "group_norm axis")
    c = data.shape[axis]
    if attrs.num_groups <= 0 or c % attrs.num_groups:
        raise TypeInferenceError(f"group_norm: {c} channels (axis {axis} of {shape_text(data.shape)}) are not "
                                 f"divisible by num_groups={attrs.num_groups}")
    _channel_vector(arg_types, 1, "gamma", c, data, axis)
    _channel_vector(arg_types, 2, "beta", c, data, axis)
    return TensorType(data.shape, data.dtype)


def _group_norm_ref(attrs, inputs, out_type):
    x, gamma, beta = inputs
    axis = attrs.axis % x.ndim
    g = attrs.num_groups
    xf = np.moveaxis(x.astype(np.float64), axis, 1)
    shape = xf.shape
    grouped = xf.reshape((shape[0], g, shape[1] // g) + shape[2:])
    red = tuple(range(2, grouped.ndim))
    mean = grouped.mean(axis=red, keepdims=True)
    var = grouped.var(axis=red, keepdims=True)
    out = ((grouped - mean) / np.sqrt(var + attrs.epsilon)).reshape(shape)
    vec_shape = (1, shape[1]) + (1,) * (len(shape) - 2)
    if attrs.scale:
        out = out * gamma.reshape(vec_shape)
    if attrs.center:
        out = out + beta.reshape(vec_shape)
    return np.moveaxis(out, 1, axis)


define_op("nn.group_norm", num_inputs=3, args=("data", "gamma", "beta"), attrs=A.GroupNormAttrs,
          rel=group_norm_rel, rel_name="GroupNorm", pattern=_P.OPAQUE, reference=_group_norm_ref, level=1)


# -- softmax / activations (softmax ops are kOutEWiseFusable as in TVM v0.13: an elementwise consumer fuses in) -----------
def softmax_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    normalize_axis(attrs.axis, len(data.shape), "softmax axis")
    return TensorType(data.shape, data.dtype)


def _softmax_ref(attrs, inputs, out_type):
    x = inputs[0].astype(np.float64)
    e = np.exp(x - x.max(axis=attrs.axis, keepdims=True))
    return e / e.sum(axis=attrs.axis, keepdims=True)


def _log_softmax_ref(attrs, inputs, out_type):
    x = inputs[0].astype(np.float64)
    shifted = x - x.max(axis=attrs.axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=attrs.axis, keepdims=True))


define_op("nn.softmax", num_inputs=1, attrs=A.SoftmaxAttrs, rel=softmax_rel, rel_name="Softmax",
          pattern=_P.OUT_ELEMWISE_FUSABLE, reference=_softmax_ref, level=1)
define_op("nn.fast_softmax", num_inputs=1, attrs=A.SoftmaxAttrs, rel=softmax_rel, rel_name="Softmax",
          pattern=_P.OUT_ELEMWISE_FUSABLE, reference=_softmax_ref, level=1)
define_op("nn.log_softmax", num_inputs=1, attrs=A.SoftmaxAttrs, rel=softmax_rel, rel_name="Softmax",
          pattern=_P.OUT_ELEMWISE_FUSABLE, reference=_log_softmax_ref, level=1)
define_op("nn.relu", num_inputs=1, rel="Identity", pattern=_P.ELEMWISE,
          reference=lambda a, i, t: np.maximum(i[0], np.zeros((), i[0].dtype)), level=1)
define_op("nn.leaky_relu", num_inputs=1, attrs=A.LeakyReluAttrs, rel="Identity", pattern=_P.ELEMWISE,
          reference=lambda a, i, t: np.where(i[0] > 0, i[0], i[0] * a.alpha), level=3)


def prelu_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    axis = normalize_axis(attrs.axis, len(data.shape), "prelu axis")
    _channel_vector(arg_types, 1, "alpha", data.shape[axis], data, axis)
    return TensorType(data.shape, data.dtype)


define_op("nn.prelu", num_inputs=2, args=("data", "alpha"), attrs=A.PReluAttrs, rel=prelu_rel, rel_name="PRelu",
          pattern=_P.BROADCAST,
          reference=lambda a, i, t: np.where(i[0] > 0, i[0], i[0] * _along(i[1], i[0].ndim, a.axis % i[0].ndim)),
          level=3)


# -- dropout / batch_flatten --------------------------------------------------------------------------------------------
def dropout_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    if not 0.0 <= attrs.rate < 1.0:
        raise TypeInferenceError(f"dropout: rate must be in [0, 1), got {attrs.rate}")
    t = TensorType(data.shape, data.dtype)
    return TupleType([t, t])


# at inference dropout is the identity; the mask is all ones
define_op("nn.dropout", num_inputs=1, attrs=A.DropoutAttrs, rel=dropout_rel, rel_name="Dropout",
          pattern=_P.OPAQUE, reference=lambda a, i, t: (i[0].copy(), np.ones_like(i[0])), level=1)


def batch_flatten_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    if len(data.shape) < 1:
        raise TypeInferenceError("batch_flatten: the data must have at least one dimension")
    return TensorType((data.shape[0], math.prod(data.shape[1:])), data.dtype)


define_op("nn.batch_flatten", num_inputs=1, rel=batch_flatten_rel, rel_name="BatchFlatten", pattern=_P.INJECTIVE,
          reference=lambda a, i, t: i[0].reshape(t.shape), level=2)
