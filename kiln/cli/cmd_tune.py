"""``kiln tune MODEL -o tune.log``: extract the model's tunable tasks, tune each with a progress bar,
append every measurement to the log (TVM's format) and print a summary table."""
from __future__ import annotations

import os
import time

import numpy as np

from .cmd_compile import add_layout_argument, add_model_arguments
from .common import (CLIError, add_threads_argument, apply_threads, info, load_model, parse_input_shapes, require_static_shapes,
                     parse_target)
from .plot import check_plot_path, save_curves
from .. import transform
from .build import convert_layout

TUNERS = ("xgb", "xgb_knob", "xgb_itervar", "xgb_curve", "xgb_rank", "ga", "random", "gridsearch")


def add_parser(sub) -> None:
    p = sub.add_parser("tune", help="tune a model's operators with AutoTVM and write the tuning log",
                       description="Extract the tunable tasks of a model (autotvm.task.extract_from_program), "
                       "tune each one with a progress bar, append every measurement to the log in TVM's format and "
                       "print a summary. Use the log with `kiln compile --tuning-records LOG`.")
    add_model_arguments(p)
    p.add_argument("-o", "--output", required=True, metavar="LOG", help="tuning log to append to")
    p.add_argument("--trials", type=int, default=200, metavar="N", help="trials per task (default 200)")
    p.add_argument("--tuner", choices=TUNERS, default="xgb", help="search strategy (default xgb)")
    p.add_argument("--early-stopping", type=int, default=None, metavar="N",
                   help="stop a task after N trials without a better config")
    p.add_argument("--ops", default=None, metavar="OPS",
                   help="only tune these Relay ops, e.g. nn.conv2d,nn.dense (default: every tunable op)")
    p.add_argument("--opt-level", type=int, default=3, choices=range(0, 5), metavar="{0..4}",
                   help="PassContext opt_level used for task extraction (default 3)")
    p.add_argument("--number", type=int, default=None,
                   help="runs per measurement (default 4; 1 with --enable-cpu-cache-flush)")
    p.add_argument("--repeat", type=int, default=3, help="measurements per config (default 3)")
    p.add_argument("--min-repeat-ms", type=int, default=0, help="minimum length of one measurement in ms")
    p.add_argument("--enable-cpu-cache-flush", action="store_true",
                   help="evict the CPU caches before each measurement, the operator's input excepted "
                   "(AutoTVM LocalRunner's enable_cpu_cache_flush): a layer then reads its weights from memory, as "
                   "in a network whose weights exceed the last-level cache (resnet18 and larger on most CPUs), "
                   "where configs tuned hot can lose (the RPC server flushes its own caches)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds allowed to build or run one config")
    p.add_argument("--parallel", type=int, default=None, metavar="N", help="configs built in parallel")
    p.add_argument("--transfer-learning", action="store_true",
                   help="seed model-based tuners with the records already in the log")
    p.add_argument("--rpc-key", default=None, help="measure on RPC servers registered under this key")
    p.add_argument("--rpc-tracker", default=None, metavar="HOST:PORT", help="RPC tracker address (with --rpc-key)")
    p.add_argument("--plot", default=None, metavar="PNG", help="save the tuning curves (best GFLOPS over trials); "
                   "`kiln plot LOG -o PNG` draws them from an existing log")
    add_layout_argument(p)
    add_threads_argument(p)
    p.set_defaults(handler=run)


def _tracker_address(text: str) -> tuple:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise CLIError(f"--rpc-tracker {text!r} is not HOST:PORT (e.g. 127.0.0.1:9190)")
    return host, int(port)


def make_measure_option(args) -> dict:
    from .. import autotvm  # lazy: heavy compiler package (fast `kiln --help`)
    builder = autotvm.LocalBuilder(timeout=args.timeout, n_parallel=args.parallel)
    flush = bool(getattr(args, "enable_cpu_cache_flush", False))
    number = args.number if args.number is not None else (1 if flush else 4)
    if flush and (number != 1 or args.min_repeat_ms > 0):
        # the caches are evicted once per measurement: a second run in it, or one grown to --min-repeat-ms,
        # would time a warm kernel again
        raise CLIError(f"--enable-cpu-cache-flush times one cold run per measurement: it needs --number 1 (got "
                       f"{number}) and --min-repeat-ms 0 (got {args.min_repeat_ms}); use --repeat for more "
                       "measurements")
    if args.rpc_key or args.rpc_tracker:
        if not (args.rpc_key and args.rpc_tracker):
            raise CLIError("remote tuning needs both --rpc-key and --rpc-tracker")
        host, port = _tracker_address(args.rpc_tracker)
        runner = autotvm.RPCRunner(args.rpc_key, host, port, number=number, repeat=args.repeat,
                                   min_repeat_ms=args.min_repeat_ms, timeout=args.timeout,
                                   enable_cpu_cache_flush=flush)
    else:
        runner = autotvm.LocalRunner(number=number, repeat=args.repeat, min_repeat_ms=args.min_repeat_ms,
                                     timeout=args.timeout, enable_cpu_cache_flush=flush)
    return autotvm.measure_option(builder=builder, runner=runner)


