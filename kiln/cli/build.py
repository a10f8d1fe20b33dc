"""Compile a loaded model with ``relay.build`` (optionally under tuning records) — shared by compile and bench."""
from __future__ import annotations

import contextlib
import time

from .common import CLIError, LoadedModel, check_file


def tuning_context(records: str | None):
    """``autotvm.apply_history_best(records)`` (or a no-op) and the number of tuned workloads it holds."""
    if not records:
        return contextlib.nullcontext(), 0
    check_file(records, "tuning log")
    from .. import autotvm
    ctx = autotvm.apply_history_best(records)
    n = len(getattr(ctx, "best_by_targetkey", {})) or len(getattr(ctx, "best_by_model", {}))
    if n == 0:
        raise CLIError(f"tuning log {records!r} holds no usable (error-free) records")
    return ctx, n


def build_model(model: LoadedModel, target, opt_level: int = 3, records: str | None = None):
    """``relay.build`` the model; returns (factory module, seconds, tuned workloads in the log)."""
    from .. import relay, transform
    ctx, n_tuned = tuning_context(records)
    start = time.perf_counter()
    with ctx, transform.PassContext(opt_level=opt_level), target:
        lib = relay.build(model.mod, target=target, params=model.params)
    return lib, time.perf_counter() - start, n_tuned


def describe_inputs(inputs: list) -> str:
    return ", ".join(f"{n}{list(s)} {d}" for n, s, d in inputs) or "(none)"
