"""kiln's thread pool driven directly (kiln_pool_launch through ctypes, a Python body): every iteration runs
exactly once for any extent and thread count (1 thread, more threads than iterations, more chunks than
threads, uneven last chunks), guided chunk sizes, errors, and the caller's sleep while a worker finishes
a chunk (kiln/runtime/thread_pool.c). Timing is never asserted."""
import ctypes
import os
import subprocess
import sys
import threading
import time

import pytest

from kiln.runtime import thread_pool

BODY = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)


def _lib():
    lib = thread_pool._load()
    if lib is None:
        pytest.fail("kiln's thread pool could not be built")
    lib.kiln_pool_launch.restype = ctypes.c_int32
    lib.kiln_pool_launch.argtypes = [BODY, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32]
    return lib


class Recorder:
    """A body that records the chunks it ran ((begin, end, thread)) and may sleep or fail in them."""

    def __init__(self, delay_s=0.0, worker_delay_s=0.0, fail_at=None):
        self.chunks, self.lock = [], threading.Lock()
        self.delay_s, self.worker_delay_s, self.fail_at = delay_s, worker_delay_s, fail_at
        self.caller = threading.get_ident()
        self.body = BODY(self._run)

    def _run(self, begin, end, _closure):
        me = threading.get_ident()
        with self.lock:
            self.chunks.append((begin, end, me))
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.worker_delay_s and me != self.caller:
            time.sleep(self.worker_delay_s)
        return 1 if self.fail_at is not None and begin <= self.fail_at < end else 0

    def covered(self, extent):
        ranges = sorted((b, e) for b, e, _ in self.chunks)
        pos = 0
        for b, e in ranges:
            assert b == pos and e > b, f"chunks {ranges} do not tile [0, {extent})"
            pos = e
        assert pos == extent, f"chunks {ranges} end at {pos}, not {extent}"
        return ranges


@pytest.mark.parametrize("extent", [1, 2, 3, 7, 64, 353, 1000])
@pytest.mark.parametrize("threads", [1, 2, 3, 5])
def test_every_iteration_runs_once(extent, threads):
    lib = _lib()
    rec = Recorder()
    assert lib.kiln_pool_launch(rec.body, None, extent, threads) == 0
    ranges = rec.covered(extent)
    if threads == 1 or extent == 1:
        assert ranges == [(0, extent)]  # one thread: the caller runs the whole loop in one call


def test_guided_chunks_more_than_threads_and_shrinking():
    lib = _lib()
    rec = Recorder()
    assert lib.kiln_pool_launch(rec.body, None, 352, 2) == 0
    sizes = [e - b for b, e in rec.covered(352)]
    assert sizes[0] == 88  # 352 / (2 * 2 threads), KILN_POOL_GUIDED's default
    assert len(sizes) > 2 and all(a >= b for a, b in zip(sizes, sizes[1:])) and sizes[-1] >= 1


def test_guided_divisor_from_the_environment():
    code = ("import ctypes; from kiln.runtime import thread_pool as tp\n"
            "import test_thread_pool_chunks as t\n"
            "lib = t._lib(); rec = t.Recorder(); assert lib.kiln_pool_launch(rec.body, None, 352, 2) == 0\n"
            "print([e - b for b, e in rec.covered(352)][0])\n")
    here = os.path.dirname(os.path.abspath(__file__))
    for value, first in (("4", 44), ("junk", 88)):
        env = dict(os.environ, KILN_POOL_GUIDED=value,
                   PYTHONPATH=os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        assert int(out.stdout.split()[-1]) == first, (value, out.stdout)


def test_error_in_a_chunk_is_reported():
    lib = _lib()
    rec = Recorder(fail_at=200)
    assert lib.kiln_pool_launch(rec.body, None, 352, 2) == -1
    rec.covered(352)  # the other chunks still ran
    assert lib.kiln_pool_launch(Recorder().body, None, 352, 2) == 0  # and the next job starts clean


def test_caller_sleeps_while_a_worker_finishes_its_chunk():
    """With no spin time the caller, out of chunks while a worker still runs one (20 ms longer than any of
    the caller's), sleeps on the futex and the worker's last chunk wakes it (caller_waits counts it). Tried
    for 10 jobs and at least 10 seconds: the worker may not wake before the caller took every chunk (a busy
    machine: 16 test processes on 16 CPUs once kept it off a CPU for 10 jobs), and the caller itself may be
    descheduled until the worker is done."""
    lib = _lib()
    old = thread_pool.set_spin_us(0)
    try:
        slept = worker_ran = jobs = 0
        deadline = time.monotonic() + 10.0
        while not slept and (jobs < 10 or time.monotonic() < deadline):
            jobs += 1
            before = thread_pool.pool_stats()["caller_waits"]
            rec = Recorder(delay_s=0.002, worker_delay_s=0.02)
            assert lib.kiln_pool_launch(rec.body, None, 16, 2) == 0
            rec.covered(16)
            worker_ran += any(t != rec.caller for _, _, t in rec.chunks)
            slept += thread_pool.pool_stats()["caller_waits"] > before
        assert worker_ran, f"the pool's worker never took a chunk in {jobs} jobs"
        assert slept, "the caller never slept while the worker ran a chunk"
    finally:
        thread_pool.set_spin_us(old)


@pytest.mark.parametrize("m,n,k", [(64, 48, 97), (61, 37, 83), (7, 24, 129)])
def test_dense_on_the_pool_matches_numpy(m, n, k):
    """A generated dense + bias + relu (the MLP's layers; M = 64 leaves a ragged last row block of 4, odd N
    padded panels)
    on the pool at 1, 2 and 3 threads (uneven chunk counts) agrees with numpy."""
    import numpy as np
    import kiln
    from kiln import relay
    from kiln.contrib import graph_executor
    rng = np.random.default_rng(m * n + k)
    x = rng.standard_normal((m, k)).astype("float32")
    w = rng.standard_normal((n, k)).astype("float32")
    b = rng.standard_normal(n).astype("float32")
    xv, wv, bv = relay.var("x", shape=(m, k)), relay.var("w", shape=(n, k)), relay.var("b", shape=(n,))
    f = relay.Function([xv, wv, bv], relay.nn.relu(relay.nn.bias_add(relay.nn.dense(xv, wv), bv)))
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(kiln.IRModule.from_expr(f), target="llvm", params={"w": w, "b": b})
    g = graph_executor.GraphModule(lib["default"](kiln.cpu(0)))
    want = np.maximum(x.astype(np.float64) @ w.T.astype(np.float64) + b, 0)
    try:
        for threads in (1, 2, 3):
            kiln.runtime.set_num_threads(threads)
            g.run(x=x)
            np.testing.assert_allclose(g.get_output(0).numpy(), want, rtol=1e-4, atol=1e-4)
    finally:
        kiln.runtime.set_num_threads(None)
