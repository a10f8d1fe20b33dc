"""Who runs kiln's parallel loops (kiln's thread pool or OpenMP), OpenMP's defaults (applied when ``kiln.runtime``
is imported) and the thread-count policy.

Parallel loops run on kiln's own thread pool by default (``kiln/runtime/thread_pool.c``,
:mod:`kiln.runtime.thread_pool`); ``KILN_PARALLEL_BACKEND=openmp`` (or ``kiln.target.codegen_c.PARALLEL_BACKEND``,
read when code is generated) brings back ``#pragma omp parallel for``. Why a pool of kiln's own: an OpenMP region
ends in a barrier that waits for *every* thread of the team, so with a CPU-bound neighbour on a 2-core machine
each region waited for a descheduled worker to wake (mobilenet_v2 at 2 threads ~3.5x slower than at 1 thread).
The code generator outlines each parallel loop body into ``static int32_t body(begin, end, closure)`` and calls
the launch function the loader stored in the module's ``__kiln_parallel_launch`` (null: the loop runs serially,
so an exported ``.so`` stays self-contained). The pool has N-1 workers (N: the thread count below, grown on
demand); the caller publishes a job, runs chunks itself (claimed through one atomic ticket, guided sizes: the
work left / (2 * threads)), and when none is left waits only for chunks already claimed, never for a worker
that has not woken up. Idle workers spin 300 us while no other process keeps a core busy, else 50 us (the
adaptive policy below; ``KILN_POOL_SPIN_US`` or :func:`kiln.runtime.thread_pool.set_spin_us` fix it),
then sleep on a futex. A launch while the pool is busy (a second Python thread, a kernel called from inside a
parallel body) runs serially; a forked child starts new workers on its first launch. Measurements:
benchmarks/results/contention_pool.md and docs/architecture.md ("Parallel loops: kiln's thread pool").

The rest of this first half concerns the OpenMP backend (and any OpenMP code in the process):

The second half of this module chooses how many threads an OpenMP parallel loop gets while other processes
keep cores busy (``KILN_THREAD_POLICY=adaptive|fixed``, :func:`set_thread_policy`; see the comment before
:func:`get_thread_policy`); loops on kiln's pool keep the requested count ("The thread pool needs no fewer
threads" there). The first half is the wait policy of the idle OpenMP workers:

kiln's parallel loops run on GNU OpenMP (libgomp). After a parallel region its worker threads wait for the
next one: spinning for ``GOMP_SPINCOUNT`` iterations, then sleeping on a futex. Both extremes hurt:

* sleeping at once (``OMP_WAIT_POLICY=PASSIVE``) makes every parallel region pay a wake-up. Inside a VM that
  is tens of microseconds, and a model is a chain of short regions: on a quiet 2-core EPYC VM mobilenet_v2
  ran in 18-20 ms with 2 threads, slower than with one (14 ms);
* libgomp's default (300,000 spins, milliseconds) keeps idle workers burning CPU long after a run; on a
  machine whose cores are busy with other processes they take time from the thread doing the work.

So unless the user chose (``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` set, or ``KILN_OMP_WAIT_POLICY``), kiln
sets ``GOMP_SPINCOUNT=10000``: workers spin a fraction of a millisecond, which covers the gap between the
kernels of one graph run, then sleep. The same mobilenet_v2 ran in 7.2-7.6 ms (ACTIVE: 7.6). On a machine
kept busy by other processes spinning still costs (2.6x on mobilenet_v2 beside two CPU hogs); there
``KILN_OMP_WAIT_POLICY=passive`` (the test suite's setting) is the better choice.
``KILN_OMP_WAIT_POLICY=active|passive|keep`` picks explicitly (``keep``: leave libgomp's own default).

libgomp reads the environment once, when it is loaded. kiln's kernel libraries load it on first use, but a
library imported earlier may have loaded it already: PyTorch ships its own ``libgomp.so.1``, which the
dynamic linker then reuses for kiln's kernels (same soname), so the two share one OpenMP runtime and the
policy is whatever was in the environment when ``import torch`` ran. :func:`openmp_status` reports this;
import kiln first (or set the variable in the shell) to get the policy everywhere. Small kernels avoid the
question altogether: relay.build makes their parallel loops serial (``kiln.relay.backend.parallel_policy``).
"""
from __future__ import annotations

