"""Tutorial flow: "Compile ONNX Models" (from_onnx).

The tutorial's super-resolution network (Conv/Relu stack then a pixel shuffle written as
Reshape/Transpose/Reshape) is assembled here with onnx.helper and random weights (nothing is
downloaded), imported with relay.frontend.from_onnx(model, shape_dict), run through
relay.build_module.create_executor("graph", ...) and compared with onnxruntime.
"""
import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln as tvm
import kiln.testing
from kiln import relay
from kiln.contrib import graph_executor

UPSCALE = 3


def super_resolution_model(h, w, seed=0):
    rng = np.random.default_rng(seed)
    convs = [(64, 1, 5), (64, 64, 3), (32, 64, 3), (UPSCALE * UPSCALE, 32, 3)]
    inits, nodes = [], []
    x = "1"
    for i, (cout, cin, k) in enumerate(convs):
        wname, bname, out = f"w{i}", f"b{i}", f"conv{i}"
        inits.append(numpy_helper.from_array(
            (rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)).astype("float32"), wname))
        inits.append(numpy_helper.from_array((rng.standard_normal(cout) * 0.1).astype("float32"), bname))
        nodes.append(helper.make_node("Conv", [x, wname, bname], [out], kernel_shape=[k, k],
                                      pads=[k // 2] * 4, strides=[1, 1]))
        if i < len(convs) - 1:
            nodes.append(helper.make_node("Relu", [out], [f"relu{i}"]))
            out = f"relu{i}"
        x = out
    inits.append(numpy_helper.from_array(np.array([1, 1, UPSCALE, UPSCALE, h, w], "int64"), "shape1"))
    inits.append(numpy_helper.from_array(np.array([1, 1, h * UPSCALE, w * UPSCALE], "int64"), "shape2"))
    nodes.append(helper.make_node("Reshape", [x, "shape1"], ["r1"]))
    nodes.append(helper.make_node("Transpose", ["r1"], ["t1"], perm=[0, 1, 4, 2, 5, 3]))
    nodes.append(helper.make_node("Reshape", ["t1", "shape2"], ["out"]))
    graph = helper.make_graph(
        nodes, "super_resolution",
        [helper.make_tensor_value_info("1", TensorProto.FLOAT, [1, 1, h, w])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 1, h * UPSCALE, w * UPSCALE])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


@pytest.mark.parametrize("h,w", [(16, 16), (13, 19)])
def test_compile_onnx_model(h, w):
    onnx_model = super_resolution_model(h, w)
    x = np.random.default_rng(1).uniform(size=(1, 1, h, w)).astype("float32")
    target = "llvm"
    input_name = "1"
    shape_dict = {input_name: x.shape}
    mod, params = relay.frontend.from_onnx(onnx_model, shape_dict)
    with tvm.transform.PassContext(opt_level=1):
        executor = relay.build_module.create_executor("graph", mod, tvm.cpu(0), target, params).evaluate()
    dtype = "float32"
    tvm_output = executor(tvm.nd.array(x.astype(dtype))).numpy()
    assert tvm_output.shape == (1, 1, h * UPSCALE, w * UPSCALE)

    sess = onnxruntime.InferenceSession(onnx_model.SerializeToString(), providers=["CPUExecutionProvider"])
    (ort_output,) = sess.run(None, {input_name: x})
    tvm.testing.assert_allclose(tvm_output, ort_output, rtol=1e-4, atol=1e-5)


def test_compile_onnx_model_opt_level_3_build():
    h, w = 10, 12
    onnx_model = super_resolution_model(h, w, seed=3)
    x = np.random.default_rng(4).uniform(size=(1, 1, h, w)).astype("float32")
    mod, params = relay.frontend.from_onnx(onnx_model, {"1": x.shape}, freeze_params=True)
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    m.set_input("1", x)
    m.run()
    sess = onnxruntime.InferenceSession(onnx_model.SerializeToString(), providers=["CPUExecutionProvider"])
    tvm.testing.assert_allclose(m.get_output(0).numpy(), sess.run(None, {"1": x})[0], rtol=1e-4, atol=1e-5)
