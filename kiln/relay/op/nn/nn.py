"""Constructors of the neural-network ops (TVM's ``relay.nn``)."""
from __future__ import annotations

from ....ir.expr import RelayExpr
from ....ir.op import Op
from ....runtime.dtype import dtype_str
from ..dyn.nn import pad as dyn_pad
from ...expr import Call, TupleWrapper, const, Constant as _Constant

__all__ = ["conv2d", "conv2d_transpose", "contrib_conv2d_nchwc", "contrib_conv2d_winograd_weight_transform",
           "contrib_conv2d_winograd_without_weight_transform", "contrib_depthwise_conv2d_nchwc", "dense",
           "matmul", "batch_matmul", "bias_add", "batch_norm", "layer_norm", "group_norm", "softmax", "fast_softmax",
           "log_softmax", "relu", "leaky_relu", "prelu", "max_pool2d", "avg_pool2d", "global_avg_pool2d",
           "global_max_pool2d", "adaptive_avg_pool2d", "adaptive_max_pool2d", "dropout", "dropout_raw", "pad",
           "upsampling", "batch_flatten", "get_pad_tuple2d"]


def _call(name, args, **attrs):
    op = Op.get(name)
    return Call(op, list(args), op.make_attrs(**attrs) if op.attrs_type is not None else None)


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def get_pad_tuple2d(padding) -> tuple:
    """(top, left, bottom, right) from an int, a (pad_h, pad_w) pair or a 4-tuple."""
    if isinstance(padding, int):
        return (padding,) * 4
    padding = tuple(int(p) for p in padding)
    if len(padding) == 2:
        return (padding[0], padding[1], padding[0], padding[1])
    if len(padding) == 4:
        return padding
    raise ValueError(f"padding must have 1, 2 or 4 values, got {padding}")


def _dtype(d):
    return dtype_str(d) if d else ""


def conv2d(data, weight, strides=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, channels=None,
           kernel_size=None, data_layout="NCHW", kernel_layout="OIHW", out_layout="", out_dtype=""):
    """2-D convolution (layouts NCHW/NHWC/NCHW<x>c; kernels OIHW/HWIO/OIHW<i>i<o>o)."""
    return _call("nn.conv2d", [data, weight], strides=_pair(strides), padding=get_pad_tuple2d(padding),
                 dilation=_pair(dilation), groups=groups, channels=channels,
                 kernel_size=_pair(kernel_size) if kernel_size is not None else None, data_layout=data_layout,
                 kernel_layout=kernel_layout, out_layout=out_layout, out_dtype=_dtype(out_dtype))


def contrib_conv2d_nchwc(data, kernel, strides=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, channels=None,
                         kernel_size=None, data_layout="NCHW8c", kernel_layout="OIHW", out_layout="", out_dtype=""):
    """conv2d on packed NCHW<x>c data with a packed OIHW<i>i<o>o kernel."""
    return _call("nn.contrib_conv2d_NCHWc", [data, kernel], strides=_pair(strides), padding=get_pad_tuple2d(padding),
                 dilation=_pair(dilation), groups=groups, channels=channels,
                 kernel_size=_pair(kernel_size) if kernel_size is not None else None, data_layout=data_layout,
                 kernel_layout=kernel_layout, out_layout=out_layout, out_dtype=_dtype(out_dtype))


def contrib_conv2d_winograd_weight_transform(weight, tile_size):
    """The Winograd F(tile_size x tile_size, 3x3) transform of an OIHW weight: (alpha, alpha, O, I),
    alpha = tile_size + 2 (FoldConstant computes it at compile time for constant weights)."""
    return _call("nn.contrib_conv2d_winograd_weight_transform", [weight], tile_size=tile_size)


