"""The ops relay.quantize works with: ``relay.op.annotation.simulated_quantize`` and
``annotation.cast_hint`` (TVM's names), each with type relation, numpy reference and TE compute.

``simulated_quantize(x, dom_scale, clip_min, clip_max)`` is ``round(clip(x / dom_scale)) * dom_scale``
in float: annotation inserts it where realize will put a real quantization, so the annotated graph
runs (interpreter, FoldConstant, relay.build) with the rounding error of the integer graph. Kind
IDENTITY makes it an identity (calibration uses that to read the values being quantized).
"""
from __future__ import annotations

import numpy as np

from ...error import TypeInferenceError
from ...ir.attrs import Attrs, Field
from ...ir.op import Op, OpPattern
from ...ir.type import TensorType
from ...runtime.dtype import dtype_str
from ..expr import Call
from ..op._define import define_op
from ..op.op import register_injective_schedule
from .qconfig import QAnnotateKind
from ... import topi

SIMULATED_QUANTIZE = "relay.op.annotation.simulated_quantize"
CAST_HINT = "annotation.cast_hint"


class SimulatedQuantizeAttrs(Attrs):
    type_key = "relay.attrs.SimulatedQuantizeAttrs"
    fields = {"kind": Field(QAnnotateKind.INPUT, int, "QAnnotateKind of the value quantized"),
              "sign": Field(True, bool, "signed integer range"),
              "rounding": Field("round", str, "rounding mode (only 'round' is realized)")}


class CastHintAttrs(Attrs):
    type_key = "relay.attrs.CastHintAttrs"
    fields = {"dtype": Field("int8", dtype_str, "the dtype realize casts the value to")}


def _simulated_quantize_rel(arg_types, attrs):
    data = arg_types[0]
    if not isinstance(data, TensorType):
        raise TypeInferenceError(f"simulated_quantize: data must be a tensor, got {data}")
    for i, name in ((1, "dom_scale"), (2, "clip_min"), (3, "clip_max")):
        t = arg_types[i]
        if not isinstance(t, TensorType) or tuple(t.shape) != () or t.dtype != "float32":
            raise TypeInferenceError(f"simulated_quantize: {name} must be a float32 scalar (shape ()), got {t}")
    return TensorType(data.shape, data.dtype)


def _simulated_quantize_ref(attrs, inputs, out_type):
    data, scale, cmin, cmax = (np.asarray(v) for v in inputs)
    if int(attrs.kind) == QAnnotateKind.IDENTITY:
        return data
    q = np.round(np.clip(data / scale, cmin, cmax))
    return (q * scale).astype(data.dtype)


def _simulated_quantize_compute(attrs, inputs, out_type):
    data, scale, cmin, cmax = inputs
    if int(attrs.kind) == QAnnotateKind.IDENTITY:
        return [topi.identity(data)]
    clipped = topi.maximum(topi.minimum(topi.divide(data, scale), cmax), cmin)
    return [topi.multiply(topi.round(clipped), scale)]


def _identity_ref(attrs, inputs, out_type):
    return inputs[0]


def _identity_compute(attrs, inputs, out_type):
    return [topi.identity(inputs[0])]


define_op(SIMULATED_QUANTIZE, num_inputs=4, rel=_simulated_quantize_rel, rel_name="SimulatedQuantize",
          pattern=OpPattern.ELEMWISE, reference=_simulated_quantize_ref, attrs=SimulatedQuantizeAttrs,
          args=("data", "dom_scale", "clip_min", "clip_max"), compute=_simulated_quantize_compute, level=11,
          describe="float simulation of quantize-dequantize (relay.quantize annotation)")
define_op(CAST_HINT, num_inputs=1, rel="Identity", pattern=OpPattern.ELEMWISE, reference=_identity_ref,
          attrs=CastHintAttrs, compute=_identity_compute, level=10,
          describe="identity that tells relay.quantize's realize to cast the value to attrs.dtype")
for _name in (SIMULATED_QUANTIZE, CAST_HINT):
    if not Op.get(_name).has_attr("FTVMStrategy"):
        register_injective_schedule(_name)


def simulated_quantize(data, dom_scale, clip_min, clip_max, kind: int, sign: bool = True,
                       rounding: str = "round") -> Call:
    """A ``simulated_quantize`` call (TVM's ``relay.quantize._quantize.simulated_quantize``)."""
    op = Op.get(SIMULATED_QUANTIZE)
    return Call(op, [data, dom_scale, clip_min, clip_max], op.make_attrs(kind=kind, sign=sign, rounding=rounding))


def cast_hint(data, dtype: str) -> Call:
    """``data`` unchanged, marked for realize to cast it to ``dtype`` (TVM's ``relay.annotation.cast_hint``)."""
    op = Op.get(CAST_HINT)
    return Call(op, [data], op.make_attrs(dtype=dtype))


def stop_fusion(data) -> Call:
    """``data`` behind a fusion boundary (``annotation.stop_fusion``)."""
    return Call(Op.get("annotation.stop_fusion"), [data])
