"""ONNX Gather with a run-time index out of range: ONNX Runtime raises; kiln clamped it silently (a wrong row).
The kernel now checks every index (negative ones count from the end) and fails the run with an error that
names the op and the valid range, through the kernel's error return (docs/abi.md)."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import kiln
from kiln import relay
from kiln.contrib import graph_executor
from kiln.error import KilnError


def _model(index_dtype=TensorProto.INT64, cast=False, axis=0):
    nodes, idx_name = [], "i"
    if cast:
        nodes.append(helper.make_node("Cast", ["i"], ["ic"], to=TensorProto.INT64))
        idx_name = "ic"
    nodes.append(helper.make_node("Gather", ["x", idx_name], ["y"], axis=axis))
    out_shape = [4, 3] if axis == 0 else [5, 4]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 3]),
                                       helper.make_tensor_value_info("i", index_dtype, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def _kiln(model):
    mod, params = relay.frontend.from_onnx(model)
    lib = relay.build(mod, target="llvm", params=params)
    return graph_executor.GraphModule(lib["default"](kiln.cpu()))


X = np.arange(15, dtype="float32").reshape(5, 3)


@pytest.mark.parametrize("cast", [False, True])
def test_in_range_and_negative_indices_match_onnxruntime(cast):
    model = _model(TensorProto.INT32 if cast else TensorProto.INT64, cast)
    idx = np.array([0, 4, -1, -5], "int32" if cast else "int64")
    m = _kiln(model)
    m.set_input("x", X)
    m.set_input("i", idx)
    m.run()
    ref = ort.InferenceSession(model.SerializeToString()).run(None, {"x": X, "i": idx})[0]
    np.testing.assert_array_equal(m.get_output(0).numpy(), ref)


@pytest.mark.parametrize("bad", [5, -6, 2 ** 40])
def test_out_of_range_index_raises(bad):
    model = _model()
    idx = np.array([0, bad, 1, 1], "int64")
    with pytest.raises(Exception):  # the reference runtime refuses too
        ort.InferenceSession(model.SerializeToString()).run(None, {"x": X, "i": idx})
    m = _kiln(model)
    m.set_input("x", X)
    m.set_input("i", idx)
    with pytest.raises(KilnError, match=r"out of range for an axis of size 5 \(valid: -5..4\)"):
        m.run()
    m.set_input("i", np.array([1, 2, 3, 4], "int64"))  # the executor is usable afterwards
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), X[[1, 2, 3, 4]])


def test_axis_1_out_of_range_raises():
    m = _kiln(_model(axis=1))
    m.set_input("x", X)
    m.set_input("i", np.array([0, 1, 3, 2], "int64"))
    with pytest.raises(KilnError, match="axis of size 3"):
        m.run()


def test_constant_out_of_range_index_is_an_import_error():
    model = _model()
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.array([0, 7, 1, 1], "int64"), "i"))
    with pytest.raises(KilnError, match="out of range"):
        relay.frontend.from_onnx(model)


def test_relay_take_raise_mode_in_the_reference_interpreter():
    x = relay.var("x", shape=(5, 3))
    i = relay.var("i", shape=(2,), dtype="int64")
    func = relay.Function([x, i], relay.take(x, i, axis=0, mode="raise"))
    ex = relay.create_executor("debug", mod=kiln.IRModule.from_expr(func))
    np.testing.assert_array_equal(ex.evaluate()(X, np.array([-1, 0], "int64")).numpy(), X[[4, 0]])
    with pytest.raises(KilnError, match="out of range"):
        ex.evaluate()(X, np.array([9, 0], "int64"))