def contrib_conv2d_winograd_without_weight_transform(data, weight, tile_size, strides=(1, 1), padding=(0, 0),
                                                     dilation=(1, 1), groups=1, channels=None, kernel_size=None,
                                                     data_layout="NCHW", kernel_layout="OIHW", out_layout="",
                                                     out_dtype=""):
    """3x3 conv2d by Winograd F(tile_size x tile_size, 3x3) on a weight already transformed by
    :func:`contrib_conv2d_winograd_weight_transform` (kernel_layout describes it: HWOI, or HWOI<o>o)."""
    return _call("nn.contrib_conv2d_winograd_without_weight_transform", [data, weight], tile_size=tile_size,
                 strides=_pair(strides), padding=get_pad_tuple2d(padding), dilation=_pair(dilation), groups=groups,
                 channels=channels, kernel_size=_pair(kernel_size) if kernel_size is not None else None,
                 data_layout=data_layout, kernel_layout=kernel_layout, out_layout=out_layout,
                 out_dtype=_dtype(out_dtype))


def contrib_depthwise_conv2d_nchwc(data, kernel, strides=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1,
                                   channels=None, kernel_size=None, data_layout="NCHW8c", kernel_layout="OIHW",
                                   out_layout="", out_dtype=""):
    return _call("nn.contrib_depthwise_conv2d_NCHWc", [data, kernel], strides=_pair(strides),
                 padding=get_pad_tuple2d(padding), dilation=_pair(dilation), groups=groups, channels=channels,
                 kernel_size=_pair(kernel_size) if kernel_size is not None else None, data_layout=data_layout,
                 kernel_layout=kernel_layout, out_layout=out_layout, out_dtype=_dtype(out_dtype))


def conv2d_transpose(data, weight, strides=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, channels=None,
                     kernel_size=None, data_layout="NCHW", kernel_layout="IOHW", out_layout="", output_padding=(0, 0),
                     out_dtype=""):
    """Transposed 2-D convolution; the default IOHW weight is [in_channels, out_channels // groups, kh, kw]."""
    return _call("nn.conv2d_transpose", [data, weight], strides=_pair(strides), padding=get_pad_tuple2d(padding),
                 dilation=_pair(dilation), groups=groups, channels=channels,
                 kernel_size=_pair(kernel_size) if kernel_size is not None else None, data_layout=data_layout,
                 kernel_layout=kernel_layout, out_layout=out_layout, output_padding=_pair(output_padding),
                 out_dtype=_dtype(out_dtype))


def dense(data, weight, units=None, out_dtype=""):
    """``data @ weight.T``: data [..., K], weight [units, K]."""
    return _call("nn.dense", [data, weight], units=units, out_dtype=_dtype(out_dtype))


def matmul(tensor_a, tensor_b, units=None, out_dtype="", transpose_a=False, transpose_b=False):
    return _call("nn.matmul", [tensor_a, tensor_b], units=units, out_dtype=_dtype(out_dtype),
                 transpose_a=transpose_a, transpose_b=transpose_b)


def batch_matmul(tensor_a, tensor_b, out_dtype="", transpose_a=False, transpose_b=True):
    """Batched matmul; by default ``tensor_b`` is [batch, N, K] (transposed)."""
    return _call("nn.batch_matmul", [tensor_a, tensor_b], out_dtype=_dtype(out_dtype), transpose_a=transpose_a,
                 transpose_b=transpose_b)


def bias_add(data, bias, axis=1):
    return _call("nn.bias_add", [data, bias], axis=axis)


def batch_norm(data, gamma, beta, moving_mean, moving_var, axis=1, epsilon=1e-5, center=True, scale=True):
    """Batch normalization (inference); returns a 3-field TupleWrapper (output, mean, var)."""
    call = _call("nn.batch_norm", [data, gamma, beta, moving_mean, moving_var], axis=axis, epsilon=epsilon,
                 center=center, scale=scale)
    return TupleWrapper(call, 3)


def layer_norm(data, gamma, beta, axis=-1, epsilon=1e-5, center=True, scale=True):
    return _call("nn.layer_norm", [data, gamma, beta], axis=axis, epsilon=epsilon, center=center, scale=scale)


def group_norm(data, gamma, beta, num_groups, axis=1, epsilon=1e-5, center=True, scale=True):
    return _call("nn.group_norm", [data, gamma, beta], num_groups=num_groups, axis=axis, epsilon=epsilon,
                 center=center, scale=scale)


