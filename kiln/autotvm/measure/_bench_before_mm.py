"""Local measurement: LocalBuilder compiles configs in worker processes, LocalRunner times them in a
separate process (TVM's ``autotvm.measure.measure_methods``, without RPC).

The builder exports each compiled kernel library to a temporary directory; the runner loads it in its
own worker process and times it with ``Module.time_evaluator``. A kernel that crashes or hangs kills only
that worker: the measurement becomes one failed MeasureResult (RUNTIME_DEVICE / RUN_TIMEOUT).
"""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from collections import namedtuple
from random import getrandbits

import numpy as np

from ...error import KilnError
from ..env import GLOBAL_SCOPE, reset_global_scope
from ..task.space import InstantiationError
from ..utils import get_const_tuple
from .executor import StatusKind, WorkerPool
from .measure import Builder, MeasureErrorNo, MeasureResult, Runner

logger = logging.getLogger("autotvm")


class BuildResult(namedtuple("BuildResult", ("filename", "arg_info", "error", "time_cost"))):
    """A built config: the exported library path, ((shape, dtype) per argument), an error
    (traceback, exception) or None, and the seconds spent building."""


def _build_func_common(measure_input, **build_kwargs):
    """Instantiate the template with the config and compile it; returns (module, arg_info)."""
    from ... import build as kiln_build
    from ...target.target import Target

    target, task, config = measure_input
    target = Target.canon_target(target)
    with target:
        s, args = task.instantiate(config)
        if not config.valid():
            raise InstantiationError(config.errors)
        kwargs = {}
        if task.target_host is not None:
            kwargs["target_host"] = task.target_host
        func = kiln_build(s, args, target=target, **kwargs)
    return func, tuple((get_const_tuple(x.shape), str(x.dtype)) for x in args)


def default_build_func(measure_input, tmp_dir: str, **build_kwargs) -> BuildResult:
    """Build one config and export it as a shared library in ``tmp_dir`` (runs in a builder worker)."""
    import traceback
    tic = time.time()
    try:
        filename = os.path.join(tmp_dir, f"tmp_func_{getrandbits(64):0x}.so")
        func, arg_info = _build_func_common(measure_input, **build_kwargs)
        func.export_library(filename)
    except Exception as exc:  # reported as a failed measurement, never raised
        return BuildResult(None, None, (traceback.format_exc(), exc), time.time() - tic)
    return BuildResult(filename, arg_info, None, time.time() - tic)


def _instantiate_only(measure_input, tmp_dir: str, **build_kwargs) -> BuildResult:
    """Build function that only instantiates the template (checks the config) without compiling."""
    import traceback
    tic = time.time()
    try:
        target, task, config = measure_input
        from ...target.target import Target
        with Target.canon_target(target):
            task.instantiate(config)
        if not config.valid():
            raise InstantiationError(config.errors)
    except Exception as exc:
        return BuildResult(None, None, (traceback.format_exc(), exc), time.time() - tic)
    return BuildResult(None, (), None, time.time() - tic)


def _build_job(build_func, measure_input, tmp_dir, build_kwargs, global_scope):
    GLOBAL_SCOPE.deep_copy(global_scope)
    return build_func(measure_input, tmp_dir, **build_kwargs)


def _error_result(error_no: int, tb: str, exc, cost: float) -> MeasureResult:
    return MeasureResult((tb, exc), int(error_no), cost, time.time())


