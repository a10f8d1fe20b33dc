"""More nn ops frontends need: instance_norm, l2_normalize, lrn, conv1d, pool1d, depth_to_space,
space_to_depth, mirror_pad (registrations, constructors live in ``nn.py``)."""
from __future__ import annotations

import numpy as np

from ....error import TypeInferenceError
from ....ir.attrs import Attrs, Field
from ....ir.op import OpPattern
from ....ir.type import TensorType
from .. import op_attrs as A
from ..op_attrs import _int_tuple as _ints
from .._define import define_op, topi_compute
from ._any_channels import channels_from_weight
from ._spatial_attrs import pad_tuple, pooled_size, window_span
from ..type_relations import is_any, shape_text, tensor_arg
from ._nn import axis_norm_rel
from ....topi.testing import conv2d_nchw_python, pool2d_python

_P = OpPattern


class InstanceNormAttrs(Attrs):
    type_key = "relay.attrs.InstanceNormAttrs"
    fields = {"axis": Field(1, int), "epsilon": Field(1e-5, float), "center": Field(True, bool),
              "scale": Field(True, bool)}


class L2NormalizeAttrs(Attrs):
    type_key = "relay.attrs.L2NormalizeAttrs"
    fields = {"eps": Field(0.0, float), "axis": Field((), _ints)}


class LRNAttrs(Attrs):
    type_key = "relay.attrs.LRNAttrs"
    fields = {"size": Field(5, int), "axis": Field(1, int), "bias": Field(2.0, float), "alpha": Field(1e-5, float),
              "beta": Field(0.75, float)}


class Conv1DAttrs(Attrs):
    type_key = "relay.attrs.Conv1DAttrs"
    fields = {"strides": Field((1,), _ints), "padding": Field((0, 0), _ints), "dilation": Field((1,), _ints),
              "groups": Field(1, int), "channels": Field(None, int), "kernel_size": Field(None, _ints),
              "data_layout": "NCW", "kernel_layout": "OIW", "out_layout": "", "out_dtype": Field("", A._dtype_or_empty)}


class MaxPool1DAttrs(Attrs):
    type_key = "relay.attrs.MaxPool1DAttrs"
    fields = {"pool_size": Field((1,), _ints), "strides": Field((1,), _ints), "dilation": Field((1,), _ints),
              "padding": Field((0, 0), _ints), "layout": "NCW", "out_layout": "", "ceil_mode": Field(False, bool)}


class AvgPool1DAttrs(Attrs):
    type_key = "relay.attrs.AvgPool1DAttrs"
    fields = dict(MaxPool1DAttrs.fields, count_include_pad=Field(False, bool))


class SubPixelAttrs(Attrs):
    type_key = "relay.attrs.SubPixelAttrs"
    fields = {"block_size": Field(1, int), "layout": "NCHW", "mode": "DCR"}


class MirrorPadAttrs(Attrs):
    type_key = "relay.attrs.MirrorPadAttrs"
    fields = {"mode": "SYMMETRIC", "pad_width": Field((), lambda v: tuple(_ints(p) for p in v))}


# -- normalizations ------------------------------------------------------------------------------------------
_instance_norm_rel = axis_norm_rel("instance_norm")


def _instance_norm_ref(attrs, inputs, out_type):
    x, gamma, beta = inputs
    axis = attrs.axis % x.ndim
    red = tuple(d for d in range(x.ndim) if d not in (0, axis))
    xf = x.astype(np.float64)
    out = (xf - xf.mean(red, keepdims=True)) / np.sqrt(xf.var(red, keepdims=True) + attrs.epsilon)
    shape = [1] * x.ndim
    shape[axis] = -1
    if attrs.scale:
        out = out * gamma.reshape(shape)
    if attrs.center:
        out = out + beta.reshape(shape)
    return out


define_op("nn.instance_norm", num_inputs=3, args=("data", "gamma", "beta"), attrs=InstanceNormAttrs,
          rel=_instance_norm_rel, rel_name="InstanceNorm", pattern=_P.OPAQUE, reference=_instance_norm_ref, level=1)


