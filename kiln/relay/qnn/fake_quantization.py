"""FakeQuantizationToInteger (TVM's ``relay.transform.FakeQuantizationToInteger``): rewrite the float
regions of QDQ graphs, ``dequantize -> conv2d / dense / add / relu / pool / reshape ... -> quantize``, into QNN
ops on the integers, so that the float ops between a dequantize and a quantize disappear.

Each ``qnn.quantize`` is a region's root. Walking its input backwards, every op must have a rule here and every
leaf must be a ``qnn.dequantize`` (or a constant usable as one); otherwise the region stays in float. A rule maps
the op's integer inputs and their affine types (scale, zero point, dtype, channel axis) to an integer
expression and its affine type; the root requantizes that into the quantize's parameters. The float graph is
left for other consumers, so the rewrite is always safe.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...ir.op import Op
from ...transform.pass_base import register_pass
from ..expr import Call, const
from ..expr_functor import ExprMutator, NonPrimitiveMutator
from ..transform._util import op_call, tensor_type, typed_function_pass
from . import op as qnn
from .op._common import const_value
from ...error import RelayError


@dataclass
class Affine:
    """What real values an integer tensor stands for: ``(q - zero_point) * scale`` (per channel on ``axis``)."""
    scale: object
    zero_point: object
    dtype: str
    axis: int = -1


class _NotConvertible(Exception):
    pass


def _same(a, b) -> bool:
    va, vb = const_value(a), const_value(b)
    return va is not None and vb is not None and np.shape(va) == np.shape(vb) and np.array_equal(va, vb)


def _is_zero(e) -> bool:
    v = const_value(e)
    return v is not None and bool(np.all(np.asarray(v) == 0))


def _scalar_zp(t: Affine) -> bool:
    v = const_value(t.zero_point)
    return v is not None and np.ndim(v) == 0 or (v is not None and np.size(v) == 1)


class _Region:
    """One region's conversion; walks the original (typed) expressions, and takes each leaf's input from the
    mutator, so regions feeding regions chain on their integer forms."""

    def __init__(self, mutator, root_input=None, root_params=None):
        self.mutator = mutator
        self.root_input, self.root_params = root_input, root_params  # the quantize's input and (scale, zp, dtype)
        self.memo: dict = {}

    def convert(self, expr):
        hit = self.memo.get(expr)
        if hit is None:
            hit = self._convert(expr)
            self.memo[expr] = hit
        return hit

    def _convert(self, expr):
        if not isinstance(expr, Call) or not isinstance(expr.op, Op):
            raise _NotConvertible()
        name = expr.op.name
        rule = _RULES.get(name)
        if rule is None:
            raise _NotConvertible()
        return rule(self, expr)


def _dequantize(region, call):
    a = call.attrs
    ttype = tensor_type(call.args[0])
    ndim = len(ttype.shape)
    x = region.mutator.visit(call.args[0])
    return x, Affine(call.args[1], call.args[2], ttype.dtype, a.axis % ndim if ndim else -1)


def _mul_scales(a, b):
    return op_call("multiply", [a, b])


def _conv2d(region, call):
    a = call.attrs
    if a.data_layout != "NCHW" or a.kernel_layout != "OIHW":
        raise _NotConvertible()
    x, tx = region.convert(call.args[0])
    w, tw = region.convert(call.args[1])
    if tx.dtype == "int32" or tw.dtype == "int32" or not _scalar_zp(tx):
        raise _NotConvertible()
    attrs = dict(a)
    attrs["out_dtype"] = "int32"
    out = qnn.conv2d(x, w, tx.zero_point, tw.zero_point, tx.scale, tw.scale, **{
        k: attrs[k] for k in ("kernel_size", "channels", "strides", "padding", "dilation", "groups", "data_layout",
                              "kernel_layout", "out_layout", "out_dtype")})
    return out, Affine(_mul_scales(tx.scale, tw.scale), const(np.int32(0)), "int32", 1)


def _dense(region, call):
    x, tx = region.convert(call.args[0])
    w, tw = region.convert(call.args[1])
    if tx.dtype == "int32" or tw.dtype == "int32" or not _scalar_zp(tx):
        raise _NotConvertible()
    units = tensor_type(call.args[1]).shape[0]
    out = qnn.dense(x, w, tx.zero_point, tw.zero_point, tx.scale, tw.scale, units=units)
    ndim = len(tensor_type(call).shape)
    return out, Affine(_mul_scales(tx.scale, tw.scale), const(np.int32(0)), "int32", ndim - 1)


def _add(region, call, bias_axis=None):
    lhs, tl = region.convert(call.args[0])
    rhs, tr = region.convert(call.args[1])
    if tl.dtype == "int32" and tr.dtype == "int32":
        if not _same(tr.scale, tl.scale):
            rhs = qnn.requantize(rhs, tr.scale, tr.zero_point, tl.scale, const(np.int32(0)), axis=tr.axis,
                                 out_dtype="int32")
        elif not _is_zero(tr.zero_point):
            raise _NotConvertible()
        if bias_axis is not None:
            return op_call("nn.bias_add", [lhs, rhs], axis=bias_axis), tl
        return op_call("add", [lhs, rhs]), tl
    if tl.dtype in ("int8", "uint8") and tr.dtype == tl.dtype and bias_axis is None:
        if call is region.root_input and region.root_params[2] == tl.dtype:
            # quantize(add(a, b)): qnn.add straight into the quantize's parameters (ONNX Runtime's QLinearAdd)
            scale, zp, dtype = region.root_params
            return qnn.add(lhs, rhs, tl.scale, tl.zero_point, tr.scale, tr.zero_point, scale, zp), \
                Affine(scale, zp, dtype, -1)
        # inside a region the sum's range is unknown: an exact int32 sum at the lhs scale
        zero = const(np.int32(0))
        l32 = qnn.requantize(lhs, tl.scale, tl.zero_point, tl.scale, zero, out_dtype="int32")
        r32 = qnn.requantize(rhs, tr.scale, tr.zero_point, tl.scale, zero, out_dtype="int32")
        return op_call("add", [l32, r32]), Affine(tl.scale, zero, "int32", -1)
    raise _NotConvertible()


def _bias_add(region, call):
    return _add(region, call, bias_axis=call.attrs.axis)


def _relu(region, call):
    x, t = region.convert(call.args[0])
    if t.dtype == "int32":
        if not _is_zero(t.zero_point):
            raise _NotConvertible()
        return op_call("nn.relu", [x]), t
    zp = const_value(t.zero_point)
    if zp is None or np.size(zp) != 1:
        raise _NotConvertible()
    return op_call("maximum", [x, const(np.asarray(zp).reshape(()).astype(t.dtype))]), t


def _same_type(region, call):
    """Ops that only move or select values: the same op on the integers, the same affine type."""
    x, t = region.convert(call.args[0])
    if call.op.name not in ("nn.max_pool2d",) and not (_scalar_zp(t) and np.size(const_value(t.scale)) == 1):
        raise _NotConvertible()
    return Call(call.op, [x] + list(call.args[1:]), call.attrs), t


def _avg_pool(region, call):
    x, t = region.convert(call.args[0])
    if t.dtype == "int32" or not _scalar_zp(t) or np.size(const_value(t.scale)) != 1:
        raise _NotConvertible()
    a = call.attrs
    if call.op.name == "nn.global_avg_pool2d":
        if a.layout != "NCHW":
            raise _NotConvertible()
        shape = tensor_type(call.args[0]).shape
        out = qnn.avg_pool2d(x, t.scale, t.zero_point, t.scale, t.zero_point, pool_size=(shape[2], shape[3]),
                             strides=(1, 1), padding=(0, 0), dilation=(1, 1))
    else:
        out = qnn.avg_pool2d(x, t.scale, t.zero_point, t.scale, t.zero_point, pool_size=a.pool_size,
                             strides=a.strides, padding=a.padding, dilation=a.dilation, ceil_mode=a.ceil_mode,
                             count_include_pad=a.count_include_pad, layout=a.layout, out_layout=a.out_layout)
    return out, t


_RULES = {"qnn.dequantize": _dequantize, "nn.conv2d": _conv2d, "nn.dense": _dense, "add": _add,
          "nn.bias_add": _bias_add, "nn.relu": _relu, "nn.avg_pool2d": _avg_pool,
          "nn.global_avg_pool2d": _avg_pool}
for _name in ("nn.max_pool2d", "reshape", "nn.batch_flatten", "transpose", "squeeze", "expand_dims"):
    _RULES[_name] = _same_type


class _Rewriter(NonPrimitiveMutator):
    def __init__(self, hard_fail: bool):
        super().__init__()
        self.hard_fail = hard_fail

    def visit_call(self, call):
        new = super().visit_call(call)
        if not (isinstance(new.op, Op) and new.op.name == "qnn.quantize"):
            return new
        src = call.args[0]
        if isinstance(src, Call) and isinstance(src.op, Op) and src.op.name == "qnn.dequantize":
            return new  # a bare quantize(dequantize(x)): nothing to gain
        try:
            x, t = _Region(self, src, (call.args[1], call.args[2], call.attrs.out_dtype)).convert(src)
        except _NotConvertible:
            if self.hard_fail:
                raise RelayError("FakeQuantizationToInteger: a quantize's input region has an op without an "
                                 "integer rule or a leaf that is not a dequantize") from None
            return new
        a = new.attrs
        if t.dtype == a.out_dtype and _same(t.scale, new.args[1]) and _same(t.zero_point, new.args[2]):
            return x
        return qnn.requantize(x, t.scale, t.zero_point, new.args[1], new.args[2], axis=t.axis,
                              out_dtype=a.out_dtype)


def FakeQuantizationToInteger(hard_fail: bool = False, use_qat: bool = False,  # noqa: N802 (TVM's name)
                              optional_qnn_ops=None):
    """Rewrite dequantize -> float ops -> quantize regions into integer QNN ops (``use_qat`` and
    ``optional_qnn_ops`` are accepted for TVM compatibility; kiln's rule set is fixed)."""
    if use_qat:
        raise NotImplementedError("FakeQuantizationToInteger(use_qat=True) (regions ending in float ops) is not "
                                  "implemented in kiln")

    def rewrite(func, mod, ctx):
        return _Rewriter(hard_fail).visit(func)
    return typed_function_pass(rewrite, 0, "FakeQuantizationToInteger")


register_pass("FakeQuantizationToInteger", FakeQuantizationToInteger)
