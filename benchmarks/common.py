"""Shared benchmark helpers: interleaved timing of several contenders, machine facts, result files."""
from __future__ import annotations

import json
import os
import platform
import statistics
import threading
import time
from typing import Callable

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def machine_info(targets=("llvm",)) -> dict:
    """The machine a result came from: CPU model (/proc/cpuinfo), usable cores, ISA features, and for each kiln
    target string the ISA kiln builds for it (``kiln.target.x86.target_cpu_summary``)."""
    from kiln.target.x86 import host_cpu_info
    info = host_cpu_info()
    feats = [f for f in ("avx512f", "avx512vnni", "avx512bf16", "amx_tile", "avx2", "fma", "avx") if f in info.flags]
    return {"cpu": info.model_name or "unknown CPU", "cores": info.num_cores, "online_cpus": os.cpu_count(),
            "features": feats, "targets": {t: target_isa(t) for t in targets},
            "host_target": os.environ.get("KILN_HOST_TARGET") or None,
            "python": platform.python_version(), "load_average": list(os.getloadavg())}


def target_isa(target: str) -> str:
    """One line naming the CPU and vector ISA kiln builds ``target`` for (or why it cannot)."""
    try:
        from kiln.target.x86 import target_cpu_summary
        return target_cpu_summary(target)
    except Exception as err:  # noqa: BLE001 - an unknown CPU name is reported in the table
        return f"invalid target: {str(err).splitlines()[0][:160]}"


def thread_counts(ort_intra_op: int | None = None, pytorch: bool = True) -> dict:
    """The thread count of every contender: kiln's requested and in-use counts and its policy, PyTorch's
    (when it is a contender and torch is imported) and ONNX Runtime's ``intra_op_num_threads`` (as the benchmark set it)."""
    import sys
    from kiln.runtime import thread_status
    st = thread_status()
    out = {"kiln": st["requested"], "kiln_in_use": st["threads"], "kiln_policy": st["policy"]}
    if pytorch and "torch" in sys.modules:
        out["pytorch"] = sys.modules["torch"].get_num_threads()
    if ort_intra_op is not None:
        out["onnxruntime"] = ort_intra_op
    return out


def machine_line(machine: dict, threads: dict | None = None) -> str:
    """The markdown line every results table starts with: CPU model, cores, ISA per target, threads."""
    targets = "; ".join(f"target `{t}` -> {isa}" for t, isa in machine.get("targets", {}).items())
    text = (f"Machine: {machine['cpu']}, {machine['cores']} usable cores ({machine.get('online_cpus')} online), "
            f"features {', '.join(machine['features']) or 'none of AVX/AVX2/FMA/AVX-512'}; {targets}")
    if machine.get("host_target"):
        text += f"; KILN_HOST_TARGET={machine['host_target']!r}"
    if threads:
        used = threads.get("kiln_in_use", threads["kiln"])
        parts = [f"kiln {threads['kiln']} ({threads.get('kiln_policy', 'fixed')} policy"
                 + (f", {used} in use at the end)" if used != threads["kiln"] else ")")]
        parts += [f"{k} {v}" for k, v in threads.items() if k not in ("kiln", "kiln_in_use", "kiln_policy")]
        text += "; threads: " + ", ".join(parts)
    load = machine.get("load_average")
    if load:
        text += f"; load average {', '.join(f'{x:.1f}' for x in load)}"
    return text + "."


def time_call(fn: Callable[[], object], number: int) -> float:
    """Mean seconds of ``number`` back-to-back calls."""
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number


SETTLE_S = 0.05
QUIET_WINDOW_S = 0.01
QUIET_SHARE = 0.1
SETTLE_MAX_S = 1.0


def other_threads_runnable() -> int | None:
    """How many threads of this process besides the calling one are running or waiting for a CPU (state R in
    /proc/self/task/*/stat); None where that cannot be read. A spinning thread that another process has
    descheduled uses no CPU for a while but stays runnable."""
    try:
        me = threading.get_native_id()
        count = 0
        for tid in os.listdir("/proc/self/task"):
            if int(tid) == me:
                continue
            try:
                with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                    text = f.read()
            except OSError:  # the thread ended
                continue
            if text[text.rindex(b")") + 2:][:1] == b"R":
                count += 1
        return count
    except (OSError, ValueError):
        return None


def settle(min_s: float = SETTLE_S, window_s: float = QUIET_WINDOW_S, share: float = QUIET_SHARE,
           max_s: float = SETTLE_MAX_S, cpu_clock: Callable[[], float] = time.process_time,
           clock: Callable[[], float] = time.perf_counter, sleep: Callable[[float], None] = time.sleep,
           runnable: Callable[[], int | None] = other_threads_runnable) -> float:
    """Pause before a contender's block until the threads the previous contenders left behind have gone idle.

    Sleeps ``min_s``, then ``window_s`` at a time until, in one window, this process (whose calling thread is
    asleep meanwhile) used less than ``share`` of one core's time and at its end no other thread of the process
    is runnable (:func:`other_threads_runnable`), or ``max_s`` in all has passed. Returns the seconds waited.
    Why: a library's pool keeps spinning after its last call, and in one process those threads take cores
    from whoever runs next. ONNX Runtime's worker spins about 50 ms of CPU time after a call (100-200 ms of
    wall time on a busy 2-core VM), longer than the fixed ``SETTLE_S`` pause used before, so the contender
    timed after it (kiln, in benchmarks.run's column order) ran with one core for much of its block. Waiting
    for quiet treats every contender alike (kiln's pool, OpenMP's workers and ONNX Runtime's all count) and
    changes nothing where no pool spins."""
    start = clock()
    sleep(min_s)
    while clock() - start < max_s:
        c0, t0 = cpu_clock(), clock()
        sleep(window_s)
        used, wall = cpu_clock() - c0, clock() - t0
        if used < share * max(wall, window_s) and not runnable():
            break
    return clock() - start


