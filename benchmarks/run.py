"""kiln beside PyTorch eager, torch.compile and ONNX Runtime on models and single ops, in one run.

    python -m benchmarks.run [--models mlp_b1,resnet18,...] [--rounds 7] [--number 3] [--tuning-log FILE]
                             [--skip torch_compile,onnxruntime] [--threads N] [--no-write]
                             [--targets "llvm" "llvm -mcpu=core-avx2"]   # one kiln column per target
                             [--pause settle|fixed]

For each workload: fp32, every contender with the same thread count, a warm-up, then ``rounds`` interleaved
rounds of ``number`` calls (median and min per call; before each block a pause until the threads the previous
contender left spinning are idle, ``benchmarks.common.settle``, then one untimed call), compile time, and the max abs error against PyTorch eager.
kiln's path for models is the PyTorch frontend -> relay.build (opt_level 3, under the llvm target so the x86
AlterOpLayout hooks run) -> graph executor; a workload whose path fails shows "n/a" with the reason.
``--targets`` (or ``--target``, repeatable) builds kiln once per target string, each a column timed in the same
interleaved rounds as the others, so the host's ISA and e.g. ``-mcpu=core-avx2`` are compared in one table; a
target whose ISA this CPU lacks is built but shows n/a (it cannot run here).
Writes benchmarks/results/run.json and run.md (with the CPU model, the ISA of every target and every
contender's thread count).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import traceback

import numpy as np

from . import isa_hold
from .common import PAUSES, interleaved, machine_info, machine_line, paired_ratio, thread_counts, write_results
from .models import MODELS

CONTENDERS = ("pytorch", "torch_compile", "onnxruntime", "kiln", "kiln_tuned")


def _reason(err: BaseException) -> str:
    text = f"{type(err).__name__}: {err}".splitlines()[0]
    return text[:160]


def kiln_column(name: str, target: str, targets: list) -> str:
    """Column name of kiln built for ``target``: ``kiln`` for the first target, ``kiln [<target>]`` for others."""
    return name if target == targets[0] else f"{name} [{target}]"


def _kiln_build(model, inputs, tuning_log=None, target="llvm"):
    import torch
    import kiln as tvm
    from kiln import relay
    from kiln.runtime.graph_executor import GraphModule
    if not hasattr(relay, "frontend") or not hasattr(relay.frontend, "from_pytorch"):
        raise NotImplementedError("relay.frontend.from_pytorch is not available")
    scripted = torch.jit.trace(model, inputs).eval()
    shapes = [(f"input{i}", (tuple(x.shape), str(x.dtype).replace("torch.", ""))) for i, x in enumerate(inputs)]
    t0 = time.perf_counter()
    mod, params = relay.frontend.from_pytorch(scripted, shapes)
    target = tvm.target.Target(target)
    ctx = None
    if tuning_log:
        from kiln import autotvm
        ctx = autotvm.apply_history_best(tuning_log)
        ctx.__enter__()
    try:
        with tvm.transform.PassContext(opt_level=3), target:
            lib = relay.build(mod, target=target, params=params)
    finally:
        if ctx is not None:
            ctx.__exit__(None, None, None)
    compile_s = time.perf_counter() - t0
    from kiln.runtime.cpu_features import missing_features
    from kiln.target.x86 import required_features
    missing = missing_features(required_features(target))
    if missing:
        raise RuntimeError(f"built ({compile_s:.1f}s) but this CPU cannot run it: it lacks {', '.join(missing)}")
    gmod = GraphModule(lib["default"](tvm.cpu(0)))
    for (name, _), x in zip(shapes, inputs):
        gmod.set_input(name, tvm.nd.array(x.numpy()))

    def run():
        gmod.run()

    def output():
        gmod.run()
        return gmod.get_output(0).numpy()
    return run, output, compile_s


def _onnxruntime(model, inputs, threads, tmpdir):
    import onnxruntime as ort
    import torch
    path = os.path.join(tmpdir, "model.onnx")
    t0 = time.perf_counter()
    torch.onnx.export(model, inputs, path, input_names=[f"input{i}" for i in range(len(inputs))], dynamo=False)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    compile_s = time.perf_counter() - t0
    feed = {f"input{i}": x.numpy() for i, x in enumerate(inputs)}
    return (lambda: sess.run(None, feed)), (lambda: sess.run(None, feed)[0]), compile_s


def _torch_compile(model, inputs):
    import torch
    compiled = torch.compile(model)
    t0 = time.perf_counter()
    with torch.no_grad():
        compiled(*inputs)
    compile_s = time.perf_counter() - t0

    def run():
        with torch.no_grad():
            return compiled(*inputs)
    return run, (lambda: run().numpy()), compile_s


def bench_one(key: str, args, tmpdir: str) -> dict:
    import torch
    desc, factory = MODELS[key]
    row = {"workload": key, "description": desc, "results": {}, "notes": {}}
    try:
        model, inputs = factory()
    except Exception as err:  # noqa: BLE001 - a missing package makes the whole row n/a
        row["notes"]["all"] = _reason(err)
        return row
    with torch.no_grad():
        ref = model(*inputs)
    ref = ref.numpy() if hasattr(ref, "numpy") else np.asarray(ref)
    contenders, compile_s, errors = {}, {}, {}

    def add(name, make):
        if name in args.skip:
            row["notes"][name] = "skipped (--skip)"
            return
        try:
            run, output, c = make()
            out = output()
            errors[name] = float(np.max(np.abs(np.asarray(out, dtype=np.float64) - ref)))
            contenders[name] = run
            compile_s[name] = c
        except Exception as err:  # noqa: BLE001 - report the reason, keep benchmarking the others
            row["notes"][name] = _reason(err)
            if args.verbose:
                traceback.print_exc()

    def eager():
        def run():
            with torch.no_grad():
                return model(*inputs)
        return run, (lambda: run().numpy()), 0.0
    add("pytorch", eager)
    add("torch_compile", lambda: _torch_compile(model, inputs))
    add("onnxruntime", lambda: _onnxruntime(model, inputs, args.threads, tmpdir))
    for target in args.targets:
        add(kiln_column("kiln", target, args.targets), lambda t=target: _kiln_build(model, inputs, target=t))
    if args.tuning_log:
        for target in args.targets:
            add(kiln_column("kiln_tuned", target, args.targets),
                lambda t=target: _kiln_build(model, inputs, args.tuning_log, target=t))
    if contenders:
        from kiln.runtime import thread_pool
        before = thread_pool.pool_stats()
        timings = interleaved(contenders, rounds=args.rounds, number=args.number, warmup=args.warmup,
                              pause=PAUSES[args.pause])
        after = thread_pool.pool_stats()
        if before:  # kiln's pool while every contender was timed: did its workers sleep between jobs?
            row["kiln_pool"] = {k: after[k] - before[k] for k in ("jobs", "wakeups", "caller_waits", "caller_moves",
                                                                   "chunks_by_caller", "chunks_by_workers")
                                if k in after}
        for name, t in timings.items():
            row["results"][name] = {"median_ms": t["median_s"] * 1e3, "min_ms": t["best_s"] * 1e3,
                                    "compile_s": compile_s[name], "max_abs_err": errors[name],
                                    "settle_ms": [round(w * 1e3, 1) for w in t.get("settle_s", [])]}
            if name.startswith("kiln") and "onnxruntime" in timings:
                row["results"][name]["vs_onnxruntime"] = paired_ratio(t["runs_s"], timings["onnxruntime"]["runs_s"])
    return row


def _columns(data: dict) -> list:
    """Contenders in table order: the fixed ones, each kiln column (one per target) where it belongs."""
    seen = []
    for r in data["rows"]:
        for c in list(r["results"]) + list(r["notes"]):
            if c != "all" and c not in seen:
                seen.append(c)
    base = {c: i for i, c in enumerate(CONTENDERS)}
    return sorted(seen, key=lambda c: (base.get(c.split(" [")[0], len(base)), seen.index(c)))


def to_markdown(data: dict) -> str:
    m = data["machine"]
    names = _columns(data)
    th = data["thread_counts"]
    lines = ["# kiln benchmark", "", isa_hold.with_status(machine_line(m, th), data.get("held_isa")), "",
             f"fp32; {data['rounds']} interleaved rounds of {data['number']} calls after {data['warmup']} warm-up "
             f"calls; pause before each block: {data.get('pause', 'fixed')}; OpenMP wait policy {data.get('openmp', {}).get('policy') or 'libgomp default'} (shared by kiln "
             f"and PyTorch); kiln columns: " + ", ".join(f"`{kiln_column('kiln', t, data['targets'])}` = target "
                                                       f"`{t}`" for t in data["targets"]) + ".",
             "", "Median ms per call (min ms) [compile s] {max abs error vs PyTorch}.", "",
             "| workload | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    notes = []
    for r in data["rows"]:
        cells = []
        for c in names:
            res = r["results"].get(c)
            if res is not None:
                cell = f"{res['median_ms']:.3f} ({res['min_ms']:.3f})"
                if c != "pytorch":
                    cell += f" [{res['compile_s']:.1f}s] {{{res['max_abs_err']:.1e}}}"
                cells.append(cell)
            else:
                reason = r["notes"].get(c) or r["notes"].get("all") or "n/a"
                cells.append("n/a")
                notes.append(f"- {r['workload']} / {c}: {reason}")
        lines.append(f"| {r['description']} | " + " | ".join(cells) + " |")
    pool = [(r["description"], r["kiln_pool"]) for r in data["rows"] if r.get("kiln_pool", {}).get("jobs")]
    if pool:
        lines += ["", "kiln's thread pool during the timing (every kiln column, warm-up included): parallel jobs, "
                  "worker wake-ups from sleep per job, share of chunks run by the workers, caller sleeps, caller "
                  "moves off a bound worker's CPU."]
        for desc, p in pool:
            chunks = p["chunks_by_caller"] + p["chunks_by_workers"]
            lines.append(f"- {desc}: {p['jobs']} jobs, {p['wakeups'] / p['jobs']:.2f} wake-ups per job, "
                         f"{100 * p['chunks_by_workers'] / max(1, chunks):.0f}% of chunks by workers, "
                         f"{p['caller_waits']} caller sleeps, {p.get('caller_moves', 0)} caller moves")
    settles = [(r["description"], {c: res["settle_ms"] for c, res in r["results"].items() if res.get("settle_ms")})
               for r in data["rows"]]
    settles = [(d, s) for d, s in settles if s]
    if settles:
        lines += ["", "Pause before each contender's block (benchmarks.common.settle: until the threads the previous "
                  "contender left spinning are idle), median / max ms:"]
        for desc, s in settles:
            lines.append(f"- {desc}: " + ", ".join(f"{c} {sorted(v)[len(v) // 2]:.0f} / {max(v):.0f}"
                                                   for c, v in s.items()))
    paired = [(r["description"], c, r["results"][c]["vs_onnxruntime"]) for r in data["rows"] for c in names
              if "vs_onnxruntime" in r["results"].get(c, {})]
    if paired:
        lines += ["", "kiln / ONNX Runtime, paired: the median of the per-round ratios (each round times both back to "
                  "back, so a slow stretch of the machine slows both), its 95% bootstrap interval, the rounds kiln "
                  "was ahead."]
        for desc, c, p in paired:
            lines.append(f"- {desc}, {c}: {p['median']:.3f} [{p['ci95'][0]:.3f}-{p['ci95'][1]:.3f}], ahead in "
                         f"{p['ahead']} of {p['rounds']}")
    if notes:
        lines += ["", "Not measured:", *notes]
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    import tempfile
    # kiln first: it sets its OpenMP wait-policy default before libgomp is loaded (torch ships one too and the
    # two libraries then share it), so both contenders run under the policy recorded in the results
    from kiln.runtime.thread_policy import openmp_status, thread_status
    from kiln.target.x86 import host_cpu_info
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(MODELS), help=f"comma list of: {', '.join(MODELS)}")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--number", type=int, default=5)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=host_cpu_info().num_cores)
    p.add_argument("--targets", nargs="+", default=None, metavar="TARGET",
                   help="kiln target strings, one kiln column each (default: llvm, the host)")
    p.add_argument("--target", action="append", default=None, metavar="TARGET",
                   help="a kiln target string (repeatable; adds to --targets)")
    p.add_argument("--thread-policy", choices=("adaptive", "fixed"), default=None,
                   help="kiln's thread-count policy (default: $KILN_THREAD_POLICY, else adaptive)")
    p.add_argument("--tuning-log", default=None, help="AutoTVM log: adds a 'kiln_tuned' column")
    p.add_argument("--skip", default="", help="comma list of contenders to leave out")
    p.add_argument("--pause", choices=sorted(PAUSES), default="settle",
                   help="before each block: 'settle' (until the threads the previous contender left spinning are "
                        "idle; the default) or 'fixed' (50 ms, as before session 9: unfair to whoever follows "
                        "ONNX Runtime)")
    isa_hold.add_argument(p, "PyTorch and ONNX Runtime")
    p.add_argument("--out", default="run", help="results file stem under benchmarks/results/")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args(argv)
    args.skip = set(filter(None, args.skip.split(",")))
    isa_target = isa_hold.apply(p, args.isa, pytorch=not {"pytorch", "torch_compile"} <= args.skip,
                                onnxruntime="onnxruntime" not in args.skip)
    args.targets = list(dict.fromkeys((args.targets or []) + (args.target or []))) or [isa_target or "llvm"]
    import torch
    from kiln.target import Target
    for t in args.targets:
        try:
            Target(t)
        except Exception as err:  # noqa: BLE001 - a bad target string is a usage error
            p.error(f"--targets {t!r}: {str(err).splitlines()[0]}")
    keys = [k.strip() for k in args.models.split(",") if k.strip()]
    unknown = [k for k in keys if k not in MODELS]
    if unknown:
        p.error(f"unknown workloads {unknown}; choose from {list(MODELS)}")
    os.environ.setdefault("KILN_NUM_THREADS", str(args.threads))
    torch.set_num_threads(args.threads)
    if args.thread_policy:
        from kiln.runtime import set_thread_policy
        set_thread_policy(args.thread_policy)
    rows = []
    with tempfile.TemporaryDirectory() as tmpdir:
        for key in keys:
            print(f"[benchmarks.run] {key} ...", file=sys.stderr, flush=True)
            rows.append(bench_one(key, args, tmpdir))
    data = {"machine": machine_info(args.targets), "threads": args.threads, "targets": args.targets,
            "thread_counts": thread_counts(ort_intra_op=args.threads), "thread_policy": thread_status(),
            "rounds": args.rounds, "number": args.number, "pause": args.pause,
            "warmup": args.warmup, "tuning_log": args.tuning_log, "openmp": openmp_status(),
            "held_isa": isa_hold.status(),
            "versions": {"torch": torch.__version__, "numpy": np.__version__}, "rows": rows}
    try:
        import onnxruntime
        data["versions"]["onnxruntime"] = onnxruntime.__version__
    except ImportError:
        pass
    text = to_markdown(data)
    print(text)
    if not args.no_write:
        jpath, mpath = write_results(args.out, data, text)
        print(f"wrote {jpath} and {mpath}", file=sys.stderr)
    return data


if __name__ == "__main__":
    main()