def make_tuner(name: str, task):
    from ..autotvm import tuner as T  # lazy: heavy compiler package (fast `kiln --help`)
    if name.startswith("xgb"):
        try:
            import xgboost  # noqa: F401
        except ImportError:
            raise CLIError(f"--tuner {name} needs xgboost, which kiln's autotvm extra installs (the CPU build): "
                           'pip install "kiln-compiler[autotvm]"; or use --tuner ga / random') from None
        kinds = {"xgb": ("itervar", "reg"), "xgb_knob": ("knob", "reg"), "xgb_itervar": ("itervar", "reg"),
                 "xgb_curve": ("curve", "reg"), "xgb_rank": ("itervar", "rank")}
        feature_type, loss_type = kinds[name]
        return T.XGBTuner(task, feature_type=feature_type, loss_type=loss_type)
    if name == "ga":
        return T.GATuner(task, pop_size=min(50, max(2, len(task.config_space))))
    if name == "random":
        return T.RandomTuner(task)
    return T.GridSearchTuner(task)


def _parse_ops(text: str | None):
    if not text:
        return None
    from ..relay import op as _op  # lazy: heavy compiler package (fast `kiln --help`)
    ops = []
    for name in (n.strip() for n in text.split(",") if n.strip()):
        try:
            ops.append(_op.get(name))
        except Exception:  # noqa: BLE001 - unknown op names raise registry errors
            raise CLIError(f"--ops: {name!r} is not a Relay operator (e.g. nn.conv2d, nn.dense)") from None
    return tuple(ops)


def _short_args(task) -> str:
    parts = []
    for a in task.args:
        if isinstance(a, (tuple, list)) and a and a[0] == "TENSOR":
            parts.append("x".join(str(d) for d in a[1]))
    return ", ".join(parts)


def unique_tasks(tasks: list) -> list:
    """``tasks`` without repeats of one workload (same template name and arguments): one tuning per workload,
    since the log is looked up by workload."""
    seen, out = set(), []
    for task in tasks:
        key = (task.name, repr(task.args), str(task.target))
        if key not in seen:
            seen.add(key)
            out.append(task)
    return out


def run(args) -> int:
    from .. import autotvm  # lazy: heavy compiler package (fast `kiln --help`)
    from ..rpc.launcher import exit_on_signals  # lazy: RPC tracker/server stack, only for `kiln tune` (fast `kiln --help`)
    exit_on_signals()  # SIGTERM/SIGHUP unwind like Ctrl-C: the tracker and servers tuning started are stopped
    if args.trials < 1:
        raise CLIError("--trials must be at least 1")
    if args.early_stopping is not None and args.early_stopping < 1:
        raise CLIError("--early-stopping must be at least 1")
    apply_threads(args.threads)   # the measuring processes inherit it
    target = parse_target(args.target)
    specs = parse_input_shapes(args.input_shapes)
    require_static_shapes(specs, 'tune')
    out_dir = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(out_dir):
        raise CLIError(f"-o {args.output!r}: the folder {out_dir!r} does not exist")
    if args.plot:
        check_plot_path(args.plot)
    model = load_model(args.model, args.model_format, specs, args.params)
    return tune_loaded(model, target, args)


