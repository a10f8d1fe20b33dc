"""The adaptive thread policy (kiln.runtime.thread_policy): how many cores other processes keep busy is
measured from /proc/stat and the process's own CPU time, and parallel loops get the cores left free.

The decisions are tested with an injected clock and CPU counters (no busy machine needed); the real
counters are tested against a CPU-bound neighbour process; the plumbing into loaded libraries is tested
through ``__kiln_num_threads``. Speed is never asserted here (benchmarks/contention.py measures it)."""
import subprocess
import sys

import numpy as np
import pytest

import kiln
from kiln.error import KilnError
from kiln.runtime import nd, thread_policy as tp
from kiln.runtime.abi import C_PRELUDE


class FakeMachine:
    """A clock and CPU counters advanced by hand: ``others`` busy cores, ``mine`` cores used by this process."""

    def __init__(self):
        self.t = 100.0
        self.busy = 5000.0
        self.mine = 10.0
        self.samples = 0

    def clock(self):
        return self.t

    def sample(self):
        self.samples += 1
        return self.busy, self.mine

    def advance(self, seconds, others, mine=0.0):
        self.t += seconds
        self.busy += seconds * (others + mine)
        self.mine += seconds * mine


def _adapter(cpus=2, confirm=2):
    fake = FakeMachine()
    return fake, tp.ThreadAdapter(sample=fake.sample, clock=fake.clock, cpus=cpus, window_s=0.25, confirm=confirm)


def _step(fake, ad, others, mine=0.0, seconds=0.3):
    fake.advance(seconds, others, mine)
    return ad.tick()


def test_busy_neighbour_lowers_the_count_after_confirmed_windows():
    fake, ad = _adapter()
    assert not ad.tick() and ad.usable is None and ad.threads(2) == 2   # first sample: nothing to compare
    assert not _step(fake, ad, others=1.0)                              # one window says 1: not yet
    assert ad.others == pytest.approx(1.0) and ad.threads(2) == 2
    assert _step(fake, ad, others=1.0)                                  # the second agrees: applied
    assert ad.usable == 1 and ad.threads(2) == 1 and ad.threads(8) == 1 and ad.changes == 1
    assert not _step(fake, ad, others=1.0)                              # no change, nothing to apply
    # the neighbour stops: back to every core after two quiet windows
    assert not _step(fake, ad, others=0.0) and ad.threads(2) == 1
    assert _step(fake, ad, others=0.0) and ad.usable == 2 and ad.threads(2) == 2 and ad.changes == 2


def test_own_cpu_time_is_not_contention():
    # this process keeping both cores busy (its OpenMP workers, spinning or not, ONNX Runtime in-process)
    fake, ad = _adapter()
    ad.tick()
    for _ in range(3):
        _step(fake, ad, others=0.0, mine=2.0)
    assert ad.others == pytest.approx(0.0, abs=1e-9) and ad.usable == 2 and ad.threads(2) == 2


def test_a_single_burst_does_not_flip_and_rounding():
    fake, ad = _adapter(cpus=4)
    ad.tick()
    _step(fake, ad, others=0.2)
    _step(fake, ad, others=0.2)
    assert ad.usable == 4
    for others in (3.0, 0.2, 3.0, 0.2):             # alternating windows never agree twice
        _step(fake, ad, others=others)
    assert ad.usable == 4 and ad.changes == 1
    _step(fake, ad, others=1.6)
    _step(fake, ad, others=1.6)
    assert ad.usable == 2                           # 4 - 1.6 = 2.4 rounds to 2
    _step(fake, ad, others=1.4)
    _step(fake, ad, others=1.4)
    assert ad.usable == 3                           # 2.6 rounds to 3
    _step(fake, ad, others=7.5)
    _step(fake, ad, others=7.5)
    assert ad.usable == 1 and ad.threads(4) == 1    # never below one thread


def test_measures_at_most_once_per_window_and_restarts():
    fake, ad = _adapter(confirm=1)
    ad.tick()
    for _ in range(50):                             # a run every 1 ms: one sample per 0.25 s window
        _step(fake, ad, others=1.0, seconds=0.001)
    assert fake.samples == 1
    _step(fake, ad, others=1.0, seconds=0.25)
    assert fake.samples == 2 and ad.usable == 1
    ad.restart()
    assert ad.usable is None and ad.others is None and ad.threads(2) == 2


def test_no_counters_means_no_decision():
    ad = tp.ThreadAdapter(sample=lambda: None, clock=iter(range(0, 100, 1)).__next__, cpus=2)
    for _ in range(5):
        assert not ad.tick()
    assert ad.usable is None and ad.threads(2) == 2


