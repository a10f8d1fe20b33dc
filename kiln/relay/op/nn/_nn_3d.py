"""3-D convolution and pooling, and 1-D / 3-D adaptive pooling (TVM's nn.conv3d, nn.conv3d_transpose,
nn.max_pool3d, nn.avg_pool3d, nn.adaptive_{avg,max}_pool{1,3}d). kiln computes channel-first layouts
(NCDHW data, OIDHW / IODHW kernels, NCW for 1-D); relations reject others with a clear message."""
from __future__ import annotations

from ....error import TypeInferenceError
from ....ir.attrs import Attrs, Field
from ....ir.op import OpPattern
from ....ir.type import TensorType
from .. import op_attrs as A
from ..op_attrs import _int_tuple as _ints
from .._define import define_op, topi_compute
from ._any_channels import channels_from_weight
from ._spatial_attrs import ntuple, pad_tuple, pooled_size, window_span
from ..type_relations import is_any, shape_text, tensor_arg
from ....topi.testing import conv3d_ncdhw_python, conv3d_transpose_ncdhw_python, poolnd_python, adaptive_pool
from ....topi.utils import get_const_tuple

_P = OpPattern


def triple(v, what) -> tuple:
    return ntuple(v, 3, what)


def pad6(padding) -> tuple:
    """(front, top, left, back, bottom, right) from 1, 3 or 6 values (TVM's get_pad_tuple3d)."""
    return pad_tuple(padding, 3)


class Conv3DAttrs(Attrs):
    type_key = "relay.attrs.Conv3DAttrs"
    fields = {"strides": Field((1, 1, 1), _ints), "padding": Field((0, 0, 0), _ints),
              "dilation": Field((1, 1, 1), _ints), "groups": Field(1, int), "channels": Field(None, A._int),
              "kernel_size": Field(None, A._opt_int_tuple), "data_layout": "NCDHW", "kernel_layout": "OIDHW",
              "out_layout": "", "out_dtype": Field("", A._dtype_or_empty)}


class Conv3DTransposeAttrs(Attrs):
    type_key = "relay.attrs.Conv3DTransposeAttrs"
    fields = {"channels": Field(None, A._int), "kernel_size": Field(None, A._opt_int_tuple),
              "strides": Field((1, 1, 1), _ints), "padding": Field((0, 0, 0), _ints),
              "output_padding": Field((0, 0, 0), _ints), "dilation": Field((1, 1, 1), _ints),
              "groups": Field(1, int), "data_layout": "NCDHW", "kernel_layout": "IODHW", "out_layout": "",
              "out_dtype": Field("", A._dtype_or_empty)}


class MaxPool3DAttrs(Attrs):
    type_key = "relay.attrs.MaxPool3DAttrs"
    fields = {"pool_size": Field((1, 1, 1), _ints), "strides": Field((1, 1, 1), _ints),
              "dilation": Field((1, 1, 1), _ints), "padding": Field((0, 0, 0), _ints),
              "layout": "NCDHW", "out_layout": "", "ceil_mode": Field(False, bool)}


class AvgPool3DAttrs(Attrs):
    type_key = "relay.attrs.AvgPool3DAttrs"
    fields = dict(MaxPool3DAttrs.fields, count_include_pad=Field(False, bool))


class AdaptivePool1DAttrs(Attrs):
    type_key = "relay.attrs.AdaptivePool1DAttrs"
    fields = {"output_size": Field(None, A._opt_int_tuple), "layout": "NCW", "out_layout": ""}


class AdaptivePool3DAttrs(Attrs):
    type_key = "relay.attrs.AdaptivePool3DAttrs"
    fields = {"output_size": Field(None, A._opt_int_tuple), "layout": "NCDHW", "out_layout": ""}


def _check_layout(what, got, want):
    if got not in ("", want):
        raise TypeInferenceError(f"{what}: kiln supports layout {want}, got {got}")


