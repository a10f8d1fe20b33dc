"""``nn.max_pool2d_grad`` / ``nn.avg_pool2d_grad`` (TVM's ops): the input gradient of 2-D pooling.

Arguments ``(out_grad, data)`` and the forward op's attrs. Compiled through ``topi.nn.pool_grad`` (generic
pool schedule); the debug interpreter uses the numpy reference (kiln/topi/testing/pool_grad.py).
"""
from __future__ import annotations

from ....error import TypeInferenceError
from ....ir.op import OpPattern
from ....ir.type import TensorType
from .. import op_attrs as A
from .._define import define_op, topi_fn
from ..type_relations import shape_text, tensor_arg
from ._conv_pool import pad4, pair, pool2d_rel
from .nn import _call, _pair, get_pad_tuple2d
from ....topi.testing.pool_grad import pool2d_grad_nchw_python

__all__ = ["max_pool2d_grad", "avg_pool2d_grad"]


def pool2d_grad_rel(arg_types, attrs):
    grad = tensor_arg(arg_types, 0, "out_grad")
    data = tensor_arg(arg_types, 1, "data")
    if attrs.layout != "NCHW":
        raise TypeInferenceError(f"pool2d_grad: only the NCHW layout is supported, got {attrs.layout}")
    expected = pool2d_rel([data], attrs)
    if tuple(grad.shape) != tuple(expected.shape):
        raise TypeInferenceError(f"pool2d_grad: out_grad has shape {shape_text(grad.shape)} but pooling "
                                 f"{shape_text(data.shape)} gives {shape_text(expected.shape)}")
    return TensorType(data.shape, data.dtype)


def _ref(pool_type):
    def ref(attrs, inputs, out_type):
        grad, data = inputs
        return pool2d_grad_nchw_python(grad, data, pair(attrs.pool_size, "pool_size"), pair(attrs.strides, "strides"),
                                       pad4(attrs.padding), pool_type, ceil_mode=attrs.ceil_mode,
                                       count_include_pad=getattr(attrs, "count_include_pad", False),
                                       dilation=pair(attrs.dilation, "dilation"))
    return ref


def _compute(pool_type):
    def compute(attrs, inputs, out_type):
        grad, data = inputs
        fn = topi_fn("nn.pool_grad", f"nn.{pool_type}_pool2d_grad")
        return [fn(grad, data, pair(attrs.pool_size, "pool_size"), pair(attrs.strides, "strides"),
                   pad4(attrs.padding), pool_type, attrs.ceil_mode, getattr(attrs, "count_include_pad", False),
                   attrs.layout, pair(attrs.dilation, "dilation"))]
    compute.__name__ = f"compute_{pool_type}_pool2d_grad"
    return compute


define_op("nn.max_pool2d_grad", num_inputs=2, args=("out_grad", "data"), attrs=A.MaxPool2DAttrs,
          rel=pool2d_grad_rel, rel_name="MaxPool2DGrad", pattern=OpPattern.OPAQUE, reference=_ref("max"),
          compute=_compute("max"), level=2)
define_op("nn.avg_pool2d_grad", num_inputs=2, args=("out_grad", "data"), attrs=A.AvgPool2DAttrs,
          rel=pool2d_grad_rel, rel_name="AvgPool2DGrad", pattern=OpPattern.OPAQUE, reference=_ref("avg"),
          compute=_compute("avg"), level=2)


def max_pool2d_grad(out_grad, data, pool_size=(1, 1), strides=(1, 1), padding=(0, 0), layout="NCHW",
                    out_layout="", ceil_mode=False, dilation=(1, 1)):
    """The gradient of ``nn.max_pool2d`` with respect to ``data``."""
    return _call("nn.max_pool2d_grad", [out_grad, data], pool_size=_pair(pool_size), strides=_pair(strides),
                 dilation=_pair(dilation), padding=get_pad_tuple2d(padding), layout=layout, out_layout=out_layout,
                 ceil_mode=ceil_mode)


def avg_pool2d_grad(out_grad, data, pool_size=(1, 1), strides=(1, 1), padding=(0, 0), layout="NCHW",
                    out_layout="", ceil_mode=False, count_include_pad=True, dilation=(1, 1)):
    """The gradient of ``nn.avg_pool2d`` with respect to ``data``."""
    return _call("nn.avg_pool2d_grad", [out_grad, data], pool_size=_pair(pool_size), strides=_pair(strides),
                 dilation=_pair(dilation), padding=get_pad_tuple2d(padding), layout=layout, out_layout=out_layout,
                 ceil_mode=ceil_mode, count_include_pad=count_include_pad)
