"""Gradients of Relay operators (``FPrimalGradient``), used by ``relay.transform.gradient``.

Each function takes the typed forward call ``orig`` (its arguments carry ``checked_type``) and the gradient
``grad`` of its output, and returns one gradient expression per argument (TVM's ``register_gradient``
contract). A tuple-valued argument (``concatenate``'s input) gets a Tuple expression; a tuple-valued output
(``split``) receives ``grad`` as a Tuple whose fields are the gradients of the output's fields.
Broadcasting binary ops sum the gradient back to each operand's shape with ``collapse_sum_like``.
"""
from __future__ import annotations

import math

import numpy as np

from ...error import OpNotImplemented
from ...ir.type import TensorType
from ..expr import Tuple, TupleGetItem, const
from . import nn as _nn
from .op import register_gradient
from .reduce import sum as _sum
from .tensor import (cos, cosh, exp, sin, sinh, log, negative, ones_like, zeros_like, power, less, equal,
                     greater_equal, less_equal, logical_or)
from .tensor import where, cast_like, floor_mod, clip
from .shape import broadcast_to_like, collapse_sum_like
from .transform import reshape, reshape_like, strided_slice, transpose, concatenate, split, squeeze
from .indexing import one_hot


# -- helpers -----------------------------------------------------------------------------------------------
def _ttype(e) -> TensorType:
    ty = e.checked_type
    if not isinstance(ty, TensorType):
        raise OpNotImplemented(f"gradient: expected a tensor operand, got {ty}")
    return ty


def _shape(e) -> tuple:
    ty = _ttype(e)
    if ty.is_dynamic():
        raise OpNotImplemented("gradient: operands with dynamic (Any) shapes are not supported")
    return tuple(int(d) for d in ty.shape)


def _dtype(e) -> str:
    return _ttype(e).dtype


def _c(value, like):
    """A scalar constant of ``like``'s dtype."""
    return const(value, _dtype(like))


def _zero_grad(orig, grad):
    return [zeros_like(a) for a in orig.args]


def _reduced_axes(attrs, ndim: int) -> list:
    axis = attrs.axis
    if axis is None:
        axes = list(range(ndim))
    else:
        axes = [int(a) + ndim if int(a) < 0 else int(a) for a in (axis if isinstance(axis, (list, tuple)) else
                                                                  [axis])]
    if getattr(attrs, "exclude", False):
        axes = [a for a in range(ndim) if a not in axes]
    return sorted(axes)


def _keepdims_like(grad, data, attrs):
    """``grad`` of a reduction reshaped so it broadcasts against ``data`` (the reduced axes kept as 1)."""
    shape = list(_shape(data))
    for a in _reduced_axes(attrs, len(shape)):
        shape[a] = 1
    return reshape(grad, shape)


# -- elementwise unary -------------------------------------------------------------------------------------
@register_gradient("negative")
def negative_grad(orig, grad):
    return [negative(grad)]


@register_gradient("exp")
def exp_grad(orig, grad):
    return [grad * orig]


@register_gradient("log")
def log_grad(orig, grad):
    return [grad / orig.args[0]]


@register_gradient("log2")
def log2_grad(orig, grad):
    x = orig.args[0]
    return [grad / (x * _c(math.log(2.0), x))]


@register_gradient("log10")
def log10_grad(orig, grad):
    x = orig.args[0]
    return [grad / (x * _c(math.log(10.0), x))]


@register_gradient("sqrt")
def sqrt_grad(orig, grad):
    return [grad * _c(0.5, orig) / orig]


@register_gradient("rsqrt")
def rsqrt_grad(orig, grad):
    x = orig.args[0]
    return [grad * _c(-0.5, x) * orig / x]


@register_gradient("sigmoid")
def sigmoid_grad(orig, grad):
    return [grad * orig * (ones_like(orig) - orig)]


@register_gradient("tanh")
def tanh_grad(orig, grad):
    return [grad * (ones_like(orig) - orig * orig)]


