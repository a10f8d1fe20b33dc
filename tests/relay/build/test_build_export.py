"""The deployable artifact: one file holding kernels, graph JSON and params, loadable with no compiler."""
import os
import subprocess
import sys

import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.contrib import graph_executor
from kiln.error import ModuleLoadError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

LOADER = r"""
import shutil, sys
import numpy as np
for cc in ("gcc", "cc", "clang", "g++"):
    assert shutil.which(cc) is None, cc
import kiln
from kiln.contrib import graph_executor
lib = kiln.runtime.load_module(sys.argv[1])
m = graph_executor.GraphModule(lib["default"](kiln.cpu(0)))
assert m.module._native is not None
m.set_input("data", np.load(sys.argv[2]))
m.run()
np.save(sys.argv[3], m.get_output(0).numpy())
loaded = sorted(k for k in sys.modules if k.split(".")[:2] in (["kiln", "relay"], ["kiln", "te"], ["kiln", "tir"],
                                                           ["kiln", "target"], ["kiln", "topi"], ["kiln", "driver"]))
assert not loaded, loaded
"""


@pytest.fixture(scope="module")
def built():
    mod, params = relay.testing.mlp.get_workload(batch_size=2, num_classes=10, image_shape=(1, 6, 6))
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    x = np.random.default_rng(0).uniform(-1, 1, size=(2, 1, 6, 6)).astype("float32")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.run(data=x)
    return lib, x, m.get_output(0).numpy()


@pytest.mark.parametrize("suffix", [".so", ".tar"])
def test_export_and_load_in_process(built, tmp_path, suffix):
    lib, x, want = built
    path = str(tmp_path / f"model{suffix}")
    lib.export_library(path)
    loaded = tvm.runtime.load_module(path)
    assert loaded.get_function("get_graph_json")() == lib.get_graph_json()
    assert set(loaded["get_params"]()) == set(lib.get_params())
    m = graph_executor.GraphModule(loaded["default"](tvm.cpu(0)))
    assert m.module._native is not None  # the native plan runner travelled with the kernels
    m.set_input("data", x)
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), want)


def test_export_load_in_fresh_process_without_compiler(built, tmp_path):
    lib, x, want = built
    so = str(tmp_path / "model.so")
    lib.export_library(so)
    np.save(tmp_path / "x.npy", x)
    env = dict(os.environ, PATH=str(tmp_path / "empty-bin"), PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-c", LOADER, so, str(tmp_path / "x.npy"), str(tmp_path / "y.npy")],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), want)


def test_truncated_and_corrupted_artifacts(built, tmp_path):
    lib, _, _ = built
    so = tmp_path / "model.so"
    lib.export_library(str(so))
    data = so.read_bytes()
    cut = tmp_path / "cut.so"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModuleLoadError):
        tvm.runtime.load_module(str(cut))
    bad = bytearray(data)
    bad[len(bad) // 3] ^= 0xFF
    flipped = tmp_path / "flipped.so"
    flipped.write_bytes(bytes(bad))
    with pytest.raises(ModuleLoadError):
        tvm.runtime.load_module(str(flipped))
    tar = tmp_path / "model.tar"
    lib.export_library(str(tar))
    tdata = tar.read_bytes()
    (tmp_path / "cut.tar").write_bytes(tdata[:5000])
    with pytest.raises(ModuleLoadError):
        tvm.runtime.load_module(str(tmp_path / "cut.tar"))


def test_corrupt_factory_payload_is_a_load_error(built):
    from kiln.runtime.registry import get_global_func
    loader = get_global_func("runtime.module.loadbinary_GraphExecutorFactory")
    with pytest.raises(ModuleLoadError):
        loader({"module_name": "default"}, {"graph_json": b"{}", "params": b"\x00" * 7}, None)
    with pytest.raises(ModuleLoadError):
        loader({"module_name": "default"}, {"params": b""}, None)
