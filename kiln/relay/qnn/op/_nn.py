"""qnn.conv2d, qnn.conv2d_transpose, qnn.dense, qnn.batch_matmul (int32 accumulations of zero-point-shifted
operands), and the ops computed as dequantize -> float op -> quantize: qnn.avg_pool2d, qnn.leaky_relu,
qnn.sigmoid, qnn.tanh, qnn.hardswish.

The integer ops lower to the nn op on ``cast(x, int32) - zero_point`` operands with ``out_dtype="int32"``;
padding with zeros after the shift is padding with the zero point before it, as the ops define.
"""
from __future__ import annotations

import numpy as np

from ....error import TypeInferenceError
from ....ir.op import Op, OpPattern, register_op_attr
from ....ir.type import TensorType
from ...op import op_attrs as OA
from ...op._define import define_op
from ...op.type_relations import tensor_arg
from ...transform._util import op_call
from . import arith
from ...expr import const
from ._common import check_dtype, check_qparam, const_value, dequantize_expr, quantize_expr, shift_zp

_INT_IN = ("int8", "uint8", "int16", "uint16", "int32")


def _kernel_o_axis(layout: str) -> int:
    return layout.index("O") if "O" in layout else 0


# -- integer accumulation ops ---------------------------------------------------------------------------
class _IntOp:
    """One of qnn.conv2d / conv2d_transpose / dense / batch_matmul, defined from its nn counterpart."""

    def __init__(self, name, nn_name, attrs, arg_names, kernel_axis):
        self.name, self.nn_name, self.kernel_axis = name, nn_name, kernel_axis
        define_op(name, num_inputs=6, args=arg_names, attrs=attrs, rel=self.rel, rel_name=name,
                  pattern=OpPattern.OPAQUE, level=11, reference=self.reference)
        register_op_attr(name, "FTVMQnnCanonicalize", self.lower)

    def _nn_attrs(self, attrs):
        values = dict(attrs)
        values["out_dtype"] = attrs.out_dtype or "int32"
        return Op.get(self.nn_name).make_attrs(**values)

    def rel(self, arg_types, attrs):
        data = tensor_arg(arg_types, 0, "data")
        kernel = tensor_arg(arg_types, 1, "kernel")
        check_dtype(self.name, "data", data, _INT_IN)
        check_dtype(self.name, "kernel", kernel, _INT_IN)
        out_dtype = attrs.out_dtype or "int32"
        if out_dtype not in ("int32", "int64", "int16"):
            raise TypeInferenceError(f"{self.name}: out_dtype must be int32 (the accumulator), got {out_dtype}")
        nn_rel = Op.get(self.nn_name).get_attr("FTypeRelation")
        out = nn_rel([TensorType(data.shape, "int32"), TensorType(kernel.shape, "int32")], self._nn_attrs(attrs))
        ch = kernel.shape[self.kernel_axis(attrs)] if len(kernel.shape) else None
        check_qparam(self.name, arg_types, 2, "input_zero_point", "int32")
        check_qparam(self.name, arg_types, 3, "kernel_zero_point", "int32", ch)
        check_qparam(self.name, arg_types, 4, "input_scale", "float32")
        check_qparam(self.name, arg_types, 5, "kernel_scale", "float32", ch)
        return TensorType(out.shape, out_dtype)

    def reference(self, attrs, inputs, out_type):
        data, kernel, izp, kzp = inputs[:4]
        d = (np.asarray(data, np.int64) - np.int64(np.asarray(izp).reshape(-1)[0])).astype(np.int32)
        k = (np.asarray(kernel, np.int64)
             - arith._per_channel(np.asarray(kzp, np.int64), np.ndim(kernel), self.kernel_axis(attrs))).astype(np.int32)
        ref = Op.get(self.nn_name).get_attr("FReference")
        return ref(self._nn_attrs(attrs), [d, k], TensorType(out_type.shape, "int32"))

    def lower(self, attrs, args, ts):
        exact = self._float_exact(attrs, args, ts)
        if exact is not None:
            return exact
        d = shift_zp(args[0], ts[0], args[2], ts[2])
        k = shift_zp(args[1], ts[1], args[3], ts[3], self.kernel_axis(attrs))
        return op_call(self.nn_name, [d, k], **dict(self._nn_attrs(attrs)))

    def _float_exact(self, attrs, args, ts):
        """The op in float32 when that is provably exact, else None.

        With a constant kernel, every partial sum of an output is bounded by ``max|x - zp_x| * ||w_o - zp_w||_1``
        (the L1 norm of that output's shifted weights). Below 2**24 every float32 product and sum of integers is
        exact whatever the summation order, so the float kernels (packed, vectorized x86 schedules) compute the
        int32 result exactly; casting back loses nothing.
        """
        if self.name not in ("qnn.conv2d", "qnn.dense") or (attrs.out_dtype or "int32") != "int32":
            return None
        w, wzp, xzp = const_value(args[1]), const_value(args[3]), const_value(args[2])
        if w is None or wzp is None or xzp is None or np.size(xzp) != 1:
            return None
        axis = self.kernel_axis(attrs)
        shifted = np.asarray(w, np.int64) - arith._per_channel(np.asarray(wzp, np.int64), w.ndim, axis)
        l1 = np.abs(np.moveaxis(shifted, axis, 0)).reshape(shifted.shape[axis], -1).sum(axis=1)
        lo, hi = arith.qrange(ts[0].dtype)
        zp = int(np.asarray(xzp).reshape(()))
        bound = max(abs(lo - zp), abs(hi - zp)) * int(l1.max(initial=0))
        if bound >= 2 ** 24:
            return None
        xf = op_call("cast", [args[0]], dtype="float32")
        if zp:
            xf = op_call("subtract", [xf, const(np.float32(zp))])
        values = dict(self._nn_attrs(attrs))
        values["out_dtype"] = "float32"
        out = op_call(self.nn_name, [xf, const(shifted.astype(np.float32))], **values)
        return op_call("cast", [out], dtype="int32")


