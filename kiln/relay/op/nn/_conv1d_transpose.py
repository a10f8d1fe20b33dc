"""``nn.conv1d_transpose`` (TVM's op): transposed 1-D convolution, NCW data and IOW weight.

Compiled through ``topi.nn.group_conv1d_transpose_ncw`` (the 3-D transposed convolution of unit depth and
height); the reference is the 3-D numpy one on the same expansion. Other layouts are refused by the relation.
"""
from __future__ import annotations

from ....error import TypeInferenceError
from ....ir.attrs import Attrs, Field
from ....ir.op import OpPattern
from ....ir.type import TensorType
from .. import op_attrs as A
from ..op_attrs import _int_tuple as _ints
from .._define import define_op, topi_compute
from ._any_channels import channels_from_weight
from ._spatial_attrs import pad_tuple
from ..type_relations import is_any, shape_text, tensor_arg
from .nn import _call, _dtype
from ....topi.testing import conv3d_transpose_ncdhw_python

__all__ = ["conv1d_transpose"]


def _single(v, what):
    v = _ints(v)
    if len(v) != 1:
        raise TypeInferenceError(f"conv1d_transpose: {what} must have one value, got {v}")
    return v[0]


def _pad2(v):
    return pad_tuple(v, 1, "conv1d_transpose")


class Conv1DTransposeAttrs(Attrs):
    type_key = "relay.attrs.Conv1DTransposeAttrs"
    fields = {"channels": Field(None, A._int), "kernel_size": Field(None, A._opt_int_tuple),
              "strides": Field((1,), _ints), "padding": Field((0, 0), _ints), "output_padding": Field((0,), _ints),
              "dilation": Field((1,), _ints), "groups": Field(1, int), "data_layout": "NCW", "kernel_layout": "IOW",
              "out_layout": "", "out_dtype": Field("", A._dtype_or_empty)}


def conv1d_transpose_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    weight = tensor_arg(arg_types, 1, "weight")
    for what, got, want in (("data_layout", attrs.data_layout, "NCW"), ("kernel_layout", attrs.kernel_layout, "IOW")):
        if got not in ("", want):
            raise TypeInferenceError(f"conv1d_transpose: kiln supports {what} {want}, got {got}")
    if len(data.shape) != 3 or len(weight.shape) != 3:
        raise TypeInferenceError(f"conv1d_transpose: expects 3-d data and weight, got {shape_text(data.shape)} "
                                 f"and {shape_text(weight.shape)}")
    n, c, w = data.shape
    cin, opg, k = weight.shape
    if cin != c or attrs.groups < 1 or c % attrs.groups:
        raise TypeInferenceError(f"conv1d_transpose: data {shape_text(data.shape)} has {c} channels but weight "
                                 f"{shape_text(weight.shape)} (IOW) with groups={attrs.groups} does not fit")
    s, d = _single(attrs.strides, "strides"), _single(attrs.dilation, "dilation")
    op, (pl, pr) = _single(attrs.output_padding, "output_padding"), _pad2(attrs.padding)
    if op >= max(s, d):
        raise TypeInferenceError(f"conv1d_transpose: output_padding {op} must be smaller than the stride {s} or "
                                 f"the dilation {d}")
    out = (w - 1) * s + (k - 1) * d + 1 - pl - pr + op
    if not is_any(out) and out <= 0:
        raise TypeInferenceError(f"conv1d_transpose: the padding {attrs.padding} leaves no output")
    out_c = opg * attrs.groups
    if attrs.channels is not None and attrs.channels != out_c:
        raise TypeInferenceError(f"conv1d_transpose: channels={attrs.channels} but the weight gives {out_c}")
    return TensorType((n, out_c, out), attrs.out_dtype or data.dtype)


def conv1d_transpose_ref(attrs, inputs, out_type):
    data, weight = inputs
    pl, pr = _pad2(attrs.padding)
    out = conv3d_transpose_ncdhw_python(data[:, :, None, None, :], weight[:, :, None, None, :],
                                        (1, 1, _single(attrs.strides, "strides")), (0, 0, pl, 0, 0, pr),
                                        (0, 0, _single(attrs.output_padding, "output_padding")), groups=attrs.groups,
                                        dilation=(1, 1, _single(attrs.dilation, "dilation")))
    return out[:, :, 0, 0, :]


define_op("nn.conv1d_transpose", num_inputs=2, args=("data", "weight"), attrs=Conv1DTransposeAttrs,
          rel=channels_from_weight(conv1d_transpose_rel, "transpose"), rel_name="Conv1DTranspose",
          pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
          reference=conv1d_transpose_ref, level=2,
          compute=topi_compute("nn.group_conv1d_transpose_ncw", "nn.conv1d_transpose", lambda a, i, t: [
              i[0], i[1], _single(a.strides, "strides"), _pad2(a.padding), a.out_dtype or t.dtype,
              _single(a.output_padding, "output_padding"), a.groups, _single(a.dilation, "dilation")]))


def conv1d_transpose(data, weight, strides=(1,), padding=(0,), output_padding=(0,), dilation=(1,), groups=1,
                     channels=None, kernel_size=None, data_layout="NCW", kernel_layout="IOW", out_layout="",
                     out_dtype=""):
    """Transposed 1-D convolution (NCW data, IOW weight), TVM's ``relay.nn.conv1d_transpose``."""
    return _call("nn.conv1d_transpose", [data, weight], strides=_ints(strides), padding=_pad2(padding),
                 output_padding=_ints(output_padding), dilation=_ints(dilation), groups=groups, channels=channels,
                 kernel_size=_ints(kernel_size) if kernel_size is not None else None, data_layout=data_layout,
                 kernel_layout=kernel_layout, out_layout=out_layout, out_dtype=_dtype(out_dtype))
