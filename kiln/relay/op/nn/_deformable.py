"""``nn.deformable_conv2d`` (TVM's DeformableConv2D): NCHW data, OIHW weight, offsets
[N, 2 * deformable_groups * KH * KW, OH, OW]; computed by ``topi.nn.deformable_conv2d_nchw``."""
from __future__ import annotations

from ....error import TypeInferenceError
from ....ir.attrs import Attrs, Field
from ....ir.op import OpPattern
from ....ir.type import TensorType
from ....topi.testing import deformable_conv2d_nchw_python
from .. import op_attrs as A
from ..op_attrs import _int_tuple as _ints
from .._define import define_op, topi_compute
from ..type_relations import shape_text, tensor_arg
from ._spatial_attrs import ntuple, pad_tuple


def _pair(v, what):
    return ntuple(v, 2, what, "deformable_conv2d")


def _pad4(v):
    return pad_tuple(v, 2, "deformable_conv2d")


class DeformableConv2DAttrs(Attrs):
    type_key = "relay.attrs.DeformableConv2DAttrs"
    fields = {"strides": Field((1, 1), _ints), "padding": Field((0, 0), _ints), "dilation": Field((1, 1), _ints),
              "deformable_groups": Field(1, int), "groups": Field(1, int), "channels": Field(None, A._int),
              "kernel_size": Field(None, A._opt_int_tuple), "data_layout": "NCHW", "kernel_layout": "OIHW",
              "out_layout": "", "out_dtype": Field("", A._dtype_or_empty)}


def _rel(arg_types, attrs):
    data, offset, weight = (tensor_arg(arg_types, k, n) for k, n in enumerate(("data", "offset", "weight")))
    for what, got, want in (("data_layout", attrs.data_layout, "NCHW"), ("kernel_layout", attrs.kernel_layout, "OIHW")):
        if got not in ("", want):
            raise TypeInferenceError(f"deformable_conv2d: kiln supports {what} {want}, got {got}")
    if len(data.shape) != 4 or len(weight.shape) != 4 or len(offset.shape) != 4:
        raise TypeInferenceError(f"deformable_conv2d: expects 4-d data, offset and weight, got "
                                 f"{shape_text(data.shape)}, {shape_text(offset.shape)}, {shape_text(weight.shape)}")
    n, c, h, w = data.shape
    o, i, kh, kw = weight.shape
    g, dg = attrs.groups, attrs.deformable_groups
    if g < 1 or i * g != c or o % g:
        raise TypeInferenceError(f"deformable_conv2d: data {shape_text(data.shape)} has {c} channels but weight "
                                 f"{shape_text(weight.shape)} with groups={g} expects {i * g}")
    if dg < 1 or c % dg:
        raise TypeInferenceError(f"deformable_conv2d: {c} channels do not split into {dg} deformable groups")
    if attrs.channels is not None and attrs.channels != o:
        raise TypeInferenceError(f"deformable_conv2d: channels={attrs.channels} but the weight has {o} outputs")
    (sh, sw), (dh, dw) = _pair(attrs.strides, "strides"), _pair(attrs.dilation, "dilation")
    pt, pl, pb, pr = _pad4(attrs.padding)
    oh = (h + pt + pb - ((kh - 1) * dh + 1)) // sh + 1
    ow = (w + pl + pr - ((kw - 1) * dw + 1)) // sw + 1
    if oh <= 0 or ow <= 0:
        raise TypeInferenceError(f"deformable_conv2d: a {kh}x{kw} kernel does not fit the padded input "
                                 f"{shape_text(data.shape)}")
    want = (n, 2 * dg * kh * kw, oh, ow)
    if tuple(offset.shape) != want:
        raise TypeInferenceError(f"deformable_conv2d: offset has shape {shape_text(offset.shape)}, expected "
                                 f"{shape_text(want)} (2 * deformable_groups * KH * KW channels at the output size)")
    return TensorType((n, o, oh, ow), attrs.out_dtype or data.dtype)


def _ref(attrs, inputs, out_type):
    data, offset, weight = inputs
    out = deformable_conv2d_nchw_python(data, offset, weight, _pair(attrs.strides, "strides"),
                                        _pad4(attrs.padding), _pair(attrs.dilation, "dilation"),
                                        attrs.deformable_groups, attrs.groups)
    return out.astype(out_type.dtype)


define_op("nn.deformable_conv2d", num_inputs=3, args=("data", "offset", "weight"), attrs=DeformableConv2DAttrs,
          rel=_rel, rel_name="DeformableConv2D", pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=_ref, level=5,
          compute=topi_compute("nn.deformable_conv2d_nchw", "nn.deformable_conv2d", lambda a, i, t: [
              i[0], i[1], i[2], _pair(a.strides, "strides"), _pad4(a.padding), _pair(a.dilation, "dilation"),
              a.deformable_groups, a.groups, a.out_dtype or t.dtype]))
