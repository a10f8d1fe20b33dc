"""A pool of worker processes where each job has a deadline (TVM's PopenPoolExecutor, in spirit).

Jobs run in separate processes started with the "spawn" method (so every payload must be picklable, and
nothing inherited from the parent, such as xgboost's threads, can deadlock a worker). A job that raises
returns its traceback; a job that runs past its deadline gets its worker killed and reports TIMEOUT; a
job whose worker dies (a segfaulting kernel) reports CRASHED. Either way the pool replaces the worker
and the caller keeps going.
"""
from __future__ import annotations

import contextlib
import enum
import multiprocessing
import multiprocessing.connection
import os
import pickle
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ...error import KilnError


class StatusKind(enum.IntEnum):
    COMPLETE = 0
    EXCEPTION = 1
    TIMEOUT = 2
    CRASHED = 3


@dataclass
class JobResult:
    """The outcome of one job: ``value`` when COMPLETE, else ``error`` (traceback text, exception)."""

    status: StatusKind
    value: Any = None
    error: tuple | None = None


class WorkerCrashedError(KilnError, ChildProcessError):
    """A worker process died while running a job (e.g. the measured kernel crashed)."""


class JobTimeoutError(KilnError, TimeoutError):
    """A job ran past its deadline; its worker was killed."""


def _worker_main(conn, initializer, initargs) -> None:
    try:
        if initializer is not None:
            initializer(*initargs)
    except BaseException:  # report a broken initializer instead of hanging the parent
        conn.send(("init_error", traceback.format_exc()))
        return
    conn.send(("ready", os.getpid()))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        fn, args, kwargs = msg
        try:
            out = ("ok", fn(*args, **kwargs))
        except BaseException as exc:  # the job's own failure, reported to the parent
            out = ("error", (traceback.format_exc(), exc))
        try:
            conn.send(out)
        except Exception:  # an unpicklable result or exception
            if out[0] == "ok":
                conn.send(("error", (traceback.format_exc(), KilnError("job result is not picklable"))))
            else:
                conn.send(("error", (out[1][0], KilnError(f"{type(out[1][1]).__name__}: {out[1][1]}"))))


@contextlib.contextmanager
def _without_main_reimport():
    """Start spawned workers without re-running the user's ``__main__`` script.

    multiprocessing's "spawn" re-imports the parent's main module in the child; a tuning script
    written like TVM's tutorials (no ``if __name__ == "__main__":`` guard) would then start tuning
    again in every worker. Nothing a worker receives needs the user's main module: task templates
    travel by value (cloudpickle) or are restored by importing their defining module.
    """
    import multiprocessing.spawn as mp_spawn
    original = mp_spawn.get_preparation_data

    def preparation_data(name):
        data = original(name)
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
        return data

    mp_spawn.get_preparation_data = preparation_data
    try:
        yield
    finally:
        mp_spawn.get_preparation_data = original


class _Worker:
    def __init__(self, ctx, initializer, initargs, startup_timeout: float):
        parent, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=_worker_main, args=(child, initializer, initargs), daemon=True)
        with _without_main_reimport():
            self.proc.start()
        child.close()
        self.conn = parent
        self.ready = False
        self.startup_timeout = startup_timeout
        self.started = time.time()

    def wait_ready(self) -> None:
        if self.ready:
            return
        if not self.conn.poll(self.startup_timeout):
            self.kill()
            raise KilnError(f"AutoTVM worker process did not start within {self.startup_timeout} s")
        try:
            kind, info = self.conn.recv()
        except EOFError:
            self.kill()
            raise KilnError("AutoTVM worker process exited during start-up") from None
        if kind != "ready":
            self.kill()
            raise KilnError(f"AutoTVM worker initializer failed:\n{info}")
        self.ready = True

    def kill(self) -> None:
        try:
            if self.proc.is_alive():
                self.proc.kill()
            self.proc.join(timeout=5)
        except Exception:
            pass
        try:
            self.conn.close()
        except Exception:
            pass

    def close(self) -> None:
        try:
            self.conn.send(None)
            self.proc.join(timeout=1)
        except Exception:
            pass
        self.kill()


