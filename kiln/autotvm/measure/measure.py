"""Measurement interfaces (TVM's ``autotvm.measure.measure``): inputs, results, error codes, the
Builder/Runner base classes, ``measure_option`` and the batch measuring function tuners call."""
from __future__ import annotations

import enum
import logging
import multiprocessing
from collections import namedtuple

from ...error import KilnError

logger = logging.getLogger("autotvm")


class MeasureInput(namedtuple("MeasureInput", ["target", "task", "config"])):
    """What to measure: a target, a task and one config of its space."""


class MeasureResult(namedtuple("MeasureResult", ["costs", "error_no", "all_cost", "timestamp"])):
    """A measurement: ``costs`` (seconds per run; on error a (traceback, exception) pair), ``error_no``
    (a :class:`MeasureErrorNo`), ``all_cost`` (seconds spent building and running) and ``timestamp``."""

    def __repr__(self) -> str:
        try:
            err = f"MeasureErrorNo.{MeasureErrorNo(self.error_no).name}"
        except ValueError:
            err = str(self.error_no)
        return (f"{type(self).__name__}(costs={self.costs!r}, error_no={err}, all_cost={self.all_cost}, "
                f"timestamp={self.timestamp!r})")


class MeasureErrorNo(enum.IntEnum):
    """Error codes of a measurement, as in TVM."""

    NO_ERROR = 0
    INSTANTIATION_ERROR = 1
    COMPILE_HOST = 2
    COMPILE_DEVICE = 3
    RUNTIME_DEVICE = 4
    WRONG_ANSWER = 5
    BUILD_TIMEOUT = 6
    RUN_TIMEOUT = 7
    UNKNOWN_ERROR = 8


class Builder:
    """Compiles a batch of MeasureInputs into runnable artifacts (BuildResults or failed MeasureResults)."""

    def __init__(self, timeout: float = 10, n_parallel: int | None = None, build_kwargs: dict | None = None):
        self.timeout = timeout
        self.n_parallel = n_parallel or multiprocessing.cpu_count()
        self.user_build_kwargs = dict(build_kwargs) if build_kwargs is not None else {}
        self.runner_build_kwargs = None
        self.build_kwargs: dict = {}
        self.task = None

    def set_task(self, task, build_kwargs: dict | None = None) -> None:
        """Prepare for a task; ``build_kwargs`` come from the runner (device limits...)."""
        self.task = task
        self.build_kwargs = dict(build_kwargs) if build_kwargs is not None else {}
        clash = [k for k in self.user_build_kwargs if k in self.build_kwargs]
        if clash:
            logger.warning("user build_kwargs %s override the runner's", clash)
        self.build_kwargs.update(self.user_build_kwargs)

    def build(self, measure_inputs) -> list:
        raise NotImplementedError(f"{type(self).__name__}.build")


class Runner:
    """Runs built artifacts and times them, returning one MeasureResult per input."""

    def __init__(self, timeout: float = 5, n_parallel: int | None = None):
        self.timeout = timeout
        self.n_parallel = n_parallel or multiprocessing.cpu_count()
        self.task = None

    def set_task(self, task):
        """Prepare for a task; may return objects that must stay alive while measuring."""
        self.task = task
        return None

    def get_build_kwargs(self) -> dict:
        """Extra build arguments derived from the device (e.g. limits); none by default."""
        return {}

    def run(self, measure_inputs, build_results) -> list:
        raise NotImplementedError(f"{type(self).__name__}.run")


def measure_option(builder, runner) -> dict:
    """Measurement options for ``Tuner.tune``: a Builder (or "local") and a Runner (or "local")."""
    from .measure_methods import LocalBuilder, LocalRunner

    if isinstance(builder, str):
        if builder != "local":
            raise KilnError(f"invalid builder {builder!r}: expected 'local' or a Builder object")
        builder = LocalBuilder()
    if isinstance(runner, str):
        if runner != "local":
            raise KilnError(f"invalid runner {runner!r}: expected 'local' or a Runner object such as "
                            "autotvm.RPCRunner(key, host, port)")
        runner = LocalRunner()
    if not isinstance(builder, Builder):
        raise KilnError(f"measure_option: builder must be a Builder, got {type(builder).__name__}")
    if not isinstance(runner, Runner):
        raise KilnError(f"measure_option: runner must be a Runner, got {type(runner).__name__}")
    return {"builder": builder, "runner": runner}


def create_measure_batch(task, option):
    """A function measuring a list of MeasureInputs with the option's builder and runner.

    The configs are built with ``GLOBAL_SCOPE.in_tuning`` set, as ``Tuner.tune`` builds them, whoever
    calls the function: templates that measure a kernel alone the way the network runs it (the x86 conv
    and Winograd templates take their data and kernel already packed / transformed while tuning) then
    give the same timings when a script re-measures configs outside a tuner (e.g. to verify the best
    ones), instead of timings that include packing the weights on every call."""
    from ..env import GLOBAL_SCOPE
    builder, runner = option["builder"], option["runner"]
    attach_objects = runner.set_task(task)
    builder.set_task(task, runner.get_build_kwargs())

    def measure_batch(measure_inputs):
        old = GLOBAL_SCOPE.in_tuning
        GLOBAL_SCOPE.in_tuning = True
        try:
            build_results = builder.build(measure_inputs)
        finally:
            GLOBAL_SCOPE.in_tuning = old
        return runner.run(measure_inputs, build_results)

    measure_batch.n_parallel = builder.n_parallel
    measure_batch.attach_objects = attach_objects
    measure_batch.builder = builder
    measure_batch.runner = runner
    return measure_batch
