"""Builders and runners (TVM's ``autotvm.measure.measure_methods``).

LocalBuilder compiles configs in worker processes and exports each kernel library to a temporary
directory. RPCRunner measures the libraries on RPC servers registered with a tracker; LocalRunner is
an RPCRunner with its own tracker and server on loopback (as in TVM), so local and remote measurement
share one path (``remote.run_through_rpc``). A kernel that crashes or hangs kills only the server's
session worker: the measurement becomes one failed MeasureResult (RUNTIME_DEVICE / RUN_TIMEOUT).
"""
from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
import threading
import time
import traceback
import warnings
import weakref
from collections import namedtuple
from random import getrandbits

from ...error import KilnError, RPCError
from ..env import GLOBAL_SCOPE, reset_global_scope
from ..task.space import InstantiationError
from ..utils import get_const_tuple
from .executor import StatusKind, WorkerPool
from .measure import Builder, MeasureErrorNo, MeasureResult, Runner
from .remote import (CLIENT_GRACE_S, RemoteMeasureExecutor, check_remote, classify_error,  # noqa: F401
                     default_module_loader, request_remote, run_through_rpc)
from ... import build as kiln_build
from ...target.target import Target
from ...rpc.measure import count_servers, tracker_keys, LocalCluster

logger = logging.getLogger("autotvm")


class BuildResult(namedtuple("BuildResult", ("filename", "arg_info", "error", "time_cost"))):
    """A built config: the exported library path, ((shape, dtype) per argument), an error
    (traceback, exception) or None, and the seconds spent building."""


def _build_func_common(measure_input, **build_kwargs):
    """Instantiate the template with the config and compile it; returns (module, arg_info)."""

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


class RPCRunner(Runner):
    """Measure built configs on RPC servers of ``key`` registered with the tracker at ``host:port``.

    Each config is run ``repeat`` times on the server, each run averaging ``number`` calls
    (``number`` grows so a run lasts at least ``min_repeat_ms``); the fastest and slowest runs are
    dropped. ``timeout`` is the session timeout of one measurement (a hanging kernel: RUN_TIMEOUT).
    Up to ``n_parallel`` configs are measured at once, each on its own server (the tracker queues
    requests while all are busy); it defaults to the number of servers of ``key``.
    ``enable_cpu_cache_flush`` flushes the CPU caches before each run (use with ``number=1``).
    ``module_loader`` replaces how a session is opened and the library loaded (see
    ``default_module_loader``).
    """

    def __init__(self, key: str, host: str, port: int, priority: int = 1, timeout: float = 10,
                 n_parallel: int | None = None, number: int = 4, repeat: int = 3, min_repeat_ms: int = 0,
                 cooldown_interval: float = 0.1, enable_cpu_cache_flush: bool = False, module_loader=None):
        super().__init__(timeout, n_parallel)
        self._n_parallel_given = n_parallel
        self.key, self.host, self.port, self.priority = key, host, port, priority
        self.number, self.repeat, self.min_repeat_ms = number, repeat, min_repeat_ms
        self.cooldown_interval = cooldown_interval
        self.enable_cpu_cache_flush = enable_cpu_cache_flush
        self.module_loader = module_loader
        self._ref_input = None
        self.ref_output = None  # kiln extension: expected outputs (None entries skip an argument)
        self.executor = RemoteMeasureExecutor()
        self._next_start = 0.0  # no timing run starts before this time.time() (the cool-down)

    @property
    def ref_input(self):
        """Fixed inputs (numpy arrays) to measure with instead of random ones."""
        return self._ref_input

    @ref_input.setter
    def ref_input(self, val) -> None:
        if val is not None:
            warnings.warn("You are specifying fixed input for tuning the operator. Be sure your input is valid "
                          "for the operator, e.g. indices are in range.", stacklevel=2)
        self._ref_input = val

    def _tracker_addr(self) -> tuple:
        host = self.host or os.environ.get("TVM_TRACKER_HOST")
        port = self.port or os.environ.get("TVM_TRACKER_PORT")
        if not host or not port:
            raise RPCError(f"{type(self).__name__}: no tracker address: pass host and port, or set "
                           "TVM_TRACKER_HOST and TVM_TRACKER_PORT")
        return host, int(port)

    def set_task(self, task):
        """Check that a server of our key answers (a clear error otherwise) and size ``n_parallel``."""

        self.task = task
        host, port = self._tracker_addr()
        try:
            registered, free = count_servers(self.key, host, port)
        except RPCError as err:
            raise RPCError(f"{type(self).__name__}: cannot reach the RPC tracker at {host}:{port} ({err}); start "
                           f"one with `python -m kiln.exec.rpc_tracker --host={host} --port={port}`") from None
        if registered == 0:
            keys = tracker_keys(host, port)
            raise RPCError(
                f"{type(self).__name__}: the tracker at {host}:{port} has no server with key {self.key!r} "
                f"(keys it knows: {keys or 'none'}); start one with `python -m kiln.exec.rpc_server "
                f"--tracker={host}:{port} --key={self.key}` and check with `python -m kiln.exec.query_rpc_tracker "
                f"--host={host} --port={port}`")
        if not check_remote(task.target, self.key, host, port, timeout=max(10.0, float(self.timeout))):
            raise RPCError(
                f"{type(self).__name__}: cannot get a device from the servers of key {self.key!r} at the tracker "
                f"{host}:{port} ({registered} registered, {free} free): none answered in time or none has a "
                f"{task.target} device; check the queue with `python -m kiln.exec.query_rpc_tracker --host={host} "
                f"--port={port}` and make sure servers are free")
        logger.info("Get devices for measurement successfully!")
        if self._n_parallel_given is None:
            self.n_parallel = max(1, registered)
        return None

    def get_build_kwargs(self) -> dict:
        """Build arguments that depend on the device (none for CPUs)."""
        keys = set(getattr(self.task.target, "keys", ()) or ())
        if keys & {"cuda", "opencl", "rocm", "vulkan", "gpu"}:
            logger.warning("%s: kiln's RPC devices do not report GPU limits; configs are not pre-checked against "
                           "the remote GPU's thread and shared-memory limits", type(self).__name__)
        return {}

    def _remote_kwargs(self) -> dict:
        host, port = self._tracker_addr()
        return {"device_key": self.key, "host": host, "port": port, "priority": self.priority,
                "timeout": self.timeout,
                # the wait in the tracker's queue is part of the batch deadline, as in TVM
                "request_timeout": self.timeout * (self.n_parallel + 1)}

    def run(self, measure_inputs, build_results) -> list:
        """Measure each built config on a server; one MeasureResult per input, in order."""
        remote_kwargs = self._remote_kwargs()
        deadline = self.timeout * (self.n_parallel + 1) + self.cooldown_interval + 2 * CLIENT_GRACE_S
        # The cool-down between two batches of measurements overlaps with preparing the next batch
        # (session, upload, inputs) unless it is long compared with the session timeout, which the
        # server counts from the session's start: then each measurement sleeps after itself, as in TVM.
        overlap = self.cooldown_interval < 0.5 * self.timeout
        results: list = []
        pairs = list(zip(measure_inputs, build_results))
        for start in range(0, len(pairs), self.n_parallel):
            chunk = pairs[start:start + self.n_parallel]
            not_before = self._next_start if overlap else None
            jobs = [(inp, res, self.number, self.repeat, self.min_repeat_ms, self.cooldown_interval, remote_kwargs,
                     self._ref_input, self.enable_cpu_cache_flush, self.module_loader, self.ref_output, not_before)
                    for inp, res in chunk]
            measured_until = 0.0
            for (_, built), res in zip(chunk, self.executor.map(run_through_rpc, jobs, deadline)):
                if not isinstance(res, MeasureResult):
                    errno = MeasureErrorNo.RUN_TIMEOUT if isinstance(res, TimeoutError) else classify_error(res)
                    res = _error_result(errno, "".join(traceback.format_exception(res)), res, self.timeout)
                if not isinstance(built, MeasureResult):  # it ran on a server
                    measured_until = max(measured_until, min(res.timestamp, time.time()))
                results.append(res)
            if overlap and measured_until:
                self._next_start = measured_until + self.cooldown_interval
        return results

    def __del__(self):
        try:
            self.executor.close()
        except Exception:  # noqa: BLE001
            pass