def _hint_cache_flush(model, args) -> None:
    """Say when the model's weights exceed this machine's last-level cache and the kernels are timed hot: in the
    network each layer then reads its weights from memory, where configs chosen hot can lose (resnet18 on a 32 MB
    L3: its cold-tuned log ran 0.98x of the hot-tuned one, docs/architecture.md)."""
    if getattr(args, "enable_cpu_cache_flush", False) or args.rpc_key or args.rpc_tracker:
        return  # already cold, or measured on another machine whose cache this one does not know
    from ..relay.backend.te_compiler import weight_bytes
    from ..runtime.benchmark import last_level_cache_bytes
    total = weight_bytes(model.mod, model.params)  # bound params and frozen initializers: the module's constants
    llc = last_level_cache_bytes()
    if total > llc:
        info(f"the model's weights ({total / 2**20:.0f} MiB) exceed this CPU's last-level cache ({llc / 2**20:.0f} "
             "MiB): in the network each layer reads its weights from memory; --enable-cpu-cache-flush times the "
             "kernels that way")


def tune_loaded(model, target, args) -> int:
    """Extract, de-duplicate and tune the tasks of a loaded model as ``args`` (the ``kiln tune`` flags) say;
    returns the exit code (``kiln tune`` and ``kiln.driver.tvmc.tune``)."""
    from .. import autotvm  # lazy: heavy compiler package (fast `kiln --help`)
    ops = _parse_ops(args.ops)
    measure_option = make_measure_option(args)
    label = getattr(args, "model", None) or "the model"
    start = time.perf_counter()
    mod = convert_layout(model.mod, args.desired_layout)
    with transform.PassContext(opt_level=args.opt_level):
        found = autotvm.task.extract_from_program(mod["main"], target=target, params=model.params, ops=ops)
    tasks = unique_tasks(found)
    info(f"extracted {len(tasks)} tunable task(s) from {label} in {time.perf_counter() - start:.2f} s"
         + (f" ({len(found) - len(tasks)} duplicate(s) skipped)" if len(found) > len(tasks) else ""))
    _hint_cache_flush(model, args)
    if not tasks:
        print("nothing to tune: the model has no tunable operators"
              + (f" among {args.ops}" if args.ops else "") + "; no log written")
        return 0

    history = []
    if args.transfer_learning and os.path.isfile(args.output):
        history = list(autotvm.record.load_from_file(args.output))
    rows, curves = [], []
    tune_start = time.perf_counter()
    for i, task in enumerate(tasks):
        prefix = f"[Task {i + 1:2d}/{len(tasks):2d}] "
        n_trial = min(args.trials, len(task.config_space))
        tuner = make_tuner(args.tuner, task)
        if history:
            tuner.load_history(history)
        monitor = autotvm.callback.Monitor()
        t0 = time.perf_counter()
        tuner.tune(n_trial=n_trial, measure_option=measure_option, early_stopping=args.early_stopping,
                   callbacks=[autotvm.callback.progress_bar(n_trial, prefix=prefix),
                              autotvm.callback.log_to_file(args.output), monitor])
        trials = len(monitor.scores)
        best = tuner.best_flops
        rows.append((i + 1, task.name, _short_args(task), task.flop, trials, n_trial, best,
                     task.flop / best if best > 0 else float("nan"), time.perf_counter() - t0))
        curves.append((f"{i + 1}: {task.name}", np.maximum.accumulate(np.asarray(monitor.scores or [0.0]))))
    total = time.perf_counter() - tune_start
    print(_table(rows))
    failed = [r for r in rows if not r[6] > 0]
    info(f"tuned {len(tasks)} task(s) in {total:.1f} s; log appended to {args.output}")
    if failed:
        print(f"warning: no valid config was measured for task(s) {[r[0] for r in failed]}; "
              "rerun with -v to see the measurement errors")
    if args.plot:
        how = save_curves(curves, args.plot, title=f"AutoTVM tuning of {os.path.basename(label)}")
        info(f"saved the tuning curves to {args.plot} ({how})")
    return 0 if not failed or len(failed) < len(rows) else 1


def _table(rows) -> str:
    head = ("#", "task", "shapes", "GFLOP", "trials", "best GFLOPS", "best ms", "time s")
    body = [(str(r[0]), r[1], r[2], f"{r[3] / 1e9:.4f}", f"{r[4]}/{r[5]}", f"{r[6] / 1e9:.2f}",
             f"{r[7] * 1e3:.4f}" if np.isfinite(r[7]) else "n/a", f"{r[8]:.1f}") for r in rows]
    widths = [max(len(h), *(len(b[k]) for b in body)) for k, h in enumerate(head)]
    fmt = lambda cols: "  ".join(c.ljust(w) if k < 3 else c.rjust(w) for k, (c, w) in enumerate(zip(cols, widths)))  # noqa: E731
    return "\n".join([fmt(head), fmt(tuple("-" * w for w in widths))] + [fmt(b) for b in body])