# -- conv3d -----------------------------------------------------------------------------------------------
def conv3d_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    weight = tensor_arg(arg_types, 1, "weight")
    _check_layout("conv3d", attrs.data_layout, "NCDHW")
    _check_layout("conv3d", attrs.kernel_layout, "OIDHW")
    if len(data.shape) != 5 or len(weight.shape) != 5:
        raise TypeInferenceError(f"conv3d: expects 5-d data and weight, got {shape_text(data.shape)} and "
                                 f"{shape_text(weight.shape)}")
    n, c = data.shape[:2]
    o, i = weight.shape[:2]
    ks = tuple(weight.shape[2:])
    if attrs.groups < 1 or i * attrs.groups != c or o % attrs.groups:
        raise TypeInferenceError(f"conv3d: data {shape_text(data.shape)} has {c} channels but weight "
                                 f"{shape_text(weight.shape)} with groups={attrs.groups} expects {i * attrs.groups}")
    if attrs.channels is not None and attrs.channels != o:
        raise TypeInferenceError(f"conv3d: channels={attrs.channels} but the weight has {o} output channels")
    st, dl, p = triple(attrs.strides, "conv3d strides"), triple(attrs.dilation, "conv3d dilation"), pad6(attrs.padding)
    out = [(s + p[j] + p[j + 3] - ((k - 1) * d + 1)) // t + 1
           for j, (s, k, d, t) in enumerate(zip(data.shape[2:], ks, dl, st))]
    if any(not is_any(v) and v <= 0 for v in out):
        raise TypeInferenceError(f"conv3d: a {ks} kernel does not fit the padded input {shape_text(data.shape)}")
    return TensorType((n, o, *out), attrs.out_dtype or data.dtype)


def conv3d_ref(attrs, inputs, out_type):
    data, weight = inputs
    dt = out_type.dtype
    return conv3d_ncdhw_python(data.astype(dt), weight.astype(dt), triple(attrs.strides, "strides"),
                               pad6(attrs.padding), groups=attrs.groups, dilation=triple(attrs.dilation, "dilation"))


define_op("nn.conv3d", num_inputs=2, args=("data", "weight"), attrs=Conv3DAttrs, rel=channels_from_weight(conv3d_rel),
          rel_name="Conv3D",
          pattern=_P.OUT_ELEMWISE_FUSABLE, reference=conv3d_ref, level=2,
          compute=topi_compute("nn.group_conv3d_ncdhw", "nn.conv3d", lambda a, i, t: [
              i[0], i[1], triple(a.strides, "strides"), pad6(a.padding), triple(a.dilation, "dilation"), a.groups,
              a.out_dtype or t.dtype]))


def conv3d_transpose_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    weight = tensor_arg(arg_types, 1, "weight")
    _check_layout("conv3d_transpose", attrs.data_layout, "NCDHW")
    _check_layout("conv3d_transpose", attrs.kernel_layout, "IODHW")
    if len(data.shape) != 5 or len(weight.shape) != 5:
        raise TypeInferenceError(f"conv3d_transpose: expects 5-d data and weight, got {shape_text(data.shape)} "
                                 f"and {shape_text(weight.shape)}")
    n, c = data.shape[:2]
    cin, opg = weight.shape[:2]
    ks = tuple(weight.shape[2:])
    if cin != c or c % attrs.groups:
        raise TypeInferenceError(f"conv3d_transpose: data {shape_text(data.shape)} has {c} channels but weight "
                                 f"{shape_text(weight.shape)} (IODHW) with groups={attrs.groups} does not fit")
    st, dl = triple(attrs.strides, "strides"), triple(attrs.dilation, "dilation")
    op, p = triple(attrs.output_padding, "output_padding"), pad6(attrs.padding)
    out = [(s - 1) * t + (k - 1) * d + 1 - p[j] - p[j + 3] + o
           for j, (s, t, k, d, o) in enumerate(zip(data.shape[2:], st, ks, dl, op))]
    if any(not is_any(v) and v <= 0 for v in out):
        raise TypeInferenceError(f"conv3d_transpose: the padding {attrs.padding} leaves no output")
    out_c = opg * attrs.groups
    if attrs.channels is not None and attrs.channels != out_c:
        raise TypeInferenceError(f"conv3d_transpose: channels={attrs.channels} but the weight gives {out_c}")
    return TensorType((n, out_c, *out), attrs.out_dtype or data.dtype)


def conv3d_transpose_ref(attrs, inputs, out_type):
    data, weight = inputs
    return conv3d_transpose_ncdhw_python(data, weight, triple(attrs.strides, "strides"), pad6(attrs.padding),
                                         triple(attrs.output_padding, "output_padding"), groups=attrs.groups,
                                         dilation=triple(attrs.dilation, "dilation"))


define_op("nn.conv3d_transpose", num_inputs=2, args=("data", "weight"), attrs=Conv3DTransposeAttrs,
          rel=channels_from_weight(conv3d_transpose_rel, "transpose"), rel_name="Conv3DTranspose",
          pattern=_P.OUT_ELEMWISE_FUSABLE,
          reference=conv3d_transpose_ref, level=2,
          compute=topi_compute("nn.group_conv3d_transpose_ncdhw", "nn.conv3d_transpose", lambda a, i, t: [
              i[0], i[1], triple(a.strides, "strides"), pad6(a.padding), a.out_dtype or t.dtype,
              triple(a.output_padding, "output_padding"), a.groups, triple(a.dilation, "dilation")]))


