"""Does the pause before each contender's block matter? kiln and ONNX Runtime in one process (as in
benchmarks.run), each round timing both twice: once after the old fixed pause (``SETTLE_S``, 50 ms) and once
after :func:`benchmarks.common.settle` (at least 50 ms, then until the process's other threads are idle).

    python -m benchmarks.settle_ab [--models mlp_b64,resnet50] [--rounds 15] [--number 5] [--threads 2]
                                   [--out settle_ab]

The order in a round is ORT, kiln (fixed pause), ORT, kiln (settle), so kiln always follows ONNX Runtime, as in
benchmarks.run's column order. Reports per workload: median and min ms of each, kiln / ONNX Runtime (median of
the per-round ratios, with the range of the middle half), the CPU time the process's *other* threads used
during kiln's timed block (ONNX Runtime's spinning worker shows up here), and the pauses taken.
Writes benchmarks/results/<NAME>.{md,json} unless ``--out ''``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time

from .common import SETTLE_S, machine_info, machine_line, settle, thread_counts, write_results


def _thread_cpu_s() -> float:
    """CPU seconds of the calling thread."""
    return time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID)


def _tasks() -> set:
    try:
        return {int(t) for t in os.listdir("/proc/self/task")}
    except OSError:
        return set()


def _cpu_s(tids) -> float:
    """CPU seconds of the threads ``tids`` of this process (those still alive; /proc/self/task/*/schedstat)."""
    total = 0
    for t in tids:
        try:
            with open(f"/proc/self/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total / 1e9


_KILN_WORKERS: set = set()


def _quartiles(xs: list) -> tuple:
    xs = sorted(xs)
    return xs[len(xs) // 4], xs[(3 * len(xs)) // 4]


def measure(key: str, args, tmpdir: str) -> dict:
    from .models import MODELS
    from .run import _kiln_build, _onnxruntime
    model, inputs = MODELS[key][1]()
    run_k, _, _ = _kiln_build(model, inputs)
    before = _tasks()
    run_o, _, _ = _onnxruntime(model, inputs, args.threads, tmpdir)
    run_o()
    ort_threads = _tasks() - before
    before = _tasks()
    run_k()
    _KILN_WORKERS.update(_tasks() - before)  # the pool's workers start on the first parallel loop
    pauses = {"fixed": lambda: (time.sleep(SETTLE_S), SETTLE_S)[1], "settle": settle}
    ms = {f"{c}_{p}": [] for p in pauses for c in ("ort", "kiln")}
    others = {p: [] for p in pauses}
    ort_spin = {p: [] for p in pauses}
    kiln_worker = {p: [] for p in pauses}
    waits = {p: [] for p in pauses}
    for fn in (run_k, run_o, run_k, run_o):
        fn()
    for _ in range(args.rounds):
        for pname, pause in pauses.items():
            for cname, fn in (("ort", run_o), ("kiln", run_k)):
                w = pause()
                fn()
                p0, m0 = time.process_time(), _thread_cpu_s()
                o0, w0 = _cpu_s(ort_threads), _cpu_s(_KILN_WORKERS)
                t0 = time.perf_counter()
                for _ in range(args.number):
                    fn()
                wall = time.perf_counter() - t0
                other = (time.process_time() - p0) - (_thread_cpu_s() - m0)
                o1, w1 = _cpu_s(ort_threads), _cpu_s(_KILN_WORKERS)
                ms[f"{cname}_{pname}"].append(wall / args.number * 1e3)
                if cname == "kiln":
                    others[pname].append(other / wall)
                    ort_spin[pname].append((o1 - o0) / wall)
                    kiln_worker[pname].append((w1 - w0) / wall)
                    waits[pname].append(w * 1e3)
    out = {"workload": key, "description": MODELS[key][0], "ms": ms, "others_share": others, "pause_ms": waits,
           "ort_threads_share": ort_spin, "kiln_worker_share": kiln_worker}
    for pname in pauses:
        ratios = [k / o for k, o in zip(ms[f"kiln_{pname}"], ms[f"ort_{pname}"])]
        out[f"ratio_{pname}"] = {"median": statistics.median(ratios), "iqr": _quartiles(ratios)}
    return out


def to_markdown(data: dict) -> str:
    lines = ["# Pause before each block: fixed 50 ms vs settle (until the process's threads are idle)", "",
             machine_line(data["machine"], data["thread_counts"]), "",
             f"One process, {data['rounds']} rounds of: ORT, kiln (fixed pause), ORT, kiln (settle); {data['number']} "
             "calls per block after one untimed call. ms per call: median (min). Ratio: kiln / ORT, median of the "
             "per-round ratios [middle half]. During kiln's timed block: CPU used by ONNX Runtime's threads and by "
             "kiln's pool worker, in cores (CPU seconds / wall seconds), median [max]. Pause: ms, median [max].", "",
             "| workload | pause | ORT | kiln | kiln / ORT | ORT threads during kiln | kiln worker | pause |",
             "|---|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        for p in ("fixed", "settle"):
            o, k = r["ms"][f"ort_{p}"], r["ms"][f"kiln_{p}"]
            rt = r[f"ratio_{p}"]
            sh, kw = r["ort_threads_share"][p], r["kiln_worker_share"][p]
            pw = r["pause_ms"][p]
            lines.append(f"| {r['description']} | {p} | {statistics.median(o):.3f} ({min(o):.3f}) | "
                         f"{statistics.median(k):.3f} ({min(k):.3f}) | {rt['median']:.2f} [{rt['iqr'][0]:.2f}-"
                         f"{rt['iqr'][1]:.2f}] | {statistics.median(sh):.2f} [{max(sh):.2f}] | "
                         f"{statistics.median(kw):.2f} [{max(kw):.2f}] | {statistics.median(pw):.0f} [{max(pw):.0f}] |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    from kiln.runtime.thread_policy import thread_status  # noqa: F401 - kiln before torch (OpenMP policy)
    import torch
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="mlp_b64,resnet50")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--number", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default="settle_ab")
    args = p.parse_args(argv)
    os.environ.setdefault("KILN_NUM_THREADS", str(args.threads))
    torch.set_num_threads(args.threads)
    rows = []
    with tempfile.TemporaryDirectory() as tmpdir:
        for key in [k for k in args.models.split(",") if k]:
            print(f"[benchmarks.settle_ab] {key} ...", file=sys.stderr, flush=True)
            rows.append(measure(key, args, tmpdir))
    data = {"machine": machine_info(), "thread_counts": thread_counts(ort_intra_op=args.threads, pytorch=False),
            "rounds": args.rounds, "number": args.number, "threads": args.threads, "rows": rows,
            "python_threads": threading.active_count()}
    text = to_markdown(data)
    print(text)
    if args.out:
        write_results(args.out, data, text)
    return data


if __name__ == "__main__":
    main()