def softmax(data, axis=-1):
    return _call("nn.softmax", [data], axis=axis)


def fast_softmax(data, axis=-1):
    return _call("nn.fast_softmax", [data], axis=axis)


def log_softmax(data, axis=-1):
    return _call("nn.log_softmax", [data], axis=axis)


def relu(data):
    return _call("nn.relu", [data])


def leaky_relu(data, alpha=0.01):
    return _call("nn.leaky_relu", [data], alpha=alpha)


def prelu(data, alpha, axis=1):
    return _call("nn.prelu", [data, alpha], axis=axis)


def max_pool2d(data, pool_size=(1, 1), strides=(1, 1), dilation=(1, 1), padding=(0, 0), layout="NCHW",
               out_layout="", ceil_mode=False):
    return _call("nn.max_pool2d", [data], pool_size=_pair(pool_size), strides=_pair(strides),
                 dilation=_pair(dilation), padding=get_pad_tuple2d(padding), layout=layout, out_layout=out_layout,
                 ceil_mode=ceil_mode)


def avg_pool2d(data, pool_size=(1, 1), strides=(1, 1), dilation=(1, 1), padding=(0, 0), layout="NCHW",
               out_layout="", ceil_mode=False, count_include_pad=False):
    return _call("nn.avg_pool2d", [data], pool_size=_pair(pool_size), strides=_pair(strides),
                 dilation=_pair(dilation), padding=get_pad_tuple2d(padding), layout=layout, out_layout=out_layout,
                 ceil_mode=ceil_mode, count_include_pad=count_include_pad)


def global_avg_pool2d(data, layout="NCHW", out_layout=""):
    return _call("nn.global_avg_pool2d", [data], layout=layout, out_layout=out_layout)


def global_max_pool2d(data, layout="NCHW", out_layout=""):
    return _call("nn.global_max_pool2d", [data], layout=layout, out_layout=out_layout)


def adaptive_avg_pool2d(data, output_size=None, layout="NCHW", out_layout=""):
    size = [output_size] if isinstance(output_size, int) else (list(output_size) if output_size else [])
    return _call("nn.adaptive_avg_pool2d", [data], output_size=size, layout=layout, out_layout=out_layout)


def adaptive_max_pool2d(data, output_size=None, layout="NCHW", out_layout=""):
    size = [output_size] if isinstance(output_size, int) else (list(output_size) if output_size else [])
    return _call("nn.adaptive_max_pool2d", [data], output_size=size, layout=layout, out_layout=out_layout)


def dropout_raw(data, rate=0.5):
    """The dropout call itself: a tuple (output, mask)."""
    return _call("nn.dropout", [data], rate=rate)


def dropout(data, rate=0.5):
    """Dropout (the identity at inference): field 0 of ``dropout_raw``."""
    return TupleWrapper(dropout_raw(data, rate), 2)[0]


def pad(data, pad_width, pad_value=0.0, pad_mode="constant"):
    """Pad ``data`` by ``pad_width`` ((before, after) per axis) with ``pad_value`` (or edge/reflect);
    ``pad_width`` a Relay expression: dyn.nn.pad."""
    if isinstance(pad_width, _Constant):
        pad_width = pad_width.numpy().tolist()
    elif isinstance(pad_width, RelayExpr):
        return dyn_pad(data, pad_width, pad_value, pad_mode)
    if not isinstance(pad_value, RelayExpr):
        pad_value = const(pad_value)
    return _call("nn.pad", [data, pad_value], pad_width=[list(p) for p in pad_width], pad_mode=pad_mode)


def upsampling(data, scale_h=1, scale_w=1, layout="NCHW", method="nearest_neighbor", align_corners=False):
    return _call("nn.upsampling", [data], scale_h=scale_h, scale_w=scale_w, layout=layout, method=method,
                 align_corners=align_corners)


def batch_flatten(data):
    """Flatten all but the first axis: [N, ...] -> [N, prod(...)]."""
    return _call("nn.batch_flatten", [data])