class LocalBuilder(Builder):
    """Compile configs in ``n_parallel`` worker processes, each build limited to ``timeout`` seconds.

    ``build_func``: "default" (kiln.build + export_library), "instantiate" (only run the template, for
    runners that do not need a library) or a picklable function ``f(measure_input, tmp_dir, **kwargs)
    -> BuildResult``.
    """

    def __init__(self, timeout: float = 10, n_parallel: int | None = None, build_kwargs: dict | None = None,
                 build_func="default", do_fork: bool = False, runtime=None):
        super().__init__(timeout, n_parallel, build_kwargs)
        if isinstance(build_func, str):
            if build_func == "default":
                build_func = default_build_func
            elif build_func == "instantiate":
                build_func = _instantiate_only
            else:
                raise KilnError(f"invalid build_func {build_func!r}: expected 'default', 'instantiate' or a "
                                "function")
        self.build_func = build_func
        self.runtime = runtime
        self.executor = WorkerPool(self.n_parallel, timeout=timeout, initializer=reset_global_scope,
                                   initargs=(GLOBAL_SCOPE,))
        self.tmp_dir = tempfile.mkdtemp(prefix="kiln_autotvm_build_")

    def build(self, measure_inputs) -> list:
        shutil.rmtree(self.tmp_dir, ignore_errors=True)
        self.tmp_dir = tempfile.mkdtemp(prefix="kiln_autotvm_build_")
        jobs = [(self.build_func, inp, self.tmp_dir, self.build_kwargs, GLOBAL_SCOPE) for inp in measure_inputs]
        results = []
        for job in self.executor.map(_build_job, jobs, timeout=self.timeout):
            if job.status == StatusKind.COMPLETE:
                res = job.value
                if res.error is not None:
                    tb, exc = res.error
                    if isinstance(exc, InstantiationError) or "InstantiationError" in str(type(exc).__name__):
                        res = _error_result(MeasureErrorNo.INSTANTIATION_ERROR, tb, exc, res.time_cost)
                    else:
                        res = _error_result(MeasureErrorNo.COMPILE_HOST, tb, exc, res.time_cost)
                results.append(res)
            elif job.status == StatusKind.TIMEOUT:
                results.append(_error_result(MeasureErrorNo.BUILD_TIMEOUT, *job.error, self.timeout))
            elif job.status == StatusKind.CRASHED:
                results.append(_error_result(MeasureErrorNo.COMPILE_HOST, *job.error, self.timeout))
            else:
                results.append(_error_result(MeasureErrorNo.COMPILE_HOST, *job.error, 0.0))
        return results

    def __del__(self):
        try:
            self.executor.close()
            shutil.rmtree(self.tmp_dir, ignore_errors=True)
        except Exception:
            pass


def _random_inputs(arg_info, dev):
    from ...runtime import ndarray as nd
    rng = np.random.default_rng()
    arrays = []
    for shape, dtype in arg_info:
        if np.dtype(dtype).kind == "f":
            data = rng.uniform(-1, 1, size=shape).astype(dtype)
        elif np.dtype(dtype).kind in "iu":
            data = rng.integers(0, 8, size=shape).astype(dtype)
        else:
            data = np.zeros(shape, dtype=dtype)
        arrays.append(nd.array(data, device=dev))
    return arrays


def run_local(measure_input, build_result, number, repeat, min_repeat_ms, cooldown_interval,
              enable_cpu_cache_flush=False, ref_input=None, ref_output=None) -> MeasureResult:
    """Load a built library and time it (runs in the runner's worker process)."""
    import traceback
    if isinstance(build_result, MeasureResult):
        return build_result
    tic = time.time()
    errno = MeasureErrorNo.NO_ERROR
    try:
        from ...runtime import load_module
        from ...runtime.device import device
        target = measure_input.target
        kind = getattr(getattr(target, "kind", None), "name", None) or str(target).split()[0]
        dev = device(kind, 0)
        mod = load_module(build_result.filename)
        entry = getattr(mod, "entry_name", None) or "default_function"
        kwargs = {"number": number, "repeat": repeat, "min_repeat_ms": min_repeat_ms}
        if enable_cpu_cache_flush:
            kwargs["f_preproc"] = "cache_flush_cpu_non_first_arg"
        time_f = mod.time_evaluator(entry, dev, **kwargs)
        if ref_input is not None:
            from ...runtime import ndarray as nd
            args = [nd.array(x, device=dev) for x in ref_input]
        else:
            args = _random_inputs(build_result.arg_info, dev)
        costs = tuple(time_f(*args).results)
        if len(costs) > 2:  # drop the extremes to reduce variance
            costs = tuple(sorted(costs)[1:-1])
        if ref_output is not None:
            outs = [a.numpy() for a in args]
            if not all(np.allclose(x, y, rtol=1e-4, atol=1e-4) for x, y in zip(outs, ref_output) if y is not None):
                errno = MeasureErrorNo.WRONG_ANSWER
    except Exception as exc:
        costs = (traceback.format_exc(), RuntimeError(str(exc)[:1024]))
        errno = MeasureErrorNo.RUNTIME_DEVICE
    tstamp = time.time()
    if cooldown_interval:
        time.sleep(cooldown_interval)
    return MeasureResult(costs, int(errno), tstamp - tic + build_result.time_cost, tstamp)


