"""Tuning callbacks (TVM's ``autotvm.tuner.callback``): each is called as ``cb(tuner, inputs, results)``
after every measured batch."""
from __future__ import annotations

import logging
import sys
import time
import weakref

import numpy as np

from ...error import KilnError
from .. import record
from ..utils import format_si_prefix

logger = logging.getLogger("autotvm")


def log_to_file(file_out, protocol: str = "json"):
    """Append every measurement to ``file_out`` (a path or an open file) as log records."""
    if protocol not in ("json", "pickle"):
        raise KilnError(f"invalid log protocol {protocol!r}: expected 'json' or 'pickle'")

    def _callback(_, inputs, results):
        lines = "".join(record.encode(inp, res, protocol) + "\n" for inp, res in zip(inputs, results))
        if isinstance(file_out, str):
            with open(file_out, "a", encoding="utf-8") as f:
                f.write(lines)
        else:
            file_out.write(lines)
            if hasattr(file_out, "flush"):
                file_out.flush()

    _callback.file_out = file_out
    return _callback


def log_to_database(db):
    """Save every measurement into an ``autotvm.database`` Database."""

    def _callback(_, inputs, results):
        for inp, res in zip(inputs, results):
            db.save(inp, res, extend=True)

    return _callback


class Monitor:
    """Records the score (FLOPS, 0 on error) and timestamp of every trial."""

    def __init__(self):
        self.scores: list = []
        self.timestamps: list = []

    def __call__(self, tuner, inputs, results):
        for inp, res in zip(inputs, results):
            self.scores.append(inp.task.flop / np.mean(res.costs) if res.error_no == 0 else 0.0)
            self.timestamps.append(res.timestamp)

    def reset(self) -> None:
        self.scores, self.timestamps = [], []

    def trial_scores(self) -> np.ndarray:
        return np.array(self.scores)

    def trial_timestamps(self) -> np.ndarray:
        return np.array(self.timestamps)


class _ProgressState:
    def __init__(self, total: int):
        self.best_flops = 0.0
        self.cur_flops = 0.0
        self.ct = 0
        self.total = total
        self.done = False


def _progress_enabled() -> bool:
    # Only in non-debug mode: in debug mode every trial is logged instead.
    return not logger.isEnabledFor(logging.DEBUG)


def progress_bar(total: int, prefix: str = "", si_prefix: str = "G"):
    """Print ``<prefix> Current/Best: x/y GFLOPS | Progress: (done/total) | t s`` on one updating line."""
    format_si_prefix(0, si_prefix)
    ctx = _ProgressState(total)
    tic = time.time()
    out = sys.stdout

    def _write():
        out.write(f"\r{prefix} Current/Best: {format_si_prefix(ctx.cur_flops, si_prefix):7.2f}/"
                  f"{format_si_prefix(ctx.best_flops, si_prefix):7.2f} {si_prefix}FLOPS | "
                  f"Progress: ({ctx.ct}/{ctx.total}) | {time.time() - tic:.2f} s")
        out.flush()

    def _finish(state=ctx, stream=out):
        if not state.done and _progress_enabled():
            state.done = True
            try:
                stream.write(" Done.\n")
                stream.flush()
            except Exception:
                pass

    if _progress_enabled():
        _write()

    def _callback(tuner, inputs, results):
        ctx.ct += len(inputs)
        flops = 0.0
        for inp, res in zip(inputs, results):
            if res.error_no == 0:
                flops = inp.task.flop / np.mean(res.costs)
        if _progress_enabled():
            ctx.cur_flops = flops
            ctx.best_flops = tuner.best_flops
            _write()
            remaining = getattr(tuner, "ttl", None)
            if ctx.ct >= ctx.total or (remaining is not None and remaining <= 0):
                _finish()

    _callback.state = ctx
    _callback.finish = _finish
    weakref.finalize(_callback, _finish)
    return _callback
