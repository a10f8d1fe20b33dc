"""LocalRunner measures through RPC, as TVM's does: set_task starts a tracker and a server on loopback,
measurements take the RPCRunner path, and the tracker and server stop when tuning ends or at exit."""
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from kiln import autotvm
from kiln.autotvm.measure import MeasureErrorNo, MeasureInput, default_module_loader
from kiln.rpc.measure import count_servers
from kiln.testing.autotvm import get_sample_task

pytestmark = pytest.mark.timeout(300)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is not alive
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _wait_gone(pids, timeout=10.0) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


class CountingLoader:
    """A module loader that records which server process served each measurement."""

    def __init__(self):
        self.inner = default_module_loader()
        self.server_pids = []

    def __call__(self, remote_kwargs, build_result):
        loader = self

        class _Ctx:
            def __enter__(self):
                self.cm = loader.inner(remote_kwargs, build_result)
                remote, mod = self.cm.__enter__()
                loader.server_pids.append(remote.ping()["server_pid"])
                return remote, mod

            def __exit__(self, *exc):
                return self.cm.__exit__(*exc)

        return _Ctx()


@pytest.fixture(scope="module")
def built():
    task, _ = get_sample_task(16)
    builder = autotvm.LocalBuilder(n_parallel=2, timeout=60)
    builder.set_task(task)
    inputs = [MeasureInput(task.target, task, task.config_space.get(i)) for i in (2, 8, 14)]
    builds = builder.build(inputs)
    builder.executor.close()
    yield task, inputs, builds, builder


def test_set_task_starts_a_tracker_and_server_and_close_stops_them(built):
    task, inputs, builds, _ = built
    loader = CountingLoader()
    # generous timeout and deadline: under CI's load (two workers compiling on two cores) a measurement's
    # RPC round trip or the server's re-registration can take seconds
    runner = autotvm.LocalRunner(number=2, repeat=3, cooldown_interval=0.2, timeout=60, module_loader=loader)
    server, tracker = runner.set_task(task)
    pids = [server.pid, tracker.proc.pid]
    try:
        assert runner.key == f"$local$device${tracker.port}" and runner.host == "127.0.0.1"
        assert runner.port == tracker.port and runner.n_parallel == 1
        deadline = time.time() + 30  # the server registers again right after set_task's check
        while count_servers(runner.key, runner.host, runner.port) != (1, 1) and time.time() < deadline:
            time.sleep(0.02)
        assert count_servers(runner.key, runner.host, runner.port) == (1, 1)

        out = runner.run(inputs, builds)
        assert [r.error_no for r in out] == [MeasureErrorNo.NO_ERROR] * 3
        assert all(len(r.costs) == 1 and r.costs[0] > 0 for r in out)  # 3 repeats, extremes dropped
        assert loader.server_pids == [server.pid] * 3  # measured by the server set_task started
        # the cool-down separates the timings even though preparing the next one overlaps it
        stamps = [r.timestamp for r in out]
        assert all(b - a >= 0.2 for a, b in zip(stamps, stamps[1:])), stamps
    finally:
        runner.executor.close()  # what the tuner calls when tuning ends
    assert runner.tracker is None and runner.server is None
    assert _wait_gone(pids, timeout=30)


def test_fixed_inputs_reference_outputs_and_cache_flush(built):
    task, inputs, builds, _ = built
    runner = autotvm.LocalRunner(number=1, repeat=3, min_repeat_ms=2, cooldown_interval=0,
                                 enable_cpu_cache_flush=True)
    runner.set_task(task)
    try:
        out = runner.run(inputs[:1], builds[:1])
        assert out[0].error_no == MeasureErrorNo.NO_ERROR and out[0].costs[0] > 0

        rng = np.random.default_rng(1)
        a = rng.uniform(-1, 1, (16, 16)).astype("float32")
        b = rng.uniform(-1, 1, (16, 16)).astype("float32")
        with pytest.warns(UserWarning, match="fixed input"):
            runner.ref_input = [a, b, np.zeros((16, 16), "float32")]
        runner.ref_output = [None, None, a @ b]
        assert runner.run(inputs[:1], builds[:1])[0].error_no == MeasureErrorNo.NO_ERROR
        runner.ref_output = [None, None, a @ b + 1]
        assert runner.run(inputs[:1], builds[:1])[0].error_no == MeasureErrorNo.WRONG_ANSWER
    finally:
        runner.executor.close()


@pytest.mark.slow
def test_tuning_stops_the_cluster_when_it_ends():
    task, _ = get_sample_task(16)
    runner = autotvm.LocalRunner(number=2, repeat=1, cooldown_interval=0)
    seen = []

    def remember(tuner, inputs, results):
        seen.append((runner.server.pid, runner.tracker.proc.pid))

    opt = autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=2), runner=runner)
    tuner = autotvm.tuner.GridSearchTuner(task)
    tuner.tune(n_trial=4, measure_option=opt, callbacks=[remember])
    assert len(seen) == 2 and seen[0] == seen[1]
    assert tuner.best_flops > 0
    assert runner.server is None and _wait_gone(seen[0])
    # a second tuning run starts a fresh tracker and server
    tuner = autotvm.tuner.GridSearchTuner(task)
    seen.clear()
    tuner.tune(n_trial=2, measure_option=opt, callbacks=[remember])
    assert len(seen) == 1 and runner.server is None and _wait_gone(seen[0])


def test_the_cluster_stops_at_interpreter_exit(tmp_path):
    script = textwrap.dedent("""
        import sys
        from kiln import autotvm
        from kiln.testing.autotvm import get_sample_task
        task, _ = get_sample_task(16)
        RUNNER = autotvm.LocalRunner()
        server, tracker = RUNNER.set_task(task)
        print(server.pid, tracker.proc.pid, flush=True)
        # exit without closing anything
    """)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env,
                          cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    pids = [int(x) for x in proc.stdout.split()]
    assert len(pids) == 2
    assert _wait_gone(pids), pids