_QARGS = ("input_zero_point", "kernel_zero_point", "input_scale", "kernel_scale")
_IntOp("qnn.conv2d", "nn.conv2d", OA.Conv2DAttrs, ("data", "kernel") + _QARGS,
       lambda a: _kernel_o_axis(a.kernel_layout))
_IntOp("qnn.conv2d_transpose", "nn.conv2d_transpose", OA.Conv2DTransposeAttrs, ("data", "weight") + _QARGS,
       lambda a: _kernel_o_axis(a.kernel_layout))
_IntOp("qnn.dense", "nn.dense", OA.DenseAttrs, ("data", "weight") + _QARGS, lambda a: 0)
_IntOp("qnn.batch_matmul", "nn.batch_matmul", OA.BatchMatmulAttrs,
       ("x", "y", "x_zero_point", "y_zero_point", "x_scale", "y_scale"), lambda a: 1 if a.transpose_b else 2)


# -- dequantize -> float op -> quantize -----------------------------------------------------------------
def _np_float_fn(name):
    def hardswish(x):
        return x * np.clip(x + np.float32(3), np.float32(0), np.float32(6)) / np.float32(6)
    return {"qnn.sigmoid": lambda a, x: (1 / (1 + np.exp(-x))).astype(np.float32),
            "qnn.tanh": lambda a, x: np.tanh(x),
            "qnn.hardswish": lambda a, x: hardswish(x),
            "qnn.leaky_relu": lambda a, x: np.where(x > 0, x, x * np.float32(a.alpha)).astype(np.float32),
            }.get(name)


def _relay_float_fn(name, attrs, x):
    if name == "qnn.sigmoid":
        return op_call("sigmoid", [x])
    if name == "qnn.tanh":
        return op_call("tanh", [x])
    if name == "qnn.hardswish":
        relu6 = op_call("clip", [op_call("add", [x, const(3.0)])], a_min=0.0, a_max=6.0)
        return op_call("divide", [op_call("multiply", [x, relu6]), const(6.0)])
    if name == "qnn.leaky_relu":
        return op_call("nn.leaky_relu", [x], alpha=float(attrs.alpha))
    if name == "qnn.avg_pool2d":
        return op_call("nn.avg_pool2d", [x], **dict(attrs))
    raise TypeInferenceError(f"no float form for {name}")


class _FloatPathOp:
    def __init__(self, name, attrs=None):
        self.name = name
        define_op(name, num_inputs=5,
                  args=("x", "scale", "zero_point", "output_scale", "output_zero_point"), attrs=attrs, rel=self.rel,
                  rel_name=name, pattern=OpPattern.OPAQUE, level=11, reference=self.reference)
        register_op_attr(name, "FTVMQnnCanonicalize", self.lower)

    def rel(self, arg_types, attrs):
        x = tensor_arg(arg_types, 0, "x")
        check_dtype(self.name, "x", x, ("int8", "uint8", "int16", "uint16"))
        for k, (pname, dtype) in enumerate(zip(("scale", "zero_point", "output_scale", "output_zero_point"),
                                              ("float32", "int32") * 2)):
            t = check_qparam(self.name, arg_types, 1 + k, pname, dtype)
            if len(t.shape):
                raise TypeInferenceError(f"{self.name}: {pname} must be a scalar (per-tensor quantization)")
        if self.name == "qnn.avg_pool2d":
            out = Op.get("nn.avg_pool2d").get_attr("FTypeRelation")([TensorType(x.shape, "float32")], attrs)
            return TensorType(out.shape, x.dtype)
        return x

    def reference(self, attrs, inputs, out_type):
        x = arith.dequantize(inputs[0], inputs[1], inputs[2])
        if self.name == "qnn.avg_pool2d":
            y = Op.get("nn.avg_pool2d").get_attr("FReference")(attrs, [x], TensorType(out_type.shape, "float32"))
        else:
            y = _np_float_fn(self.name)(attrs, x)
        return arith.quantize(y, inputs[3], inputs[4], out_type.dtype)

    def lower(self, attrs, args, ts):
        x = dequantize_expr(args[0], ts[0], args[1], ts[1], args[2], ts[2])
        y = _relay_float_fn(self.name, attrs, x)
        return quantize_expr(y, TensorType(ts[0].shape, "float32"), args[3], ts[3], args[4], ts[4], ts[0].dtype)


for _name in ("qnn.sigmoid", "qnn.tanh", "qnn.hardswish"):
    _FloatPathOp(_name)
_FloatPathOp("qnn.leaky_relu", OA.LeakyReluAttrs)
_FloatPathOp("qnn.avg_pool2d", OA.AvgPool2DAttrs)