class LocalRunner(Runner):
    """Time built configs on this machine, in a separate worker process.

    Each config is run ``repeat`` times, each run averaging ``number`` calls (``number`` is raised so a
    run lasts at least ``min_repeat_ms``); results drop the fastest and slowest run. ``timeout`` bounds
    one config's measurement: past it the worker is killed and the result is RUN_TIMEOUT; a crash of the
    worker is RUNTIME_DEVICE.
    """

    def __init__(self, timeout: float = 10, number: int = 4, repeat: int = 3, min_repeat_ms: int = 0,
                 cooldown_interval: float = 0.1, enable_cpu_cache_flush: bool = False, module_loader=None):
        super().__init__(timeout, n_parallel=1)
        self.number = number
        self.repeat = repeat
        self.min_repeat_ms = min_repeat_ms
        self.cooldown_interval = cooldown_interval
        self.enable_cpu_cache_flush = enable_cpu_cache_flush
        self.module_loader = module_loader
        self.ref_input = None
        self.ref_output = None
        self.executor = WorkerPool(1, timeout=timeout)

    def set_task(self, task):
        self.task = task
        return None

    def get_build_kwargs(self) -> dict:
        return {}

    def run(self, measure_inputs, build_results) -> list:
        results: list = []
        jobs, slots = [], []
        for i, (inp, res) in enumerate(zip(measure_inputs, build_results)):
            if isinstance(res, MeasureResult):
                results.append(res)
                continue
            results.append(None)
            slots.append(i)
            jobs.append((inp, res, self.number, self.repeat, self.min_repeat_ms, self.cooldown_interval,
                         self.enable_cpu_cache_flush, self.ref_input, self.ref_output))
        # a hanging config gets `timeout` seconds plus its cooldown
        outs = self.executor.map(run_local, jobs, timeout=self.timeout + self.cooldown_interval)
        for i, job in zip(slots, outs):
            if job.status == StatusKind.COMPLETE:
                results[i] = job.value
            elif job.status == StatusKind.TIMEOUT:
                results[i] = _error_result(MeasureErrorNo.RUN_TIMEOUT, *job.error, self.timeout)
            elif job.status == StatusKind.CRASHED:
                results[i] = _error_result(MeasureErrorNo.RUNTIME_DEVICE, *job.error, self.timeout)
            else:
                results[i] = _error_result(MeasureErrorNo.RUNTIME_DEVICE, *job.error, 0.0)
        return results

    def __del__(self):
        try:
            self.executor.close()
        except Exception:
            pass


class RPCRunner(Runner):
    """Measure on a remote device through an RPC tracker (needs kiln.rpc sessions)."""

    def __init__(self, key, host, port, priority=1, timeout=10, n_parallel=None, number=4, repeat=3,
                 min_repeat_ms=0, cooldown_interval=0.1, enable_cpu_cache_flush=False, module_loader=None):
        super().__init__(timeout, n_parallel)
        self.key, self.host, self.port, self.priority = key, host, port, priority
        self.number, self.repeat, self.min_repeat_ms = number, repeat, min_repeat_ms
        self.cooldown_interval = cooldown_interval
        self.enable_cpu_cache_flush = enable_cpu_cache_flush

    def run(self, measure_inputs, build_results) -> list:
        from ...error import OpNotImplemented
        raise OpNotImplemented("autotvm.RPCRunner: measuring through RPC is not implemented yet (kiln.rpc "
                               "sessions); use autotvm.LocalRunner")


def request_remote(device_key, host=None, port=None, priority=1, timeout=60):
    """Request a remote session from an RPC tracker (needs kiln.rpc)."""
    from ...error import OpNotImplemented
    raise OpNotImplemented("autotvm.measure.request_remote needs kiln.rpc sessions, not implemented yet")
