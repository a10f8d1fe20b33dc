"""Executable.save / load_exec in a fresh process (no pickle: JSON + raw bytes), and corrupt input."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.error import ModuleLoadError
from kiln.runtime.vm import Executable


def _exe():
    x = relay.var("x", shape=(relay.Any(), 6))
    w = relay.var("w", shape=(4, 6))
    y = relay.nn.relu(relay.nn.dense(x, w))
    c = relay.var("c", shape=(), dtype="bool")
    mod = tvm.IRModule.from_expr(relay.Function([x, w, c], relay.If(c, y, relay.negative(y))))
    wv = np.random.default_rng(3).standard_normal((4, 6)).astype("float32")
    return relay.vm.compile(mod, "llvm", params={"w": wv}), wv


def test_save_load_in_fresh_process(tmp_path):
    exe, wv = _exe()
    code, lib = exe.save()
    (tmp_path / "code.ro").write_bytes(bytes(code))
    lib.export_library(str(tmp_path / "lib.so"))
    x = np.random.default_rng(4).standard_normal((5, 6)).astype("float32")
    np.save(tmp_path / "x.npy", x)
    script = textwrap.dedent(f"""
        import sys, numpy as np
        import kiln.runtime as rt
        from kiln.runtime.vm import Executable, VirtualMachine
        code = open({str(tmp_path / 'code.ro')!r}, 'rb').read()
        exe = Executable.load_exec(code, rt.load_module({str(tmp_path / 'lib.so')!r}))
        vm = VirtualMachine(exe, rt.cpu(0))
        x = np.load({str(tmp_path / 'x.npy')!r})
        np.save({str(tmp_path / 'out.npy')!r}, vm.run(x, np.array(False)).numpy())
        assert "kiln.relay" not in sys.modules, "the VM runtime imported the compiler"
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), -np.maximum(x @ wv.T, 0), rtol=1e-5)


def test_load_rejects_corrupt_bytecode():
    exe, _ = _exe()
    code, lib = exe.save()
    with pytest.raises(ModuleLoadError, match="magic"):
        Executable.load_exec(b"garbage" * 4, lib)
    with pytest.raises(ModuleLoadError, match="truncated"):
        Executable.load_exec(bytes(code)[:40], lib)
    bad = bytes(code).replace(b'"invoke_packed", ', b'"invoke_packed", 99', 1)
    with pytest.raises(ModuleLoadError):
        Executable.load_exec(bad, lib)