@register_gradient("sin")
def sin_grad(orig, grad):
    return [grad * cos(orig.args[0])]


@register_gradient("cos")
def cos_grad(orig, grad):
    return [negative(grad * sin(orig.args[0]))]


@register_gradient("tan")
def tan_grad(orig, grad):
    c = cos(orig.args[0])
    return [grad / (c * c)]


@register_gradient("sinh")
def sinh_grad(orig, grad):
    return [grad * cosh(orig.args[0])]


@register_gradient("cosh")
def cosh_grad(orig, grad):
    return [grad * sinh(orig.args[0])]


@register_gradient("atan")
def atan_grad(orig, grad):
    x = orig.args[0]
    return [grad / (ones_like(x) + x * x)]


@register_gradient("erf")
def erf_grad(orig, grad):
    x = orig.args[0]
    return [grad * _c(2.0 / math.sqrt(math.pi), x) * exp(negative(x * x))]


@register_gradient("abs")
def abs_grad(orig, grad):
    x = orig.args[0]
    return [where(less(x, zeros_like(x)), negative(grad), grad)]


@register_gradient("nn.relu")
def relu_grad(orig, grad):
    x = orig.args[0]
    return [where(less(x, zeros_like(x)), zeros_like(grad), grad)]


@register_gradient("nn.leaky_relu")
def leaky_relu_grad(orig, grad):
    x = orig.args[0]
    return [where(less(x, zeros_like(x)), grad * _c(float(orig.attrs.alpha), x), grad)]


@register_gradient("clip")
def clip_grad(orig, grad):
    x = orig.args[0]
    lo = _c(float(orig.attrs.a_min), x)
    hi = _c(float(orig.attrs.a_max), x)
    outside = logical_or(less(x, lo), less(hi, x))
    return [where(outside, zeros_like(grad), grad)]


for _name in ("sign", "round", "floor", "ceil", "trunc", "zeros_like", "ones_like"):
    register_gradient(_name, _zero_grad)
for _name in ("zeros", "ones"):
    register_gradient(_name, lambda orig, grad: [])


@register_gradient("copy")
def copy_grad(orig, grad):
    return [grad]


@register_gradient("cast")
def cast_grad(orig, grad):
    return [cast_like(grad, orig.args[0])]


@register_gradient("cast_like")
def cast_like_grad(orig, grad):
    x, like = orig.args
    return [cast_like(grad, x), zeros_like(like)]


# -- broadcasting binary -----------------------------------------------------------------------------------
@register_gradient("add")
def add_grad(orig, grad):
    x, y = orig.args
    return [collapse_sum_like(grad, x), collapse_sum_like(grad, y)]


@register_gradient("subtract")
def subtract_grad(orig, grad):
    x, y = orig.args
    return [collapse_sum_like(grad, x), collapse_sum_like(negative(grad), y)]


@register_gradient("multiply")
def multiply_grad(orig, grad):
    x, y = orig.args
    return [collapse_sum_like(grad * y, x), collapse_sum_like(grad * x, y)]


@register_gradient("divide")
def divide_grad(orig, grad):
    x, y = orig.args
    return [collapse_sum_like(grad / y, x), collapse_sum_like(negative(grad * orig / y), y)]


@register_gradient("power")
def power_grad(orig, grad):
    x, y = orig.args
    dx = grad * y * power(x, y - ones_like(y))
    dy = grad * orig * log(x)
    return [collapse_sum_like(dx, x), collapse_sum_like(dy, y)]


@register_gradient("maximum")
def maximum_grad(orig, grad):
    x, y = orig.args
    pick_x = greater_equal(x, y)
    zero = zeros_like(grad)
    return [collapse_sum_like(where(pick_x, grad, zero), x), collapse_sum_like(where(pick_x, zero, grad), y)]