# Local clusters still running; stopped at interpreter exit if the tuner did not stop them.
_LIVE_CLUSTERS: "weakref.WeakSet" = weakref.WeakSet()


@atexit.register
def _stop_live_clusters() -> None:
    for cluster in list(_LIVE_CLUSTERS):
        try:
            cluster.terminate()
        except Exception:  # noqa: BLE001
            pass


class LocalRunner(RPCRunner):
    """Measure on this machine, through a tracker and a server of its own (TVM's "fake local" mode).

    ``set_task`` starts a tracker and one server on loopback and checks the connection; configs are
    then measured one at a time exactly as RPCRunner measures them, so a kernel that crashes or
    hangs costs one failed measurement and the server carries on. The tracker and server stop when
    tuning ends (the tuner closes ``executor``), when the runner is collected, or at exit.
    """

    def __init__(self, timeout: float = 10, number: int = 4, repeat: int = 3, min_repeat_ms: int = 0,
                 cooldown_interval: float = 0.1, enable_cpu_cache_flush: bool = False, module_loader=None):
        super().__init__("", None, None, 0, timeout=timeout, n_parallel=1, number=number, repeat=repeat,
                         min_repeat_ms=min_repeat_ms, cooldown_interval=cooldown_interval,
                         enable_cpu_cache_flush=enable_cpu_cache_flush, module_loader=module_loader)
        self.tracker = None
        self.server = None
        self._cluster = None
        self._cluster_lock = threading.Lock()
        self.executor.on_close.append(_CloseCluster(weakref.ref(self)))

    def set_task(self, task):
        """Start a fresh tracker and server for this task; returns ``(server, tracker)`` as TVM does."""

        self.stop_cluster()
        cluster = LocalCluster(n_servers=1)
        _LIVE_CLUSTERS.add(cluster)
        with self._cluster_lock:
            self._cluster = cluster
        self.tracker, self.server = cluster.tracker, cluster.servers[0]
        self.key, self.host, self.port = cluster.key, cluster.host, cluster.port
        try:
            super().set_task(task)
        except BaseException:
            self.stop_cluster()
            raise
        return self.server, self.tracker

    def stop_cluster(self) -> None:
        """Stop the tracker and server started by ``set_task`` (if running)."""
        with self._cluster_lock:
            cluster, self._cluster = self._cluster, None
        self.tracker = self.server = None
        if cluster is not None:
            _LIVE_CLUSTERS.discard(cluster)
            cluster.terminate()

    def __del__(self):
        try:
            self.executor.close()
            self.stop_cluster()
        except Exception:  # noqa: BLE001
            pass


class _CloseCluster:
    """Clean-up hook of a LocalRunner's executor (holds the runner weakly, so it can be collected)."""

    def __init__(self, runner_ref):
        self.runner_ref = runner_ref

    def __call__(self) -> None:
        runner = self.runner_ref()
        if runner is not None:
            runner.stop_cluster()
