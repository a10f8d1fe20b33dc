"""Gradients of Relay operators (``FPrimalGradient``), used by ``relay.transform.gradient``.

Each function takes the typed forward call ``orig`` (its arguments carry ``checked_type``) and the gradient
``grad`` of its output, and returns one gradient expression per argument (TVM's ``register_gradient``
contract). A tuple-valued argument (``concatenate``'s input) gets a Tuple expression; a tuple-valued output
(``split``) receives ``grad`` as a Tuple whose fields are the gradients of the output's fields.
Broadcasting binary ops sum the gradient back to each operand's shape with ``collapse_sum_like``.
Every op TVM v0.13 registers a gradient for has one here, plus the ones docs/compat.md lists beyond TVM.
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
from .tensor import sqrt as _sqrt
from .transform import reverse as _reverse, arange as _arange
from .algorithm import cumsum as _cumsum
from .scatter import scatter_elements as _scatter_elements
from .compat_ops import strided_set as _strided_set
from .reduce import mean as _mean
from .shape import shape_of
from .transform import expand_dims as _expand_dims
from ...topi.transform import strided_slice_plan as _slice_plan
from .transform import layout_transform as _layout_transform
from .nn._conv_pool import pad4


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
    dshape = _shape(data)  # indices may have a dynamic (Any) shape: the reshapes below infer their length
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
    outer = int(np.prod(flat_data_shape[:ax], dtype=np.int64))
    inner = int(np.prod(flat_data_shape[ax + 1:], dtype=np.int64))
    if _ttype(indices).is_dynamic():
        k = len(_ttype(indices).shape)
        return [_take_grad_broadcast(grad, idx, k, dshape, flat_data_shape, ax, n, dt, axis is None),
                zeros_like(indices)]
    hot = reshape(one_hot(idx, const(1, dt), const(0, dt), n, -1, dt), [-1, n])  # (ni, n)
    g = reshape(grad, [outer, -1, inner])
    g = reshape(transpose(g, [1, 0, 2]), [-1, outer * inner])  # (ni, outer*inner)
    scattered = _nn.dense(transpose(g), transpose(hot))  # (outer*inner, n)
    scattered = transpose(reshape(scattered, [outer, inner, n]), [0, 2, 1])
    return [reshape(scattered, list(dshape)), zeros_like(indices)]


def _take_grad_broadcast(grad, idx, k, dshape, flat_shape, ax, n, dt, flat):
    """take's gradient for indices of run-time length: grad (lead + I + rest) times one_hot(idx) (I + (n,)),
    summed over I. No reshape of a dynamic tensor (the interpreter needs static reshapes)."""
    lead, rest = len(flat_shape[:ax]), len(flat_shape[ax + 1:])
    hot = one_hot(idx, const(1, dt), const(0, dt), n, -1, dt)  # I + (n,)
    for _ in range(lead):
        hot = _expand_dims(hot, 0)
    if rest:
        hot = _expand_dims(hot, lead + k + 1, rest)
    g = _expand_dims(grad, lead + k)  # lead + I + (1,) + rest
    out = _sum(g * hot, axis=list(range(lead, lead + k)))  # lead + (n,) + rest
    return reshape(out, list(dshape)) if flat else out


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


def _hw_axes(layout: str, what: str) -> list:
    if not (set(layout) >= {"H", "W"}) or any(ch.islower() for ch in layout):
        raise OpNotImplemented(f"gradient of {what}: layout {layout!r} is not supported (a layout with H and W "
                               "and no split axes, e.g. NCHW or NHWC)")
    return [layout.index("H"), layout.index("W")]


@register_gradient("nn.global_avg_pool2d")
def global_avg_pool2d_grad(orig, grad):
    data = orig.args[0]
    axes = _hw_axes(orig.attrs.layout, "nn.global_avg_pool2d")
    shape = _shape(data)
    return [broadcast_to_like(grad / _c(float(shape[axes[0]] * shape[axes[1]]), data), data)]


@register_gradient("nn.global_max_pool2d")
def global_max_pool2d_grad(orig, grad):
    data = orig.args[0]
    axes = _hw_axes(orig.attrs.layout, "nn.global_max_pool2d")
    mask = cast_like(equal(data, orig), data)
    return [mask / _sum(mask, axis=axes, keepdims=True) * grad]


def _conv2d_weight_grad(data, grad, kh, kw, strides, padding, dilation):
    """dL/dW of one group of an NCHW/OIHW conv: a conv of data (channels as batch) by grad (batch as channels)."""
    data_t = transpose(data, [1, 0, 2, 3])  # (C, N, H, W)
    grad_t = transpose(grad, [1, 0, 2, 3])  # (O, N, oh, ow) used as an OIHW weight
    w = _nn.conv2d(data_t, grad_t, strides=dilation, padding=padding, dilation=strides)  # (C, O, kh', kw')
    w = transpose(w, [1, 0, 2, 3])
    return strided_slice(w, [0, 0], [kh, kw], axes=[2, 3])


_TO_NCHW = {"NCHW": None, "NHWC": [0, 3, 1, 2]}
_TO_OIHW = {"OIHW": None, "HWIO": [3, 2, 0, 1], "OHWI": [0, 3, 1, 2]}


def _permute(e, perm):
    return e if perm is None else transpose(e, perm)


def _unpermute(e, perm):
    if perm is None:
        return e
    inverse = [0] * len(perm)
    for i, a in enumerate(perm):
        inverse[a] = i
    return transpose(e, inverse)


def _permuted_shape(shape, perm):
    return tuple(shape) if perm is None else tuple(shape[a] for a in perm)


def _conv2d_nchw_grads(data, weight, grad, dshape, wshape, gshape, attrs):
    """(d data, d weight) of an NCHW/OIHW conv2d given its output gradient (all NCHW/OIHW)."""
    n, c, h, w = dshape
    o, _, kh, kw = wshape
    _, _, oh, ow = gshape
    sh, sw = (int(s) for s in attrs.strides)
    dh, dw = (int(d) for d in attrs.dilation)
    pt, pl, pb, pr = pad4(attrs.padding)
    groups = int(attrs.groups)
    full_h = (oh - 1) * sh - pt - pb + (kh - 1) * dh + 1
    full_w = (ow - 1) * sw - pl - pr + (kw - 1) * dw + 1
    ddata = _nn.conv2d_transpose(grad, weight, strides=(sh, sw), padding=(pt, pl, pb, pr), dilation=(dh, dw),
                                 groups=groups, channels=c, kernel_size=(kh, kw),
                                 output_padding=(h - full_h, w - full_w))
    conv = dict(strides=(sh, sw), padding=(pt, pl, pb, pr), dilation=(dh, dw))
    return ddata, _grouped_weight_grad(data, grad, groups, kh, kw, conv)


def _grouped_weight_grad(data, grad, groups, kh, kw, conv):
    """dL/dW of conv2d(data, W) with output gradient ``grad``: one weight gradient per group, stacked on O."""
    if groups == 1:
        return _conv2d_weight_grad(data, grad, kh, kw, **conv)
    dparts = split(data, groups, 1)
    gparts = split(grad, groups, 1)
    return concatenate([_conv2d_weight_grad(dparts[i], gparts[i], kh, kw, **conv) for i in range(groups)], 0)


@register_gradient("nn.conv2d")
def conv2d_grad(orig, grad):
    """data: conv2d_transpose of the gradient by the weight; weight: a conv of the data by the gradient.
    NHWC data and HWIO/OHWI kernels are transposed to NCHW/OIHW and back (TVM supports NCHW/OIHW only)."""
    attrs = orig.attrs
    data, weight = orig.args
    dl, kl = attrs.data_layout, attrs.kernel_layout
    if dl not in _TO_NCHW or kl not in _TO_OIHW or (attrs.out_layout or dl) != dl:
        raise OpNotImplemented(f"gradient of nn.conv2d: data layout {dl}, kernel layout {kl}, out layout "
                               f"{attrs.out_layout!r} is not supported (data NCHW/NHWC, kernel OIHW/HWIO/OHWI, "
                               "out layout = data layout)")
    dperm, kperm = _TO_NCHW[dl], _TO_OIHW[kl]
    ddata, dweight = _conv2d_nchw_grads(
        _permute(data, dperm), _permute(weight, kperm), _permute(grad, dperm),
        _permuted_shape(_shape(data), dperm), _permuted_shape(_shape(weight), kperm),
        _permuted_shape(_shape(orig), dperm), attrs)
    return [_unpermute(ddata, dperm), _unpermute(dweight, kperm)]


@register_gradient("nn.conv2d_transpose")
def conv2d_transpose_grad(orig, grad):
    """y = conv2d_transpose(x, W) is the adjoint of conv2d(., W) (W read as OIHW with O = x's channels), so
    dx = conv2d(grad, W) and dW is the weight gradient of conv2d(grad, W) against x (beyond TVM)."""
    attrs = orig.attrs
    data, weight = orig.args
    if attrs.data_layout != "NCHW" or attrs.kernel_layout != "IOHW" or (attrs.out_layout or "NCHW") != "NCHW":
        raise OpNotImplemented(f"gradient of nn.conv2d_transpose: only NCHW data / IOHW kernel layouts are "
                               f"supported, got {attrs.data_layout}/{attrs.kernel_layout}")
    n, c, h, w = _shape(data)
    _, _, kh, kw = _shape(weight)
    groups = int(attrs.groups)
    conv = dict(strides=tuple(int(v) for v in attrs.strides), padding=pad4(attrs.padding),
                dilation=tuple(int(v) for v in attrs.dilation))
    ddata = _nn.conv2d(grad, weight, groups=groups, channels=c, kernel_size=(kh, kw), **conv)
    ddata = strided_slice(ddata, [0, 0], [h, w], axes=[2, 3])  # output_padding >= stride leaves extra rows
    return [ddata, _grouped_weight_grad(grad, data, groups, kh, kw, conv)]


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


# == added for TVM v0.13 parity (its _tensor_grad.py list) and beyond it (docs/compat.md, Gradients) ==========
def _take_first(vec):
    return reshape(strided_slice(vec, [0], [1]), [])


def _field(grad, i: int):
    """Field ``i`` of a tuple-valued gradient (a Tuple literal or a tuple expression)."""
    return grad.fields[i] if isinstance(grad, Tuple) else TupleGetItem(grad, i)


# -- inverse trigonometric / hyperbolic (TVM's acos, acosh, asin, asinh, atanh) -------------------------------
@register_gradient("asin")
def asin_grad(orig, grad):
    x = orig.args[0]
    return [grad / _sqrt(ones_like(x) - x * x)]


@register_gradient("acos")
def acos_grad(orig, grad):
    x = orig.args[0]
    return [negative(grad / _sqrt(ones_like(x) - x * x))]


@register_gradient("asinh")
def asinh_grad(orig, grad):
    x = orig.args[0]
    return [grad / _sqrt(x * x + ones_like(x))]


@register_gradient("acosh")
def acosh_grad(orig, grad):
    x = orig.args[0]
    return [grad / _sqrt(x * x - ones_like(x))]


@register_gradient("atanh")
def atanh_grad(orig, grad):
    x = orig.args[0]
    return [grad / (ones_like(x) - x * x)]


# -- fast approximations: the derivative of the function they approximate (beyond TVM) ---------------------
@register_gradient("fast_exp")
def fast_exp_grad(orig, grad):
    return [grad * orig]


@register_gradient("fast_tanh")
def fast_tanh_grad(orig, grad):
    return [grad * (ones_like(orig) - orig * orig)]


@register_gradient("fast_erf")
def fast_erf_grad(orig, grad):
    return erf_grad(orig, grad)


# -- ops whose result carries no gradient to their inputs (TVM registers zeros for some of them) ------------
for _name in ("less_equal", "not_equal", "less", "greater", "greater_equal", "equal", "logical_and", "logical_or",
              "logical_not", "logical_xor", "argmax", "argmin", "shape_of", "ndarray_size", "isnan", "isinf",
              "isfinite"):
    register_gradient(_name, _zero_grad)
for _name in ("dyn.zeros", "dyn.ones"):
    register_gradient(_name, _zero_grad)


@register_gradient("collapse_sum_to")
def collapse_sum_to_grad(orig, grad):
    x, shape = orig.args
    return [broadcast_to_like(grad, x), zeros_like(shape)]


@register_gradient("contrib_reverse_reshape")
def reverse_reshape_grad(orig, grad):
    return [reshape_like(grad, orig.args[0])]


@register_gradient("dyn.reshape")
def dyn_reshape_grad(orig, grad):
    return [reshape_like(grad, orig.args[0]), zeros_like(orig.args[1])]


# -- reductions ----------------------------------------------------------------------------------------------
@register_gradient("variance")
def variance_grad(orig, grad):
    """``variance(x, m) = sum((x - m)^2) / n'``: d/dx = 2 (x - m) / n', d/dm = -(the same), summed to m's
    shape (TVM splits the terms differently; the sum over both arguments agrees when m = mean(x))."""
    data, mean = orig.args
    shape = _shape(data)
    count = int(np.prod([shape[a] for a in _reduced_axes(orig.attrs, len(shape))], dtype=np.int64))
    if orig.attrs.unbiased:
        count -= 1
    diff = (data - mean) * _keepdims_like(grad, data, orig.attrs) * _c(2.0 / max(count, 1), data)
    return [diff, collapse_sum_like(negative(diff), mean)]


# -- losses ----------------------------------------------------------------------------------------------------
def _inverse_batch(x):
    return _c(1.0 / _shape(x)[0], x)


@register_gradient("nn.cross_entropy")
def cross_entropy_grad(orig, grad):
    x, y = orig.args
    g = grad * _inverse_batch(x)
    return [negative(g * y / x), negative(g * log(x))]


@register_gradient("nn.cross_entropy_with_logits")
def cross_entropy_with_logits_grad(orig, grad):
    x, y = orig.args
    g = grad * _inverse_batch(x)
    return [negative(g * y), negative(g * x)]


# -- indexing --------------------------------------------------------------------------------------------------
@register_gradient("arange")
def arange_grad(orig, grad):
    """out[i] = start + i * step: d/dstart = sum(grad), d/dstop = 0, d/dstep = sum(i * grad)."""
    start, stop, step = orig.args
    dt = _dtype(orig)
    if _ttype(orig).is_dynamic():  # run-time bounds: the length is known at run time only
        n = cast_like(_take_first(shape_of(orig)), orig)
    else:
        n = const(float(_shape(orig)[0]), dt)
    index = _arange(const(0.0, dt), n, const(1.0, dt), dtype=dt)
    return [cast_like(_sum(grad), start), zeros_like(stop), cast_like(_sum(grad * index), step)]


@register_gradient("one_hot")
def one_hot_grad(orig, grad):
    """on_value gets the sum of the gradient at the hot positions, off_value the sum elsewhere."""
    indices, on_value, off_value = orig.args
    attrs = orig.attrs
    dt = _dtype(orig)
    hot = one_hot(indices, const(1, dt), const(0, dt), int(attrs.depth), int(attrs.axis), dt)
    on = _sum(grad * hot)
    off = _sum(grad) - on
    return [zeros_like(indices), cast_like(on, on_value), cast_like(off, off_value)]


@register_gradient("gather_nd")
def gather_nd_grad(orig, grad):
    """Scatter-add of ``grad`` into ``data``: the indexed leading axes flattened to one, then
    ``scatter_elements(..., reduction="add")`` along it (TVM uses ``scatter_nd``, which kiln lacks)."""
    data, indices = orig.args
    attrs = orig.attrs
    if int(getattr(attrs, "batch_dims", 0) or 0) != 0:
        raise OpNotImplemented("gradient of gather_nd with batch_dims != 0 is not implemented")
    dshape, ishape = _shape(data), _shape(indices)
    m = ishape[0]
    k = int(np.prod(ishape[1:], dtype=np.int64))
    lead = int(np.prod(dshape[:m], dtype=np.int64))
    rest = int(np.prod(dshape[m:], dtype=np.int64))
    idx_dt = _dtype(indices)
    lin = None
    for j in range(m):  # row-major linear index over the first m axes
        part = reshape(strided_slice(indices, [j], [j + 1], axes=[0]), [k])
        lin = part if lin is None else lin * const(dshape[j], idx_dt) + part
    lin = reshape(lin, [k, 1]) if lin is not None else None
    g = reshape(grad, [k, rest])
    idx = broadcast_to_like(lin, g)
    zeros = reshape(zeros_like(data), [lead, rest])
    flat = _scatter_elements(zeros, idx, g, axis=0, reduction="add")
    return [reshape(flat, list(dshape)), zeros_like(indices)]


@register_gradient("gather")
def gather_grad(orig, grad):
    """Scatter-add of ``grad`` at ``indices`` along ``axis`` (beyond TVM)."""
    data, indices = orig.args
    return [_scatter_elements(zeros_like(data), indices, grad, axis=int(orig.attrs.axis), reduction="add"),
            zeros_like(indices)]


@register_gradient("cumsum")
def cumsum_grad(orig, grad):
    """A reversed cumulative sum of the gradient (exclusive stays exclusive); axis None flattened."""
    data = orig.args[0]
    attrs = orig.attrs
    g = cast_like(grad, data)
    if attrs.axis is None:
        g, axis = reshape(g, [-1]), 0
    else:
        axis = int(attrs.axis) % len(_shape(data))
    back = _reverse(_cumsum(_reverse(g, axis), axis=axis, exclusive=bool(attrs.exclusive)), axis)
    return [reshape_like(back, data) if attrs.axis is None else back]


def _full_slice_plan(orig):
    x = orig.args[0]
    attrs = orig.attrs
    return _slice_plan(_shape(x), attrs.begin, attrs.end, attrs.strides,
                       list(attrs.axes) if attrs.axes is not None else None, attrs.slice_mode or "end")


@register_gradient("strided_slice")
def strided_slice_grad(orig, grad):
    """The gradient written into zeros at the sliced positions (``strided_set``, as TVM)."""
    x = orig.args[0]
    xshape = _shape(x)
    plan = _full_slice_plan(orig)
    begin, end, strides = [], [], []
    for (b, e, s), n in zip(plan, xshape):
        begin.append(b)
        end.append(e if e >= 0 else -(n + 1))  # a negative step through index 0: stop before the start
        strides.append(s)
    if any(len(range(*p)) == 0 for p in plan):
        return [zeros_like(x)]
    return [_strided_set(zeros_like(x), grad, begin, end, strides)]


# -- normalization, dropout -------------------------------------------------------------------------------
@register_gradient("nn.dropout")
def dropout_grad(orig, grad):
    """kiln's dropout is the identity (inference; the mask is ones), so the output's gradient passes."""
    return [_field(grad, 0)]


def _channel_shape(ndim: int, axis: int, c: int) -> list:
    shape = [1] * ndim
    shape[axis] = c
    return shape


@register_gradient("nn.batch_norm")
def batch_norm_grad(orig, grad):
    """Gradient of Relay's batch_norm as the op computes it: ``(x - moving_mean) / sqrt(moving_var + eps) *
    gamma + beta`` with the statistics as inputs (outputs 1 and 2 pass moving_mean and moving_var through).
    A training-mode batch norm is built from ``mean``/``variance`` feeding these inputs; their gradients
    carry the batch-statistics terms."""
    x, gamma, beta, mu, var = orig.args
    attrs = orig.attrs
    shape = _shape(x)
    ndim = len(shape)
    axis = int(attrs.axis) % ndim
    c = shape[axis]
    cs = _channel_shape(ndim, axis, c)
    others = [a for a in range(ndim) if a != axis]
    g = _field(grad, 0)
    inv = ones_like(var) / _sqrt(var + _c(float(attrs.epsilon), var))  # (C,)
    scale = inv * gamma if attrs.scale else inv
    centered = x - reshape(mu, cs)
    dx = g * reshape(scale, cs)
    sum_g = _sum(g, axis=others)
    sum_gc = _sum(g * centered, axis=others)
    dgamma = sum_gc * inv if attrs.scale else zeros_like(gamma)
    dbeta = sum_g if attrs.center else zeros_like(beta)
    dmu = negative(sum_g * scale) + _field(grad, 1)
    g_gamma = gamma if attrs.scale else ones_like(gamma)
    dvar = sum_gc * g_gamma * _c(-0.5, var) * inv * inv * inv + _field(grad, 2)
    return [dx, dgamma, dbeta, dmu, dvar]


def _norm_parts(x, axes, eps, dtype):
    """(xhat, 1/sqrt(var + eps)) of ``x`` normalized over ``axes`` (biased variance, as the ops)."""
    mu = _mean(x, axis=axes, keepdims=True)
    centered = x - mu
    var = _mean(centered * centered, axis=axes, keepdims=True)
    inv = ones_like(var) / _sqrt(var + const(float(eps), dtype))
    return centered * inv, inv


def _norm_backward(xhat, inv, dxhat, axes):
    """dx = inv * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), the means over ``axes``."""
    m1 = _mean(dxhat, axis=axes, keepdims=True)
    m2 = _mean(dxhat * xhat, axis=axes, keepdims=True)
    return inv * (dxhat - m1 - xhat * m2)


def _affine_grads(grad, xhat, gamma, beta, attrs, axis, ndim, c):
    """dxhat and the gamma/beta gradients of ``xhat * gamma + beta`` (gamma/beta along ``axis``)."""
    cs = _channel_shape(ndim, axis, c)
    others = [a for a in range(ndim) if a != axis]
    dxhat = grad * reshape(gamma, cs) if attrs.scale else grad
    dgamma = _sum(grad * xhat, axis=others) if attrs.scale else zeros_like(gamma)
    dbeta = _sum(grad, axis=others) if attrs.center else zeros_like(beta)
    return dxhat, dgamma, dbeta


@register_gradient("nn.layer_norm")
def layer_norm_grad(orig, grad):
    x, gamma, beta = orig.args
    shape = _shape(x)
    axis = int(orig.attrs.axis) % len(shape)
    xhat, inv = _norm_parts(x, [axis], orig.attrs.epsilon, _dtype(x))
    dxhat, dgamma, dbeta = _affine_grads(grad, xhat, gamma, beta, orig.attrs, axis, len(shape), shape[axis])
    return [_norm_backward(xhat, inv, dxhat, [axis]), dgamma, dbeta]


@register_gradient("nn.instance_norm")
def instance_norm_grad(orig, grad):
    x, gamma, beta = orig.args
    shape = _shape(x)
    axis = int(orig.attrs.axis) % len(shape)
    axes = [a for a in range(len(shape)) if a not in (0, axis)]
    xhat, inv = _norm_parts(x, axes, orig.attrs.epsilon, _dtype(x))
    dxhat, dgamma, dbeta = _affine_grads(grad, xhat, gamma, beta, orig.attrs, axis, len(shape), shape[axis])
    return [_norm_backward(xhat, inv, dxhat, axes), dgamma, dbeta]


@register_gradient("nn.group_norm")
def group_norm_grad(orig, grad):
    """Normalized over (channels of a group, spatial axes): the channel axis is split into (groups, c/g)."""
    x, gamma, beta = orig.args
    shape = _shape(x)
    ndim = len(shape)
    axis = int(orig.attrs.axis) % ndim
    groups = int(orig.attrs.num_groups)
    c = shape[axis]
    grouped = list(shape[:axis]) + [groups, c // groups] + list(shape[axis + 1:])
    axes = [a for a in range(len(grouped)) if a not in (0, axis)]
    xg = reshape(x, grouped)
    xhat_g, inv = _norm_parts(xg, axes, orig.attrs.epsilon, _dtype(x))
    xhat = reshape(xhat_g, list(shape))
    dxhat, dgamma, dbeta = _affine_grads(grad, xhat, gamma, beta, orig.attrs, axis, ndim, c)
    dx = _norm_backward(xhat_g, inv, reshape(dxhat, grouped), axes)
    return [reshape(dx, list(shape)), dgamma, dbeta]


# -- annotations: identities for the gradient (TVM's gradient pass special-cases checkpoint to recompute the
# forward in the backward pass; kiln keeps the forward values, so the numbers are the same) ----------------
for _name in ("annotation.checkpoint", "annotation.stop_fusion"):
    register_gradient(_name, copy_grad)


# -- more layout ops and activations (beyond TVM) --------------------------------------------------------


@register_gradient("reverse")
def reverse_grad(orig, grad):
    return [_reverse(grad, int(orig.attrs.axis))]


@register_gradient("repeat")
def repeat_grad(orig, grad):
    """Each input element was copied ``repeats`` times in a row along ``axis``: sum those copies."""
    x = orig.args[0]
    shape = _shape(x)
    axis = int(orig.attrs.axis) % len(shape)
    r = int(orig.attrs.repeats)
    split_shape = list(shape[:axis]) + [shape[axis], r] + list(shape[axis + 1:])
    return [_sum(reshape(grad, split_shape), axis=[axis + 1])]


@register_gradient("layout_transform")
def layout_transform_grad(orig, grad):
    return [_layout_transform(grad, orig.attrs.dst_layout, orig.attrs.src_layout)]


@register_gradient("nn.prelu")
def prelu_grad(orig, grad):
    x, alpha = orig.args
    ndim = len(_shape(x))
    axis = int(orig.attrs.axis) % ndim
    cs = _channel_shape(ndim, axis, _shape(alpha)[0])
    neg = less(x, zeros_like(x))
    dx = where(neg, grad * reshape(alpha, cs), grad)
    dalpha = _sum(where(neg, grad * x, zeros_like(grad)), axis=[a for a in range(ndim) if a != axis])
    return [dx, dalpha]


register_gradient("nn.fast_softmax", softmax_grad)


@register_gradient("nn.upsampling")
def upsampling_grad(orig, grad):
    """Nearest-neighbour upsampling by integer scales: each input pixel's gradient is the sum of its block."""
    attrs = orig.attrs
    sh, sw = float(attrs.scale_h), float(attrs.scale_w)
    if attrs.method != "nearest_neighbor" or sh != int(sh) or sw != int(sw):
        raise OpNotImplemented("gradient of nn.upsampling: only nearest_neighbor with integer scales is "
                               f"implemented (got {attrs.method}, scales {sh}, {sw})")
    x = orig.args[0]
    shape = _shape(x)
    hw = _hw_axes(attrs.layout, "nn.upsampling")
    split_shape, sum_axes = [], []
    for a, n in enumerate(shape):
        split_shape.append(n)
        if a in hw:
            sum_axes.append(len(split_shape))
            split_shape.append(int(sh) if a == hw[0] else int(sw))
    return [_sum(reshape(grad, split_shape), axis=sum_axes)]