@register_gradient("minimum")
def minimum_grad(orig, grad):
    x, y = orig.args
    pick_x = less_equal(x, y)
    zero = zeros_like(grad)
    return [collapse_sum_like(where(pick_x, grad, zero), x), collapse_sum_like(where(pick_x, zero, grad), y)]


@register_gradient("where")
def where_grad(orig, grad):
    cond, x, y = orig.args
    zero = zeros_like(grad)
    return [zeros_like(cond), collapse_sum_like(where(cond, grad, zero), x),
            collapse_sum_like(where(cond, zero, grad), y)]


@register_gradient("collapse_sum_like")
def collapse_sum_like_grad(orig, grad):
    x, like = orig.args
    return [broadcast_to_like(grad, x), zeros_like(like)]


@register_gradient("broadcast_to")
def broadcast_to_grad(orig, grad):
    return [collapse_sum_like(grad, orig.args[0])]


@register_gradient("broadcast_to_like")
def broadcast_to_like_grad(orig, grad):
    x, like = orig.args
    return [collapse_sum_like(grad, x), zeros_like(like)]


# -- reductions --------------------------------------------------------------------------------------------
@register_gradient("sum")
def sum_grad(orig, grad):
    data = orig.args[0]
    return [broadcast_to_like(_keepdims_like(grad, data, orig.attrs), data)]


@register_gradient("mean")
def mean_grad(orig, grad):
    data = orig.args[0]
    shape = _shape(data)
    count = int(np.prod([shape[a] for a in _reduced_axes(orig.attrs, len(shape))], dtype=np.int64))
    return [broadcast_to_like(_keepdims_like(grad, data, orig.attrs) / _c(float(count), data), data)]


def _extremum_grad(orig, grad):
    """max/min: the gradient goes to the elements equal to the result, split evenly among ties."""
    data = orig.args[0]
    axes = _reduced_axes(orig.attrs, len(_shape(data)))
    hit = equal(data, _keepdims_like(orig, data, orig.attrs))
    mask = cast_like(hit, data)
    share = mask / _sum(mask, axis=axes, keepdims=True)
    return [share * _keepdims_like(grad, data, orig.attrs)]


register_gradient("max", _extremum_grad)
register_gradient("min", _extremum_grad)


@register_gradient("prod")
def prod_grad(orig, grad):
    """grad * prod / x: defined where no element of a reduced group is zero (as TVM's)."""
    data = orig.args[0]
    return [_keepdims_like(grad, data, orig.attrs) * _keepdims_like(orig, data, orig.attrs) / data]


# -- shape and layout --------------------------------------------------------------------------------------
def _reshape_back(orig, grad):
    return [reshape_like(grad, orig.args[0])]


for _name in ("reshape", "nn.batch_flatten", "expand_dims", "squeeze"):
    register_gradient(_name, _reshape_back)


@register_gradient("reshape_like")
def reshape_like_grad(orig, grad):
    x, like = orig.args
    return [reshape_like(grad, x), zeros_like(like)]


@register_gradient("transpose")
def transpose_grad(orig, grad):
    axes = orig.attrs.axes
    ndim = len(_shape(orig.args[0]))
    if not axes:
        return [transpose(grad)]
    axes = [int(a) % ndim for a in axes]
    inverse = [0] * ndim
    for i, a in enumerate(axes):
        inverse[a] = i
    return [transpose(grad, inverse)]


@register_gradient("concatenate")
def concatenate_grad(orig, grad):
    fields = orig.args[0].checked_type.fields
    axis = int(orig.attrs.axis)
    ndim = len(fields[0].shape)
    axis = axis + ndim if axis < 0 else axis
    bounds, at = [], 0
    for f in fields[:-1]:
        at += int(f.shape[axis])
        bounds.append(at)
    if len(fields) == 1:
        return [Tuple([grad])]
    parts = split(grad, bounds, axis)
    return [Tuple([parts[i] for i in range(len(fields))])]


@register_gradient("split")
def split_grad(orig, grad):
    axis = int(orig.attrs.axis)
    fields = [TupleGetItem(grad, i) for i in range(len(orig.checked_type.fields))]
    return [concatenate(fields, axis)]