def test_policy_choice(monkeypatch):
    monkeypatch.delenv("KILN_THREAD_POLICY", raising=False)
    try:
        assert tp.get_thread_policy() == "adaptive"                   # the default
        monkeypatch.setenv("KILN_THREAD_POLICY", "Fixed")
        assert tp.get_thread_policy() == "fixed"
        kiln.runtime.set_thread_policy("adaptive")                    # the runtime call wins over the variable
        assert tp.get_thread_policy() == "adaptive"
        with pytest.raises(KilnError, match="set_thread_policy expects one of adaptive, fixed"):
            kiln.runtime.set_thread_policy("greedy")
        kiln.runtime.set_thread_policy(None)
        monkeypatch.setenv("KILN_THREAD_POLICY", "greedy")
        with pytest.raises(KilnError, match=r"\$KILN_THREAD_POLICY must be one of adaptive, fixed, got 'greedy'"):
            tp.get_thread_policy()
    finally:
        monkeypatch.delenv("KILN_THREAD_POLICY", raising=False)
        kiln.runtime.set_thread_policy(None)
    status = kiln.runtime.thread_status()
    assert {"policy", "requested", "threads", "cpus", "others_busy_cores", "changes"} <= set(status)


READ_THREADS = C_PRELUDE + r"""
int32_t read_threads(KilnValue* args, int32_t num_args) {
  int32_t* out = (int32_t*)args[0].v_handle;
  out[0] = __kiln_num_threads;
  return 0;
}
"""


def _read_threads(fn) -> int:
    out = nd.empty((1,), "int32")
    fn(out)
    return int(out.numpy()[0])


@pytest.fixture
def fake_adapter(monkeypatch):
    """The process-wide adapter driven by a FakeMachine; the policy and thread count restored afterwards."""
    fake = FakeMachine()
    monkeypatch.setattr(tp.ADAPTER, "_sample", fake.sample)
    monkeypatch.setattr(tp.ADAPTER, "_clock", fake.clock)
    monkeypatch.setattr(tp.ADAPTER, "cpus", 2)
    tp.ADAPTER.restart()  # forget what earlier tests in this process measured (real clock, real load)
    kiln.runtime.set_num_threads(2)
    yield fake
    tp.ADAPTER.restart()
    kiln.runtime.set_thread_policy(None)
    kiln.runtime.set_num_threads(None)


def test_decisions_reach_loaded_and_new_libraries(fake_adapter):
    from kiln.target import create_c_module
    funcs = [{"name": "read_threads", "args": [{"name": "out", "kind": "buffer", "dtype": "int32", "shape": [1]}]}]
    before = create_c_module(READ_THREADS, funcs)["read_threads"]
    kiln.runtime.set_thread_policy("adaptive")
    assert _read_threads(before) == 2
    tp.tick()
    for _ in range(2):
        fake_adapter.advance(0.3, others=1.0)
        tp.tick()
    assert kiln.runtime.effective_threads(backend="openmp") == 1 and _read_threads(before) == 1
    assert kiln.runtime.effective_threads() == 2                      # loops on kiln's pool keep the requested count
    after = create_c_module(READ_THREADS.replace("read_threads", "read_threads2"),
                            [dict(funcs[0], name="read_threads2")])["read_threads2"]
    assert _read_threads(after) == 1                                  # a library loaded now starts at 1
    assert kiln.runtime.num_threads() == 2                            # the requested count is unchanged
    kiln.runtime.set_thread_policy("fixed")                           # fixed: the requested count, at once
    assert _read_threads(before) == 2 and _read_threads(after) == 2
    kiln.runtime.set_thread_policy("adaptive")                        # the measurement is kept
    assert _read_threads(before) == 1
    kiln.runtime.set_num_threads(1)                                   # the requested count caps it
    assert _read_threads(before) == 1 and kiln.runtime.thread_status()["requested"] == 1
    kiln.runtime.set_num_threads(2)                                   # and the measurement still holds
    assert _read_threads(before) == 1
    st = kiln.runtime.thread_status()
    assert st["policy"] == "adaptive" and st["requested"] == 2 and st["threads_openmp"] == 1 and st["threads"] == 2
    tp.ADAPTER.restart()
    kiln.runtime.set_thread_policy("adaptive")
    assert _read_threads(before) == 2 and kiln.runtime.thread_status()["threads_openmp"] == 2


# a library whose parallel loops are the pool's: it has the launch pointer the loader fills in
READ_THREADS_POOL = READ_THREADS.replace("read_threads", "read_threads_pool") + r"""
typedef int32_t (*KilnParallelBody)(int64_t begin, int64_t end, void* closure);
typedef int32_t (*KilnParallelLaunchFn)(KilnParallelBody body, void* closure, int64_t extent, int32_t threads);
__attribute__((weak)) KilnParallelLaunchFn __kiln_parallel_launch = 0;
"""


