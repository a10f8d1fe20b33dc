"""Attribute schemas of the QNN ops, under TVM's type keys and field names (TVM's ``relay.qnn.op`` attrs).

The shared nn schemas (Conv2DAttrs, DenseAttrs, BatchMatmulAttrs, AvgPool2DAttrs, LeakyReluAttrs,
ConcatenateAttrs) are reused from ``relay.op.op_attrs``, as TVM's qnn ops reuse them.
"""
from __future__ import annotations

from ....ir.attrs import Attrs, Field
from ....runtime.dtype import dtype_str

ROUNDING_MODES = ("UPWARD", "TONEAREST")


def _dtype(value) -> str:
    return dtype_str(value) if value not in (None, "") else ""


def _rounding(value) -> str:
    value = "None" if value is None else str(value)
    return value


class QuantizeAttrs(Attrs):
    type_key = "relay.attrs.QuantizeAttrs"
    fields = {"out_dtype": Field("int8", _dtype), "axis": Field(-1, int)}


class DequantizeAttrs(Attrs):
    type_key = "relay.attrs.DequantizeAttrs"
    fields = {"out_dtype": Field("float32", _dtype), "axis": Field(-1, int)}


class RequantizeAttrs(Attrs):
    type_key = "relay.attrs.RequantizeAttrs"
    fields = {"axis": Field(-1, int), "rounding": Field("None", _rounding),
              "compute_dtype": Field("None", _rounding), "out_dtype": Field("int8", _dtype)}


class SimulatedQuantizeAttrs(Attrs):
    type_key = "relay.attrs.SimulatedQuantizeAttrs"
    fields = {"axis": Field(-1, int)}


class BroadcastAttrs(Attrs):
    """qnn.add / qnn.mul / qnn.subtract: the per-channel axes of the two operands' quantization params."""
    type_key = "relay.attrs.BroadcastAttrs"
    fields = {"lhs_axis": Field(-1, int), "rhs_axis": Field(-1, int)}


class FixedPointMultiplyAttrs(Attrs):
    """qnn.fixed_point_multiply (kiln's lowering step of requantize): the rounding of the final shift."""
    type_key = "relay.attrs.QnnFixedPointMultiplyAttrs"
    fields = {"rounding": Field("UPWARD", str), "high_word": Field(False, bool)}