@register_gradient("stack")
def stack_grad(orig, grad):
    n = len(orig.args[0].checked_type.fields)
    axis = int(orig.attrs.axis)
    axis = axis + len(_shape(orig)) if axis < 0 else axis
    parts = split(grad, n, axis)
    return [Tuple([squeeze(parts[i], [axis]) for i in range(n)])]


@register_gradient("tile")
def tile_grad(orig, grad):
    x = orig.args[0]
    xshape = _shape(x)
    oshape = _shape(orig)
    reps = [o // d if d else 0 for o, d in zip(oshape[len(oshape) - len(xshape):], xshape)]
    lead = len(oshape) - len(xshape)
    inter = list(oshape[:lead])
    sum_axes = list(range(lead))
    for r, d in zip(reps, xshape):
        sum_axes.append(len(inter))
        inter += [r, d]
    g = reshape(grad, inter)
    return [reshape(_sum(g, axis=sum_axes), list(xshape))]


@register_gradient("strided_slice")
def strided_slice_grad(orig, grad):
    """Pads the gradient back to the input's shape (unit strides only)."""
    x = orig.args[0]
    xshape = _shape(x)
    attrs = orig.attrs
    strides = list(attrs.strides or [])
    if any(int(s) != 1 for s in strides):
        raise OpNotImplemented("gradient of strided_slice with non-unit strides is not implemented")
    axes = list(attrs.axes) if attrs.axes is not None else list(range(len(attrs.begin)))
    pads = [[0, 0] for _ in xshape]
    oshape = _shape(orig)
    for i, a in enumerate(axes):
        a = int(a) % len(xshape)
        b = int(attrs.begin[i])
        b = max(0, min(xshape[a], b + xshape[a] if b < 0 else b))
        pads[a] = [b, xshape[a] - b - oshape[a]]
    return [_nn.pad(grad, pads)]


@register_gradient("nn.pad")
def pad_grad(orig, grad):
    x = orig.args[0]
    if orig.attrs.pad_mode != "constant":
        raise OpNotImplemented(f"gradient of nn.pad with pad_mode={orig.attrs.pad_mode!r} is not implemented")
    xshape = _shape(x)
    begin = [int(p[0]) for p in orig.attrs.pad_width]
    end = [b + d for b, d in zip(begin, xshape)]
    out = [strided_slice(grad, begin, end)]
    return out + [zeros_like(a) for a in orig.args[1:]]


@register_gradient("take")
def take_grad(orig, grad):
    """Scatter-add of ``grad`` into ``data``'s shape, as a one-hot matrix product."""
    data, indices = orig.args
    dshape = _shape(data)
    ishape = _shape(indices)
    attrs = orig.attrs
    if int(getattr(attrs, "batch_dims", 0) or 0) != 0:
        raise OpNotImplemented("gradient of take with batch_dims != 0 is not implemented")
    dt = _dtype(data)
    axis = attrs.axis
    if axis is None:
        flat_data_shape = [int(np.prod(dshape, dtype=np.int64))]
        ax = 0
    else:
        ax = int(axis) % len(dshape)
        flat_data_shape = list(dshape)
    n = flat_data_shape[ax]
    idx = indices
    mode = getattr(attrs, "mode", "clip")
    idx_dt = _dtype(indices)
    if mode == "wrap":
        idx = floor_mod(idx, const(n, idx_dt))
    else:
        idx = clip(idx, 0, n - 1)
    ni = int(np.prod(ishape, dtype=np.int64))
    outer = int(np.prod(flat_data_shape[:ax], dtype=np.int64))
    inner = int(np.prod(flat_data_shape[ax + 1:], dtype=np.int64))
    hot = reshape(one_hot(idx, const(1, dt), const(0, dt), n, -1, dt), [ni, n])  # (ni, n)
    g = reshape(grad, [outer, ni, inner])
    g = reshape(transpose(g, [1, 0, 2]), [ni, outer * inner])  # (ni, outer*inner)
    scattered = _nn.dense(transpose(g), transpose(hot))  # (outer*inner, n)
    scattered = transpose(reshape(scattered, [outer, inner, n]), [0, 2, 1])
    return [reshape(scattered, list(dshape)), zeros_like(indices)]


# -- neural network ----------------------------------------------------------------------------------------
@register_gradient("nn.bias_add")
def bias_add_grad(orig, grad):
    data, bias = orig.args
    ndim = len(_shape(data))
    axis = int(orig.attrs.axis) % ndim
    return [collapse_sum_like(grad, data), _sum(grad, axis=[a for a in range(ndim) if a != axis])]


@register_gradient("nn.dense")
def dense_grad(orig, grad):
    data, weight = orig.args  # (..., K), (N, K) -> (..., N)
    dshape = _shape(data)
    k = dshape[-1]
    g2 = reshape(grad, [-1, _shape(weight)[0]])
    d2 = reshape(data, [-1, k])
    ddata = reshape(_nn.dense(g2, transpose(weight)), list(dshape))
    dweight = _nn.dense(transpose(g2), transpose(d2))
    return [ddata, dweight]


@register_gradient("nn.matmul")
def matmul_grad(orig, grad):
    a, b = orig.args
    ta, tb = bool(orig.attrs.transpose_a), bool(orig.attrs.transpose_b)
    a2 = transpose(a) if ta else a  # (M, K)
    b2 = transpose(b) if tb else b  # (K, N)
    da = _nn.matmul(grad, b2, transpose_b=True)  # (M, K)
    db = _nn.matmul(a2, grad, transpose_a=True)  # (K, N)
    return [transpose(da) if ta else da, transpose(db) if tb else db]


@register_gradient("nn.batch_matmul")
def batch_matmul_grad(orig, grad):
    a, b = orig.args
    ta, tb = bool(orig.attrs.transpose_a), bool(orig.attrs.transpose_b)
    bmm = _nn.batch_matmul
    if not ta and not tb:
        da, db = bmm(grad, b, transpose_a=False, transpose_b=True), bmm(a, grad, transpose_a=True, transpose_b=False)
    elif not ta and tb:
        da, db = bmm(grad, b, transpose_a=False, transpose_b=False), bmm(grad, a, transpose_a=True, transpose_b=False)
    elif ta and not tb:
        da, db = bmm(b, grad, transpose_a=False, transpose_b=True), bmm(a, grad, transpose_a=False, transpose_b=False)
    else:
        da, db = bmm(b, grad, transpose_a=True, transpose_b=True), bmm(grad, a, transpose_a=True, transpose_b=True)
    return [collapse_sum_like(da, a), collapse_sum_like(db, b)]


@register_gradient("nn.softmax")
def softmax_grad(orig, grad):
    axis = int(orig.attrs.axis)
    return [(grad - _sum(grad * orig, axis=[axis], keepdims=True)) * orig]


@register_gradient("nn.log_softmax")
def log_softmax_grad(orig, grad):
    axis = int(orig.attrs.axis)
    return [grad - _sum(grad, axis=[axis], keepdims=True) * exp(orig)]


@register_gradient("nn.global_avg_pool2d")
def global_avg_pool2d_grad(orig, grad):
    data = orig.args[0]
    if orig.attrs.layout != "NCHW":
        raise OpNotImplemented("gradient of nn.global_avg_pool2d: only the NCHW layout is supported")
    n, c, h, w = _shape(data)
    return [broadcast_to_like(grad / _c(float(h * w), data), data)]


@register_gradient("nn.global_max_pool2d")
def global_max_pool2d_grad(orig, grad):
    data = orig.args[0]
    if orig.attrs.layout != "NCHW":
        raise OpNotImplemented("gradient of nn.global_max_pool2d: only the NCHW layout is supported")
    mask = cast_like(equal(data, orig), data)
    return [mask / _sum(mask, axis=[2, 3], keepdims=True) * grad]


def _pad4(padding) -> tuple:
    p = [int(v) for v in padding]
    if len(p) == 1:
        return (p[0],) * 4
    if len(p) == 2:
        return (p[0], p[1], p[0], p[1])
    return tuple(p)


def _conv2d_weight_grad(data, grad, kh, kw, strides, padding, dilation):
    """dL/dW of one group of an NCHW/OIHW conv: a conv of data (channels as batch) by grad (batch as channels)."""
    data_t = transpose(data, [1, 0, 2, 3])  # (C, N, H, W)
    grad_t = transpose(grad, [1, 0, 2, 3])  # (O, N, oh, ow) used as an OIHW weight
    w = _nn.conv2d(data_t, grad_t, strides=dilation, padding=padding, dilation=strides)  # (C, O, kh', kw')
    w = transpose(w, [1, 0, 2, 3])
    return strided_slice(w, [0, 0], [kh, kw], axes=[2, 3])


@register_gradient("nn.conv2d")
def conv2d_grad(orig, grad):
    """data: conv2d_transpose of the gradient by the weight; weight: a conv of the data by the gradient."""
    attrs = orig.attrs
    data, weight = orig.args
    if attrs.data_layout != "NCHW" or attrs.kernel_layout != "OIHW" or (attrs.out_layout or "NCHW") != "NCHW":
        raise OpNotImplemented(f"gradient of nn.conv2d: only NCHW data / OIHW kernel layouts are supported, got "
                               f"{attrs.data_layout}/{attrs.kernel_layout}")
    n, c, h, w = _shape(data)
    o, _, kh, kw = _shape(weight)
    _, _, oh, ow = _shape(orig)
    sh, sw = (int(s) for s in attrs.strides)
    dh, dw = (int(d) for d in attrs.dilation)
    pt, pl, pb, pr = _pad4(attrs.padding)
    groups = int(attrs.groups)
    full_h = (oh - 1) * sh - pt - pb + (kh - 1) * dh + 1
    full_w = (ow - 1) * sw - pl - pr + (kw - 1) * dw + 1
    ddata = _nn.conv2d_transpose(grad, weight, strides=(sh, sw), padding=(pt, pl, pb, pr), dilation=(dh, dw),
                                 groups=groups, channels=c, kernel_size=(kh, kw),
                                 output_padding=(h - full_h, w - full_w))
    conv = dict(strides=(sh, sw), padding=(pt, pl, pb, pr), dilation=(dh, dw))
    if groups == 1:
        dweight = _conv2d_weight_grad(data, grad, kh, kw, **conv)
    else:  # one weight gradient per group, stacked along O
        dparts = split(data, groups, 1)
        gparts = split(grad, groups, 1)
        dweight = concatenate([_conv2d_weight_grad(dparts[i], gparts[i], kh, kw, **conv) for i in range(groups)],
                              0)
    return [ddata, dweight]


def _pool_grad(op_name):
    def grad_fn(orig, grad):
        fn = getattr(_nn, op_name + "_grad", None)
        if fn is None:
            raise OpNotImplemented(f"gradient of nn.{op_name} needs nn.{op_name}_grad, which kiln does not have")
        attrs = orig.attrs
        kw = dict(pool_size=attrs.pool_size, strides=attrs.strides, padding=attrs.padding, layout=attrs.layout,
                  ceil_mode=attrs.ceil_mode, dilation=attrs.dilation)
        if op_name == "avg_pool2d":
            kw["count_include_pad"] = attrs.count_include_pad
        return [fn(grad, orig.args[0], **kw)]
    grad_fn.__name__ = f"{op_name}_grad"
    return grad_fn


register_gradient("nn.max_pool2d", _pool_grad("max_pool2d"))
register_gradient("nn.avg_pool2d", _pool_grad("avg_pool2d"))
