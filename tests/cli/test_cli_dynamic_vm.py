"""``kiln compile`` of ONNX models with dynamic axes gives a VM executable; ``kiln run`` and
``kiln.driver.tvmc.run`` run it at several sizes (outputs vs ONNX Runtime)."""
from __future__ import annotations

import numpy as np
import pytest

from .conftest import run_kiln

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def _param(rng, shape):
    return rng.standard_normal(shape).astype("float32") * 0.3


@pytest.fixture(scope="module")
def dyn_models(tmp_path_factory):
    """mlp.onnx: Gemm/MatMul + Relu over (batch, 16) and over (batch, seq, 16) with LayerNormalization
    and Softmax; cnn.onnx: Conv + BatchNorm + Relu + MaxPool + GlobalAveragePool + Gemm over a dynamic batch."""
    from onnx import TensorProto, helper, numpy_helper
    d = tmp_path_factory.mktemp("dyn_vm")
    rng = np.random.default_rng(11)
    init = [numpy_helper.from_array(_param(rng, (16, 24)), "W1"), numpy_helper.from_array(_param(rng, (24,)), "b1"),
            numpy_helper.from_array(_param(rng, (24, 5)), "W2"),
            numpy_helper.from_array(np.ones(24, "float32") * 1.5, "g"),
            numpy_helper.from_array(_param(rng, (24,)), "be")]
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]),
             helper.make_node("LayerNormalization", ["r", "g", "be"], ["n"], axis=-1, epsilon=1e-5),
             helper.make_node("MatMul", ["n", "W2"], ["o"]), helper.make_node("Softmax", ["o"], ["y"], axis=-1)]
    graph = helper.make_graph(nodes, "seq_mlp",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 5])], init)
    mlp = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    mlp.ir_version = 8
    onnx.save(mlp, d / "mlp.onnx")

    init = [numpy_helper.from_array(_param(rng, (6, 3, 3, 3)), "W"), numpy_helper.from_array(_param(rng, (6,)), "B"),
            numpy_helper.from_array(np.abs(_param(rng, (6,))) + 0.5, "s"),
            numpy_helper.from_array(_param(rng, (6,)), "bb"), numpy_helper.from_array(_param(rng, (6,)), "m"),
            numpy_helper.from_array(np.abs(_param(rng, (6,))) + 0.5, "v"),
            numpy_helper.from_array(_param(rng, (4, 6)), "F"), numpy_helper.from_array(_param(rng, (4,)), "fb")]
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["bn"]),
             helper.make_node("Relu", ["bn"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["p"], ["g"]), helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "F", "fb"], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 9, 11])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], init)
    cnn = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    cnn.ir_version = 8
    onnx.save(cnn, d / "cnn.onnx")
    return d


def _ort(path, x):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.mark.parametrize("name,shapes", [("mlp", [(1, 7, 16), (3, 16, 16), (8, 7, 16)]),
                                         ("cnn", [(1, 3, 9, 11), (3, 3, 9, 11), (8, 3, 9, 11)])])
def test_compile_once_run_at_several_sizes(dyn_models, tmp_path, name, shapes):
    res = run_kiln("compile", dyn_models / f"{name}.onnx", "-o", tmp_path / f"{name}.so")
    assert res.returncode == 0, res.stderr
    assert "Relay VM" in res.stdout and "?" in res.stdout
    rng = np.random.default_rng(5)
    for k, shape in enumerate(shapes):
        x = rng.standard_normal(shape).astype("float32")
        np.savez(tmp_path / f"in{k}.npz", x=x)
        res = run_kiln("run", tmp_path / f"{name}.so", "-i", tmp_path / f"in{k}.npz", "-o", tmp_path / f"out{k}")
        assert res.returncode == 0, res.stderr
        with np.load(tmp_path / f"out{k}.npz") as data:
            np.testing.assert_allclose(data["output_0"], _ort(dyn_models / f"{name}.onnx", x), rtol=1e-4, atol=1e-5)


def test_run_errors_name_the_dynamic_input(dyn_models, tmp_path):
    so = tmp_path / "cnn.so"
    assert run_kiln("compile", dyn_models / "cnn.onnx", "-o", so).returncode == 0
    res = run_kiln("run", so)  # random inputs cannot pick a size for the dynamic batch
    assert res.returncode == 1 and "dynamic dimensions [?, 3, 9, 11]" in res.stderr and "--inputs" in res.stderr
    np.savez(tmp_path / "bad.npz", x=np.zeros((2, 3, 9, 10), "float32"))
    res = run_kiln("run", so, "-i", tmp_path / "bad.npz")
    assert res.returncode == 1 and "expects [?, 3, 9, 11]" in res.stderr
    np.savez(tmp_path / "ok.npz", x=np.zeros((2, 3, 9, 11), "float32"))
    res = run_kiln("run", so, "-i", tmp_path / "ok.npz", "--profile")
    assert res.returncode == 1 and "VM executable" in res.stderr
    res = run_kiln("run", so, "-i", tmp_path / "ok.npz", "--print-time", "--repeat", "2")
    assert res.returncode == 0 and "Execution time summary" in res.stdout


def test_pinned_shapes_still_give_a_graph_build_and_use_vm_forces_the_vm(dyn_models, tmp_path):
    res = run_kiln("compile", dyn_models / "cnn.onnx", "--input-shapes", "x:2x3x9x11", "-o", tmp_path / "g.so")
    assert res.returncode == 0, res.stderr
    assert "Relay VM" not in res.stdout and "memory plan:" in res.stdout
    res = run_kiln("compile", dyn_models / "cnn.onnx", "--input-shapes", "x:2x3x9x11", "--use-vm",
                   "-o", tmp_path / "v.so")
    assert res.returncode == 0 and "Relay VM (--use-vm)" in res.stdout
    x = np.random.default_rng(2).standard_normal((2, 3, 9, 11)).astype("float32")
    np.savez(tmp_path / "x.npz", x=x)
    outs = []
    for so in ("g.so", "v.so"):
        res = run_kiln("run", tmp_path / so, "-i", tmp_path / "x.npz", "-o", tmp_path / f"{so}.out")
        assert res.returncode == 0, res.stderr
        with np.load(tmp_path / f"{so}.out.npz") as data:
            outs.append(data["output_0"])
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-6)


def test_tvmc_api_dynamic(dyn_models, tmp_path):
    from kiln.driver import tvmc
    model = tvmc.load(str(dyn_models / "mlp.onnx"))
    package = tvmc.compile(model, target="llvm", package_path=str(tmp_path / "mlp_pkg.so"))
    assert package.type == "vm"
    rng = np.random.default_rng(9)
    for shape in [(1, 7, 16), (3, 16, 16)]:
        x = rng.standard_normal(shape).astype("float32")
        result = tvmc.run(package, inputs={"x": x})
        np.testing.assert_allclose(result.get_output("output_0"), _ort(dyn_models / "mlp.onnx", x),
                                   rtol=1e-4, atol=1e-5)
    with pytest.raises(Exception, match="dynamic dimensions"):
        tvmc.run(package)
