"""kiln and ONNX Runtime beside a CPU-bound neighbour process: how much slower each gets, in one run.

    python -m benchmarks.contention [--models mobilenet_v2,resnet18,mlp_b1] [--rounds 5] [--number 5]
                                    [--threads N] [--neighbours 1] [--settle-s 1.0] [--no-write]
                                    [--schedules static,guided] [--backends pool,openmp]

Each round runs one phase per neighbour count in turn: quiet (no neighbour), then with ``--neighbours``
subprocesses (a comma list, e.g. ``1,2``: one phase each) that spin in a bounded ``while`` loop (each stops by
itself after ``--neighbour-max-s`` and is killed at the end of its phase).
At the start of a phase kiln runs the model for ``--settle-s`` seconds, as a server would (the adaptive thread
policy measures on those runs), then every contender is timed once, interleaved (benchmarks.common). Contenders:

* ``kiln``: the default, adaptive thread policy (kiln.runtime.thread_policy): fewer threads while other
  processes keep cores busy;
* ``kiln_fixed``: the same build with the policy ``fixed`` at ``--threads``;
* ``kiln_1t``: fixed at one thread (what the adaptive policy should reach beside one neighbour on 2 cores);
* ``kiln_fixed_<schedule>`` for each of ``--schedules``: the model built again with its parallel loops
  scheduled ``static``/``dynamic``/``guided`` (kiln.target.codegen_c.OMP_SCHEDULE), fixed at ``--threads``;
* ``kiln_fixed_<backend>`` for each of ``--backends``: the model built with its parallel loops run by kiln's
  thread pool (``pool``) or OpenMP (``openmp``) (kiln.target.codegen_c.PARALLEL_BACKEND), fixed at ``--threads``;
* ``onnxruntime`` (``intra_op_num_threads=--threads``) and ``onnxruntime_1t``.

The workload ``bert4`` (defined here) is the issue's BERT encoder: 4 layers, hidden 512, 8 heads, seq 128.

Reports, per model and contender, the median ms of each phase and busy/quiet, and kiln / ONNX Runtime per phase;
the threads kiln's adaptive policy was using at the end of each busy phase and the others' load it measured.
Writes benchmarks/results/contention.{md,json}. Timings are only comparable within one run on one machine.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from . import isa_hold
from .common import interleaved, machine_info, machine_line, thread_counts, write_results
from .models import MODELS

HOG = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end:\n    pass\n"
KILN = ("kiln", "kiln_fixed", "kiln_1t")


def _bert4():
    import torch
    from transformers import BertConfig, BertModel
    from .models import _Tensors, _stub_torchvision_meta
    _stub_torchvision_meta()
    torch.manual_seed(0)
    config = BertConfig(hidden_size=512, num_hidden_layers=4, num_attention_heads=8, intermediate_size=2048)
    model = BertModel(config).eval()
    return _Tensors.wrap(model, "last_hidden_state"), (torch.randint(0, 30000, (1, 128)),)


WORKLOADS = dict(MODELS, bert4=("BERT encoder, 4 layers, hidden 512, seq 128", _bert4))


def phase_names(neighbours: list) -> list:
    """``quiet`` and one ``busy<k>`` per neighbour count (``busy`` alone when there is one count)."""
    if len(neighbours) == 1:
        return ["quiet", "busy"]
    return ["quiet"] + [f"busy{k}" for k in neighbours]


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


def _build_with_backend(model, inputs, backend: str):
    """The model built with its parallel loops run by ``backend`` (kiln.target.codegen_c.PARALLEL_BACKEND)."""
    import importlib
    from .run import _kiln_build
    codegen_c = importlib.import_module("kiln.target.codegen_c")
    saved = codegen_c.PARALLEL_BACKEND
    codegen_c.PARALLEL_BACKEND = backend
    try:
        return _kiln_build(model, inputs)[0]
    finally:
        codegen_c.PARALLEL_BACKEND = saved


def bench_model(key: str, args, tmpdir: str) -> dict:
    import numpy as np
    import torch
    from kiln.runtime import set_num_threads, set_thread_policy, thread_status
    from .run import _kiln_build, _onnxruntime, _reason
    desc, factory = WORKLOADS[key]
    phases = phase_names(args.neighbours)
    counts = dict(zip(phases, [0] + args.neighbours))
    row = {"workload": key, "description": desc, "notes": {}, "phases": {p: {} for p in phases},
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
    import importlib
    default_backend = importlib.import_module("kiln.target.codegen_c").parallel_backend()
    for backend in args.backends:   # the same model, its parallel loops run by another backend (A/B)
        try:
            other_run = run if backend == default_backend else _build_with_backend(model, inputs, backend)
            contenders[f"kiln_fixed_{backend}"] = _kiln_timer(other_run, "fixed", args.threads)
        except Exception as err:  # noqa: BLE001
            row["notes"][f"kiln_fixed_{backend}"] = _reason(err)
    for name, threads in (("onnxruntime", args.threads), ("onnxruntime_1t", 1)):
        try:
            ort_run, ort_out, _ = _onnxruntime(model, inputs, threads, tmpdir)
            row["max_abs_err"][name] = float(np.max(np.abs(ort_out() - ref)))
            contenders[name] = ort_run
        except Exception as err:  # noqa: BLE001
            row["notes"][name] = _reason(err)
    runs = {p: {name: [] for name in contenders} for p in phases}
    try:
        for rnd in range(args.rounds):
            for phase in phases:
                with Neighbours(counts[phase], args.neighbour_max_s):
                    set_thread_policy("adaptive")
                    set_num_threads(args.threads)
                    end = time.perf_counter() + args.settle_s
                    while time.perf_counter() < end:   # a server's steady state under this load
                        run()
                    t = interleaved(contenders, rounds=1, number=args.number, warmup=1, start=rnd)
                    for name, r in t.items():
                        runs[phase][name] += r["runs_s"]
                    if phase == phases[-1]:
                        contenders["kiln"][1](1)       # the adaptive contender's state after the phase
                        st = thread_status()
                        row["kiln_busy_threads"].append(st["threads"])
                        row["others_busy_cores"].append(st["others_busy_cores"])
    finally:
        set_thread_policy(None)
        set_num_threads(None)
    for phase in phases:
        for name, r in runs[phase].items():
            row["phases"][phase][name] = {"median_ms": statistics.median(r) * 1e3, "min_ms": min(r) * 1e3,
                                          "runs_ms": [x * 1e3 for x in r]}
    return row


def to_markdown(data: dict) -> str:
    lines = ["# kiln and ONNX Runtime beside a CPU-bound neighbour", "",
             isa_hold.with_status(machine_line(data["machine"], data["thread_counts"]), data.get("held_isa")), "",
             f"Phases: quiet, then {data['neighbours']} CPU-bound neighbour process(es) spinning; {data['rounds']} "
             f"rounds of all phases, each phase {data['settle_s']} s of kiln runs then every contender timed for "
             f"{data['number']} calls, interleaved. Median ms; busy / quiet; contender / onnxruntime per phase.",
             f"Load average (1 min) before the run: {data.get('loadavg_before', '?')}, after: "
             f"{data.get('loadavg_after', '?')} (other processes on the machine).", ""]
    for r in data["rows"]:
        lines.append(f"## {r['description']}")
        lines.append("")
        if not r["phases"]["quiet"]:
            lines += [f"not measured: {r['notes']}", ""]
            continue
        phases = list(r["phases"])
        busy = phases[1:]
        lines += ["| contender | " + " | ".join(f"{p} ms" for p in phases) + " | "
                  + " | ".join(f"{p} / quiet" for p in busy) + " | vs onnxruntime (" + ", ".join(phases) + ") |",
                  "|---" * (1 + len(phases) + len(busy) + 1) + "|"]
        q = r["phases"]["quiet"]
        for name in q:
            ms = [r["phases"][p][name]["median_ms"] for p in phases]
            ratios = [f"{m / ms[0]:.2f}" for m in ms[1:]]
            vs = ""
            if "onnxruntime" in q and name != "onnxruntime":
                vs = ", ".join(f"{r['phases'][p][name]['median_ms'] / r['phases'][p]['onnxruntime']['median_ms']:.2f}"
                               for p in phases)
            lines.append(f"| {name} | " + " | ".join(f"{m:.3f}" for m in ms) + " | " + " | ".join(ratios)
                         + f" | {vs} |")
        others = [x for x in r["others_busy_cores"] if x is not None]
        lines += ["", f"kiln's adaptive policy at the end of each busy phase: threads {r['kiln_busy_threads']}, "
                  f"others' load measured {', '.join(f'{x:.2f}' for x in others)} cores."]
        if r["notes"]:
            lines.append(f"Not measured: {r['notes']}")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> dict:
    from kiln.runtime.thread_policy import openmp_status  # kiln before torch: its OpenMP default applies
    from kiln.target.x86 import HOST_TARGET_ENV, host_cpu_info
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="mobilenet_v2,resnet18,mlp_b1")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--number", type=int, default=5)
    p.add_argument("--threads", type=int, default=host_cpu_info().num_cores)
    p.add_argument("--neighbours", default="1", help="neighbour counts of the busy phases, e.g. 1 or 1,2")
    p.add_argument("--backends", default="",
                   help="also time kiln_fixed built with these parallel-loop backends (pool,openmp)")
    p.add_argument("--neighbour-max-s", type=float, default=300.0, help="a neighbour stops by itself after this")
    p.add_argument("--settle-s", type=float, default=1.0, help="kiln runs before each phase's timing")
    p.add_argument("--schedules", default="",
                   help="also time kiln_fixed built with these parallel-loop schedules (static,dynamic,guided)")
    isa_hold.add_argument(p, "ONNX Runtime")
    p.add_argument("--out", default="contention")
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    isa_target = isa_hold.apply(p, args.isa, pytorch=False)
    if isa_target:  # the builds here take the default target: make it mean the ISA's CPU
        os.environ[HOST_TARGET_ENV] = isa_target
    import torch
    keys = [k for k in args.models.split(",") if k]
    args.schedules = [x for x in args.schedules.split(",") if x]
    args.backends = [x for x in args.backends.split(",") if x]
    if any(x not in ("pool", "openmp") for x in args.backends):
        p.error(f"--backends takes pool, openmp; got {args.backends}")
    try:
        args.neighbours = [int(x) for x in str(args.neighbours).split(",") if x]
    except ValueError:
        p.error(f"--neighbours takes a comma list of counts, got {args.neighbours!r}")
    if any(x not in ("static", "dynamic", "guided") for x in args.schedules):
        p.error(f"--schedules takes static, dynamic, guided; got {args.schedules}")
    unknown = [k for k in keys if k not in WORKLOADS]
    if unknown:
        p.error(f"unknown workloads {unknown}; choose from {list(WORKLOADS)}")
    if args.rounds < 1 or args.number < 1 or not args.neighbours or min(args.neighbours) < 1 or args.threads < 1:
        p.error("--rounds, --number and --threads must be >= 1, --neighbours counts >= 1")
    torch.set_num_threads(args.threads)
    rows = []
    loadavg_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmpdir:
        for key in keys:
            print(f"[benchmarks.contention] {key} ...", file=sys.stderr, flush=True)
            rows.append(bench_model(key, args, tmpdir))
    data = {"machine": machine_info(), "thread_counts": thread_counts(ort_intra_op=args.threads, pytorch=False),
            "threads": args.threads, "neighbours": args.neighbours, "rounds": args.rounds, "number": args.number,
            "settle_s": args.settle_s, "openmp": openmp_status(), "rows": rows, "held_isa": isa_hold.status(),
            "loadavg_before": round(loadavg_before, 2), "loadavg_after": round(os.getloadavg()[0], 2)}
    text = to_markdown(data)
    print(text)
    if not args.no_write:
        jpath, mpath = write_results(args.out, data, text)
        print(f"wrote {jpath} and {mpath}", file=sys.stderr)
    return data


if __name__ == "__main__":
    main()
