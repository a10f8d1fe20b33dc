"""kiln's thread pool keeps its workers off the caller's CPU and never binds the caller (kiln/runtime/thread_pool.c,
"the workers are kept off the CPU the caller ran on"), while a launch asks for a thread per CPU of the process:
each of the first (CPUs - 1) workers may run on every CPU of the process's mask but the one the caller ran on
when they were placed (the reserved CPU); the rest, every worker of a launch asking for fewer threads than the
process has CPUs, and every worker when binding is turned off (KILN_POOL_BIND=0, TVM_BIND_THREADS=0) are
unbound; a caller found on a CPU a participating worker may use is moved to the reserved CPU with its mask
restored. Each case runs in a fresh process (workers are created once per process). Timing is never asserted."""
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
extent = 1000
lib = t._lib()
me = threading.get_native_id()
caller_cpu = on_cpu(me)

def worker_masks():
    return sorted(allowed(tid) for tid in map(int, os.listdir("/proc/self/task"))
                  if tid != me and open(f"/proc/self/task/{tid}/comm").read().startswith("kiln-pool-"))

history = []
for threads in map(int, sys.argv[2].split(",")):  # one launch per thread count, in order
    rec = t.Recorder()
    assert lib.kiln_pool_launch(rec.body, None, extent, threads) == 0
    rec.covered(extent)
    history.append(worker_masks())
out = {"caller_before": caller_cpu, "caller_mask": sorted(os.sched_getaffinity(0)),
       "worker_masks": history[-1], "history": history, "stats": thread_pool.pool_stats()}
if sys.argv[3] == "move":
    bound = [m[0] for m in history[-1] if len(m) == 1]
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


def _kept_off(masks, cpus):
    """The one CPU of ``cpus`` that workers restricted to ``masks`` (all the same: ``cpus`` less one) avoid."""
    assert masks and all(m == masks[0] for m in masks), masks
    missing = sorted(set(cpus) - set(masks[0]))
    assert len(missing) == 1 and set(masks[0]) < set(cpus), (masks, cpus)
    return missing[0]


@needs_two_cpus
def test_workers_kept_off_the_callers_cpu_caller_left_free():
    cpus = _cpus()[:4]  # a launch asking for a thread per CPU of the process keeps the workers off one CPU
    threads = len(cpus)
    res = _run(mask=cpus, threads=threads)
    assert res["caller_mask"] == cpus  # the user's thread is never bound
    masks = res["worker_masks"]
    assert len(masks) == threads - 1
    _kept_off(masks, cpus)


@needs_two_cpus
def test_more_workers_than_other_cpus_leaves_the_rest_unbound():
    two = _cpus()[:2]
    res = _run(mask=two, threads=5)
    masks = res["worker_masks"]
    assert len(masks) == 4
    assert sum(len(m) == 1 for m in masks) == 1, masks  # one CPU besides the caller's: one kept-off worker
    assert all(m == two for m in masks if len(m) != 1)
    kept = [m[0] for m in masks if len(m) == 1][0]
    assert kept in two and res["caller_mask"] == two


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 3,
                    reason="a launch of fewer threads than the process's CPUs that still has a worker needs 3 CPUs")
def test_fewer_threads_than_cpus_leave_the_workers_unbound_and_all_cpus_keep_them_off_again():
    """Keeping workers off the caller's CPU is for a pool that spans its process's CPUs: a launch asking for fewer
    threads than that (a process sharing a many-core machine) leaves the workers to the kernel; a later launch
    asking for every CPU restricts them all, the earlier worker included, and one asking for fewer frees them."""
    cpus = _cpus()[:3]
    res = _run(mask=cpus, threads="2,3,2,3")
    first, full, fewer, again = res["history"]
    assert first == [cpus], first
    assert len(full) == 2
    _kept_off(full, cpus)  # the earlier worker too
    assert fewer == [cpus, cpus], fewer
    assert len(again) == 2
    _kept_off(again, cpus)


@pytest.mark.parametrize("env", [{"KILN_POOL_BIND": "0"}, {"TVM_BIND_THREADS": "0"}])
def test_binding_turned_off(env):
    cpus = _cpus()[:2]
    res = _run(mask=cpus, threads=2, **env)
    assert res["worker_masks"] == [cpus]


def test_one_cpu_process_keeps_an_unbound_worker_and_runs_every_iteration():
    one = _cpus()[:1]
    res = _run(mask=one, threads=2, KILN_NUM_THREADS="2")
    assert res["worker_masks"] == [one]  # no other CPU to bind it to


@needs_two_cpus
def test_caller_on_a_workers_cpu_moves_off_it_mask_restored():
    res = _run(mask=_cpus()[:2], threads=2, mode="move")
    assert res["moved"], "the caller, put on the worker's CPU, was never moved off it in 20 launches"
