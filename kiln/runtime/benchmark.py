"""time_evaluator's measuring loop and its result, BenchmarkResult (TVM semantics).

Compiled kernels are timed in C (``__kiln_time_call``) with arguments checked once; any other
callable is timed with a Python loop. ``$KILN_TIME_EVALUATOR_CLOCK=cpu`` reports the process's CPU time
per call instead of wall-clock time: on a machine shared with other work, a single-threaded kernel's CPU
time barely depends on the load while its wall time mostly measures the scheduler (AutoTVM tuning on a
busy machine ranks configs by noise otherwise). With several threads it is the sum over the threads.
"""
from __future__ import annotations

import math
import statistics
import time
from typing import Callable, Sequence

import numpy as np

from ..error import KilnError
from .registry import register_func


class BenchmarkResult:
    """Per-repeat mean times in seconds (``results``) and their summary statistics."""

    def __init__(self, results: Sequence[float]):
        self.results = tuple(float(r) for r in results)
        if not self.results:
            raise KilnError("BenchmarkResult needs at least one measurement")
        self.mean = statistics.fmean(self.results)
        self.median = statistics.median(self.results)
        self.min = min(self.results)
        self.max = max(self.results)
        self.std = statistics.pstdev(self.results) if len(self.results) > 1 else 0.0

    def __str__(self) -> str:
        names = ("mean (ms)", "median (ms)", "max (ms)", "min (ms)", "std (ms)")
        vals = (self.mean, self.median, self.max, self.min, self.std)
        head = " ".join(f"{n:^12}" for n in names)
        body = " ".join(f"{v * 1e3:^12.4f}" for v in vals)
        return f"Execution time summary:\n{head}\n{body}\n"

    def __repr__(self) -> str:
        return (f"BenchmarkResult(min={self.min}, mean={self.mean}, median={self.median}, max={self.max}, "
                f"std={self.std}, results={list(self.results)})")


def _python_timer(func: Callable, args: tuple) -> Callable[[int], float]:
    perf = time.perf_counter

    def timer(number: int) -> float:
        start = perf()
        for _ in range(number):
            func(*args)
        return (perf() - start) / number

    return timer


def measure_clock() -> str:
    """The clock time_evaluator reports: "wall" (default) or "cpu" ($KILN_TIME_EVALUATOR_CLOCK)."""
    import os
    clock = os.environ.get("KILN_TIME_EVALUATOR_CLOCK", "").strip().lower() or "wall"
    if clock not in ("wall", "cpu"):
        raise KilnError(f"$KILN_TIME_EVALUATOR_CLOCK must be 'wall' or 'cpu', got {clock!r}")
    return clock


def _cpu_timer(wall_timer: Callable[[int], float]) -> Callable[[int], float]:
    def timer(number: int) -> float:
        start = time.process_time()
        wall = wall_timer(number)
        cpu = (time.process_time() - start) / number
        return cpu if cpu > 0 else wall  # a clock too coarse for a tiny kernel: fall back to wall time

    return timer


def measure(func: Callable, args: tuple, dev, number: int = 10, repeat: int = 1, min_repeat_ms: float = 0,
            limit_zero_time_iterations: int = 100, cooldown_interval_ms: float = 0,
            repeats_to_cooldown: int = 1, preproc: Callable | None = None) -> BenchmarkResult:
    """Run ``func(*args)`` ``repeat`` times ``number`` calls each; per repeat, the mean seconds per call.

    With ``min_repeat_ms``, ``number`` grows until one repeat lasts at least that long (and stays grown
    for the following repeats, as in TVM).
    """
    if number < 1 or repeat < 1:
        raise KilnError(f"time_evaluator: number and repeat must be >= 1, got number={number}, repeat={repeat}")
    timer = None
    make = getattr(func, "make_timer", None)
    if make is not None:
        timer = make(args)
    if timer is None:
        timer = _python_timer(func, args)
    if measure_clock() == "cpu":
        timer = _cpu_timer(timer)
    timer(1)  # warm up (first-touch of pages, lazy symbol binding)
    if dev is not None:
        dev.sync()
    results = []
    for r in range(repeat):
        if preproc is not None:
            preproc(*args)
        zero_times = 0
        per_call = timer(number)
        while per_call * number * 1e3 < min_repeat_ms and zero_times < limit_zero_time_iterations:
            if per_call <= 0:
                zero_times += 1
                number = number * 2
            else:
                number = max(int(math.ceil(min_repeat_ms / (per_call * 1e3))) + 1, int(number * 1.618))
            if preproc is not None:
                preproc(*args)
            per_call = timer(number)
        if dev is not None:
            dev.sync()
        results.append(per_call)
        if cooldown_interval_ms > 0 and (r + 1) % max(repeats_to_cooldown, 1) == 0:
            time.sleep(cooldown_interval_ms / 1e3)
    return BenchmarkResult(results)


def last_level_cache_bytes() -> int:
    """Size of the largest CPU cache (from sysfs), or 32 MiB when unknown."""
    best = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        import os

        for entry in os.listdir(base):
            try:
                with open(f"{base}/{entry}/size") as f:
                    text = f.read().strip().upper()
            except OSError:
                continue
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            digits = text.rstrip("KMG")
            if digits.isdigit():
                best = max(best, int(digits) * scale)
    except OSError:
        pass
    return best or (32 << 20)


_flush_buffer: list = []


@register_func("cache_flush_cpu_non_first_arg", override=True)
def cache_flush_cpu_non_first_arg(*args) -> None:
    """TVM's f_preproc for cold-cache timing: evict the CPU caches before a repeat.

    kiln cannot flush single cache lines from Python, so it writes a scratch buffer twice the size of the
    last-level cache, which evicts every argument, and then reads the first argument (a kernel's input, in a
    network the previous layer's fresh output) back into the caches: the kernel finds its input in cache and its
    weights and output in memory, as in a network whose weights exceed the last-level cache.
    """
    if not _flush_buffer:
        _flush_buffer.append(np.zeros(2 * last_level_cache_bytes() // 8, dtype=np.int64))
    buf = _flush_buffer[0]
    buf += 1
    first = getattr(args[0], "_arr", None) if args else None
    if isinstance(first, np.ndarray) and first.size:
        first.reshape(-1).view(np.uint8)[::64].sum()  # one byte a cache line
