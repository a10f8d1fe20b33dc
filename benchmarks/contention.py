"""kiln and ONNX Runtime beside a CPU-bound neighbour process: how much slower each gets, in one run.

    python -m benchmarks.contention [--models mobilenet_v2,resnet18,mlp_b1] [--rounds 5] [--number 5]
                                    [--threads N] [--neighbours 1] [--settle-s 1.0] [--no-write]
                                    [--schedules static,guided]

Each round runs two phases, quiet and busy, in turn: in the busy phase ``--neighbours`` subprocesses spin in a
bounded ``while`` loop (each stops by itself after ``--neighbour-max-s`` and is killed at the end of its phase).
At the start of a phase kiln runs the model for ``--settle-s`` seconds, as a server would (the adaptive thread
policy measures on those runs), then every contender is timed once, interleaved (benchmarks.common). Contenders:

* ``kiln``: the default, adaptive thread policy (kiln.runtime.thread_policy): fewer threads while other
  processes keep cores busy;
* ``kiln_fixed``: the same build with the policy ``fixed`` at ``--threads``;
* ``kiln_1t``: fixed at one thread (what the adaptive policy should reach beside one neighbour on 2 cores);
* ``kiln_fixed_<schedule>`` for each of ``--schedules``: the model built again with its parallel loops
  scheduled ``static``/``dynamic``/``guided`` (kiln.target.codegen_c.OMP_SCHEDULE), fixed at ``--threads``;
* ``onnxruntime`` (``intra_op_num_threads=--threads``) and ``onnxruntime_1t``.

Reports, per model and contender, the median ms of each phase and busy/quiet, and kiln / ONNX Runtime per phase;
the threads kiln's adaptive policy was using at the end of each busy phase and the others' load it measured.
Writes benchmarks/results/contention.{md,json}. Timings are only comparable within one run on one machine.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time

from .common import interleaved, machine_info, machine_line, thread_counts, write_results
from .models import MODELS

HOG = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end:\n    pass\n"
KILN = ("kiln", "kiln_fixed", "kiln_1t")
PHASES = ("quiet", "busy")


class Neighbours:
    """``n`` CPU-bound subprocesses, each bounded to ``max_s`` seconds; stopped on exit of the ``with``."""

    def __init__(self, n: int, max_s: float):
        self.n, self.max_s, self.procs = n, max_s, []

    def __enter__(self):
        self.procs = [subprocess.Popen([sys.executable, "-c", HOG.format(s=self.max_s)]) for _ in range(self.n)]
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        self.procs = []


def _kiln_timer(run, policy: str, threads: int):
    """A ("timer", f(n)) contender that runs under ``policy`` with at most ``threads`` threads."""
    from kiln.runtime import set_num_threads, set_thread_policy

    def timer(n: int) -> float:
        set_thread_policy(policy)
        set_num_threads(threads)
        t0 = time.perf_counter()
        for _ in range(n):
            run()
        return (time.perf_counter() - t0) / n
    return ("timer", timer)


def _build_with_schedule(model, inputs, schedule: str):
    """The model built with its parallel loops' OpenMP schedule set to ``schedule``
    (kiln.target.codegen_c.OMP_SCHEDULE) instead of the default; the default is restored after."""
    import importlib
    from .run import _kiln_build
    codegen_c = importlib.import_module("kiln.target.codegen_c")  # the module (kiln.target.codegen_c is also a function)
    saved = codegen_c.OMP_SCHEDULE
    codegen_c.OMP_SCHEDULE = schedule
    try:
        return _kiln_build(model, inputs)[0]
    finally:
        codegen_c.OMP_SCHEDULE = saved


def bench_model(key: str, args, tmpdir: str) -> dict:
    import numpy as np
    import torch
    from kiln.runtime import set_num_threads, set_thread_policy, thread_status
    from .run import _kiln_build, _onnxruntime, _reason
    desc, factory = MODELS[key]
    row = {"workload": key, "description": desc, "notes": {}, "phases": {p: {} for p in PHASES},
           "kiln_busy_threads": [], "others_busy_cores": []}
    try:
        model, inputs = factory()
        with torch.no_grad():
            ref = model(*inputs).numpy()
        run, output, _ = _kiln_build(model, inputs)
        row["max_abs_err"] = {"kiln": float(np.max(np.abs(output() - ref)))}
    except Exception as err:  # noqa: BLE001 - the row reports why
        row["notes"]["kiln"] = _reason(err)
        return row
    contenders = {"kiln": _kiln_timer(run, "adaptive", args.threads),
                  "kiln_fixed": _kiln_timer(run, "fixed", args.threads),
                  "kiln_1t": _kiln_timer(run, "fixed", 1)}
    for schedule in args.schedules:   # the same model, its parallel loops scheduled another way (A/B)
        try:
            other_run = _build_with_schedule(model, inputs, schedule)
            contenders[f"kiln_fixed_{schedule}"] = _kiln_timer(other_run, "fixed", args.threads)
        except Exception as err:  # noqa: BLE001
            row["notes"][f"kiln_fixed_{schedule}"] = _reason(err)
    for name, threads in (("onnxruntime", args.threads), ("onnxruntime_1t", 1)):
        try:
            ort_run, ort_out, _ = _onnxruntime(model, inputs, threads, tmpdir)
            row["max_abs_err"][name] = float(np.max(np.abs(ort_out() - ref)))
            contenders[name] = ort_run
        except Exception as err:  # noqa: BLE001
            row["notes"][name] = _reason(err)
    runs = {p: {name: [] for name in contenders} for p in PHASES}
    try:
        for _ in range(args.rounds):
            for phase in PHASES:
                with Neighbours(args.neighbours if phase == "busy" else 0, args.neighbour_max_s):
                    set_thread_policy("adaptive")
                    set_num_threads(args.threads)
                    end = time.perf_counter() + args.settle_s
                    while time.perf_counter() < end:   # a server's steady state under this load
                        run()
                    t = interleaved(contenders, rounds=1, number=args.number, warmup=1)
                    for name, r in t.items():
                        runs[phase][name] += r["runs_s"]
                    if phase == "busy":
                        contenders["kiln"][1](1)       # the adaptive contender's state after the phase
                        st = thread_status()
                        row["kiln_busy_threads"].append(st["threads"])
                        row["others_busy_cores"].append(st["others_busy_cores"])
    finally:
        set_thread_policy(None)
        set_num_threads(None)
    for phase in PHASES:
        for name, r in runs[phase].items():
            row["phases"][phase][name] = {"median_ms": statistics.median(r) * 1e3, "min_ms": min(r) * 1e3,
                                          "runs_ms": [x * 1e3 for x in r]}
    return row


def to_markdown(data: dict) -> str:
    lines = ["# kiln and ONNX Runtime beside a CPU-bound neighbour", "", machine_line(data["machine"],
             data["thread_counts"]), "",
             f"{data['neighbours']} neighbour process(es) spinning in the busy phase; {data['rounds']} rounds of "
             f"(quiet, busy), each phase {data['settle_s']} s of kiln runs then every contender timed for "
             f"{data['number']} calls, interleaved. Median ms (busy / quiet).", ""]
    for r in data["rows"]:
        lines.append(f"## {r['description']}")
        lines.append("")
        if not r["phases"]["quiet"]:
            lines += [f"not measured: {r['notes']}", ""]
            continue
        lines += ["| contender | quiet ms | busy ms | busy / quiet | vs onnxruntime (quiet, busy) |",
                  "|---|---|---|---|---|"]
        q, b = r["phases"]["quiet"], r["phases"]["busy"]
        for name in q:
            ratio = b[name]["median_ms"] / q[name]["median_ms"]
            vs = ""
            if "onnxruntime" in q and name != "onnxruntime":
                vs = (f"{q[name]['median_ms'] / q['onnxruntime']['median_ms']:.2f}, "
                      f"{b[name]['median_ms'] / b['onnxruntime']['median_ms']:.2f}")
            lines.append(f"| {name} | {q[name]['median_ms']:.3f} | {b[name]['median_ms']:.3f} | {ratio:.2f} | {vs} |")
        others = [x for x in r["others_busy_cores"] if x is not None]
        lines += ["", f"kiln's adaptive policy at the end of each busy phase: threads {r['kiln_busy_threads']}, "
                  f"others' load measured {', '.join(f'{x:.2f}' for x in others)} cores."]
        if r["notes"]:
            lines.append(f"Not measured: {r['notes']}")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> dict:
    from kiln.runtime.thread_policy import openmp_status  # kiln before torch: its OpenMP default applies
    import torch
    from kiln.target.x86 import host_cpu_info
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="mobilenet_v2,resnet18,mlp_b1")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--number", type=int, default=5)
    p.add_argument("--threads", type=int, default=host_cpu_info().num_cores)
    p.add_argument("--neighbours", type=int, default=1)
    p.add_argument("--neighbour-max-s", type=float, default=300.0, help="a neighbour stops by itself after this")
    p.add_argument("--settle-s", type=float, default=1.0, help="kiln runs before each phase's timing")
    p.add_argument("--schedules", default="",
                   help="also time kiln_fixed built with these parallel-loop schedules (static,dynamic,guided)")
    p.add_argument("--out", default="contention")
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    keys = [k for k in args.models.split(",") if k]
    args.schedules = [x for x in args.schedules.split(",") if x]
    if any(x not in ("static", "dynamic", "guided") for x in args.schedules):
        p.error(f"--schedules takes static, dynamic, guided; got {args.schedules}")
    unknown = [k for k in keys if k not in MODELS]
    if unknown:
        p.error(f"unknown workloads {unknown}; choose from {list(MODELS)}")
    if args.rounds < 1 or args.number < 1 or args.neighbours < 0 or args.threads < 1:
        p.error("--rounds, --number and --threads must be >= 1, --neighbours >= 0")
    torch.set_num_threads(args.threads)
    rows = []
    with tempfile.TemporaryDirectory() as tmpdir:
        for key in keys:
            print(f"[benchmarks.contention] {key} ...", file=sys.stderr, flush=True)
            rows.append(bench_model(key, args, tmpdir))
    data = {"machine": machine_info(), "thread_counts": thread_counts(ort_intra_op=args.threads, pytorch=False),
            "threads": args.threads, "neighbours": args.neighbours, "rounds": args.rounds, "number": args.number,
            "settle_s": args.settle_s, "openmp": openmp_status(), "rows": rows}
    text = to_markdown(data)
    print(text)
    if not args.no_write:
        jpath, mpath = write_results(args.out, data, text)
        print(f"wrote {jpath} and {mpath}", file=sys.stderr)
    return data


if __name__ == "__main__":
    main()
