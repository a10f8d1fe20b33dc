"""The tuning curve: best throughput found after each trial, as data or as a PNG plot."""
from __future__ import annotations

import os

import numpy as np

from ...error import KilnError
from ..utils import format_si_prefix
from ..task.task import create
from .. import record
from .callback import Monitor


def _scores_from_records(records, flop) -> list:
    flops_cache: dict = {}
    scores = []
    for inp, res in records:
        if res.error_no != 0:
            scores.append(0.0)
            continue
        f = flop
        if f is None:
            key = inp.task.workload
            if key not in flops_cache:
                try:
                    flops_cache[key] = create(inp.task.name, inp.task.args, inp.target).flop
                except Exception as exc:
                    raise KilnError(f"cannot compute the FLOP count of task {inp.task.name!r} to plot its "
                                    f"tuning curve ({exc}); pass flop=...") from exc
            f = flops_cache[key]
        scores.append(f / np.mean(res.costs))
    return scores


def tuning_curve(source, flop: float | None = None) -> np.ndarray:
    """Best FLOPS after each trial. ``source``: a log file path, (input, result) pairs, a
    ``callback.Monitor``, or a sequence of per-trial FLOPS."""

    if isinstance(source, Monitor):
        scores = list(source.scores)
    elif isinstance(source, (str, os.PathLike)):
        scores = _scores_from_records(list(record.load_from_file(source)), flop)
    else:
        items = list(source)
        if items and isinstance(items[0], tuple) and len(items[0]) == 2:
            scores = _scores_from_records(items, flop)
        else:
            scores = [float(x) for x in items]
    return np.maximum.accumulate(np.asarray(scores, dtype=np.float64)) if scores else np.zeros(0)


def plot_tuning_curve(source, filename, flop: float | None = None, title: str | None = None,
                      si_prefix: str = "G") -> str:
    """Save the tuning curve (best FLOPS over trials) as a PNG; needs matplotlib."""
    curve = tuning_curve(source, flop)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise KilnError("plot_tuning_curve needs matplotlib, which is not installed: pip install matplotlib "
                        "(tuning_curve() gives the data without it)") from err
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(np.arange(1, len(curve) + 1), [format_si_prefix(v, si_prefix) for v in curve])
    ax.set_xlabel("trials")
    ax.set_ylabel(f"best {si_prefix}FLOPS")
    ax.set_title(title or "AutoTVM tuning curve")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.fspath(filename), format="png")
    plt.close(fig)
    return os.fspath(filename)
