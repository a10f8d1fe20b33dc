"""TEST-ONLY operators for the Relay IR tests (names under ``test.``; never real op names)."""
from __future__ import annotations

import numpy as np

from kiln.error import TypeInferenceError
from kiln.ir import Attrs, TensorType, TupleType, register_op, register_op_attr, OpPattern


def broadcast_rel(arg_types, attrs):
    a, b = arg_types
    if not isinstance(a, TensorType) or not isinstance(b, TensorType):
        raise TypeInferenceError(f"expects tensors, got {a.astext()} and {b.astext()}")
    if a.dtype != b.dtype:
        raise TypeInferenceError(f"dtypes differ: {a.dtype} vs {b.dtype}")
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise TypeInferenceError(f"shapes {a.shape} and {b.shape} are not broadcastable") from None
    return TensorType(shape, a.dtype)


class TestScaleAttrs(Attrs):
    type_key = "relay.attrs.TestScaleAttrs"
    fields = {"scale": 1.0, "axes": (0,), "layout": "NCHW", "out_dtype": ""}


def scale_rel(arg_types, attrs):
    (x,) = arg_types
    dtype = attrs.out_dtype or x.dtype
    return TensorType(x.shape, dtype)


def split2_rel(arg_types, attrs):
    (x,) = arg_types
    half = x.shape[0] // 2
    t = TensorType((half,) + tuple(x.shape[1:]), x.dtype)
    return TupleType([t, t])


def register_test_ops():
    add = register_op("test.add", "test-only broadcast add")
    if not add.has_attr("FTypeRelation"):
        add.set_num_inputs(2).add_argument("lhs").add_argument("rhs").set_support_level(1)
        add.add_type_rel("TestBroadcast", broadcast_rel)
        register_op_attr("test.add", "TOpPattern", OpPattern.BROADCAST)
        register_op_attr("test.add", "FReference", lambda attrs, ins, out_type: ins[0] + ins[1])
    scale = register_op("test.scale", "test-only scale with attrs")
    if not scale.has_attr("FTypeRelation"):
        scale.set_num_inputs(1).set_attrs_type(TestScaleAttrs).add_type_rel("TestScale", scale_rel)
    split = register_op("test.split2", "test-only split in two halves")
    if not split.has_attr("FTypeRelation"):
        split.set_num_inputs(1).add_type_rel("TestSplit2", split2_rel)


register_test_ops()
