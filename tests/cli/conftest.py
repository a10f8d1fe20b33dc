"""Tiny models for the ``kiln`` command tests (ONNX via onnx.helper, a traced torch module, Relay text) and a
helper that runs the command in a subprocess with a time limit."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_kiln(*args, cwd=None, timeout: float = 180, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m kiln.cli *args`` in a fresh process; fails the test if it takes longer than ``timeout``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("KILN_NUM_THREADS", "1")  # timings in tests are not asserted; keep them steady
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "kiln.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cli_models")


@pytest.fixture(scope="session")
def onnx_models(model_dir):
    """conv.onnx (conv with odd spatial size + relu, weights frozen in the file) and dyn.onnx (dynamic batch)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    w = np.random.default_rng(7).standard_normal((4, 3, 3, 3)).astype("float32")
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 7, 9])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 7, 9])],
                              [numpy_helper.from_array(w, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # readable by older ONNX Runtime builds too
    onnx.save(model, model_dir / "conv.onnx")

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "dyn",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])])
    dyn = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    dyn.ir_version = 8
    onnx.save(dyn, model_dir / "dyn.onnx")
    return {"dir": model_dir, "conv": model_dir / "conv.onnx", "conv_w": w, "dyn": model_dir / "dyn.onnx"}


@pytest.fixture(scope="session")
def torch_model(model_dir):
    """tiny.pt: a traced, saved Linear(5, 3) + relu * 2, and the torch module for references."""
    torch = pytest.importorskip("torch")

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(5, 3)

        def forward(self, x):
            return torch.relu(self.fc(x)) * 2.0

    torch.manual_seed(0)
    tiny = Tiny().eval()
    path = model_dir / "tiny.pt"
    torch.jit.save(torch.jit.trace(tiny, torch.rand(2, 5)), str(path))
    return {"path": path, "module": tiny}


@pytest.fixture(scope="session")
def relay_model(model_dir):
    """prog.txt (Relay text) with prog.params (binding %w) next to it."""
    path = model_dir / "prog.txt"
    path.write_text('#[version = "0.0.5"]\n'
                    'def @main(%x: Tensor[(3, 5), float32], %w: Tensor[(3, 5), float32]) {\n'
                    '  nn.relu(multiply(add(%x, %w), 3f))\n}\n')
    from kiln import relay
    w = np.random.default_rng(8).standard_normal((3, 5)).astype("float32")
    (model_dir / "prog.params").write_bytes(bytes(relay.save_param_dict({"w": w})))
    return {"path": path, "w": w}


@pytest.fixture(scope="session")
def compiled_conv(onnx_models):
    """conv.onnx compiled once by ``kiln compile`` for the run/bench tests."""
    so = onnx_models["dir"] / "conv.so"
    res = run_kiln("compile", onnx_models["conv"], "-o", so)
    assert res.returncode == 0, res.stdout + res.stderr
    return so
