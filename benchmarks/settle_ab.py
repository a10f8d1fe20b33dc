"""Does the pause before each contender's block matter? kiln and ONNX Runtime in one process (as in
benchmarks.run), each round timing both twice: once after the old fixed pause (``SETTLE_S``, 50 ms) and once
after :func:`benchmarks.common.settle` (at least 50 ms, then until the process's other threads are idle).

    python -m benchmarks.settle_ab [--models mlp_b64,resnet50] [--rounds 15] [--number 5] [--threads 2]
                                   [--out settle_ab]

The order in a round is ORT, kiln (fixed pause), ORT, kiln (settle), kiln (settle), so kiln follows ONNX
Runtime as in benchmarks.run's column order. Reports per workload: median and min ms of each, kiln / ONNX Runtime (median of
the per-round ratios, with the range of the middle half), the CPU time ONNX Runtime's threads and kiln's worker
used during kiln's timed block (ONNX Runtime's spinning worker shows up here), and the pauses taken. A third
kiln block per round follows kiln's own (no ONNX Runtime before it): kiln in the benchmark's process as if
alone.
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


ARMS = (("ort_fixed", "fixed", "ort"), ("kiln_fixed", "fixed", "kiln"), ("ort_settle", "settle", "ort"),
        ("kiln_settle", "settle", "kiln"), ("kiln_again", "settle", "kiln"))
RATIOS = (("kiln_fixed", "ort_fixed"), ("kiln_settle", "ort_settle"), ("kiln_again", "ort_settle"),
          ("kiln_settle", "kiln_again"))


def measure(key: str, args, tmpdir: str) -> dict:
    from kiln.runtime import thread_pool
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
    fns = {"ort": run_o, "kiln": run_k}
    ms = {arm: [] for arm, _, _ in ARMS}
    ort_share = {arm: [] for arm, _, c in ARMS if c == "kiln"}
    worker_share = {arm: [] for arm in ort_share}
    waits = {arm: [] for arm, _, _ in ARMS}
    pool = {arm: {"jobs": 0, "wakeups": 0, "caller_waits": 0} for arm in ort_share}
    for fn in (run_k, run_o, run_k, run_o):
        fn()
    for _ in range(args.rounds):
        for arm, pname, cname in ARMS:
            fn = fns[cname]
            waits[arm].append(pauses[pname]() * 1e3)
            fn()
            s0 = thread_pool.pool_stats()
            o0, w0 = _cpu_s(ort_threads), _cpu_s(_KILN_WORKERS)
            t0 = time.perf_counter()
            for _ in range(args.number):
                fn()
            wall = time.perf_counter() - t0
            o1, w1 = _cpu_s(ort_threads), _cpu_s(_KILN_WORKERS)
            s1 = thread_pool.pool_stats()
            ms[arm].append(wall / args.number * 1e3)
            if arm in ort_share:
                ort_share[arm].append((o1 - o0) / wall)
                worker_share[arm].append((w1 - w0) / wall)
                for k in pool[arm]:
                    pool[arm][k] += s1.get(k, 0) - s0.get(k, 0)
    out = {"workload": key, "description": MODELS[key][0], "ms": ms, "pause_ms": waits,
           "ort_threads_share": ort_share, "kiln_worker_share": worker_share, "kiln_pool": pool, "ratios": {}}
    for num, den in RATIOS:
        ratios = [a / b for a, b in zip(ms[num], ms[den])]
        out["ratios"][f"{num} / {den}"] = {"median": statistics.median(ratios), "iqr": _quartiles(ratios)}
    return out


def to_markdown(data: dict) -> str:
    lines = ["# Pause before each block: fixed 50 ms vs settle (until the process's threads are idle)", "",
             machine_line(data["machine"], data["thread_counts"]), "",
             f"One process, {data['rounds']} rounds of: ORT, kiln after a fixed 50 ms pause (`_fixed`); ORT, kiln "
             f"after `settle` (`_settle`); kiln again after `settle`, this time following kiln (`kiln_again`). "
             f"{data['number']} calls per block after one untimed call. ms per call: median (min). During kiln's "
             "timed block: CPU used by ONNX Runtime's threads and by kiln's pool worker, in cores (CPU seconds / "
             "wall seconds), median [max]; kiln's pool: worker wake-ups from sleep per job, caller sleeps. "
             "Pause: ms, median [max].", "",
             "| workload | arm | ms | ORT threads during kiln | kiln worker | wake-ups / job, caller sleeps | pause |",
             "|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        for arm, _, cname in ARMS:
            m, pw = r["ms"][arm], r["pause_ms"][arm]
            cells = [f"{statistics.median(m):.3f} ({min(m):.3f})"]
            if cname == "kiln":
                sh, kw, pl = r["ort_threads_share"][arm], r["kiln_worker_share"][arm], r["kiln_pool"][arm]
                cells += [f"{statistics.median(sh):.2f} [{max(sh):.2f}]", f"{statistics.median(kw):.2f} [{max(kw):.2f}]",
                          f"{pl['wakeups'] / max(1, pl['jobs']):.2f}, {pl['caller_waits']}"]
            else:
                cells += ["", "", ""]
            cells.append(f"{statistics.median(pw):.0f} [{max(pw):.0f}]")
            lines.append(f"| {r['description']} | {arm} | " + " | ".join(cells) + " |")
    lines += ["", "Per-round ratios, median [middle half]:", ""]
    for r in data["rows"]:
        lines.append(f"- {r['description']}: " + "; ".join(f"{k} {v['median']:.2f} [{v['iqr'][0]:.2f}-{v['iqr'][1]:.2f}]"
                                                           for k, v in r["ratios"].items()))
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
