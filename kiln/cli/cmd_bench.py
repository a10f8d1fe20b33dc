"""``kiln bench MODEL``: latency (median / min) of a model through kiln, beside the model's own framework
(ONNX Runtime for .onnx, PyTorch for TorchScript) when installed, timed in interleaved rounds.

Every contender runs with kiln's thread count (``--threads``, else :func:`kiln.runtime.num_threads`): ONNX Runtime's
``intra_op_num_threads``, PyTorch's ``set_num_threads``. The report names the CPU, the ISA kiln built for and
each contender's thread count (kiln's policy too: ``--thread-policy``)."""
from __future__ import annotations

import statistics
import time

import numpy as np

from .cmd_compile import add_model_arguments
from .common import (CLIError, add_threads_argument, apply_threads, load_model, parse_input_shapes, require_static_shapes, parse_target,
                     random_input)
from ..runtime import cpu, num_threads, set_thread_policy, thread_status
from ..runtime.graph_executor import GraphModule
from .cmd_run import load_graph_module
from .build import build_model
from ..target.x86 import host_cpu_info, target_cpu_summary

PEERS = ("onnxruntime", "pytorch")


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="measure a model's latency (kiln beside ONNX Runtime / PyTorch)",
                       description="Compile MODEL (or load an already compiled .so/.tar) and time it on random "
                       "inputs: median and min per call over interleaved rounds, with the model's own framework "
                       "timed in the same rounds when it is installed, and kiln's max error against it.")
    add_model_arguments(p)
    p.add_argument("--tuning-records", default=None, metavar="LOG", help="AutoTVM log to apply when compiling")
    p.add_argument("--opt-level", type=int, default=3, choices=range(0, 5), metavar="{0..4}")
    p.add_argument("--rounds", type=int, default=7, help="timed rounds (default 7)")
    p.add_argument("--number", type=int, default=10, help="calls per round (default 10)")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls first (default 3)")
    p.add_argument("--no-peers", action="store_true", help="time kiln only")
    p.add_argument("--seed", type=int, default=0)
    add_threads_argument(p)
    p.add_argument("--thread-policy", choices=("adaptive", "fixed"), default=None,
                   help="kiln's thread-count policy: adaptive (default; OpenMP-built loops get fewer threads while "
                   "other processes keep cores busy, kiln's pool keeps the count) or fixed ($KILN_THREAD_POLICY)")
    p.set_defaults(handler=run)


def _interleaved():
    """The benchmark suite's interleaved timer when the repo's ``benchmarks`` package is importable."""
    try:
        from benchmarks.common import interleaved
        return interleaved, "benchmarks.common.interleaved"
    except Exception:  # noqa: BLE001 - not running from the repository
        return _own_interleaved, "kiln.cli"


def _own_interleaved(contenders: dict, rounds: int = 7, number: int = 3, warmup: int = 2) -> dict:
    for fn in contenders.values():
        for _ in range(warmup):
            fn()
    runs: dict = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            runs[name].append((time.perf_counter() - t0) / number)
    return {name: {"median_s": statistics.median(r), "best_s": min(r), "runs_s": r} for name, r in runs.items()}


def _peer_onnxruntime(path: str, feed: dict, threads: int):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}
    feed = {k: v for k, v in feed.items() if k in names}
    used = f"{sess.get_session_options().intra_op_num_threads} (intra_op_num_threads)"
    return (lambda: sess.run(None, feed)), (lambda: sess.run(None, feed)[0]), used


def _peer_pytorch(path: str, feed: dict, threads: int):
    import torch
    torch.set_num_threads(threads)
    module = torch.jit.load(path, map_location="cpu").eval()
    args = [torch.from_numpy(np.ascontiguousarray(v)) for v in feed.values()]

    def call():
        with torch.no_grad():
            return module(*args)

    def first():
        out = call()
        while isinstance(out, (tuple, list)):
            out = out[0]
        return out.numpy()
    return call, first, f"{torch.get_num_threads()} (torch.get_num_threads)"


