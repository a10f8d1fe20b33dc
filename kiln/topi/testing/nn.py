"""References for softmax, normalizations, dense and batched matmul."""
from __future__ import annotations

import numpy as np

from ...error import KilnError
from .common import acc_dtype


def softmax_python(a_np, axis=1):
    """Softmax along ``axis`` (TVM's default: 1), computed stably."""
    shifted = a_np - np.max(a_np, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return (e / np.sum(e, axis=axis, keepdims=True)).astype(a_np.dtype)


def log_softmax_python(a_np, axis=1):
    """Log-softmax along ``axis``."""
    shifted = a_np - np.max(a_np, axis=axis, keepdims=True)
    return (shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))).astype(a_np.dtype)


def layer_norm_python(data, gamma, beta, axis, epsilon=1e-5):
    """Layer normalization over ``axis`` (int or tuple); ``beta`` may be None."""
    axis = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    x = data.astype("float64")
    mean = x.mean(axis=axis, keepdims=True)
    var = x.var(axis=axis, keepdims=True)
    out = (x - mean) / np.sqrt(var + epsilon) * gamma
    if beta is not None:
        out = out + beta
    return out.astype(data.dtype)


def group_norm_python(data, gamma, beta, num_groups, channel_axis, axes, epsilon=1e-5):
    """Group normalization: channels split into ``num_groups``; statistics over each group and ``axes``."""
    shape = data.shape
    channel_axis = channel_axis % data.ndim
    channels = shape[channel_axis]
    if channels % num_groups:
        raise KilnError(f"group_norm: {channels} channels do not split into {num_groups} groups")
    grouped = list(shape)
    grouped[channel_axis:channel_axis + 1] = [num_groups, channels // num_groups]
    x = data.astype("float64").reshape(grouped)
    red = [channel_axis + 1] + [a % data.ndim + (1 if a % data.ndim > channel_axis else 0) for a in axes]
    mean = x.mean(axis=tuple(red), keepdims=True)
    var = x.var(axis=tuple(red), keepdims=True)
    out = ((x - mean) / np.sqrt(var + epsilon)).reshape(shape)
    bshape = [1] * data.ndim
    bshape[channel_axis] = channels
    out = out * np.reshape(gamma, bshape)
    if beta is not None:
        out = out + np.reshape(beta, bshape)
    return out.astype(data.dtype)


def instance_norm_python(data, gamma, beta, axis, epsilon=1e-5):
    """Instance normalization: per (batch, channel) statistics over ``axis``; gamma/beta on axis 1."""
    axis = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    x = data.astype("float64")
    mean = x.mean(axis=axis, keepdims=True)
    var = x.var(axis=axis, keepdims=True)
    bshape = [1] * data.ndim
    bshape[1] = data.shape[1]
    out = (x - mean) / np.sqrt(var + epsilon) * np.reshape(gamma, bshape)
    if beta is not None:
        out = out + np.reshape(beta, bshape)
    return out.astype(data.dtype)


def batch_norm(x, gamma, beta, moving_mean, moving_var, axis, epsilon, center, scale, training, momentum):
    """Batch normalization; returns ``[out, new_moving_mean, new_moving_var]`` as TVM's reference does."""
    shape = [1] * x.ndim
    axis = axis % x.ndim
    shape[axis] = x.shape[axis]
    xf = x.astype("float64")
    if training:
        red = tuple(i for i in range(x.ndim) if i != axis)
        mean, var = xf.mean(axis=red), xf.var(axis=red)
    else:
        mean, var = moving_mean.astype("float64"), moving_var.astype("float64")
    out = (xf - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + epsilon)
    if scale:
        out = out * gamma.reshape(shape)
    if center:
        out = out + beta.reshape(shape)
    out = out.astype(x.dtype)
    if training:
        return [out, ((1 - momentum) * moving_mean + momentum * mean).astype(moving_mean.dtype),
                ((1 - momentum) * moving_var + momentum * var).astype(moving_var.dtype)]
    return [out, moving_mean, moving_var]


def lrn_python(a_np, size, axis, bias, alpha, beta):
    """Local response normalization across ``axis``: ``a / (bias + alpha/size * sum(a^2))^beta``."""
    radius = size // 2
    sq = a_np.astype("float64") ** 2
    n = a_np.shape[axis]
    sqr_sum = np.zeros_like(sq)
    moved = np.moveaxis(sq, axis, 0)
    acc = np.moveaxis(sqr_sum, axis, 0)
    for j in range(n):
        acc[j] = moved[max(0, j - radius):min(n, j + radius + 1)].sum(axis=0)
    return (a_np / np.power(bias + alpha * sqr_sum / size, beta)).astype(a_np.dtype)


def l2_normalize_python(a_np, eps, axis=None):
    """``a / sqrt(max(sum(a^2, axis), eps))``."""
    axis = tuple(axis) if isinstance(axis, (list, tuple)) else axis
    sq = np.sum(a_np.astype("float64") ** 2, axis=axis, keepdims=True)
    return (a_np / np.sqrt(np.maximum(sq, eps))).astype(a_np.dtype)


def dense(x, y, bias, use_bias=False, use_relu=False, out_dtype=None):
    """``x · yᵀ (+ bias) (relu)`` with x [M, K] and y [N, K]."""
    dtype = np.dtype(out_dtype or x.dtype)
    out = x.astype(acc_dtype(dtype)) @ y.astype(acc_dtype(dtype)).T
    if use_bias:
        out = out + bias
    if use_relu:
        out = np.maximum(out, 0)
    return out.astype(dtype)


def dense_python(x, weight, bias=None, out_dtype=None):
    """``nn.dense`` reference: ``x · weightᵀ (+ bias)``; x may have leading batch axes."""
    dtype = np.dtype(out_dtype or x.dtype)
    out = x.astype(acc_dtype(dtype)) @ weight.astype(acc_dtype(dtype)).T
    if bias is not None:
        out = out + bias
    return out.astype(dtype)


def matmul_python(a, b, transpose_a=False, transpose_b=False, out_dtype=None):
    """``nn.matmul`` reference: 2-D (or batched) product with optional transposes of the last two axes."""
    dtype = np.dtype(out_dtype or a.dtype)
    a = np.swapaxes(a, -1, -2) if transpose_a else a
    b = np.swapaxes(b, -1, -2) if transpose_b else b
    return (a.astype(acc_dtype(dtype)) @ b.astype(acc_dtype(dtype))).astype(dtype)


def batch_matmul(x, y, out_dtype=None, trans_x=False, trans_y=True):
    """Batched matmul of 3-D arrays; a batch of 1 broadcasts. TVM's default ``trans_y=True`` (y is [B, N, K])."""
    if x.ndim != 3 or y.ndim != 3:
        raise KilnError(f"batch_matmul needs 3-D inputs, got {x.shape} and {y.shape}")
    if x.shape[0] != y.shape[0] and 1 not in (x.shape[0], y.shape[0]):
        raise KilnError(f"batch_matmul: batch sizes {x.shape[0]} and {y.shape[0]} do not broadcast")
    return matmul_python(x, y, trans_x, trans_y, out_dtype)