class WorkerPool:
    """``n_workers`` persistent spawned processes running jobs with a per-job ``timeout`` (seconds)."""

    def __init__(self, n_workers: int = 1, timeout: float | None = None, initializer: Callable | None = None,
                 initargs: Sequence = (), start_method: str | None = None, startup_timeout: float = 120.0):
        self.n_workers = max(1, int(n_workers))
        self.timeout = timeout
        self.initializer = initializer
        self.initargs = tuple(initargs)
        self.start_method = start_method or os.environ.get("KILN_AUTOTVM_START_METHOD", "spawn")
        self._ctx = multiprocessing.get_context(self.start_method)
        self.startup_timeout = startup_timeout
        self._workers: list = []

    def _new_worker(self) -> _Worker:
        return _Worker(self._ctx, self.initializer, self.initargs, self.startup_timeout)

    def _ensure_workers(self, n: int) -> None:
        self._workers = [w for w in self._workers if w.proc.is_alive()]
        while len(self._workers) < n:
            self._workers.append(self._new_worker())
        for w in self._workers:
            w.wait_ready()

    def map(self, fn: Callable, arg_list: Sequence[tuple], timeout: float | None = None) -> list:
        """Run ``fn(*args)`` for each args tuple; returns a JobResult per job, in order."""
        timeout = self.timeout if timeout is None else timeout
        jobs = list(enumerate(arg_list))
        results: list = [None] * len(jobs)
        if not jobs:
            return results
        self._ensure_workers(min(self.n_workers, len(jobs)))
        idle = list(self._workers)
        busy: dict = {}  # conn -> (worker, job index, deadline)
        while jobs or busy:
            while jobs and idle:
                worker = idle.pop()
                idx, args = jobs.pop(0)
                try:
                    worker.conn.send((fn, tuple(args), {}))
                except (pickle.PicklingError, TypeError, AttributeError) as exc:
                    results[idx] = JobResult(StatusKind.EXCEPTION, error=(traceback.format_exc(), KilnError(
                        f"job payload is not picklable: {exc}")))
                    idle.append(worker)
                    continue
                except (BrokenPipeError, OSError):
                    worker.kill()
                    jobs.insert(0, (idx, args))
                    idle.append(self._replace(worker))
                    continue
                deadline = time.time() + timeout if timeout else None
                busy[worker.conn] = (worker, idx, deadline)
            if not busy:
                continue
            now = time.time()
            deadlines = [d for (_, _, d) in busy.values() if d is not None]
            wait_for = max(0.0, min(deadlines) - now) if deadlines else None
            ready = multiprocessing.connection.wait(list(busy), timeout=wait_for)
            for conn in ready:
                worker, idx, _ = busy.pop(conn)
                try:
                    kind, payload = conn.recv()
                except (EOFError, OSError):
                    worker.proc.join(timeout=2)
                    code = worker.proc.exitcode
                    worker.kill()
                    how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
                    results[idx] = JobResult(StatusKind.CRASHED, error=(
                        "", WorkerCrashedError(f"worker process died while running the job ({how})")))
                    idle.append(self._replace(worker))
                    continue
                except Exception as exc:  # the result could not be unpickled here
                    results[idx] = JobResult(StatusKind.EXCEPTION, error=(traceback.format_exc(), exc))
                    idle.append(worker)
                    continue
                if kind == "ok":
                    results[idx] = JobResult(StatusKind.COMPLETE, value=payload)
                else:
                    results[idx] = JobResult(StatusKind.EXCEPTION, error=payload)
                idle.append(worker)
            now = time.time()
            for conn in list(busy):
                worker, idx, deadline = busy[conn]
                if deadline is not None and now >= deadline and conn not in ready:
                    busy.pop(conn)
                    worker.kill()
                    results[idx] = JobResult(StatusKind.TIMEOUT, error=(
                        "", JobTimeoutError(f"job did not finish within {timeout} s; its worker was killed")))
                    idle.append(self._replace(worker))
        return results

    def _replace(self, worker: _Worker) -> _Worker:
        new = self._new_worker()
        self._workers = [w for w in self._workers if w is not worker] + [new]
        new.wait_ready()
        return new

    def close(self) -> None:
        """Stop every worker."""
        for w in self._workers:
            w.close()
        self._workers = []

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
