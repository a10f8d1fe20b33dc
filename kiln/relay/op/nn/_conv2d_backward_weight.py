"""``nn.conv2d_backward_weight`` (TVM's op): the weight gradient of a 2-D convolution from the output
gradient and the data, ``conv2d_backward_weight(grad, data, ...) -> dW``.

As in TVM the call carries ``Conv2DAttrs`` with ``data_layout`` = the grad layout, ``kernel_layout`` = the data
layout and ``out_layout`` = the kernel layout; ``kernel_size`` is required. kiln supports NCHW grad/data and an
OIHW result, compiled through ``topi.nn.conv2d_backward_weight_nchw`` (one reduction; TVM legalizes the op into
a grouped conv2d on CPU). kiln's own conv2d gradient computes the same with ``nn.conv2d`` directly.
"""
from __future__ import annotations

from ....error import TypeInferenceError
from ....ir.op import Op, OpPattern
from ....ir.type import TensorType
from .. import op_attrs as A
from .._define import define_op, topi_compute
from ..op import register_legalize, register_reduce_schedule
from ..type_relations import shape_text, tensor_arg
from .nn import _call, _dtype, _pair, get_pad_tuple2d
from ....topi.testing.conv_backward_weight import conv2d_backward_weight_nchw_python

__all__ = ["conv2d_backward_weight"]


def _check_layouts(attrs):
    got = (attrs.data_layout, attrs.kernel_layout, attrs.out_layout or "OIHW")
    if got != ("NCHW", "NCHW", "OIHW"):
        raise TypeInferenceError(f"conv2d_backward_weight: kiln supports grad_layout NCHW, data_layout NCHW and "
                                 f"kernel_layout OIHW, got {got}")


def _rel(arg_types, attrs):
    grad = tensor_arg(arg_types, 0, "grad")
    data = tensor_arg(arg_types, 1, "data")
    _check_layouts(attrs)
    if len(grad.shape) != 4 or len(data.shape) != 4:
        raise TypeInferenceError(f"conv2d_backward_weight: grad {shape_text(grad.shape)} and data "
                                 f"{shape_text(data.shape)} must be 4-d (NCHW)")
    if attrs.kernel_size is None:
        raise TypeInferenceError("conv2d_backward_weight: kernel_size must be given")
    n, o, oh, ow = grad.shape
    n2, c, h, w = data.shape
    groups = int(attrs.groups)
    if n != n2 or groups < 1 or c % groups or o % groups:
        raise TypeInferenceError(f"conv2d_backward_weight: grad {shape_text(grad.shape)} and data "
                                 f"{shape_text(data.shape)} do not fit groups={groups}")
    if attrs.channels is not None and int(attrs.channels) != o:
        raise TypeInferenceError(f"conv2d_backward_weight: channels={attrs.channels} but grad has {o} channels")
    kh, kw = (int(k) for k in attrs.kernel_size)
    sh, sw = (int(s) for s in attrs.strides)
    dh, dw = (int(d) for d in attrs.dilation)
    pt, pl, pb, pr = get_pad_tuple2d(tuple(attrs.padding))
    if (h + pt + pb - (kh - 1) * dh - 1) // sh + 1 != oh or (w + pl + pr - (kw - 1) * dw - 1) // sw + 1 != ow:
        raise TypeInferenceError(f"conv2d_backward_weight: grad {shape_text(grad.shape)} is not the output shape of "
                                 f"a conv2d of data {shape_text(data.shape)} by a {(kh, kw)} kernel with strides "
                                 f"{(sh, sw)}, padding {(pt, pl, pb, pr)} and dilation {(dh, dw)}")
    return TensorType((o, c // groups, kh, kw), attrs.out_dtype or data.dtype)


def _reference(attrs, inputs, out_type):
    return conv2d_backward_weight_nchw_python(inputs[0], inputs[1], attrs.kernel_size, attrs.strides,
                                              get_pad_tuple2d(tuple(attrs.padding)), int(attrs.groups),
                                              dilation=attrs.dilation)


define_op("nn.conv2d_backward_weight", num_inputs=2, args=("grad", "data"), attrs=A.Conv2DAttrs, rel=_rel,
          rel_name="Conv2DBackwardWeight", pattern=OpPattern.OPAQUE, reference=_reference, level=2,
          compute=topi_compute("nn.conv2d_backward_weight_nchw", "nn.conv2d_backward_weight", lambda a, i, t: [
              i[0], i[1], a.kernel_size, a.strides, get_pad_tuple2d(tuple(a.padding)), a.dilation, a.groups,
              a.out_dtype or t.dtype]))
if not Op.get("nn.conv2d_backward_weight").has_attr("FTVMStrategy"):
    register_reduce_schedule("nn.conv2d_backward_weight")


def conv2d_backward_weight(grad, data, strides=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, channels=None,
                           kernel_size=None, grad_layout="NCHW", data_layout="NCHW", kernel_layout="OIHW",
                           out_dtype=""):
    """The weight gradient of ``conv2d(data, W)`` given its output gradient (TVM's
    ``relay.nn.conv2d_backward_weight``; kernel_size is required)."""
    return _call("nn.conv2d_backward_weight", [grad, data], strides=_pair(strides),
                 padding=get_pad_tuple2d(padding), dilation=_pair(dilation), groups=groups, channels=channels,
                 kernel_size=_pair(kernel_size) if kernel_size is not None else None, data_layout=grad_layout,
                 kernel_layout=data_layout, out_layout=kernel_layout, out_dtype=_dtype(out_dtype))


def _legalize(attrs, inputs, types):
    """As TVM on CPU: the weight gradient as an ``nn.conv2d`` of the data by the gradient (batch and channels
    exchanged, one per group), cropped to the kernel size."""
    from .._tensor_grad import _grouped_weight_grad  # the gradient module imports this package
    grad, data = inputs
    kh, kw = (int(k) for k in attrs.kernel_size)
    conv = dict(strides=tuple(int(s) for s in attrs.strides), padding=get_pad_tuple2d(tuple(attrs.padding)),
                dilation=tuple(int(d) for d in attrs.dilation))
    out = _grouped_weight_grad(data, grad, int(attrs.groups), kh, kw, conv)
    want = attrs.out_dtype or (types[1].dtype if types and types[1] is not None else "")
    if want and types[1] is not None and want != types[1].dtype:
        out = _call("cast", [out], dtype=want)
    return out


register_legalize("nn.conv2d_backward_weight", _legalize)