# -- more nn ops (registered in _nn_extra) ---------------------------------------------------------------------
def instance_norm(data, gamma, beta, axis=1, epsilon=1e-5, center=True, scale=True):
    return _call("nn.instance_norm", [data, gamma, beta], axis=axis, epsilon=epsilon, center=center, scale=scale)


def l2_normalize(data, eps, axis=None):
    return _call("nn.l2_normalize", [data], eps=eps, axis=list(axis) if axis is not None else [])


def lrn(data, size=5, axis=1, bias=2, alpha=0.00001, beta=0.75):
    return _call("nn.lrn", [data], size=size, axis=axis, bias=bias, alpha=alpha, beta=beta)


def _one(v):
    return (v,) if isinstance(v, int) else tuple(v)


def conv1d(data, weight, strides=1, padding=0, dilation=1, groups=1, channels=None, kernel_size=None,
           data_layout="NCW", kernel_layout="OIW", out_layout="", out_dtype=""):
    pad = _one(padding)
    return _call("nn.conv1d", [data, weight], strides=_one(strides), padding=pad * 2 if len(pad) == 1 else pad,
                 dilation=_one(dilation), groups=groups, channels=channels,
                 kernel_size=_one(kernel_size) if kernel_size is not None else None, data_layout=data_layout,
                 kernel_layout=kernel_layout, out_layout=out_layout, out_dtype=_dtype(out_dtype))


def max_pool1d(data, pool_size=(1,), strides=(1,), dilation=(1,), padding=(0,), layout="NCW", out_layout="",
               ceil_mode=False):
    pad = _one(padding)
    return _call("nn.max_pool1d", [data], pool_size=_one(pool_size), strides=_one(strides), dilation=_one(dilation),
                 padding=pad * 2 if len(pad) == 1 else pad, layout=layout, out_layout=out_layout, ceil_mode=ceil_mode)


def avg_pool1d(data, pool_size=(1,), strides=(1,), dilation=(1,), padding=(0,), layout="NCW", out_layout="",
               ceil_mode=False, count_include_pad=False):
    pad = _one(padding)
    return _call("nn.avg_pool1d", [data], pool_size=_one(pool_size), strides=_one(strides), dilation=_one(dilation),
                 padding=pad * 2 if len(pad) == 1 else pad, layout=layout, out_layout=out_layout, ceil_mode=ceil_mode,
                 count_include_pad=count_include_pad)


def depth_to_space(data, block_size, layout="NCHW", mode="DCR"):
    return _call("nn.depth_to_space", [data], block_size=block_size, layout=layout, mode=mode)


def space_to_depth(data, block_size, layout="NCHW"):
    return _call("nn.space_to_depth", [data], block_size=block_size, layout=layout)


def mirror_pad(data, pad_width, mode="SYMMETRIC"):
    return _call("nn.mirror_pad", [data], pad_width=[list(p) for p in pad_width], mode=mode)


__all__ += ["instance_norm", "l2_normalize", "lrn", "conv1d", "max_pool1d", "avg_pool1d", "depth_to_space",
            "space_to_depth", "mirror_pad"]


# -- 3-d convolution / pooling and 1-d / 3-d adaptive pooling (registered in _nn_3d) -------------------------------
def _triple(v):
    return (v, v, v) if isinstance(v, int) else tuple(v)


def conv3d(data, weight, strides=(1, 1, 1), padding=(0, 0, 0), dilation=(1, 1, 1), groups=1, channels=None,
           kernel_size=None, data_layout="NCDHW", kernel_layout="OIDHW", out_layout="", out_dtype=""):
    """3-D convolution (NCDHW data, OIDHW weight)."""
    return _call("nn.conv3d", [data, weight], strides=_triple(strides), padding=_triple(padding),
                 dilation=_triple(dilation), groups=groups, channels=channels,
                 kernel_size=_triple(kernel_size) if kernel_size is not None else None, data_layout=data_layout,
                 kernel_layout=kernel_layout, out_layout=out_layout, out_dtype=_dtype(out_dtype))