import os
import threading
import time
from ..error import KilnError
from .library import num_threads, apply_effective_threads

try:
    import resource
    _CLK_TCK = float(os.sysconf("SC_CLK_TCK"))
except (ImportError, ValueError, OSError, AttributeError):  # not a POSIX system: nothing to measure
    resource = None
    _CLK_TCK = 100.0

_STATUS: dict = {}

# spins before an idle OpenMP worker sleeps (see the module doc for the measurements behind it)
DEFAULT_SPINCOUNT = 10000


def libgomp_loaded() -> bool:
    """Whether an OpenMP runtime (libgomp) is already mapped into this process."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            return any("libgomp" in line for line in f)
    except OSError:
        return False


def configure_openmp_env(environ=None) -> dict:
    """Set kiln's OpenMP wait-policy default in ``environ`` (``os.environ``) unless the user chose one.

    Returns (and remembers for :func:`openmp_status`) what was decided: ``policy`` (``ACTIVE`` / ``PASSIVE`` /
    ``GOMP_SPINCOUNT=<n>`` in effect for a libgomp loaded from now on, or None for libgomp's own default), ``set_by_kiln``, ``reason`` and
    ``libgomp_preloaded`` (True when a runtime was already loaded, so the setting cannot reach it)."""
    env = os.environ if environ is None else environ
    choice = env.get("KILN_OMP_WAIT_POLICY", "").strip().lower()
    preloaded = libgomp_loaded() if environ is None else False
    status = {"set_by_kiln": False, "libgomp_preloaded": preloaded}
    if choice == "keep":
        status.update(policy=env.get("OMP_WAIT_POLICY"), reason="KILN_OMP_WAIT_POLICY=keep")
    elif choice in ("active", "passive"):
        env["OMP_WAIT_POLICY"] = choice.upper()
        status.update(policy=choice.upper(), set_by_kiln=True, reason="KILN_OMP_WAIT_POLICY")
    elif choice:
        raise KilnError(f"$KILN_OMP_WAIT_POLICY must be 'active', 'passive' or 'keep', got {choice!r}")
    elif "OMP_WAIT_POLICY" in env or "GOMP_SPINCOUNT" in env:
        status.update(policy=env.get("OMP_WAIT_POLICY"), reason="set by the user (OMP_WAIT_POLICY / GOMP_SPINCOUNT)")
    else:
        env["GOMP_SPINCOUNT"] = str(DEFAULT_SPINCOUNT)
        status.update(policy=f"GOMP_SPINCOUNT={DEFAULT_SPINCOUNT}", set_by_kiln=True, reason="kiln default")
    if environ is None:
        _STATUS.clear()
        _STATUS.update(status)
    return status


def openmp_status() -> dict:
    """What :func:`configure_openmp_env` decided at import, plus whether libgomp is loaded now; a
    ``warning`` says when kiln's setting could not take effect (libgomp was loaded before kiln)."""
    out = dict(_STATUS)
    out["libgomp_loaded"] = libgomp_loaded()
    if out.get("set_by_kiln") and out.get("libgomp_preloaded"):
        out["warning"] = ("an OpenMP runtime was loaded before kiln (e.g. by `import torch`); it keeps the wait "
                          "policy it was started with. Import kiln first or set OMP_WAIT_POLICY / GOMP_SPINCOUNT "
                          "in the environment.")
    return out


# -- how many threads: the adaptive policy ------------------------------------------------------------------
# A parallel loop ends in a barrier, so it takes as long as its slowest thread. When another process keeps a
# core busy, the thread sharing that core with it gets half of it (or waits a whole scheduler slice). With
# OpenMP's static schedule (kiln's until session 6) that thread owned a fixed share and the others waited
# for all of it: on a 2-core machine beside one CPU-bound process mobilenet_v2 went from 6 to 15 ms with 2
# threads, slower than the same model on one thread (which gets a core of its own). The C backend now
# schedules parallel loops ``guided`` (kiln.target.codegen_c, OMP_SCHEDULE), so the thread that runs takes
# the work left; the barrier still waits for the late thread to wake up and arrive (an OpenMP rule).
# Measured with 2 threads fixed beside other processes (load average 7-12 on 2 cores): conv2d 3x3 64->64
# 56x56 median 15-20 ms static, 8.5-12.5 ms guided; at load ~4, with or without one CPU-bound neighbour,
# the two were equal (conv 12.0 ms; mobilenet_v2 50 / 97 ms, ONNX Runtime 34 / 52). Under load 6-10
# mobilenet_v2 at 2 threads took 55 ms either way, while one thread ran it in 15 ms: the
# wake-ups of its ~100 regions per run dominate, which only the thread count below avoids. Spinning
# longer or shorter (GOMP_SPINCOUNT) changes only what the waiting threads do, not the wait. So kiln also
# measures how much CPU time the *other* processes use, and runs its parallel loops on the cores they leave
# free: ``threads = min(requested, round(cpus - others))``, at least 1.
#
# Measurement: every ``window_s`` (0.25 s) at most, on a graph executor / VM run, kiln reads the busy time of
# the CPUs it may run on (/proc/stat: user, nice, system, irq, softirq, steal; the per-CPU lines of its
# affinity when that is not every CPU, e.g. under taskset or a cpuset) and its own process's CPU time
# (getrusage; its OpenMP workers, spinning or not, and any other library in the process count as its own).
# The difference over the wall time of the window is the number of cores the others kept busy. A new
# count is applied after ``confirm`` (2) windows in a row agree, so a short burst does not flip it.
# The decision is written into every loaded library's ``__kiln_num_threads`` (the mechanism of
# ``kiln.runtime.set_num_threads``), which the next parallel region reads.

#
# The thread pool needs no fewer threads. All of the above is about OpenMP's closing barrier. kiln's own pool
# (the default backend since session 7, kiln/runtime/thread_pool.c) never waits for a worker that has not
# woken up, hands out guided chunks so a slowed worker takes less, and its caller sleeps while a preempted
# worker finishes a chunk, so the kernel moves that worker to the caller's idle core. With it, fewer
# threads only cost: the process gets one CPU share instead of two from the scheduler, and on a quiet moment
# the second core idles. Measured on the 2-core EPYC (benchmarks/results/contention_pool.md, load 12-17):
# the pool at 2 threads fixed beat the adaptive policy (which had dropped to 1 thread) beside 1 and 2
# CPU-bound neighbours on mobilenet_v2 (56 vs 73 ms, 61 vs 129), resnet18 (267 vs 338, 408 vs 503) and BERT
# (229 vs 292, 375 vs 441); the MLP at batch 64 under load ~10 ran 0.76-0.85x ONNX Runtime at 2 threads and
# 0.94x at 1 (benchmarks/results/dense64_*.md). And the policy's decision split fresh processes into two
# modes (MLP batch 64: 0.65 ms at 2 threads, 1.03 ms where it had settled on 1). So the count the policy
# derives applies to OpenMP loops only (``effective_threads(backend="openmp")``; a library built for
# OpenMP has no ``__kiln_parallel_launch``, kiln.runtime.library); pool loops run at the requested count.

THREAD_POLICY_ENV = "KILN_THREAD_POLICY"
THREAD_POLICIES = ("adaptive", "fixed")
_policy_override: list = []


def get_thread_policy() -> str:
    """The thread-count policy in effect: :func:`set_thread_policy`'s, else ``$KILN_THREAD_POLICY``, else
    ``adaptive``. ``fixed`` always uses :func:`kiln.runtime.num_threads` threads."""
    if _policy_override:
        return _policy_override[0]
    text = os.environ.get(THREAD_POLICY_ENV, "").strip().lower()
    if not text:
        return "adaptive"
    if text not in THREAD_POLICIES:
        raise KilnError(f"${THREAD_POLICY_ENV} must be one of {', '.join(THREAD_POLICIES)}, got {text!r}")
    return text


def set_thread_policy(policy: str | None) -> None:
    """Choose the thread-count policy for this process: ``"adaptive"`` (OpenMP loops: fewer threads while other
    processes keep cores busy), ``"fixed"`` (always :func:`kiln.runtime.num_threads`), or None (back to
    ``$KILN_THREAD_POLICY`` / the default). Applies to every kernel library at once."""
    if policy is not None:
        if not isinstance(policy, str) or policy.strip().lower() not in THREAD_POLICIES:
            raise KilnError(f"set_thread_policy expects one of {', '.join(THREAD_POLICIES)} or None, got {policy!r}")
        policy = policy.strip().lower()
    _policy_override[:] = [] if policy is None else [policy]
    get_thread_policy()  # a bad $KILN_THREAD_POLICY is reported here, not in the middle of a run
    _apply()


def sample_cpu_times():
    """``(busy_s, self_s, cpus)``: seconds the CPUs this process may run on (its affinity; the whole machine's
    line of /proc/stat when that is every CPU) have been busy since boot, this process's CPU seconds (all its
    threads), and how many CPUs that is. None where /proc/stat cannot be read (not Linux)."""
    if resource is None:
        return None
    try:
        allowed = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        allowed = None
    try:
        with open("/proc/stat", "rb") as f:
            if allowed is None or len(allowed) >= _online_cpus():
                lines, allowed = [f.readline()], None
            else:
                names = {b"cpu%d" % i for i in allowed}
                lines = [line for line in f if line.split(b" ", 1)[0] in names]
    except OSError:
        return None
    busy = 0
    for line in lines:
        fields = line.split()
        if len(fields) < 9 or not fields[0].startswith(b"cpu"):
            return None
        # user nice system idle iowait irq softirq steal (guest time is already inside user)
        t = [int(x) for x in fields[1:9]]
        busy += t[0] + t[1] + t[2] + t[5] + t[6] + t[7]
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpus = _online_cpus() if allowed is None else len(lines)
    return busy / _CLK_TCK, usage.ru_utime + usage.ru_stime, cpus


def _online_cpus() -> int:
    return os.cpu_count() or 1


class ThreadAdapter:
    """Measures how many cores other processes keep busy and derives how many this process may use.

    ``sample`` returns ``(busy_s, self_s[, cpus])`` (see :func:`sample_cpu_times`), ``clock`` monotonic seconds;
    both are injectable so the decisions can be tested without a busy machine. ``usable`` is None until
    ``confirm`` windows agree, then the cores left free by the others (at least 1)."""

    def __init__(self, sample=None, clock=None, cpus: int | None = None, window_s: float = 0.25,
                 confirm: int = 2):
        self._sample = sample or sample_cpu_times
        self._clock = clock or time.monotonic
        self.cpus = cpus or _online_cpus()
        self.window_s = window_s
        self.confirm = max(1, int(confirm))
        self._lock = threading.Lock()
        self.changes = 0
        self.restart()

    def restart(self) -> None:
        """Forget what was measured: back to the requested thread count until new windows decide."""
        self._prev = None
        self._next = 0.0
        self._candidate = None
        self._streak = 0
        self.usable = None
        self.others = None

    def tick(self) -> bool:
        """Called before a model run: measures when a window has passed. Returns whether ``usable`` changed.
        Cheap (one clock read) between windows; never blocks (a concurrent measurement is skipped)."""
        now = self._clock()
        if now < self._next or not self._lock.acquire(blocking=False):
            return False
        try:
            return self._measure(now)
        finally:
            self._lock.release()

    def _measure(self, now: float) -> bool:
        self._next = now + self.window_s
        sample = self._sample()
        if sample is None:
            return False
        prev, self._prev = self._prev, (now, sample[0], sample[1])
        if prev is None:
            return False
        wall = now - prev[0]
        if wall <= 0:
            return False
        others = max(0.0, ((sample[0] - prev[1]) - (sample[1] - prev[2])) / wall)
        self.others = others
        if len(sample) > 2 and sample[2]:
            self.cpus = sample[2]          # the CPUs of the process's affinity (taskset, cpusets)
        want = max(1, int(self.cpus - others + 0.5))
        if want == self._candidate:
            self._streak += 1
        else:
            self._candidate, self._streak = want, 1
        if self._streak >= self.confirm and want != self.usable:
            self.usable = want
            self.changes += 1
            return True
        return False

    def threads(self, requested: int) -> int:
        """The thread count for parallel loops given the ``requested`` one (the adaptive policy)."""
        if self.usable is None:
            return requested
        return max(1, min(requested, self.usable))


ADAPTER = ThreadAdapter()


PARALLEL_BACKENDS = ("pool", "openmp")


def effective_threads(requested: int | None = None, backend: str = "pool") -> int:
    """Threads kiln's parallel loops use now: ``requested`` (default :func:`kiln.runtime.num_threads`); for
    loops run by OpenMP (``backend="openmp"``) lowered by the adaptive policy while other processes keep
    cores busy. Loops on kiln's thread pool (``"pool"``, the default backend) keep ``requested``: see
    "The thread pool needs no fewer threads" above."""
    if backend not in PARALLEL_BACKENDS:
        raise KilnError(f"effective_threads: backend must be one of {', '.join(PARALLEL_BACKENDS)}, got {backend!r}")
    if requested is None:
        requested = num_threads()
    if get_thread_policy() == "fixed" or backend == "pool":
        return requested
    return ADAPTER.threads(requested)


def _apply() -> None:
    apply_effective_threads()
    _apply_spin()


def _apply_spin() -> None:
    """The pool workers' spin follows the adaptive decision (:func:`spin_choice`): long while no other process
    keeps a core busy (:data:`kiln.runtime.thread_pool.QUIET_SPIN_US`), short otherwise or under ``fixed``."""
    from . import thread_pool
    thread_pool.adapt_spin(spin_choice())


def spin_choice() -> bool:
    """Whether the pool's workers take the long (quiet-machine) spin: the adaptive policy, and no other process
    kept a core busy in its last decision (none yet counts as quiet: a busy start costs one decision's 0.5 s)."""
    return get_thread_policy() == "adaptive" and (ADAPTER.usable is None or ADAPTER.usable >= ADAPTER.cpus)


def tick() -> None:
    """Hook of the executors (graph executor and VM runs): measure if a window passed, and when the
    decision changes write the new count into the loaded libraries. The measurement runs under both
    policies (so :func:`thread_status` can report the others' load); only ``adaptive`` acts on it."""
    if ADAPTER.tick() and get_thread_policy() == "adaptive":
        _apply()


def thread_status() -> dict:
    """What the thread policy sees and does: ``policy``, ``requested`` (num_threads), ``threads`` (in use now by
    loops on kiln's thread pool), ``threads_openmp`` (by loops built for OpenMP), ``cpus``,
    ``others_busy_cores`` (last window; None before two windows) and ``changes`` (decisions applied)."""
    requested = num_threads()
    return {"policy": get_thread_policy(), "requested": requested, "threads": effective_threads(requested),
            "threads_openmp": effective_threads(requested, backend="openmp"),
            "cpus": ADAPTER.cpus, "others_busy_cores": ADAPTER.others, "usable_cores": ADAPTER.usable,
            "changes": ADAPTER.changes, "window_s": ADAPTER.window_s}


def _after_fork_in_child() -> None:
    ADAPTER.restart()  # the parent's samples (its own CPU time) mean nothing here


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