# -- pool3d -----------------------------------------------------------------------------------------------
def pool3d_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    _check_layout("pool3d", attrs.layout, "NCDHW")
    if len(data.shape) != 5:
        raise TypeInferenceError(f"pool3d: expects NCDHW data, got {shape_text(data.shape)}")
    ks, st = triple(attrs.pool_size, "pool_size"), triple(attrs.strides, "strides")
    dl, p = triple(attrs.dilation, "dilation"), pad6(attrs.padding)
    out = []
    for j, (s, k, t, d) in enumerate(zip(data.shape[2:], ks, st, dl)):
        span = window_span(s, k, d, p[j] + p[j + 3])
        if span < 0:
            raise TypeInferenceError(f"pool3d: a {ks} window does not fit the padded input {shape_text(data.shape)}")
        out.append(pooled_size(span, t, attrs.ceil_mode))
    return TensorType(tuple(data.shape[:2]) + tuple(out), data.dtype)


def _pool3d_ref(pool_type):
    def ref(attrs, inputs, out_type):
        p = pad6(attrs.padding)
        return poolnd_python(inputs[0], triple(attrs.pool_size, "pool_size"), triple(attrs.strides, "strides"),
                             triple(attrs.dilation, "dilation"), p[:3], p[3:], pool_type,
                             count_include_pad=getattr(attrs, "count_include_pad", False),
                             ceil_mode=attrs.ceil_mode, layout="NCDHW")
    return ref


def _pool3d_compute(pool_type):
    return topi_compute("nn.pool3d", f"nn.{pool_type}_pool3d", lambda a, i, t: [
        i[0], triple(a.pool_size, "pool_size"), triple(a.strides, "strides"), triple(a.dilation, "dilation"),
        pad6(a.padding), pool_type, a.ceil_mode, "NCDHW", getattr(a, "count_include_pad", False)])


define_op("nn.max_pool3d", num_inputs=1, attrs=MaxPool3DAttrs, rel=pool3d_rel, rel_name="MaxPool3D",
          pattern=_P.OUT_ELEMWISE_FUSABLE, reference=_pool3d_ref("max"), compute=_pool3d_compute("max"), level=2)
define_op("nn.avg_pool3d", num_inputs=1, attrs=AvgPool3DAttrs, rel=pool3d_rel, rel_name="AvgPool3D",
          pattern=_P.OUT_ELEMWISE_FUSABLE, reference=_pool3d_ref("avg"), compute=_pool3d_compute("avg"), level=2)


# -- adaptive pooling, 1-d and 3-d --------------------------------------------------------------------------
def _adaptive_out(attrs, in_sizes, nd):
    size = attrs.output_size
    if size is None or len(size) == 0:
        return tuple(in_sizes)
    size = tuple(size) * nd if len(size) == 1 else tuple(size)
    if len(size) != nd or min(size) <= 0:
        raise TypeInferenceError(f"adaptive pool: output_size must be {nd} positive values, got {attrs.output_size}")
    return size


def _adaptive_rel(nd, layout):
    def rel(arg_types, attrs):
        data = tensor_arg(arg_types, 0, "data")
        _check_layout(f"adaptive_pool{nd}d", attrs.layout, layout)
        if len(data.shape) != nd + 2:
            raise TypeInferenceError(f"adaptive_pool{nd}d: expects {layout} data, got {shape_text(data.shape)}")
        return TensorType(tuple(data.shape[:2]) + _adaptive_out(attrs, data.shape[2:], nd), data.dtype)
    return rel


def _adaptive_ref(nd, pool_type, layout):
    def ref(attrs, inputs, out_type):
        x = inputs[0]
        return adaptive_pool(x, _adaptive_out(attrs, x.shape[2:], nd), pool_type, layout)
    return ref


for _nd, _layout, _attrs in ((1, "NCW", AdaptivePool1DAttrs), (3, "NCDHW", AdaptivePool3DAttrs)):
    for _kind in ("avg", "max"):
        define_op(f"nn.adaptive_{_kind}_pool{_nd}d", num_inputs=1, attrs=_attrs, rel=_adaptive_rel(_nd, _layout),
                  rel_name=f"AdaptivePool{_nd}D", pattern=_P.OUT_ELEMWISE_FUSABLE,
                  reference=_adaptive_ref(_nd, _kind, _layout), level=10,
                  compute=topi_compute(f"nn.adaptive_pool{_nd}d", f"nn.adaptive_{_kind}_pool{_nd}d",
                                       lambda a, i, t, _nd=_nd, _kind=_kind, _layout=_layout: [
                                           i[0], _adaptive_out(a, list(get_const_tuple(i[0].shape[2:])), _nd), _kind,
                                           _layout]))

del _nd, _layout, _attrs, _kind
