"""Dispatch contexts: who answers "which config for this workload on this target?"

Templates (and TOPI's tunable computes/schedules) call ``DispatchContext.current.query(target,
workload)``. Contexts nest as a stack; one that has no answer defers to the context below it. The bottom
is a :class:`FallbackContext`, which hands out :class:`FallbackConfigEntity` objects.

Untuned workloads never flood the log: each is logged at DEBUG; the first one in a process also gets a
single WARNING line, and :class:`ApplyHistoryBest` (or :func:`fallback_summary`) prints one summary line
on exit saying how many workloads fell back.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ...error import KilnError
from ..env import GLOBAL_SCOPE
from .space import FallbackConfigEntity

logger = logging.getLogger("autotvm")


def _target_keys(target) -> list:
    keys = getattr(target, "keys", None)
    return list(keys) if keys else []


def _target_model(target) -> str:
    return getattr(target, "model", "unknown") or "unknown"


class DispatchContext:
    """Base class of dispatch contexts; ``DispatchContext.current`` is the innermost active one."""

    current: "DispatchContext | None" = None
    # Messages already logged at WARNING level, so each is printed once per process.
    warning_messages: set = set()

    def __init__(self):
        self._old_ctx = DispatchContext.current

    def query(self, target, workload):
        """The config for ``workload`` on ``target``, asking the outer context when this one has none."""
        ret = self._query_inside(target, workload)
        if ret is None:
            ret = self._old_ctx.query(target, workload)
        return ret

    def update(self, target, workload, cfg) -> None:
        """Make this context answer ``cfg`` for ``workload`` on ``target``."""
        raise NotImplementedError(f"{type(self).__name__} does not support update()")

    def _query_inside(self, target, workload):
        raise NotImplementedError

    def __enter__(self):
        self._old_ctx = DispatchContext.current
        DispatchContext.current = self
        return self

    def __exit__(self, ptype, value, trace):
        DispatchContext.current = self._old_ctx


class ApplyConfig(DispatchContext):
    """Answer every query with one config (used to instantiate a template with a given config, and with
    a ConfigSpace to collect the space)."""

    def __init__(self, config):
        super().__init__()
        self._config = config
        self.workload = None

    def _query_inside(self, target, workload):
        self.workload = workload
        return self._config

    def update(self, target, workload, cfg) -> None:
        self._config = cfg


class ApplyFixedConfig(DispatchContext):
    """Use the first config of the matching task for every workload; workloads named in
    ``schedule_names`` are marked cheapest (cost 1e-6) so strategy selection prefers them."""

    def __init__(self, tasks, schedule_names):
        super().__init__()
        if isinstance(schedule_names, str):
            self._schedule_names = [schedule_names]
        elif isinstance(schedule_names, (list, tuple)):
            self._schedule_names = list(schedule_names)
        else:
            raise KilnError(f"apply_fixed_config: schedule_names must be a str or a list of str, "
                            f"got {type(schedule_names).__name__}")
        self._tasks = list(tasks)
        self.workload = None

    def _query_inside(self, target, workload):
        self.workload = workload
        config = None
        for task in self._tasks:
            if workload is not None and task.name == workload[0]:
                config = task.config_space.get(0)
                break
        if config is None:
            raise KilnError(f"apply_fixed_config: workload {workload} is not one of the given tasks "
                            f"{[t.name for t in self._tasks]}")
        config.cost = 1e-6 if workload[0] in self._schedule_names else 100000
        return config

    def update(self, target, workload, cfg) -> None:
        raise NotImplementedError("ApplyFixedConfig does not support update()")


class ApplyHistoryBest(DispatchContext):
    """Answer with the best (lowest mean cost, error-free) record per workload, matched first by the
    target's ``-model`` and then by each of its keys (e.g. "cpu").

    ``records``: a log file path, a list of paths, or an iterable of (MeasureInput, MeasureResult).
    """

    def __init__(self, records=None):
        super().__init__()
        self.best_by_targetkey: dict = {}
        self.best_by_model: dict = {}
        self._best_user_defined: dict = {}
        self._queried: set = set()
        if records is not None:
            self.load(records)

    def load(self, records) -> None:
        """Add records: a log path, a list of paths, an iterable of (MeasureInput, MeasureResult) pairs
        (read lazily, so a generator over a huge log is loaded as it goes), or an autotvm Database.
        ``load`` may be called repeatedly to add records in batches; the best per workload wins."""
        from ..database import Database
        from ..record import load_from_file

        if isinstance(records, (str, Path)):
            records = [records]
        elif isinstance(records, Database):
            records = records.filter(lambda inp, res: True)
        elif isinstance(records, tuple) and len(records) == 2 and hasattr(records[1], "error_no"):
            records = [records]  # one (input, result) pair
        if not isinstance(records, Iterable):
            raise KilnError(f"apply_history_best: expected a log path, a list of paths, (input, result) "
                            f"pairs or an autotvm Database, got {type(records).__name__}")
        counter = 0
        for rec in records:
            pairs = load_from_file(str(rec)) if isinstance(rec, (str, Path)) else [rec]
            for pair in pairs:
                if pair is None:
                    continue
                if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                    raise KilnError(f"apply_history_best: a record must be a (MeasureInput, MeasureResult) "
                                    f"pair, got {type(pair).__name__}")
                counter += 1
                self._add(*pair)
        logger.debug("Finish loading %d records", counter)

    def _add(self, inp, res) -> None:
        if res.error_no != 0:
            return
        cost = np.mean(res.costs)
        workload = inp.task.workload
        for k in _target_keys(inp.target):
            key = (k, workload)
            old = self.best_by_targetkey.get(key)
            if old is None or np.mean(old[1].costs) > cost:
                self.best_by_targetkey[key] = (inp, res)
        model = _target_model(inp.target)
        key = (model, workload)
        old = self.best_by_model.get(key)
        if old is None:
            if model != "unknown":
                self.best_by_model[key] = (inp, res)
        elif np.mean(old[1].costs) > cost:
            self.best_by_model[key] = (inp, res)

    def _query_inside(self, target, workload):
        if target is None:
            raise KilnError("apply_history_best needs a target to look up tuned configs: wrap the call in "
                            "`with kiln.target.Target('llvm'):` (or pass target= to the build)")
        if workload is not None:
            self._queried.add(workload)
        key = (_target_model(target), workload)
        if key in self._best_user_defined:
            return self._best_user_defined[key]
        if key in self.best_by_model:
            return self.best_by_model[key][0].config
        for k in _target_keys(target):
            key = (k, workload)
            if key in self._best_user_defined:
                return self._best_user_defined[key]
            if key in self.best_by_targetkey:
                return self.best_by_targetkey[key][0].config
        return None

    def update(self, target, workload, cfg) -> None:
        cfg.cost = 0  # a user-provided config is assumed best
        self._best_user_defined[(_target_model(target), workload)] = cfg
        for k in _target_keys(target):
            self._best_user_defined[(k, workload)] = cfg

    def __enter__(self):
        self._queried = set()
        self._summary = fallback_summary("apply_history_best", queried=self._queried)
        self._summary.__enter__()
        return super().__enter__()

    def __exit__(self, ptype, value, trace):
        super().__exit__(ptype, value, trace)
        self._summary.__exit__(ptype, value, trace)


class FallbackContext(DispatchContext):
    """The bottom of the stack: a :class:`FallbackConfigEntity` per (target, workload), cached so a
    schedule's fallback choices (``fallback_split``) persist."""

    _warned_once = False

    def __init__(self):
        super().__init__()
        self.memory: dict = {}
        self.silent = False
        self._report_stack: list = []

    def _query_inside(self, target, workload):
        key = (str(target), workload)
        if key in self.memory:
            return self.memory[key]
        if not (self.silent or GLOBAL_SCOPE.silent) and workload is not None:
            logger.debug("Cannot find config for target=%s, workload=%s. A fallback configuration is used.",
                         target, workload)
            if self._report_stack:
                self._report_stack[-1].append(workload)
            elif not FallbackContext._warned_once:
                FallbackContext._warned_once = True
                logger.warning("One or more operators have not been tuned (first: target=%s, workload=%s). "
                               "Fallback configurations are used, which may be slow; further untuned "
                               "workloads are logged at DEBUG level only.", target,
                               workload[0] if isinstance(workload, tuple) and workload else workload)
        cfg = FallbackConfigEntity()
        self.memory[key] = cfg
        return cfg

    def clear_cache(self, target, workload) -> None:
        """Forget the cached fallback config of one workload."""
        self.memory.pop((str(target), workload), None)

    def update(self, target, workload, cfg) -> None:
        self.memory[(str(target), workload)] = cfg


