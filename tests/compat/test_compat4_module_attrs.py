"""TVM-era code reaches some modules as attributes after ``from tvm import relay`` without importing them itself
(``tvm.contrib.graph_executor.create(...)``, ``relay.backend._backend``): both are bound by importing relay."""
import subprocess
import sys


def test_relay_import_binds_graph_executor_and_backend():
    code = ("import kiln as tvm\nfrom kiln import relay\n"
            "assert tvm.contrib.graph_executor.GraphModule is not None\n"
            "assert callable(tvm.contrib.graph_executor.create)\n"
            "assert relay.backend._backend.GraphPlanMemory is not None\n")
    # a fresh interpreter, so that no other test's imports bind the modules first
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
