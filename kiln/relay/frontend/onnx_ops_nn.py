"""ONNX converters for neural-network ops: Conv/ConvTranspose, Gemm/MatMul/Einsum, pooling, normalizations,
Softmax/LogSoftmax/Hardmax, Dropout, LRN and Resize/Upsample.

1-D convolutions and pools run as their 2-D forms with a unit height; 3-D forms are not supported (kiln has
no 3-D kernels)."""
from __future__ import annotations

import math

import numpy as np

from .. import op as _op
from ..op import image as _image
from ..op import nn as _nn
from .einsum import einsum
from .onnx_common import onnx_op
from .onnx_ops_elemwise import scalar


def _is_float(dtype: str) -> bool:
    return dtype.startswith("float")


def auto_pads(ctx, attr, in_spatial, kernel, strides, dilations) -> tuple:
    """(begins, ends) paddings per spatial axis from ``pads`` or ``auto_pad``."""
    nd = len(in_spatial)
    auto = attr.get("auto_pad", "NOTSET") or "NOTSET"
    if auto == "NOTSET":
        pads = list(attr.get("pads", [0] * (2 * nd)))
        if len(pads) != 2 * nd:
            raise ctx.error(f"pads {pads} must have {2 * nd} values for {nd} spatial axes")
        return pads[:nd], pads[nd:]
    if auto == "VALID":
        return [0] * nd, [0] * nd
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise ctx.error(f"auto_pad must be NOTSET, VALID, SAME_UPPER or SAME_LOWER, got {auto!r}")
    if any(not isinstance(n, int) for n in in_spatial):
        raise ctx.unsupported(f"auto_pad={auto} over a dynamic spatial size")
    begins, ends = [], []
    for n, k, s, d in zip(in_spatial, kernel, strides, dilations):
        out = -(-n // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - n, 0)
        small, big = total // 2, total - total // 2
        begins.append(small if auto == "SAME_UPPER" else big)
        ends.append(big if auto == "SAME_UPPER" else small)
    return begins, ends


def _spatial_attrs(ctx, attr, nd, kernel):
    strides = list(attr.get("strides", [1] * nd))
    dilations = list(attr.get("dilations", [1] * nd))
    if len(strides) != nd or len(dilations) != nd:
        raise ctx.error(f"strides {strides} / dilations {dilations} must have {nd} values")
    return strides, dilations


def _to_2d(ctx, x, what):
    """A 1-D spatial tensor [N, C, L] as [N, C, 1, L]; 3-D spatial tensors are not supported."""
    shape = ctx.shape(x, dynamic_ok=True)
    if len(shape) == 3:
        return _op.reshape(x, [0, 0, 1, -1]), True
    if len(shape) == 4:
        return x, False
    raise ctx.unsupported(f"{what} with {len(shape) - 2} spatial dimensions (kiln has 1-D and 2-D forms)")


def _from_2d(ctx, y):
    return _op.reshape(y, [0, 0, -1])


# -- convolution -----------------------------------------------------------------------------------------------
@onnx_op("Conv", since=1)
def _conv(inputs, attr, ctx):
    x, w = inputs[0], inputs[1]
    b = inputs[2] if len(inputs) > 2 else None
    xshape, wshape = ctx.shape(x, dynamic_ok=True), ctx.shape(w)
    nd = len(xshape) - 2
    kernel = list(attr.get("kernel_shape", wshape[2:]))
    strides, dilations = _spatial_attrs(ctx, attr, nd, kernel)
    begins, ends = auto_pads(ctx, attr, xshape[2:], kernel, strides, dilations)
    group = int(attr.get("group", 1))
    x2, was_1d = _to_2d(ctx, x, "Conv")
    if was_1d:
        w = _op.reshape(w, [wshape[0], wshape[1], 1, wshape[2]])
        kernel, strides, dilations = [1] + kernel, [1] + strides, [1] + dilations
        begins, ends = [0] + begins, [0] + ends
    y = _nn.conv2d(x2, w, strides=strides, padding=(begins[0], begins[1], ends[0], ends[1]), dilation=dilations,
                   groups=group, channels=wshape[0], kernel_size=kernel)
    if b is not None:
        y = _nn.bias_add(y, b, axis=1)
    return _from_2d(ctx, y) if was_1d else y


@onnx_op("ConvTranspose", since=1)
def _conv_transpose(inputs, attr, ctx):
    x, w = inputs[0], inputs[1]
    b = inputs[2] if len(inputs) > 2 else None
    xshape, wshape = ctx.shape(x), ctx.shape(w)
    nd = len(xshape) - 2
    group = int(attr.get("group", 1))
    kernel = list(attr.get("kernel_shape", wshape[2:]))
    strides, dilations = _spatial_attrs(ctx, attr, nd, kernel)
    out_pad = list(attr.get("output_padding", [0] * nd))
    auto = attr.get("auto_pad", "NOTSET") or "NOTSET"
    out_shape = attr.get("output_shape")
    if out_shape is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
        if out_shape is None:
            out_shape = [n * s for n, s in zip(xshape[2:], strides)]
        out_shape = list(out_shape)[-nd:]
        begins, ends = [], []
        for k in range(nd):
            total = (strides[k] * (xshape[2 + k] - 1) + out_pad[k] + (kernel[k] - 1) * dilations[k] + 1
                     - out_shape[k])
            if total < 0:  # the requested output is larger: the extra rows come from output_padding
                out_pad[k] -= total
                total = 0
            half = total // 2
            if auto == "SAME_UPPER":
                begins.append(half)
                ends.append(total - half)
            else:
                begins.append(total - half)
                ends.append(half)
    elif auto == "VALID":
        begins, ends = [0] * nd, [0] * nd
    else:
        pads = list(attr.get("pads", [0] * (2 * nd)))
        begins, ends = pads[:nd], pads[nd:]
    x2, was_1d = _to_2d(ctx, x, "ConvTranspose")
    if was_1d:
        w = _op.reshape(w, [wshape[0], wshape[1], 1, wshape[2]])
        kernel, strides, dilations = [1] + kernel, [1] + strides, [1] + dilations
        begins, ends, out_pad = [0] + begins, [0] + ends, [0] + out_pad
    y = _nn.conv2d_transpose(x2, w, strides=strides, padding=(begins[0], begins[1], ends[0], ends[1]),
                             dilation=dilations, groups=group, channels=wshape[1] * group, kernel_size=kernel,
                             output_padding=out_pad)
    if b is not None:
        y = _nn.bias_add(y, b, axis=1)
    return _from_2d(ctx, y) if was_1d else y


# -- matrix products ---------------------------------------------------------------------------------------------
def matmul(ctx, a, b):
    """numpy.matmul semantics on static shapes, via nn.dense (2-D right operand) or nn.batch_matmul."""
    ashape, bshape = ctx.shape(a), ctx.shape(b)
    squeeze_a = squeeze_b = False
    if len(ashape) == 1:
        a, ashape, squeeze_a = _op.reshape(a, [1, ashape[0]]), (1, ashape[0]), True
    if len(bshape) == 1:
        b, bshape, squeeze_b = _op.reshape(b, [bshape[0], 1]), (bshape[0], 1), True
    if ashape[-1] != bshape[-2]:
        raise ctx.error(f"MatMul of shapes {ashape} and {bshape}: inner dimensions differ")
    m, k, n = ashape[-2], ashape[-1], bshape[-1]
    if len(bshape) == 2:
        lead = ashape[:-1]
        a2 = _op.reshape(a, [int(np.prod(lead)), k]) if len(ashape) != 2 else a
        out = _nn.dense(a2, _op.transpose(b, [1, 0]), units=n)
        out_shape = list(lead) + [n]
        if len(ashape) != 2:
            out = _op.reshape(out, out_shape)
    else:
        batch = np.broadcast_shapes(tuple(ashape[:-2]), tuple(bshape[:-2]))
        nb = int(np.prod(batch)) if batch else 1
        if tuple(ashape[:-2]) != tuple(batch):
            a = _op.broadcast_to(a, list(batch) + [m, k])
        if tuple(bshape[:-2]) != tuple(batch):
            b = _op.broadcast_to(b, list(batch) + [k, n])
        out = _nn.batch_matmul(_op.reshape(a, [nb, m, k]), _op.reshape(b, [nb, k, n]), transpose_b=False)
        out_shape = list(batch) + [m, n]
        out = _op.reshape(out, out_shape)
    if squeeze_a or squeeze_b:
        final = out_shape[:-2] + ([] if squeeze_a else [m]) + ([] if squeeze_b else [n])
        out = _op.reshape(out, final)
    return out


@onnx_op("MatMul", since=1)
def _mat_mul(inputs, attr, ctx):
    return matmul(ctx, inputs[0], inputs[1])


@onnx_op("Gemm", since=1)
def _gemm(inputs, attr, ctx):
    a, b = inputs[0], inputs[1]
    c = inputs[2] if len(inputs) > 2 else None
    alpha, beta = float(attr.get("alpha", 1.0)), float(attr.get("beta", 1.0))
    dt = ctx.dtype(a)
    if int(attr.get("transA", 0)):
        a = _op.transpose(a, [1, 0])
    if not int(attr.get("transB", 0)):
        b = _op.transpose(b, [1, 0])
    out = _nn.dense(a, b)
    if alpha != 1.0:
        out = _op.multiply(out, scalar(alpha, dt))
    if c is not None and beta != 0.0:
        if beta != 1.0:
            c = _op.multiply(c, scalar(beta, dt))
        out = _op.add(out, c)
    return out


@onnx_op("Einsum", since=12)
def _einsum(inputs, attr, ctx):
    return einsum(ctx, attr["equation"], [i for i in inputs if i is not None])


# -- pooling -----------------------------------------------------------------------------------------------------
def _pool(ctx, inputs, attr, kind):
    x = inputs[0]
    xshape = ctx.shape(x, dynamic_ok=True)
    nd = len(xshape) - 2
    kernel = list(attr.get("kernel_shape", []))
    if len(kernel) != nd:
        raise ctx.error(f"kernel_shape {kernel} must have {nd} values")
    strides, dilations = _spatial_attrs(ctx, attr, nd, kernel)
    if int(attr.get("storage_order", 0)):
        raise ctx.unsupported("storage_order=1")
    begins, ends = auto_pads(ctx, attr, xshape[2:], kernel, strides, dilations)
    ceil_mode = bool(int(attr.get("ceil_mode", 0)))
    count_pad = bool(int(attr.get("count_include_pad", 0)))
    if ceil_mode and any(not isinstance(n, int) for n in xshape[2:]):
        raise ctx.unsupported("ceil_mode=1 over a dynamic spatial size")
    if ceil_mode and (kind == "MaxPool" or not count_pad):
        # ONNX's ceil mode drops a last window that would start in the end padding; express the output size
        # it asks for as extra end padding in floor mode (padding is ignored by max and by uncounted averages)
        ends = list(ends)
        for k2, (n, kk, st, d) in enumerate(zip(xshape[2:], kernel, strides, dilations)):
            span = n + begins[k2] + ends[k2] - ((kk - 1) * d + 1)
            out = -(-span // st) + 1
            if (out - 1) * st >= n + begins[k2]:
                out -= 1
            ends[k2] += max((out - 1) * st + (kk - 1) * d + 1 - (n + begins[k2] + ends[k2]), 0)
        ceil_mode = False
    x2, was_1d = _to_2d(ctx, x, kind)
    if was_1d:
        kernel, strides, dilations = [1] + kernel, [1] + strides, [1] + dilations
        begins, ends = [0] + begins, [0] + ends
    padding = (begins[0], begins[1], ends[0], ends[1])
    if kind == "MaxPool":
        y = _nn.max_pool2d(x2, pool_size=kernel, strides=strides, dilation=dilations, padding=padding,
                           ceil_mode=ceil_mode)
    else:
        y = _nn.avg_pool2d(x2, pool_size=kernel, strides=strides, dilation=dilations, padding=padding,
                           ceil_mode=ceil_mode, count_include_pad=count_pad)
    return _from_2d(ctx, y) if was_1d else y


@onnx_op("MaxPool", since=1)
def _max_pool(inputs, attr, ctx):
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        raise ctx.unsupported("the Indices output of MaxPool")
    if not _is_float(ctx.dtype(inputs[0])):
        raise ctx.unsupported(f"MaxPool on {ctx.dtype(inputs[0])}")
    return _pool(ctx, inputs, attr, "MaxPool")


@onnx_op("AveragePool", since=1)
def _average_pool(inputs, attr, ctx):
    return _pool(ctx, inputs, attr, "AveragePool")


@onnx_op("LpPool", since=11)
def _lp_pool(inputs, attr, ctx):
    x = inputs[0]
    dt = ctx.dtype(x)
    p = float(attr.get("p", 2))
    kernel = list(attr.get("kernel_shape", []))
    powered = _op.power(_op.abs(x), scalar(p, dt))
    pattr = dict(attr, count_include_pad=1)
    s = _op.multiply(_pool(ctx, [powered], pattr, "AveragePool"), scalar(float(np.prod(kernel)), dt))
    return _op.power(s, scalar(1.0 / p, dt))


def _global_pool(pool2d, reducer):
    """A global pool: the 2-D Relay op on 4-D inputs, else ``reducer`` over every spatial axis."""
    def convert(inputs, attr, ctx):
        x = inputs[0]
        if ctx.ndim(x) == 4:
            return pool2d(x)
        return reducer(x, axis=list(range(2, ctx.ndim(x))), keepdims=True)
    return convert


onnx_op("GlobalAveragePool", since=1)(_global_pool(_nn.global_avg_pool2d, _op.mean))
onnx_op("GlobalMaxPool", since=1)(_global_pool(_nn.global_max_pool2d, _op.max))


# -- normalization -----------------------------------------------------------------------------------------------
@onnx_op("BatchNormalization", since=1)
def _batch_normalization(inputs, attr, ctx):
    if int(attr.get("training_mode", 0)) or (ctx.opset < 9 and not int(attr.get("is_test", 1))):
        raise ctx.unsupported("BatchNormalization in training mode")
    x, gamma, beta, mean, var = inputs[:5]
    return _nn.batch_norm(x, gamma, beta, mean, var, axis=1, epsilon=float(attr.get("epsilon", 1e-5)))[0]


def _channel_view(ctx, t, ndim):
    """A per-channel [C] tensor shaped to broadcast against an [N, C, ...] tensor."""
    c = ctx.shape(t)[0]
    return _op.reshape(t, [c] + [1] * (ndim - 2))


def _normalize(x, axes, eps, dt):
    mean = _op.mean(x, axis=axes, keepdims=True)
    centered = _op.subtract(x, mean)
    var = _op.mean(_op.multiply(centered, centered), axis=axes, keepdims=True)
    inv = _op.rsqrt(_op.add(var, scalar(eps, dt)))
    return _op.multiply(centered, inv), mean, inv


@onnx_op("InstanceNormalization", since=1)
def _instance_normalization(inputs, attr, ctx):
    x, scale, bias = inputs
    nd = ctx.ndim(x)
    y, _, _ = _normalize(x, list(range(2, nd)), float(attr.get("epsilon", 1e-5)), ctx.dtype(x))
    return _op.add(_op.multiply(y, _channel_view(ctx, scale, nd)), _channel_view(ctx, bias, nd))


@onnx_op("LayerNormalization", since=17)
def _layer_normalization(inputs, attr, ctx):
    x, scale = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    shape = ctx.shape(x, dynamic_ok=True)
    nd = len(shape)
    axis = int(attr.get("axis", -1)) % nd
    eps = float(attr.get("epsilon", 1e-5))
    dt = ctx.dtype(x)
    extra_outputs = any(o for o in ctx.node.output[1:])
    if (axis == nd - 1 and not extra_outputs and ctx.shape(scale) == (shape[-1],)
            and (bias is None or ctx.shape(bias) == (shape[-1],))):
        b = bias if bias is not None else scalar(np.zeros(shape[-1]), dt)
        return _nn.layer_norm(x, scale, b, axis=-1, epsilon=eps)
    y, mean, inv = _normalize(x, list(range(axis, nd)), eps, dt)
    y = _op.multiply(y, scale)
    if bias is not None:
        y = _op.add(y, bias)
    return [y, mean, inv]


@onnx_op("RMSNormalization", since=23)
def _rms_normalization(inputs, attr, ctx):
    x, scale = inputs[0], inputs[1]
    nd = ctx.ndim(x)
    axis = int(attr.get("axis", -1)) % nd
    dt = ctx.dtype(x)
    ms = _op.mean(_op.multiply(x, x), axis=list(range(axis, nd)), keepdims=True)
    return _op.multiply(_op.multiply(x, _op.rsqrt(_op.add(ms, scalar(float(attr.get("epsilon", 1e-5)), dt)))),
                        scale)


def _group_norm(inputs, attr, ctx, per_group_params):
    x, scale, bias = inputs
    shape = ctx.shape(x)
    g = int(attr["num_groups"])
    n, c = shape[0], shape[1]
    if c % g:
        raise ctx.error(f"{c} channels do not divide into {g} groups")
    dt = ctx.dtype(x)
    grouped = _op.reshape(x, [n, g, -1])
    y, _, _ = _normalize(grouped, [2], float(attr.get("epsilon", 1e-5)), dt)
    y = _op.reshape(y, list(shape))
    if per_group_params:
        scale = _op.repeat(scale, c // g, axis=0)
        bias = _op.repeat(bias, c // g, axis=0)
    nd = len(shape)
    return _op.add(_op.multiply(y, _channel_view(ctx, scale, nd)), _channel_view(ctx, bias, nd))


@onnx_op("GroupNormalization", since=18)
def _group_normalization_v18(inputs, attr, ctx):
    return _group_norm(inputs, attr, ctx, per_group_params=True)


@onnx_op("GroupNormalization", since=21)
def _group_normalization_v21(inputs, attr, ctx):
    return _group_norm(inputs, attr, ctx, per_group_params=False)


@onnx_op("LpNormalization", since=1)
def _lp_normalization(inputs, attr, ctx):
    x = inputs[0]
    axis = int(attr.get("axis", -1))
    p = int(attr.get("p", 2))
    if p == 1:
        norm = _op.sum(_op.abs(x), axis=[axis], keepdims=True)
    elif p == 2:
        norm = _op.sqrt(_op.sum(_op.multiply(x, x), axis=[axis], keepdims=True))
    else:
        raise ctx.error(f"p must be 1 or 2, got {p}")
    zero = scalar(0, ctx.dtype(x))
    safe = _op.where(_op.equal(norm, zero), scalar(1, ctx.dtype(x)), norm)
    return _op.where(_op.equal(norm, zero), zero, _op.divide(x, safe))


@onnx_op("MeanVarianceNormalization", since=9)
def _mean_variance_normalization(inputs, attr, ctx):
    x = inputs[0]
    dt = ctx.dtype(x)
    axes = list(attr.get("axes", [0, 2, 3]))
    mean = _op.mean(x, axis=axes, keepdims=True)
    centered = _op.subtract(x, mean)
    std = _op.sqrt(_op.mean(_op.multiply(centered, centered), axis=axes, keepdims=True))
    return _op.divide(centered, _op.add(std, scalar(1e-9, dt)))


@onnx_op("LRN", since=1)
def _lrn(inputs, attr, ctx):
    x = inputs[0]
    shape = ctx.shape(x)
    dt = ctx.dtype(x)
    size = int(attr["size"])
    alpha, beta, bias = float(attr.get("alpha", 1e-4)), float(attr.get("beta", 0.75)), float(attr.get("bias", 1.0))
    n, c = shape[0], shape[1]
    rest = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    sq = _op.reshape(_op.multiply(x, x), [n, 1, c, rest])
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    window = _nn.avg_pool2d(sq, pool_size=(size, 1), strides=(1, 1), padding=(lo, 0, hi, 0),
                            count_include_pad=True)
    sums = _op.reshape(_op.multiply(window, scalar(float(size), dt)), list(shape))
    denom = _op.power(_op.add(scalar(bias, dt), _op.multiply(scalar(alpha / size, dt), sums)), scalar(beta, dt))
    return _op.divide(x, denom)


# -- softmax family ------------------------------------------------------------------------------------------------
def _coerce_2d(ctx, x, axis, fn):
    """Opset < 13 semantics: flatten to [prod(shape[:axis]), prod(shape[axis:])], apply on axis 1, restore."""
    shape = ctx.shape(x)
    axis = axis % len(shape) if shape else 0
    if axis == len(shape) - 1:
        return fn(x, -1)
    flat = _op.reshape(x, [int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))])
    return _op.reshape(fn(flat, 1), list(shape))


def _hardmax(ctx, x, axis):
    shape = ctx.shape(x)
    axis = axis % len(shape)
    idx = _op.argmax(x, axis=[axis], keepdims=True)
    pos = _op.arange(shape[axis], dtype="int32")
    pos = _op.reshape(pos, [shape[axis]] + [1] * (len(shape) - axis - 1))
    return _op.cast(_op.equal(idx, pos), ctx.dtype(x))


def _softmax_family(name, fn_by_axis):
    """Register ``name``: before opset 13 on the input flattened to 2-D at ``axis``, from 13 on one axis."""
    @onnx_op(name, since=1)
    def convert_v1(inputs, attr, ctx):
        x = inputs[0]
        return _coerce_2d(ctx, x, int(attr.get("axis", 1)), lambda t, a: fn_by_axis(ctx, t, a))

    @onnx_op(name, since=13)
    def convert_v13(inputs, attr, ctx):
        return fn_by_axis(ctx, inputs[0], int(attr.get("axis", -1)))


_softmax_family("Softmax", lambda ctx, x, a: _nn.softmax(x, axis=a))
_softmax_family("LogSoftmax", lambda ctx, x, a: _nn.log_softmax(x, axis=a))
_softmax_family("Hardmax", _hardmax)


# -- Dropout ---------------------------------------------------------------------------------------------------------
def _dropout_mask(ctx, x):
    return _op.ones(ctx.shape(x), "bool")


@onnx_op("Dropout", since=1)
def _dropout_v1(inputs, attr, ctx):
    x = inputs[0]
    if ctx.opset < 7 and not int(attr.get("is_test", 1)):
        raise ctx.unsupported("Dropout in training mode")
    return [x, _dropout_mask(ctx, x)]


@onnx_op("Dropout", since=12)
def _dropout_v12(inputs, attr, ctx):
    x = inputs[0]
    training = inputs[2] if len(inputs) > 2 else None
    if training is not None:
        mode = ctx.value(training)
        if mode is None or bool(np.asarray(mode).reshape(-1)[0]):
            ratio = ctx.value(inputs[1]) if len(inputs) > 1 and inputs[1] is not None else 0.5
            if mode is None or float(np.asarray(ratio).reshape(-1)[0]) != 0.0:
                raise ctx.unsupported("Dropout in training mode (training_mode=true)")
    return [x, _dropout_mask(ctx, x)]


# -- Resize / Upsample --------------------------------------------------------------------------------------------
_RESIZE_MODES = {"nearest": "nearest_neighbor", "linear": "linear", "cubic": "cubic"}


def _resize(ctx, x, out_sizes, method, coord_mode, nearest_mode, cubic_a, exclude, extrapolation):
    shape = ctx.shape(x)
    nd = len(shape)
    if nd not in (3, 4) or tuple(out_sizes[:2]) != tuple(shape[:2]):
        raise ctx.unsupported(f"resizing a rank-{nd} tensor {shape} to {tuple(out_sizes)} (kiln resizes the last one "
                              f"or two axes of 3-D/4-D tensors)")
    if coord_mode == "tf_crop_and_resize":
        raise ctx.unsupported("coordinate_transformation_mode 'tf_crop_and_resize'")
    if coord_mode == "half_pixel_symmetric":
        raise ctx.unsupported("coordinate_transformation_mode 'half_pixel_symmetric'")
    x4 = x if nd == 4 else _op.reshape(x, [shape[0], shape[1], 1, shape[2]])
    size = list(out_sizes[2:]) if nd == 4 else [1, out_sizes[2]]
    rounding = nearest_mode if method == "nearest_neighbor" else ""
    y = _image.resize2d(x4, size, layout="NCHW", method=method, coordinate_transformation_mode=coord_mode,
                        rounding_method=rounding, cubic_alpha=cubic_a, cubic_exclude=exclude,
                        extrapolation_value=extrapolation)
    return y if nd == 4 else _op.reshape(y, list(out_sizes))


def _sizes_from_scales(ctx, shape, scales):
    scales = [float(s) for s in np.asarray(scales).reshape(-1)]
    if len(scales) != len(shape):
        raise ctx.error(f"scales {scales} must have one value per axis of the {len(shape)}-D input")
    sizes = [int(math.floor(n * s + 1e-9)) for n, s in zip(shape, scales)]
    for n, s, o in zip(shape, scales, sizes):
        if n != o and abs(o / n - s) > 1e-6:
            raise ctx.unsupported(f"a scale {s} that is not output/input ({o}/{n}) (kiln resizes by sizes)")
    return sizes


@onnx_op("Resize", since=10)
def _resize_v10(inputs, attr, ctx):
    x, scales = inputs[0], inputs[1]
    mode = _RESIZE_MODES.get(attr.get("mode", "nearest"))
    if mode is None or mode == "cubic":
        raise ctx.error(f"mode must be nearest or linear, got {attr.get('mode')!r}")
    sizes = _sizes_from_scales(ctx, ctx.shape(x), ctx.require_value(scales, "scales"))
    return _resize(ctx, x, sizes, mode, "asymmetric", "floor", -0.75, 0, 0.0)


@onnx_op("Resize", since=11)
def _resize_v11(inputs, attr, ctx):
    x = inputs[0]
    scales = inputs[2] if len(inputs) > 2 else None
    sizes = inputs[3] if len(inputs) > 3 else None
    shape = ctx.shape(x)
    if int(attr.get("antialias", 0)):
        raise ctx.unsupported("antialias=1")
    mode = _RESIZE_MODES.get(attr.get("mode", "nearest"))
    if mode is None:
        raise ctx.error(f"mode must be nearest, linear or cubic, got {attr.get('mode')!r}")
    axes = attr.get("axes")
    nd = len(shape)
    axes = [a % nd for a in axes] if axes is not None else list(range(nd))
    scale_given = scales is not None and ctx.shape(scales) != (0,)
    size_v = ctx.require_value(sizes, "sizes") if sizes is not None and not scale_given else None
    if size_v is not None and np.asarray(size_v).size:
        req = [int(s) for s in np.asarray(size_v).reshape(-1)]
        policy = attr.get("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            ratios = [req[k] / shape[a] for k, a in enumerate(axes)]
            r = min(ratios) if policy == "not_larger" else max(ratios)
            req = [int(math.floor(r * shape[a] + 0.5)) for a in axes]
        out = list(shape)
        for k, a in enumerate(axes):
            out[a] = req[k]
    else:
        scale_v = ctx.require_value(scales, "scales") if scales is not None else None
        if scale_v is None or not np.asarray(scale_v).size:
            raise ctx.error("one of scales or sizes is required")
        full = [1.0] * nd
        for k, a in enumerate(axes):
            full[a] = float(np.asarray(scale_v).reshape(-1)[k])
        out = _sizes_from_scales(ctx, shape, full)
    return _resize(ctx, x, out, mode, attr.get("coordinate_transformation_mode", "half_pixel"),
                   attr.get("nearest_mode", "round_prefer_floor"), float(attr.get("cubic_coeff_a", -0.75)),
                   int(attr.get("exclude_outside", 0)), float(attr.get("extrapolation_value", 0.0)))


@onnx_op("Upsample", since=7)
def _upsample(inputs, attr, ctx):
    x = inputs[0]
    scales = attr.get("scales") if len(inputs) < 2 else ctx.require_value(inputs[1], "scales")
    mode = _RESIZE_MODES.get(attr.get("mode", "nearest"))
    if mode is None or mode == "cubic":
        raise ctx.error(f"mode must be nearest or linear, got {attr.get('mode')!r}")
    sizes = _sizes_from_scales(ctx, ctx.shape(x), scales)
    return _resize(ctx, x, sizes, mode, "asymmetric", "floor", -0.75, 0, 0.0)


# -- losses ------------------------------------------------------------------------------------------------------
def nll_loss(ctx, x, target, weight, reduction, ignore_index):
    """NegativeLogLikelihoodLoss on log-probabilities ``x`` [N, C, d...] and class indices ``target`` [N, d...]."""
    dt = ctx.dtype(x)
    tshape = ctx.shape(target)
    t = _op.cast(target, "int64")
    mask = None
    if ignore_index is not None:
        mask = _op.not_equal(t, scalar(int(ignore_index), "int64"))
        t = _op.where(mask, t, scalar(0, "int64"))
    picked = _op.gather(x, 1, _op.reshape(_op.cast(t, "int32"), [tshape[0], 1] + list(tshape[1:])))
    loss = _op.negative(_op.reshape(picked, list(tshape)))
    wt = _op.take(weight, t, axis=0) if weight is not None else None
    if mask is not None:
        wt = _op.where(mask, wt if wt is not None else scalar(1, dt), scalar(0, dt))
    if wt is not None:
        loss = _op.multiply(loss, wt)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return _op.sum(loss)
    if reduction != "mean":
        raise ctx.error(f"reduction must be none, sum or mean, got {reduction!r}")
    if wt is None:
        return _op.mean(loss)
    if mask is None and ctx.shape(wt) != tuple(tshape):
        wt = _op.broadcast_to(wt, list(tshape))
    return _op.divide(_op.sum(loss), _op.sum(wt))


@onnx_op("NegativeLogLikelihoodLoss", since=12)
def _negative_log_likelihood_loss(inputs, attr, ctx):
    weight = inputs[2] if len(inputs) > 2 else None
    return nll_loss(ctx, inputs[0], inputs[1], weight, attr.get("reduction", "mean"), attr.get("ignore_index"))


@onnx_op("SoftmaxCrossEntropyLoss", since=12)
def _softmax_cross_entropy_loss(inputs, attr, ctx):
    scores, labels = inputs[0], inputs[1]
    weight = inputs[2] if len(inputs) > 2 else None
    log_prob = _nn.log_softmax(scores, axis=1)
    loss = nll_loss(ctx, log_prob, labels, weight, attr.get("reduction", "mean"), attr.get("ignore_index"))
    return [loss, log_prob]
