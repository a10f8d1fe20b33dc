"""Defect 11 (processes) of issue 15: ``kiln tune`` stopped by Ctrl-C (SIGINT) or SIGTERM while it
measures leaves no rpc_tracker / rpc_server behind. 127.0.0.1 only; every wait is bounded."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _children(pid: int) -> list:
    """Processes whose parent is ``pid`` (from /proc/*/stat)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(name))
    return out


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def _sigint_default():
    """Children of a shell without job control inherit SIGINT ignored; a Ctrl-C test needs it delivered."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def conv_model(tmp_path_factory):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    if not os.path.isdir("/proc/self/task"):
        pytest.skip("needs /proc")
    w = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype("float32")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "W"], ["y"], pads=[1, 1, 1, 1])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 9, 9])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 9, 9])],
                              [numpy_helper.from_array(w, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path_factory.mktemp("tune_sig") / "c.onnx"
    onnx.save(model, path)
    return path


_CLUSTER_SCRIPT = """
import sys, time
from kiln.rpc.measure import LocalCluster
print("go", flush=True)
c = LocalCluster(n_servers=2)
print("up", flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("when", ["starting", "up"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signalled_process_stops_its_local_cluster(sig, when):
    """The mechanism under ``kiln tune``: a process holding a LocalCluster (tracker + servers started
    from helper threads) that gets SIGINT or SIGTERM, while the children come up or after, ends them."""
    if not os.path.isdir("/proc/self/task"):
        pytest.skip("needs /proc")
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen([sys.executable, "-c", _CLUSTER_SCRIPT], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, preexec_fn=_sigint_default)
    rpc_pids: dict = {}
    try:
        assert proc.stdout.readline().strip() == "go"
        if when == "up":
            assert proc.stdout.readline().strip() == "up"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for pid in _children(proc.pid):
                cmd = _cmdline(pid)
                if "kiln.exec.rpc_" in cmd:
                    rpc_pids[pid] = cmd
            if len(rpc_pids) >= (1 if when == "starting" else 3):
                break
            time.sleep(0.01)
        assert rpc_pids
        proc.send_signal(sig)
        proc.wait(60)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(_alive(p) for p in rpc_pids):
            time.sleep(0.1)
        left = [f"{p}: {c}" for p, c in rpc_pids.items() if _alive(p)]
        assert not left, f"still running after the process got {sig.name}: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for pid in rpc_pids:
            if _alive(pid):
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass


@pytest.mark.slow
@pytest.mark.parametrize("when", ["starting", "measuring"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_stopped_tune_leaves_no_rpc_processes(conv_model, tmp_path, sig, when):
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env["KILN_NUM_THREADS"] = "1"
    proc = subprocess.Popen([sys.executable, "-m", "kiln.cli", "tune", str(conv_model), "--target", "llvm",
                             "-o", str(tmp_path / "t.log"), "--trials", "500", "--tuner", "random"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=_sigint_default)
    rpc_pids: dict = {}
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            for pid in _children(proc.pid):
                cmd = _cmdline(pid)
                if "kiln.exec.rpc_tracker" in cmd or "kiln.exec.rpc_server" in cmd:
                    rpc_pids[pid] = cmd
            kinds = {("tracker" if "kiln.exec.rpc_tracker" in c else "server") for c in rpc_pids.values()}
            if kinds == {"tracker", "server"} or (when == "starting" and rpc_pids):
                break
            time.sleep(0.01)
        assert proc.poll() is None, "kiln tune ended before its tracker and server were seen"
        assert rpc_pids, "kiln tune started no tracker or server within 120 s"
        # "starting": while the children are still coming up (not yet ready); "measuring": after
        time.sleep(0.05 if when == "starting" else 0.5)
        for pid in _children(proc.pid):
            cmd = _cmdline(pid)
            if "kiln.exec.rpc_" in cmd:
                rpc_pids[pid] = cmd
        proc.send_signal(sig)
        proc.wait(60)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(_alive(p) for p in rpc_pids):
            time.sleep(0.1)
        left = [f"{p}: {c}" for p, c in rpc_pids.items() if _alive(p)]
        assert not left, f"still running after kiln tune got {sig.name}: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for pid in rpc_pids:  # never leave a stray process behind, even when the test fails
            if _alive(pid):
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
