"""``kiln compile`` then ``kiln run`` on each model format, outputs checked against numpy / PyTorch."""
from __future__ import annotations

import os
import shutil
import sys

import numpy as np
import pytest

from .conftest import run_kiln


def conv_relu_ref(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """NCHW conv, stride 1, pad 1, then relu (numpy)."""
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    n, _, h, wd = x.shape
    kh, kw = w.shape[2:]
    out = np.zeros((n, w.shape[0], h, wd), np.float64)
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,oc->nohw", xp[:, :, i:i + h, j:j + wd], w[:, :, i, j])
    return np.maximum(out, 0)


def test_compile_onnx_prints_summary(onnx_models, compiled_conv, tmp_path):
    assert compiled_conv.exists() and compiled_conv.stat().st_size > 0
    res = run_kiln("compile", onnx_models["conv"], "-o", tmp_path / "conv_o0.so", "--opt-level", "0")
    assert res.returncode == 0, res.stderr
    assert "memory plan:" in res.stdout and "compiled for llvm" in res.stdout
    assert "opt_level 0" in res.stdout and "wrote" in res.stdout


def test_run_onnx_model_matches_numpy(onnx_models, compiled_conv, tmp_path):
    x = np.random.default_rng(1).standard_normal((1, 3, 7, 9)).astype("float32")
    np.savez(tmp_path / "in.npz", x=x)
    res = run_kiln("run", compiled_conv, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "out.npz",
                   "--print-top", "3")
    assert res.returncode == 0, res.stderr
    with np.load(tmp_path / "out.npz") as data:
        out = data["output_0"]
    ref = conv_relu_ref(x, onnx_models["conv_w"])
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    assert "output 0: shape [1, 4, 7, 9] float32" in res.stdout
    assert "top 3:" in res.stdout
    top = np.unravel_index(np.argmax(ref), ref.shape)
    assert f"[{', '.join(str(int(i)) for i in top)}]" in res.stdout


def test_run_random_inputs_profile_and_repeat(compiled_conv):
    res = run_kiln("run", compiled_conv, "--profile", "--repeat", "3", "--number", "2")
    assert res.returncode == 0, res.stderr
    assert "latency over 3 x 2 run(s): median" in res.stdout
    assert "Duration (us)" in res.stdout and "conv2d" in res.stdout   # the per-op Report table


def test_run_without_a_compiler_on_path(compiled_conv, tmp_path):
    """The runtime side needs no compiler: run with an empty PATH (no gcc/cc reachable)."""
    res = run_kiln("run", compiled_conv, "--outputs", tmp_path / "o.npz", env_extra={"PATH": str(tmp_path)})
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "o.npz").exists()


@pytest.mark.slow
def test_compile_and_run_torchscript(torch_model, tmp_path):
    torch = pytest.importorskip("torch")
    so = tmp_path / "tiny.so"
    res = run_kiln("compile", torch_model["path"], "--input-shapes", "x:[2,5]", "-o", so)
    assert res.returncode == 0, res.stderr
    assert "inputs: x[2, 5] float32" in res.stdout
    x = np.random.default_rng(2).standard_normal((2, 5)).astype("float32")
    np.savez(tmp_path / "in.npz", x=x)
    res = run_kiln("run", so, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "out.npz")
    assert res.returncode == 0, res.stderr
    with torch.no_grad():
        ref = torch_model["module"](torch.from_numpy(x)).numpy()
    with np.load(tmp_path / "out.npz") as data:
        np.testing.assert_allclose(data["output_0"], ref, rtol=1e-5, atol=1e-5)


def test_compile_and_run_relay_text_with_params(relay_model, tmp_path):
    so = tmp_path / "prog.tar"
    res = run_kiln("compile", relay_model["path"], "-o", so)   # prog.params is picked up beside it
    if res.returncode != 0 and "C compiler" in res.stderr:
        pytest.skip("no C compiler to pack a .tar")
    assert res.returncode == 0, res.stderr
    assert "inputs: x[3, 5] float32" in res.stdout    # w is bound from prog.params
    x = np.random.default_rng(3).standard_normal((3, 5)).astype("float32")
    np.savez(tmp_path / "in.npz", x=x)
    res = run_kiln("run", so, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "out")
    assert res.returncode == 0, res.stderr
    with np.load(tmp_path / "out.npz") as data:
        np.testing.assert_allclose(data["output_0"], np.maximum((x + relay_model["w"]) * 3, 0), rtol=1e-6)


def test_default_output_name_and_onnx_dynamic_dim(onnx_models, tmp_path):
    shutil.copy(onnx_models["dyn"], tmp_path / "dyn.onnx")
    res = run_kiln("compile", "dyn.onnx", "-o", "dyn_vm.so", cwd=tmp_path)  # a dynamic axis: a VM build
    assert res.returncode == 0, res.stderr
    assert "x[?, 5] float32" in res.stdout and "Relay VM" in res.stdout
    res = run_kiln("compile", "dyn.onnx", "--input-shapes", "x:4x5", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "dyn.so").exists()
    res = run_kiln("run", "dyn.so", "--fill-mode", "ones", "--outputs", "o.npz", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    with np.load(tmp_path / "o.npz") as data:
        np.testing.assert_array_equal(data["output_0"], np.ones((4, 5), "float32"))


def test_console_script_entry_point():
    """pyproject's ``kiln = "kiln.cli:main"`` resolves to a callable returning an exit code."""
    from kiln.cli import main
    assert main(["--version"]) == 0
    assert callable(main)
    assert os.path.exists(os.path.join(os.path.dirname(sys.modules["kiln.cli"].__file__), "__main__.py"))