def test_pool_libraries_keep_the_requested_count(fake_adapter):
    """The adaptive policy lowers the count of OpenMP libraries only: loops on kiln's pool never wait for a
    late worker, so they keep the requested threads (thread_policy, "The thread pool needs no fewer threads")."""
    from kiln.target import create_c_module
    funcs = [{"name": "read_threads", "args": [{"name": "out", "kind": "buffer", "dtype": "int32", "shape": [1]}]}]
    omp = create_c_module(READ_THREADS.replace("read_threads", "read_threads_omp2"),
                          [dict(funcs[0], name="read_threads_omp2")])
    pool = create_c_module(READ_THREADS_POOL, [dict(funcs[0], name="read_threads_pool")])
    assert pool.library.parallel_backend == "pool" and omp.library.parallel_backend == "openmp"
    kiln.runtime.set_thread_policy("adaptive")
    tp.tick()
    for _ in range(2):
        fake_adapter.advance(0.3, others=1.5)
        tp.tick()
    assert _read_threads(omp["read_threads_omp2"]) == 1
    assert _read_threads(pool["read_threads_pool"]) == 2
    late = create_c_module(READ_THREADS_POOL.replace("read_threads_pool", "read_threads_pool2"),
                           [dict(funcs[0], name="read_threads_pool2")])
    assert _read_threads(late["read_threads_pool2"]) == 2              # a pool library loaded now: 2 as well
    kiln.runtime.set_num_threads(1)                                   # the requested count still caps it
    assert _read_threads(pool["read_threads_pool"]) == 1
    st = kiln.runtime.thread_status()
    assert st["threads"] == 1 and st["threads_openmp"] == 1
    with pytest.raises(KilnError, match="backend"):
        kiln.runtime.effective_threads(2, backend="tbb")


def test_fixed_policy_measures_but_does_not_act(fake_adapter):
    kiln.runtime.set_thread_policy("fixed")
    tp.tick()
    for _ in range(2):
        fake_adapter.advance(0.3, others=1.0)
        tp.tick()
    st = kiln.runtime.thread_status()
    assert st["others_busy_cores"] == pytest.approx(1.0) and st["usable_cores"] == 1 and st["threads"] == 2


def test_graph_executor_runs_drive_the_policy(fake_adapter):
    from kiln import relay
    from kiln.contrib import graph_executor
    x = relay.var("x", shape=(3, 5), dtype="float32")
    with kiln.transform.PassContext(opt_level=0):
        lib = relay.build(kiln.IRModule.from_expr(relay.Function([x], relay.add(x, x))), target="llvm")
    m = graph_executor.GraphModule(lib["default"](kiln.cpu(0)))
    data = np.random.default_rng(0).standard_normal((3, 5)).astype("float32")
    kiln.runtime.set_thread_policy("adaptive")
    samples = fake_adapter.samples
    for _ in range(3):
        fake_adapter.advance(0.3, others=1.0)
        m.run(x=data)
    assert fake_adapter.samples == samples + 3 and kiln.runtime.effective_threads(backend="openmp") == 1
    np.testing.assert_allclose(m.get_output(0).numpy(), data + data)


def test_vm_runs_drive_the_policy(fake_adapter):
    from kiln import relay
    from kiln.runtime.vm import VirtualMachine
    x = relay.var("x", shape=(4,), dtype="float32")
    exe = relay.vm.compile(kiln.IRModule.from_expr(relay.Function([x], relay.multiply(x, x))), "llvm")
    vm = VirtualMachine(exe, kiln.cpu())
    data = np.arange(4, dtype="float32")
    kiln.runtime.set_thread_policy("adaptive")
    samples = fake_adapter.samples
    for _ in range(3):
        fake_adapter.advance(0.3, others=1.0)
        out = vm.invoke("main", data)
    assert fake_adapter.samples == samples + 3 and kiln.runtime.effective_threads(backend="openmp") == 1
    np.testing.assert_allclose(out.numpy(), data * data)


HOG = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end:\n    pass\n"


def test_real_counters_see_a_cpu_bound_neighbour():
    """With a CPU-bound child process running, the real counters attribute at least half a core to others
    (on a quiet machine about one core; on a loaded one more), and none of it to this process."""
    ad = tp.ThreadAdapter(window_s=0.0, confirm=1)
    hog = subprocess.Popen([sys.executable, "-c", HOG.format(s=20)])
    try:
        import time
        time.sleep(0.2)
        ad.tick()
        time.sleep(0.8)
        ad.tick()
    finally:
        hog.kill()
        hog.wait()
    assert ad.others is not None and ad.others >= 0.5
    assert ad.usable == max(1, int(ad.cpus - ad.others + 0.5))


def test_cpus_follow_the_affinity():
    """Pinned to one CPU (taskset, a cpuset), only that CPU's line of /proc/stat counts, and the adapter
    sizes against one CPU."""
    import os
    fake = FakeMachine()
    ad = tp.ThreadAdapter(sample=lambda: fake.sample() + (3,), clock=fake.clock, cpus=8, confirm=1)
    ad.tick()
    _step(fake, ad, others=1.0)
    assert ad.cpus == 3 and ad.usable == 2
    full = tp.sample_cpu_times()
    assert full is not None and full[2] == (os.cpu_count() if len(os.sched_getaffinity(0)) >= os.cpu_count()
                                            else len(os.sched_getaffinity(0)))
    allowed = os.sched_getaffinity(0)
    if len(allowed) < 2:
        pytest.skip("needs two usable CPUs to pin to one of them")
    try:
        os.sched_setaffinity(0, {min(allowed)})
        pinned = tp.sample_cpu_times()
    finally:
        os.sched_setaffinity(0, allowed)
    assert pinned[2] == 1 and 0 < pinned[0] <= tp.sample_cpu_times()[0]
