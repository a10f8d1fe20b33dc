"""The runtime never compiles: an exported model loads and runs in a process where every compiler package of kiln
is blocked from importing (DESIGN.md: the runtime imports nothing of the compiler)."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np

import kiln
from kiln import relay

BLOCKED = ("kiln.target", "kiln.relay", "kiln.te", "kiln.tir", "kiln.topi", "kiln.autotvm", "kiln.driver")


def _export_model(path: str):
    """A small conv + dense network built at opt_level 3 (packed layouts, fused epilogues, the native run plan)."""
    x = relay.var("data", shape=(1, 3, 9, 9))
    w = relay.const(np.random.default_rng(0).uniform(-1, 1, (8, 3, 3, 3)).astype("float32"))
    d = relay.const(np.random.default_rng(1).uniform(-1, 1, (5, 8 * 7 * 7)).astype("float32"))
    y = relay.nn.relu(relay.nn.conv2d(x, w, channels=8, kernel_size=(3, 3)))
    y = relay.nn.softmax(relay.nn.dense(relay.nn.batch_flatten(y), d))
    mod = kiln.IRModule.from_expr(relay.Function([x], y))
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm")
    lib.export_library(path)
    data = np.random.default_rng(2).uniform(-1, 1, (1, 3, 9, 9)).astype("float32")
    from kiln.contrib import graph_executor
    gm = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    gm.set_input("data", data)
    gm.run()
    return data, gm.get_output(0).numpy()


def test_exported_model_runs_with_compiler_packages_blocked(tmp_path):
    so = str(tmp_path / "model.so")
    data, expect = _export_model(so)
    np.save(tmp_path / "data.npy", data)
    script = textwrap.dedent(f"""
        import importlib.abc, json, sys
        BLOCKED = {BLOCKED!r}

        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if any(name == b or name.startswith(b + ".") for b in BLOCKED):
                    raise ImportError(f"blocked for this test: {{name}}")
                return None

        sys.meta_path.insert(0, Block())
        import numpy as np
        import kiln.runtime
        lib = kiln.runtime.load_module({so!r})
        gm = kiln.runtime.graph_executor.GraphModule(lib["default"](kiln.runtime.cpu()))
        gm.set_input("data", np.load({str(tmp_path / "data.npy")!r}))
        gm.run()
        out = gm.get_output(0).numpy()
        loaded = sorted(m for m in sys.modules if m.startswith("kiln."))
        print(json.dumps({{"out": out.tolist(), "modules": loaded}}))
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(kiln.__file__))]
                                                      + [p for p in sys.path if p]))
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    np.testing.assert_allclose(np.array(result["out"], dtype="float32"), expect, rtol=1e-5, atol=1e-6)
    assert not [m for m in result["modules"] if m.startswith(BLOCKED)]