def run(args) -> int:
    if args.rounds < 1 or args.number < 1 or args.warmup < 0:
        raise CLIError("--rounds and --number must be >= 1, --warmup >= 0")
    apply_threads(args.threads)   # before kiln's kernels load; the peers get the same count below
    if args.thread_policy:
        set_thread_policy(args.thread_policy)
    threads = num_threads()
    compiled = args.model.endswith((".so", ".tar"))
    compile_s = None
    if compiled:
        _, gmod = load_graph_module(args.model)
        fmt = "compiled"
    else:
        target = parse_target(args.target)
        model = load_model(args.model, args.model_format, _static_specs(parse_input_shapes(args.input_shapes)), args.params)
        lib, compile_s, _ = build_model(model, target, args.opt_level, args.tuning_records)
        gmod = GraphModule(lib["default"](cpu(0)))
        fmt = model.fmt
    shapes, dtypes = gmod.get_input_info()
    rng = np.random.default_rng(args.seed)
    feed = {n: random_input(tuple(int(d) for d in s), str(dtypes[n]), rng) for n, s in shapes.items()}
    for n, v in feed.items():
        gmod.set_input(n, v)

    def kiln_output():
        gmod.run()
        return gmod.get_output(0).numpy()

    contenders, outputs, notes, peer_threads = {"kiln": gmod.run}, {"kiln": kiln_output()}, {}, {}
    peer = {"onnx": ("onnxruntime", _peer_onnxruntime), "pytorch": ("pytorch", _peer_pytorch)}.get(fmt)
    if peer and not args.no_peers:
        name, make = peer
        try:
            call, first, peer_threads[name] = make(args.model, feed, threads)
            outputs[name] = first()
            contenders[name] = call
        except ImportError:
            notes[name] = "not installed"
        except Exception as err:  # noqa: BLE001 - a peer that cannot run the model is reported, not fatal
            text = (str(err).strip().splitlines() or [type(err).__name__])[0]
            notes[name] = "failed: " + (text if len(text) <= 160 else "..." + text[-157:])
    timer, source = _interleaved()
    results = timer(contenders, rounds=args.rounds, number=args.number, warmup=args.warmup)

    print(f"benchmark of {args.model} ({', '.join(f'{n}{list(s)}' for n, s in shapes.items())}); "
          f"{args.rounds} rounds x {args.number} calls, timed by {source}")
    if compile_s is not None:
        print(f"kiln compile time: {compile_s:.2f} s" + (f" (tuning records {args.tuning_records})"
                                                       if args.tuning_records else " (untuned)"))
    host = host_cpu_info()
    built_for = getattr(args, "target", None) if not compiled else None
    try:
        isa = target_cpu_summary(parse_target(built_for)) if built_for else "as compiled (see the module's target)"
    except Exception:  # noqa: BLE001 - the line is informational
        isa = str(built_for)
    print(f"CPU: {host.model_name or 'unknown'}, {host.num_cores} usable cores; kiln target: {isa}")
    st = thread_status()
    counts = [f"kiln {st['requested']} ({st['policy']} policy, {st['threads']} in use at the end)"]
    counts += [f"{name} {peer_threads[name]}" for name in results if name != "kiln"]
    print("threads: " + ", ".join(counts))
    ref = next((outputs[n] for n in outputs if n != "kiln"), None)
    print(f"{'contender':<12} {'median ms':>10} {'min ms':>10} {'max |err|':>10}")
    for name, r in results.items():
        err = ""
        if ref is not None and name == "kiln":
            a, b = np.asarray(outputs["kiln"], np.float64), np.asarray(ref, np.float64)
            err = f"{np.max(np.abs(a - b)):.2e}" if a.shape == b.shape else "shape!"
        print(f"{name:<12} {r['median_s'] * 1e3:>10.4f} {r['best_s'] * 1e3:>10.4f} {err:>10}")
    for name, note in notes.items():
        print(f"{name:<12} n/a ({note})")
    if len(results) > 1:
        base = results["kiln"]["median_s"]
        for name, r in results.items():
            if name != "kiln":
                print(f"speedup of kiln over {name}: {r['median_s'] / base:.2f}x (median; > 1 means kiln is faster)")
    return 0


def _static_specs(specs: list) -> list:
    require_static_shapes(specs, "bench")
    return specs