def _l2_ref(attrs, inputs, out_type):
    x = inputs[0].astype(np.float64)
    axis = tuple(attrs.axis) if attrs.axis else None
    return x / np.sqrt(np.maximum((x * x).sum(axis=axis, keepdims=True), attrs.eps))


define_op("nn.l2_normalize", num_inputs=1, attrs=L2NormalizeAttrs, rel="Identity", pattern=_P.OUT_ELEMWISE_FUSABLE,
          reference=_l2_ref, level=2)


def _lrn_ref(attrs, inputs, out_type):
    x = inputs[0].astype(np.float64)
    axis = attrs.axis % x.ndim
    sq = np.moveaxis(x * x, axis, 0)
    half = attrs.size // 2
    padded = np.concatenate([np.zeros((half,) + sq.shape[1:]), sq, np.zeros((attrs.size - 1 - half,) + sq.shape[1:])])
    window = sum(padded[i:i + sq.shape[0]] for i in range(attrs.size))
    norm = np.moveaxis(window, 0, axis)
    return x / (attrs.bias + attrs.alpha / attrs.size * norm) ** attrs.beta


define_op("nn.lrn", num_inputs=1, attrs=LRNAttrs, rel="Identity", pattern=_P.OPAQUE, reference=_lrn_ref, level=2)


# -- 1-D convolution and pooling ---------------------------------------------------------------------------------
def _conv1d_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    weight = tensor_arg(arg_types, 1, "weight")
    if attrs.data_layout != "NCW" or attrs.kernel_layout != "OIW":
        raise TypeInferenceError(f"conv1d: kiln supports NCW data with OIW kernels, got {attrs.data_layout}/"
                                 f"{attrs.kernel_layout}")
    n, c, w = data.shape
    o, i, k = weight.shape
    if i * attrs.groups != c:
        raise TypeInferenceError(f"conv1d: data {shape_text(data.shape)} has {c} channels but weight "
                                 f"{shape_text(weight.shape)} with groups={attrs.groups} expects {i * attrs.groups}")
    pl, pr = pad_tuple(attrs.padding, 1)
    ow = (w + pl + pr - ((k - 1) * attrs.dilation[0] + 1)) // attrs.strides[0] + 1
    if not is_any(ow) and ow <= 0:
        raise TypeInferenceError(f"conv1d: a kernel of {k} does not fit the padded input {shape_text(data.shape)}")
    return TensorType((n, o, ow), attrs.out_dtype or data.dtype)


def _conv1d_ref(attrs, inputs, out_type):
    x, w = inputs
    pl, pr = pad_tuple(attrs.padding, 1)
    out = conv2d_nchw_python(x[:, :, None, :], w[:, :, None, :], (1, attrs.strides[0]), (0, pl, 0, pr),
                             groups=attrs.groups, dilation=(1, attrs.dilation[0]))
    return out[:, :, 0, :]


define_op("nn.conv1d", num_inputs=2, args=("data", "weight"), attrs=Conv1DAttrs, rel=channels_from_weight(_conv1d_rel),
          rel_name="Conv1D",
          pattern=_P.OUT_ELEMWISE_FUSABLE, reference=_conv1d_ref, level=2)


def _pool1d_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    if attrs.layout != "NCW" or len(data.shape) != 3:
        raise TypeInferenceError(f"pool1d: kiln supports NCW data, got {attrs.layout} {shape_text(data.shape)}")
    k, s, d = attrs.pool_size[0], attrs.strides[0], attrs.dilation[0]
    pl, pr = pad_tuple(attrs.padding, 1)
    span = window_span(data.shape[2], k, d, pl + pr)
    if span < 0:
        raise TypeInferenceError(f"pool1d: a window of {k} does not fit the padded input {shape_text(data.shape)}")
    ow = pooled_size(span, s, attrs.ceil_mode)
    return TensorType(data.shape[:2] + (ow,), data.dtype)


def _pool1d_ref(pool_type):
    def ref(attrs, inputs, out_type):
        pl, pr = pad_tuple(attrs.padding, 1)
        out = pool2d_python(inputs[0][:, :, None, :], (1, attrs.pool_size[0]), (1, attrs.strides[0]),
                            (0, pl, 0, pr), pool_type, ceil_mode=attrs.ceil_mode,
                            count_include_pad=getattr(attrs, "count_include_pad", False),
                            dilation=(1, attrs.dilation[0]))
        return out[:, :, 0, :]
    return ref


