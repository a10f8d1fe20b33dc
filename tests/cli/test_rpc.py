"""``kiln rpc tracker|server|query``: the wrappers start the real tracker and server, and query sees them."""
from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time

import pytest

from .conftest import REPO, run_kiln


def _start(*args):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "kiln.cli", "rpc", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env, start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 1.0)
        if ready:
            line = proc.stdout.readline()
            if line.startswith("KILN_RPC_READY"):
                return proc, int(line.split()[1])
            if not line and proc.poll() is not None:
                break
    _stop(proc)
    pytest.fail(f"kiln rpc {' '.join(args)} did not become ready")


def _stop(proc) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def test_tracker_server_query():
    base = random.randint(20000, 40000)
    tracker, port = _start("tracker", "--port", str(base), "--port-end", str(base + 50), "--silent")
    try:
        server, _ = _start("server", "--tracker", f"127.0.0.1:{port}", "--key", "kiln-cli-test",
                           "--port", str(base + 60), "--port-end", str(base + 110), "--silent")
        try:
            deadline, out = time.time() + 30, ""
            while time.time() < deadline:
                res = run_kiln("rpc", "query", "--port", str(port), timeout=60)
                assert res.returncode == 0, res.stderr
                out = res.stdout
                if "kiln-cli-test" in out:
                    break
                time.sleep(0.5)
            assert "kiln-cli-test" in out, out
        finally:
            _stop(server)
    finally:
        _stop(tracker)


def test_query_without_tracker_fails_cleanly():
    res = run_kiln("rpc", "query", "--port", "1", timeout=60)
    assert res.returncode == 1
    assert "cannot query tracker" in res.stderr and "Traceback" not in res.stderr


def test_role_flags_are_passed_through(capsys):
    from kiln.cli import main
    assert main(["rpc", "server", "--help"]) == 0
    out = capsys.readouterr().out
    assert "usage: kiln rpc server" in out and "--tracker" in out
    assert main(["rpc", "tracker", "--port", "notaport"]) == 2
    assert main(["rpc", "nonsense"]) == 2


@pytest.mark.slow
def test_tune_measures_on_an_rpc_server(tmp_path):
    """``kiln tune --rpc-key K --rpc-tracker H:P`` measures through the tracker on a server started by ``kiln rpc``."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    import numpy as np
    w = np.random.default_rng(0).standard_normal((2, 2, 3, 3)).astype("float32")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "W"], ["y"], pads=[1, 1, 1, 1])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 5, 5])],
                              [numpy_helper.from_array(w, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, tmp_path / "c.onnx")
    base = random.randint(40000, 50000)
    tracker, port = _start("tracker", "--port", str(base), "--port-end", str(base + 50), "--silent")
    try:
        server, _ = _start("server", "--tracker", f"127.0.0.1:{port}", "--key", "kiln-cli-tune",
                           "--port", str(base + 60), "--port-end", str(base + 110), "--silent")
        try:
            res = run_kiln("tune", tmp_path / "c.onnx", "-o", tmp_path / "r.log", "--trials", "2", "--tuner",
                           "random", "--rpc-key", "kiln-cli-tune", "--rpc-tracker", f"127.0.0.1:{port}",
                           "--number", "1", "--repeat", "1", timeout=300)
            assert res.returncode == 0, res.stdout + res.stderr
            from kiln import autotvm
            records = list(autotvm.record.load_from_file(str(tmp_path / "r.log")))
            assert records and all(r.error_no == 0 for _, r in records)
        finally:
            _stop(server)
    finally:
        _stop(tracker)
