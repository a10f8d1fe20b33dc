"""Measuring built configs on RPC servers: the shared path of RPCRunner and LocalRunner.

One measurement (``run_through_rpc``) asks the tracker for a session with a server of the
runner's key, uploads the built library, loads it, fills the inputs on the device (the server's
``tvm.contrib.random.random_fill``), times the entry function with ``time_evaluator`` there, and
removes the file. Every failure becomes one failed MeasureResult, never an exception:

* the server's session timeout expired (a hanging kernel), or no server became free in time:
  RUN_TIMEOUT;
* the session worker crashed (a segfaulting kernel), the server died, or the server raised an
  error: RUNTIME_DEVICE;
* the outputs differ from the reference outputs (``ref_output``, a kiln extension): WRONG_ANSWER.

``RemoteMeasureExecutor`` runs measurements in threads (the work happens on the servers, the
client only waits on sockets), a batch of ``n_parallel`` at a time, each with a deadline.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
import threading
import time
import traceback

import numpy as np

from ...error import KilnError, RPCError
from .measure import MeasureErrorNo, MeasureResult
from ...rpc.measure import request_remote as rpc_request_remote, set_session_deadline, random_fill_args, remote_array

logger = logging.getLogger("autotvm")

# Extra seconds a client waits for a server beyond the session timeout the server enforces itself.
CLIENT_GRACE_S = 5.0


# -- sessions ---------------------------------------------------------------------------------
def request_remote(device_key: str, host: str | None = None, port: int | None = None, priority: int = 1,
                   timeout: float = 60, request_timeout: float | None = None):
    """A session with a server of ``device_key`` from the tracker at ``host:port`` (TVM's
    ``autotvm.measure.request_remote``).

    ``host``/``port`` default to ``$TVM_TRACKER_HOST``/``$TVM_TRACKER_PORT``; ``timeout`` is the
    session timeout (seconds) the server enforces. ``request_timeout`` (kiln extension) bounds the
    wait for a free server; by default it waits as long as it takes, as TVM does.
    """

    return rpc_request_remote(device_key, host, port, priority, timeout, request_timeout)


def _device_kind(target) -> str:
    kind = getattr(getattr(target, "kind", None), "name", None)
    return kind or str(target).split()[0]


def check_remote(target, device_key: str, host: str | None = None, port: int | None = None, priority: int = 100,
                 timeout: float = 10) -> bool:
    """Whether a server of ``device_key`` with a device for ``target`` answers within ``timeout``
    seconds (TVM's ``check_remote``)."""
    try:
        remote = request_remote(device_key, host, port, priority, timeout=timeout, request_timeout=timeout)
    except RPCError as err:
        logger.debug("check_remote(%s): %s", device_key, err)
        return False
    try:

        set_session_deadline(remote, timeout + CLIENT_GRACE_S)
        return bool(remote.device(_device_kind(target), 0).exist)
    except KilnError as err:
        logger.debug("check_remote(%s): %s", device_key, err)
        return False
    finally:
        remote.close()


class DefaultModuleLoader:
    """Opens a session and uploads/loads a built library (TVM's ``default_module_loader``).

    Called as ``with loader(remote_kwargs, build_result) as (remote, mod)``. ``pre_load_function
    (remote, build_result)`` runs before the upload (e.g. to program a device). On exit the file is
    removed and the session closed, so the server is free again while the runner cools down.
    """

    def __init__(self, pre_load_function=None):
        self.pre_load_function = pre_load_function

    @contextlib.contextmanager
    def __call__(self, remote_kwargs: dict, build_result):

        kwargs = dict(remote_kwargs)
        remote = request_remote(**kwargs)
        try:
            set_session_deadline(remote, float(kwargs.get("timeout") or 60) + CLIENT_GRACE_S)
            if self.pre_load_function is not None:
                self.pre_load_function(remote, build_result)
            name = os.path.basename(build_result.filename)
            remote.upload(build_result.filename, name)
            try:
                yield remote, remote.load_module(name)
            finally:
                if not remote.is_closed:
                    with contextlib.suppress(RPCError):
                        remote.remove(name)
        finally:
            remote.close()


def default_module_loader(pre_load_function=None) -> DefaultModuleLoader:
    """The module loader runners use unless given one (TVM's name)."""
    return DefaultModuleLoader(pre_load_function)


# -- one measurement --------------------------------------------------------------------------
def classify_error(exc: BaseException) -> MeasureErrorNo:
    """The MeasureErrorNo of a failed remote measurement."""
    text = str(exc)
    if isinstance(exc, (TimeoutError, concurrent.futures.TimeoutError)):
        return MeasureErrorNo.RUN_TIMEOUT
    if isinstance(exc, RPCError) and ("RPCSessionTimeoutError" in text or "became free within" in text
                                      or "timed out" in text):
        return MeasureErrorNo.RUN_TIMEOUT
    return MeasureErrorNo.RUNTIME_DEVICE


def _short(exc: BaseException) -> RuntimeError:
    return RuntimeError(f"{type(exc).__name__}: {str(exc)[:1024]}")


def run_through_rpc(measure_input, build_result, number: int, repeat: int, min_repeat_ms: int,
                    cooldown_interval: float, remote_kwargs: dict, ref_input=None, enable_cpu_cache_flush: bool = False,
                    module_loader=None, ref_output=None, not_before: float | None = None) -> MeasureResult:
    """Measure one built config on a server (TVM's ``run_through_rpc``); never raises.

    As in TVM the call sleeps ``cooldown_interval`` seconds after measuring, unless ``not_before``
    (a ``time.time()`` value, kiln extension) is given: then the timing runs start no earlier than
    ``not_before`` and nothing sleeps afterwards, so the runner can overlap the cool-down after one
    measurement with preparing the next (session, upload, inputs) without shortening it.
    """

    if isinstance(build_result, MeasureResult):
        return build_result
    tic = time.time()
    errno = MeasureErrorNo.NO_ERROR
    loader = module_loader if module_loader is not None else default_module_loader()
    try:
        with loader(remote_kwargs, build_result) as (remote, mod):
            dev = remote.device(_device_kind(measure_input.target), 0)
            f_preproc = "cache_flush_cpu_non_first_arg" if enable_cpu_cache_flush else ""
            time_f = mod.time_evaluator(mod.entry_name, dev, number=number, repeat=repeat,
                                        min_repeat_ms=min_repeat_ms, f_preproc=f_preproc)
            if ref_input is not None:
                args = [remote_array(x, dev) for x in ref_input]
            else:
                # the index tensor of scatter cannot hold random values (as in TVM)
                fill = "scatter" not in str(getattr(measure_input.task, "name", ""))
                args = random_fill_args(remote, build_result.arg_info, dev, fill=fill)
            if not_before is not None and not_before > time.time():
                time.sleep(not_before - time.time())
            costs = tuple(time_f(*args).results)
            if ref_output is not None:
                outs = [a.numpy() for a in args]
                if not all(np.allclose(x, y, rtol=1e-4, atol=1e-4)
                           for x, y in zip(outs, ref_output) if y is not None):
                    errno = MeasureErrorNo.WRONG_ANSWER
        if len(costs) > 2:  # drop the fastest and the slowest run to reduce variance
            costs = tuple(sorted(costs)[1:-1])
    except Exception as exc:  # noqa: BLE001 - every failure is one failed measurement
        errno = classify_error(exc)
        costs = (traceback.format_exc(), _short(exc))
    tstamp = time.time()
    if cooldown_interval and not_before is None:
        time.sleep(cooldown_interval)
    return MeasureResult(costs, int(errno), tstamp - tic + build_result.time_cost, tstamp)


# -- running many ------------------------------------------------------------------------------
class RemoteMeasureExecutor:
    """Runs measurement jobs in threads with a deadline per batch.

    A job still running at its deadline is reported as RUN_TIMEOUT and left to finish on its own
    (its socket waits are bounded, so it does); later batches get fresh threads. ``close()`` also
    calls the owner's clean-up hooks (LocalRunner stops its tracker and server there); the tuner
    calls it when tuning ends.
    """

    def __init__(self):
        self._pool = None
        self._width = 0
        self._lock = threading.Lock()
        self.on_close: list = []

    def _get_pool(self, width: int):
        with self._lock:
            if self._pool is None or self._width < width:
                if self._pool is not None:
                    self._pool.shutdown(wait=False)
                self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=width,
                                                                   thread_name_prefix="autotvm-rpc-measure")
                self._width = width
            return self._pool

    def map(self, fn, jobs: list, deadline_s: float) -> list:
        """``fn(*job)`` for each job, all at once; a result per job or a ``TimeoutError`` instance."""
        if not jobs:
            return []
        pool = self._get_pool(len(jobs))
        futures = [pool.submit(fn, *job) for job in jobs]
        done, late = concurrent.futures.wait(futures, timeout=deadline_s)
        out = []
        for fut in futures:
            if fut in late:
                out.append(TimeoutError(f"the measurement did not finish within {deadline_s:g} s"))
            else:
                try:
                    out.append(fut.result())
                except Exception as exc:  # noqa: BLE001 - run_through_rpc does not raise; a custom loader might
                    out.append(exc)
        if late:
            with self._lock:  # do not queue the next batch behind the stragglers
                if self._pool is pool:
                    self._pool.shutdown(wait=False)
                    self._pool = None
        return out

    def close(self) -> None:
        """Stop the threads (without waiting for stragglers) and run the clean-up hooks."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)
        for hook in list(self.on_close):
            try:
                hook()
            except Exception as err:  # noqa: BLE001 - clean-up must not mask the tuning result
                logger.warning("clean-up after measuring failed: %s", err)