define_op("nn.max_pool1d", num_inputs=1, attrs=MaxPool1DAttrs, rel=_pool1d_rel, rel_name="MaxPool1D",
          pattern=_P.OUT_ELEMWISE_FUSABLE, reference=_pool1d_ref("max"), level=2)
define_op("nn.avg_pool1d", num_inputs=1, attrs=AvgPool1DAttrs, rel=_pool1d_rel, rel_name="AvgPool1D",
          pattern=_P.OUT_ELEMWISE_FUSABLE, reference=_pool1d_ref("avg"), level=2)


# -- depth_to_space / space_to_depth / mirror_pad ------------------------------------------------------------------
def _d2s_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    if attrs.layout != "NCHW" or len(data.shape) != 4:
        raise TypeInferenceError(f"depth_to_space: kiln supports NCHW, got {attrs.layout} {shape_text(data.shape)}")
    b = attrs.block_size
    n, c, h, w = data.shape
    if c % (b * b):
        raise TypeInferenceError(f"depth_to_space: {c} channels are not divisible by block_size^2 = {b * b}")
    return TensorType((n, c // (b * b), h * b, w * b), data.dtype)


def _d2s_ref(attrs, inputs, out_type):
    x = inputs[0]
    b = attrs.block_size
    n, c, h, w = x.shape
    if attrs.mode == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:  # CRD
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return y.reshape(out_type.shape)


define_op("nn.depth_to_space", num_inputs=1, attrs=SubPixelAttrs, rel=_d2s_rel, rel_name="DepthToSpace",
          pattern=_P.INJECTIVE, reference=_d2s_ref, level=5)


def _s2d_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    if attrs.layout != "NCHW" or len(data.shape) != 4:
        raise TypeInferenceError(f"space_to_depth: kiln supports NCHW, got {attrs.layout} {shape_text(data.shape)}")
    b = attrs.block_size
    n, c, h, w = data.shape
    if h % b or w % b:
        raise TypeInferenceError(f"space_to_depth: {h}x{w} is not divisible by block_size {b}")
    return TensorType((n, c * b * b, h // b, w // b), data.dtype)


def _s2d_ref(attrs, inputs, out_type):
    x = inputs[0]
    b = attrs.block_size
    n, c, h, w = x.shape
    return x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4).reshape(out_type.shape)


define_op("nn.space_to_depth", num_inputs=1, attrs=SubPixelAttrs, rel=_s2d_rel, rel_name="SpaceToDepth",
          pattern=_P.INJECTIVE, reference=_s2d_ref, level=5)


def _mirror_pad_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    if attrs.mode not in ("SYMMETRIC", "REFLECT"):
        raise TypeInferenceError(f"mirror_pad: mode must be SYMMETRIC or REFLECT, got {attrs.mode!r}")
    if len(attrs.pad_width) != len(data.shape):
        raise TypeInferenceError(f"mirror_pad: pad_width has {len(attrs.pad_width)} entries for data of rank "
                                 f"{len(data.shape)}")
    limit = 0 if attrs.mode == "SYMMETRIC" else 1
    shape = []
    for k, (n, (b, a)) in enumerate(zip(data.shape, attrs.pad_width)):
        if b < 0 or a < 0 or b > n - limit or a > n - limit:
            raise TypeInferenceError(f"mirror_pad: padding {(b, a)} does not fit axis {k} of size {n} ({attrs.mode})")
        shape.append(n + b + a)
    return TensorType(shape, data.dtype)


define_op("nn.mirror_pad", num_inputs=1, attrs=MirrorPadAttrs, rel=_mirror_pad_rel, rel_name="MirrorPad",
          pattern=_P.INJECTIVE,
          reference=lambda a, i, t: np.pad(i[0], [tuple(p) for p in a.pad_width],
                                           mode="symmetric" if a.mode == "SYMMETRIC" else "reflect"),
          compute=topi_compute("nn.mirror_pad", "nn.mirror_pad",
                               lambda a, i, t: [i[0], [p[0] for p in a.pad_width], [p[1] for p in a.pad_width],
                                                a.mode]), level=2)