def conv3d_transpose(data, weight, strides=(1, 1, 1), padding=(0, 0, 0), dilation=(1, 1, 1), groups=1,
                     channels=None, kernel_size=None, data_layout="NCDHW", kernel_layout="IODHW", out_layout="",
                     output_padding=(0, 0, 0), out_dtype=""):
    """Transposed 3-D convolution (NCDHW data, IODHW weight)."""
    return _call("nn.conv3d_transpose", [data, weight], strides=_triple(strides), padding=_triple(padding),
                 dilation=_triple(dilation), groups=groups, channels=channels,
                 kernel_size=_triple(kernel_size) if kernel_size is not None else None, data_layout=data_layout,
                 kernel_layout=kernel_layout, out_layout=out_layout, output_padding=_triple(output_padding),
                 out_dtype=_dtype(out_dtype))


def max_pool3d(data, pool_size=(1, 1, 1), strides=(1, 1, 1), dilation=(1, 1, 1), padding=(0, 0, 0),
               layout="NCDHW", out_layout="", ceil_mode=False):
    return _call("nn.max_pool3d", [data], pool_size=_triple(pool_size), strides=_triple(strides),
                 dilation=_triple(dilation), padding=_triple(padding), layout=layout, out_layout=out_layout,
                 ceil_mode=ceil_mode)


def avg_pool3d(data, pool_size=(1, 1, 1), strides=(1, 1, 1), dilation=(1, 1, 1), padding=(0, 0, 0),
               layout="NCDHW", out_layout="", ceil_mode=False, count_include_pad=False):
    return _call("nn.avg_pool3d", [data], pool_size=_triple(pool_size), strides=_triple(strides),
                 dilation=_triple(dilation), padding=_triple(padding), layout=layout, out_layout=out_layout,
                 ceil_mode=ceil_mode, count_include_pad=count_include_pad)


def _size_attr(output_size):
    if output_size is None:
        return None
    return (output_size,) if isinstance(output_size, int) else tuple(output_size)


def adaptive_avg_pool1d(data, output_size=None, layout="NCW", out_layout=""):
    return _call("nn.adaptive_avg_pool1d", [data], output_size=_size_attr(output_size), layout=layout,
                 out_layout=out_layout)


def adaptive_max_pool1d(data, output_size=None, layout="NCW", out_layout=""):
    return _call("nn.adaptive_max_pool1d", [data], output_size=_size_attr(output_size), layout=layout,
                 out_layout=out_layout)


def adaptive_avg_pool3d(data, output_size=None, layout="NCDHW", out_layout=""):
    return _call("nn.adaptive_avg_pool3d", [data], output_size=_size_attr(output_size), layout=layout,
                 out_layout=out_layout)


def adaptive_max_pool3d(data, output_size=None, layout="NCDHW", out_layout=""):
    return _call("nn.adaptive_max_pool3d", [data], output_size=_size_attr(output_size), layout=layout,
                 out_layout=out_layout)


__all__ += ["conv3d", "conv3d_transpose", "max_pool3d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_max_pool1d",
            "adaptive_avg_pool3d", "adaptive_max_pool3d"]


def deformable_conv2d(data, offset, weight, strides=(1, 1), padding=(0, 0), dilation=(1, 1), deformable_groups=1,
                      groups=1, channels=None, kernel_size=None, data_layout="NCHW", kernel_layout="OIHW",
                      out_layout="", out_dtype=""):
    """Deformable 2-D convolution (registered in _deformable): every kernel tap samples ``data`` bilinearly
    at its position moved by ``offset`` [N, 2 * deformable_groups * KH * KW, OH, OW] (dy, dx per tap)."""
    pair = (lambda v: (v, v) if isinstance(v, int) else tuple(v))
    return _call("nn.deformable_conv2d", [data, offset, weight], strides=pair(strides), padding=pair(padding),
                 dilation=pair(dilation), deformable_groups=deformable_groups, groups=groups, channels=channels,
                 kernel_size=pair(kernel_size) if kernel_size is not None else None, data_layout=data_layout,
                 kernel_layout=kernel_layout, out_layout=out_layout, out_dtype=_dtype(out_dtype))


__all__ += ["deformable_conv2d"]
