"""kiln's thread pool binds each worker to its own CPU and never binds the caller (kiln/runtime/thread_pool.c,
"Each worker is bound to its own CPU"): worker k to the k-th CPU of the creating thread's mask other than the
CPU that thread ran on, unbound when the mask has too few CPUs or binding is turned off (KILN_POOL_BIND=0,
TVM_BIND_THREADS=0); a caller found on a participating worker's CPU is moved off it with its mask restored.
Each case runs in a fresh process (workers are created once per process). Timing is never asserted."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))

SCRIPT = r"""
import json, os, sys, threading
import kiln.target.compiler  # registers the pool's build (no cached copy of this source yet)
import test_thread_pool_chunks as t
from kiln.runtime import thread_pool

def allowed(tid):
    with open(f"/proc/self/task/{tid}/status") as f:
        line = [l for l in f if l.startswith("Cpus_allowed_list")][0]
    out = set()
    for part in line.split(":", 1)[1].strip().split(","):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return sorted(out)

def on_cpu(tid):
    with open(f"/proc/self/task/{tid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])

mask = json.loads(sys.argv[1])
if mask:
    os.sched_setaffinity(0, set(mask))
threads, extent = int(sys.argv[2]), 1000
lib = t._lib()
me = threading.get_native_id()
caller_cpu = on_cpu(me)
rec = t.Recorder()
assert lib.kiln_pool_launch(rec.body, None, extent, threads) == 0
rec.covered(extent)
workers = {tid: allowed(tid) for tid in map(int, os.listdir("/proc/self/task"))
           if tid != me and open(f"/proc/self/task/{tid}/comm").read().startswith("kiln-pool-")}
out = {"caller_before": caller_cpu, "caller_mask": sorted(os.sched_getaffinity(0)),
       "worker_masks": sorted(workers.values()), "stats": thread_pool.pool_stats()}
if sys.argv[3] == "move":
    bound = [m[0] for m in workers.values() if len(m) == 1]
    full = os.sched_getaffinity(0)
    moved = 0
    for _ in range(20):
        os.sched_setaffinity(0, {bound[0]})   # run on the worker's CPU ...
        os.sched_setaffinity(0, full)         # ... with the mask as it was
        before = thread_pool.pool_stats()["caller_moves"]
        rec = t.Recorder()
        assert lib.kiln_pool_launch(rec.body, None, extent, threads) == 0
        rec.covered(extent)
        moved += thread_pool.pool_stats()["caller_moves"] > before
        assert os.sched_getaffinity(0) == full, "the caller's mask was not restored"
        if moved:
            break
    out["moved"] = moved
print("RESULT " + json.dumps(out))
"""


def _run(mask=None, threads=2, mode="plain", **env):
    environ = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]), **env)
    for name in ("KILN_POOL_BIND", "TVM_BIND_THREADS", "KILN_NUM_THREADS", "TVM_NUM_THREADS"):
        if name not in env:
            environ.pop(name, None)
    out = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(mask or []), str(threads), mode], env=environ,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def _cpus():
    return sorted(os.sched_getaffinity(0))


needs_two_cpus = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2,
                                    reason="binding workers to other CPUs needs a process with 2 or more CPUs")


@needs_two_cpus
def test_each_worker_bound_to_its_own_cpu_caller_left_free():
    cpus = _cpus()
    threads = min(len(cpus), 4)
    res = _run(threads=threads)
    assert res["caller_mask"] == cpus  # the user's thread is never bound
    masks = res["worker_masks"]
    assert len(masks) == threads - 1
    bound = [m[0] for m in masks if len(m) == 1]
    assert len(bound) == threads - 1 and len(set(bound)) == threads - 1, masks
    assert set(bound) <= set(cpus)


@needs_two_cpus
def test_more_workers_than_other_cpus_leaves_the_rest_unbound():
    two = _cpus()[:2]
    res = _run(mask=two, threads=5)
    masks = res["worker_masks"]
    assert len(masks) == 4
    assert sum(len(m) == 1 for m in masks) == 1, masks  # one CPU besides the caller's: one bound worker
    assert all(m == two for m in masks if len(m) != 1)
    bound = [m[0] for m in masks if len(m) == 1][0]
    assert bound in two and res["caller_mask"] == two


@pytest.mark.parametrize("env", [{"KILN_POOL_BIND": "0"}, {"TVM_BIND_THREADS": "0"}])
def test_binding_turned_off(env):
    cpus = _cpus()
    res = _run(threads=2, **env)
    assert res["worker_masks"] == [cpus]


def test_one_cpu_process_keeps_an_unbound_worker_and_runs_every_iteration():
    one = _cpus()[:1]
    res = _run(mask=one, threads=2, KILN_NUM_THREADS="2")
    assert res["worker_masks"] == [one]  # no other CPU to bind it to


@needs_two_cpus
def test_caller_on_a_workers_cpu_moves_off_it_mask_restored():
    res = _run(threads=2, mode="move")
    assert res["moved"], "the caller, put on the bound worker's CPU, was never moved off it in 20 launches"


def _order(cpus, cores, skip_core, cap=None, skip_cpu=-1):
    import ctypes
    from kiln.runtime import thread_pool
    lib = thread_pool._load()
    assert lib is not None, "kiln's thread pool could not be built"
    n = len(cpus)
    cap = n if cap is None else cap
    out = (ctypes.c_int32 * max(1, cap))()
    m = lib.kiln_pool_order_cpus((ctypes.c_int32 * max(1, n))(*cpus), (ctypes.c_int64 * max(1, n))(*cores),
                                 n, skip_cpu, skip_core, out, cap)
    return list(out[:m])


@pytest.mark.parametrize("cpus,cores,skip_core,want", [
    # 4 cores x 2 SMT siblings numbered adjacently (0-1 one core): the caller on core 0 (CPU 0)
    ([1, 2, 3, 4, 5, 6, 7], [0, 1, 1, 2, 2, 3, 3], 0, [2, 4, 6, 1, 3, 5, 7]),
    # siblings numbered far apart (Linux's usual: CPU c and c + 4 share a core)
    ([1, 2, 3, 4, 5, 6, 7], [1, 2, 3, 0, 1, 2, 3], 0, [1, 2, 3, 4, 5, 6, 7]),
    # no SMT: mask order
    ([0, 2, 5], [0, 2, 5], 1, [0, 2, 5]),
    # topology unknown (each CPU its own core)
    ([3, 1], [-4, -2], -1, [3, 1]),
    ([], [], 0, []),
])
def test_binding_order_spreads_over_physical_cores_first(cpus, cores, skip_core, want):
    assert _order(cpus, cores, skip_core) == want
    assert _order(cpus, cores, skip_core, cap=2) == want[:2]


@pytest.mark.parametrize("skip_cpu,want", [(-1, [1, 2, 3, 5]), (2, [3, 5, 1]), (3, [5, 1, 2]), (9, [1, 2, 3, 5])])
def test_binding_order_starts_after_the_callers_cpu(skip_cpu, want):
    """Candidates are taken from just after the creating thread's CPU, wrapping around: processes whose callers
    run on different CPUs bind their workers to different CPUs (each CPU its own core here)."""
    cpus = [c for c in (1, 2, 3, 5) if c != skip_cpu]
    assert _order(cpus, [10 + c for c in cpus], 10 + skip_cpu, skip_cpu=skip_cpu) == want


def test_binding_order_wraps_with_smt_siblings():
    """4 cores x 2 siblings numbered adjacently, the caller on CPU 4 (core 2): the other cores' first CPUs from 5
    on (6, then 0, 2), then the siblings in the same rotation (5, 7, 1, 3)."""
    cpus = [0, 1, 2, 3, 5, 6, 7]
    cores = [c // 2 for c in cpus]
    assert _order(cpus, cores, 2, skip_cpu=4) == [6, 0, 2, 5, 7, 1, 3]
