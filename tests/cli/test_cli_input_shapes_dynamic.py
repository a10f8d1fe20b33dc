"""``--input-shapes`` with -1 / ? leaves a dimension dynamic (tvmc's rule: a negative dimension is
``relay.Any()``): ``kiln compile`` then builds for the VM; ``tune``/``bench`` refuse it."""
from __future__ import annotations

import numpy as np
import pytest

from kiln.cli.common import CLIError, UNKNOWN_DIM, parse_input_shapes
from .conftest import run_kiln

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def test_parse_unknown_dims():
    specs = parse_input_shapes("x:[1,-1,16],m:?x4:int64")
    assert specs[0].shape == (1, UNKNOWN_DIM, 16) and specs[1].shape == (UNKNOWN_DIM, 4)
    with pytest.raises(CLIError, match="-1 or \\?"):
        parse_input_shapes("x:[1,a]")


@pytest.fixture(scope="module")
def seq_model(tmp_path_factory):
    from onnx import TensorProto, helper, numpy_helper
    d = tmp_path_factory.mktemp("pin_partly")
    w = np.random.default_rng(3).standard_normal((16, 5)).astype("float32")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["h"]),
                               helper.make_node("Softmax", ["h"], ["y"], axis=-1)], "seq",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 5])],
                              [numpy_helper.from_array(w, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, d / "seq.onnx")
    return d / "seq.onnx"


def test_compile_with_one_dim_pinned(seq_model, tmp_path):
    so = tmp_path / "b1.so"
    res = run_kiln("compile", seq_model, "--input-shapes", "x:[1,-1,16]", "-o", so)
    assert res.returncode == 0, res.stderr
    assert "Relay VM" in res.stdout and "x[1, ?, 16]" in res.stdout
    sess = ort.InferenceSession(str(seq_model), providers=["CPUExecutionProvider"])
    for k, seq in enumerate((3, 11)):
        x = np.random.default_rng(k).standard_normal((1, seq, 16)).astype("float32")
        np.savez(tmp_path / f"in{k}.npz", x=x)
        res = run_kiln("run", so, "-i", tmp_path / f"in{k}.npz", "-o", tmp_path / f"out{k}")
        assert res.returncode == 0, res.stderr
        with np.load(tmp_path / f"out{k}.npz") as data:
            np.testing.assert_allclose(data["output_0"], sess.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)
    np.savez(tmp_path / "b2.npz", x=np.zeros((2, 3, 16), "float32"))
    res = run_kiln("run", so, "-i", tmp_path / "b2.npz")
    assert res.returncode == 1 and "expects [1, ?, 16]" in res.stderr


def test_rank_mismatch_and_measuring_commands_refuse_unknown_dims(seq_model, tmp_path):
    res = run_kiln("compile", seq_model, "--input-shapes", "x:[1,-1]", "-o", tmp_path / "bad.so")
    assert res.returncode == 1 and "2 dimensions" in res.stderr and "declares 3" in res.stderr
    for cmd in (("bench",), ("tune", "-o", tmp_path / "t.log")):
        res = run_kiln(cmd[0], seq_model, "--input-shapes", "x:[1,-1,16]", *cmd[1:])
        assert res.returncode == 1 and "dynamic (-1 or ?)" in res.stderr, res.stderr