def fixed_pause(s: float = SETTLE_S) -> float:
    """The pause before each block until session 9: a fixed sleep (kept for A/B runs: ``--pause fixed``)."""
    time.sleep(s)
    return s


PAUSES = {"settle": settle, "fixed": fixed_pause}


def interleaved(contenders: dict, rounds: int = 7, number: int = 3, warmup: int = 2,
                pause: Callable[[], float] = settle, start: int = 0) -> dict:
    """Time each contender ``rounds`` times, alternating between them so that machine noise hits all
    alike. ``contenders`` maps a name to a zero-argument callable, or to a callable ``(number) ->
    mean seconds`` when it is a tuple ("timer", fn). Returns name -> {median_s, best_s, runs_s, settle_s}
    (``settle_s``: the pauses before its blocks, see :func:`settle`).

    The order rotates from round to round (round ``i`` starts with contender ``(start + i) mod n``), so no
    contender always comes first after whatever ran before the timing: in ``benchmarks.contention`` each phase
    runs the adaptive kiln build for a second and then times one round, and with a fixed order that build was
    always first, right after its own second of work (session 13, Zen 5, one neighbour: busy-phase medians of
    the adaptive build against the same build timed second, fixed order: MLP b1 0.038 / 0.026 ms, resnet18 14.2
    / 9.96, mobilenet_v2 3.90 / 2.49, BERT-base 102 / 92, GPT-2 134 / 115; rotated, in the next run: 0.026 /
    0.030, 8.56 / 8.39, 4.29 / 3.56, 81.6 / 90.1, no longer one-sided). Callers that time one round per call pass
    ``start`` (their round index). ``runs_s`` keeps round order, so ``paired_speedup`` still pairs runs of one
    round."""
    def run(entry, n):
        if isinstance(entry, tuple):
            return entry[1](n)
        return time_call(entry, n)

    for entry in contenders.values():
        run(entry, warmup)
    runs: dict = {name: [] for name in contenders}
    waits: dict = {name: [] for name in contenders}
    items = list(contenders.items())
    for i in range(rounds):
        k = (start + i) % len(items) if items else 0
        for name, entry in items[k:] + items[:k]:
            # The previous contender's thread pool may still be spinning (ONNX Runtime's workers spin ~50 ms of
            # CPU after a run, OpenMP's a while) and would take this one's cores: wait until the process is
            # idle, then wake this contender's own pool with one untimed call.
            waits[name].append(pause())
            run(entry, 1)
            runs[name].append(run(entry, number))
    return {name: {"median_s": statistics.median(r), "best_s": min(r), "runs_s": r, "settle_s": waits[name]}
            for name, r in runs.items()}


def paired_ratio(num: list, den: list, resamples: int = 2000, seed: int = 0) -> dict:
    """``num`` against ``den`` from runs taken in the same interleaved rounds (``num[i]`` and ``den[i]`` ran
    back to back): the median of the per-round ratios num/den, a 95% bootstrap interval of that median, the
    rounds where ``num`` was slower (ratio > 1) and where it was faster (``ahead``). Pairing cancels the slow
    drifts of a shared machine (a busy neighbour slows both runs of a round), so a few-percent difference shows
    where the spread of either series alone would hide it."""
    import random
    ratios = [a / b for a, b in zip(num, den) if b > 0]
    if not ratios:
        return {"median": float("nan"), "ci95": [float("nan"), float("nan")], "wins": 0, "ahead": 0, "rounds": 0}
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(resamples))
    return {"median": statistics.median(ratios), "ci95": [meds[int(0.025 * resamples)], meds[int(0.975 * resamples) - 1]],
            "wins": sum(r > 1 for r in ratios), "ahead": sum(r < 1 for r in ratios), "rounds": len(ratios)}


def paired_speedup(base: list, new: list, resamples: int = 2000, seed: int = 0) -> dict:
    """Speed-up of ``new`` over ``base`` (:func:`paired_ratio` of base/new): the median per-round ratio, its 95%
    bootstrap interval and in how many rounds ``new`` was faster (``wins``); an interval above 1 means
    measurably faster."""
    return paired_ratio(base, new, resamples, seed)


def write_results(name: str, data: dict, markdown: str) -> tuple[str, str]:
    os.makedirs(RESULTS_DIR, exist_ok=True)
    jpath = os.path.join(RESULTS_DIR, name + ".json")
    mpath = os.path.join(RESULTS_DIR, name + ".md")
    with open(jpath, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
    with open(mpath, "w", encoding="utf-8") as f:
        f.write(markdown)
    return jpath, mpath
