"""ONNX importer: bad input gets one clear error naming what is wrong and where."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from kiln import relay
from kiln.error import FrontendError, KilnError, OpNotImplemented

from onnx_helpers import make_model


def _relu_model(shape=(2, 3)):
    return make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], {"x": (shape, "float32")},
                      {"y": (shape, "float32")})


def test_every_unsupported_op_is_listed_at_once():
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("GridSample", ["a", "grid"], ["v"], name="gs0"),
             helper.make_node("RoiAlign", ["fm", "rois", "bidx"], ["sel"], name="roi0"),
             helper.make_node("DFT", ["a"], ["u"], name="dft0")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4]),
                                           helper.make_tensor_value_info("fm", TensorProto.FLOAT, [1, 2, 4, 4]),
                                           helper.make_tensor_value_info("rois", TensorProto.FLOAT, [3, 4]),
                                           helper.make_tensor_value_info("bidx", TensorProto.INT64, [3])],
                              [helper.make_tensor_value_info("v", TensorProto.FLOAT, [1, 2]),
                               helper.make_tensor_value_info("sel", TensorProto.FLOAT, [3, 2, 1, 1]),
                               helper.make_tensor_value_info("u", TensorProto.FLOAT, [None])],
                              initializer=[onnx.numpy_helper.from_array(np.zeros((1, 1, 2, 2), "float32"), "grid")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(OpNotImplemented) as info:
        relay.frontend.from_onnx(model)
    msg = str(info.value)
    for name in ("GridSample", "RoiAlign", "DFT", "gs0", "roi0", "dft0"):
        assert name in msg
    assert "Relu" not in msg


def test_custom_domain_op_is_unsupported():
    node = helper.make_node("FusedGemm", ["x"], ["y"], domain="com.microsoft", name="fg")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    with pytest.raises(OpNotImplemented, match="com.microsoft::FusedGemm"):
        relay.frontend.from_onnx(model)


def test_checker_failure_is_a_frontend_error():
    model = _relu_model()
    model.graph.node[0].op_type = "Reluu"  # no such op: onnx.checker rejects the model
    with pytest.raises(FrontendError, match="malformed ONNX model"):
        relay.frontend.from_onnx(model)


def test_dangling_input_names_the_node():
    model = _relu_model()
    node = helper.make_node("Add", ["y", "ghost"], ["z"], name="adder")
    model.graph.node.append(node)
    model.graph.output[0].name = "z"
    with pytest.raises(FrontendError) as info:
        relay.frontend.from_onnx(model)
    assert "ghost" in str(info.value)


def test_dynamic_input_stays_dynamic_unless_pinned():
    model = _relu_model(shape=("batch", 3))
    mod, _ = relay.frontend.from_onnx(model)  # a dim_param stays an unknown dim (run it on the VM)
    assert relay.transform.InferType()(mod)["main"].params[0].type_annotation.astext() == "Tensor[(?, 3), float32]"
    mod, _ = relay.frontend.from_onnx(model, shape={"x": (None, 3)})
    assert mod["main"].params[0].type_annotation.astext() == "Tensor[(?, 3), float32]"
    mod, _ = relay.frontend.from_onnx(model, shape={"x": (5, 3)})
    assert tuple(int(d) for d in mod["main"].params[0].type_annotation.shape) == (5, 3)


def test_inconsistent_shape_is_rejected():
    with pytest.raises(FrontendError, match="does not match"):
        relay.frontend.from_onnx(_relu_model(), shape={"x": (4, 3)})
    with pytest.raises(FrontendError, match="not inputs of the model"):
        relay.frontend.from_onnx(_relu_model(), shape={"nope": (2, 3)})


def test_unsupported_dtype_names_the_input():
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(FrontendError, match="graph input 'x'.*BFLOAT16"):
        relay.frontend.from_onnx(model)


def test_runtime_shape_operand_is_explained():
    model = make_model([helper.make_node("Reshape", ["x", "s"], ["y"], name="resh")],
                       {"x": ((2, 6), "float32"), "s": ((2,), "int64")}, {"y": ((3, 4), "float32")}, opset=13)
    with pytest.raises(OpNotImplemented) as info:  # the static converters only (no dyn.* ops)
        relay.frontend.from_onnx(model, convert_config={"use_dyn_ops": False})
    assert "'resh'" in str(info.value) and "['s']" in str(info.value)
    assert info.value.runtime_inputs == ["s"]
    mod, _ = relay.frontend.from_onnx(model)  # by default the target stays a run-time value: dyn.reshape
    assert "dyn.reshape" in mod["main"].astext()


def test_bad_attribute_names_the_node():
    model = make_model([helper.make_node("Concat", ["a", "b"], ["y"], name="cat", axis=0)],
                       {"a": ((2, 3), "float32"), "b": ((2, 4), "float32")}, {"y": ((4, 3), "float32")})
    with pytest.raises(KilnError) as info:
        relay.frontend.from_onnx(model)
    assert "'cat'" in str(info.value) and "Concat" in str(info.value)


def test_not_a_model():
    with pytest.raises(FrontendError, match="ModelProto"):
        relay.frontend.from_onnx({"not": "a model"})
    with pytest.raises(FrontendError, match="cannot parse"):
        relay.frontend.from_onnx(b"\x01\x02garbage")


def test_topk_with_k_beyond_the_axis_is_a_clear_error():
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], name="topk0")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
                              [helper.make_tensor_value_info("v", TensorProto.FLOAT, [2, 7]),
                               helper.make_tensor_value_info("i", TensorProto.INT64, [2, 7])],
                              initializer=[onnx.numpy_helper.from_array(np.array([7], "int64"), "k")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(KilnError, match=r"TopK: k=7 is outside \[0, 5\]"):
        relay.frontend.from_onnx(model)
