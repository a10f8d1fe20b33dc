"""``kiln plot tune.log -o curve.png``: the tuning curves (best GFLOPS per task against trials) of an existing
AutoTVM log, drawn as ``kiln tune --plot`` draws them, with a one-line summary per task."""
from __future__ import annotations

import os

import numpy as np

from .common import CLIError, check_file, info
from .plot import check_plot_path, save_curves


def add_parser(sub) -> None:
    p = sub.add_parser("plot", help="plot the tuning curves of an AutoTVM log (best GFLOPS per task vs trials)",
                       description="Read a tuning log written by `kiln tune` (or TVM), group its records by task "
                       "and save one curve per task: the best GFLOPS found after each trial, in the order the "
                       "records were written. Uses matplotlib when installed, else a built-in PNG renderer.")
    p.add_argument("log", metavar="LOG", help="AutoTVM tuning log (JSON lines)")
    p.add_argument("-o", "--output", default=None, metavar="PNG",
                   help="the PNG to write (default: the log's name with .png)")
    p.set_defaults(handler=run)


def task_curves(path: str) -> list:
    """``[(label, best FLOPS after each trial, trials, errors)]``, one per task of the log, in first-seen order."""
    from ..topi import generic, x86  # noqa: F401 (registers FLOP-count templates)  # lazy: heavy compiler package
    from ..autotvm import record  # lazy: heavy compiler package (fast `kiln --help`)
    from ..autotvm.tuner.plot import tuning_curve  # lazy: heavy compiler package (fast `kiln --help`)
    by_task: dict = {}
    for inp, res in record.load_from_file(path):
        key = (inp.task.name, repr(inp.task.args), str(inp.target))
        by_task.setdefault(key, []).append((inp, res))
    curves = []
    for i, ((name, _, _), pairs) in enumerate(by_task.items()):
        curve = tuning_curve(pairs)
        errors = sum(1 for _, r in pairs if r.error_no != 0)
        shapes = "x".join(str(d) for d in next((a[1] for a in pairs[0][0].task.args
                                                if isinstance(a, (tuple, list)) and a and a[0] == "TENSOR"), ()))
        curves.append((f"{i + 1}: {name} {shapes}".strip(), curve, len(pairs), errors))
    return curves


def run(args) -> int:
    check_file(args.log, "tuning log")
    output = args.output or os.path.splitext(args.log)[0] + ".png"
    check_plot_path(output)
    curves = task_curves(args.log)
    if not curves:
        raise CLIError(f"{args.log} holds no tuning records to plot")
    for label, curve, n, errors in curves:
        best = float(np.max(curve)) / 1e9 if len(curve) else 0.0
        print(f"task {label}: {n} trial(s), best {best:.2f} GFLOPS" + (f", {errors} failed" if errors else ""))
    how = save_curves([(label, curve) for label, curve, _, _ in curves], output,
                      title=f"AutoTVM tuning curves of {os.path.basename(args.log)}")
    info(f"saved the tuning curves of {len(curves)} task(s) to {output} ({how})")
    return 0