DispatchContext.current = FallbackContext()


def _root_fallback() -> FallbackContext:
    ctx = DispatchContext.current
    while not isinstance(ctx, FallbackContext):
        ctx = ctx._old_ctx
    return ctx


@contextmanager
def fallback_summary(what: str = "build", queried=None):
    """Collect untuned workloads hit inside the block and log ONE warning line about them at the end
    (relay.build wraps its strategy selection in this)."""
    root = _root_fallback()
    misses: list = []
    root._report_stack.append(misses)
    try:
        yield misses
    finally:
        root._report_stack.pop()
        if misses and not GLOBAL_SCOPE.silent:
            names = sorted({str(w[0]) if isinstance(w, tuple) and w else str(w) for w in misses})
            of = f" of {len(queried)}" if queried else ""
            logger.warning("%s: %d%s workload(s) have no tuned config (%s); fallback configurations were used, "
                           "which may be slow. Log level DEBUG on 'autotvm' lists them.", what, len(misses), of,
                           ", ".join(names[:5]) + (", ..." if len(names) > 5 else ""))


def clear_fallback_cache(target, workload) -> None:
    """Forget the fallback config of a workload in the root FallbackContext."""
    _root_fallback().clear_cache(target, workload)


def apply_fixed_config(tasks, schedule_names) -> ApplyFixedConfig:
    """TVM's ``autotvm.apply_fixed_config``."""
    return ApplyFixedConfig(tasks, schedule_names)
