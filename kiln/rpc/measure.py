"""Remote measurement helpers: the RPC half of AutoTVM's RPCRunner and LocalRunner.

AutoTVM's runners (``kiln.autotvm.measure``) use these, so local and remote measurement share one path:

    remote = request_remote(key, host, port, priority=1, timeout=60)
    costs = run_remote_evaluation(remote, build_result.filename, build_result.arg_info,
                                  number=4, repeat=3, min_repeat_ms=0)

``count_servers`` / ``tracker_keys`` read the tracker's summary (RPCRunner sizes ``n_parallel`` and
words its errors with them), ``set_session_deadline`` bounds a client's waits in a session, and
``LocalCluster`` starts a tracker and servers on loopback (what ``LocalRunner.set_task`` needs).
"""
from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time

from ..error import RPCError
from .client import RemoteDevice, RPCSession, connect_tracker
from .launcher import exit_on_signals
from .tracker import Tracker
from .server import Server


def request_remote(device_key: str, host: str | None = None, port: int | None = None, priority: int = 1,
                   timeout: float = 60, request_timeout: float | None = None) -> RPCSession:
    """A session with a server of ``device_key`` from the tracker at ``host:port`` (TVM's request_remote).

    ``host``/``port`` default to ``$TVM_TRACKER_HOST``/``$TVM_TRACKER_PORT``; ``timeout`` is the
    session timeout the server enforces; ``request_timeout`` bounds the wait for a free server.
    """
    host = host or os.environ.get("TVM_TRACKER_HOST") or os.environ.get("KILN_TRACKER_HOST")
    port = port or os.environ.get("TVM_TRACKER_PORT") or os.environ.get("KILN_TRACKER_PORT")
    if not host or not port:
        raise RPCError("request_remote: give host and port, or set TVM_TRACKER_HOST and TVM_TRACKER_PORT")
    tracker = connect_tracker(host, int(port), timeout=10)
    try:
        return tracker.request(device_key, priority=priority, session_timeout=timeout,
                               request_timeout=request_timeout)
    finally:
        tracker.close()


def check_remote(device_key: str, host: str | None = None, port: int | None = None, priority: int = 100,
                 timeout: float = 10) -> bool:
    """Whether a ``device_key`` server answers within ``timeout`` seconds (TVM's check_remote)."""
    try:
        remote = request_remote(device_key, host, port, priority, timeout=timeout, request_timeout=timeout)
    except RPCError:
        return False
    try:
        remote.cpu(0).sync()
        return True
    except RPCError:
        return False
    finally:
        remote.close()


def count_servers(device_key: str, host: str, port: int, timeout: float = 10) -> tuple:
    """``(registered, free)``: how many servers of ``device_key`` the tracker knows, and how many are free.

    A server in a session is registered but not free; one that just finished may be missing from
    ``free`` for a few milliseconds until it registers again.
    """
    tracker = connect_tracker(host, int(port), timeout=timeout)
    try:
        summary = tracker.summary()
    finally:
        tracker.close()
    free = int(summary.get("queue_info", {}).get(device_key, {}).get("free", 0))
    registered = sum(1 for info in summary.get("server_info", [])
                     if str(info.get("key", "")) == "server:" + device_key)
    return max(registered, free), free


def tracker_keys(host: str, port: int, timeout: float = 10) -> list:
    """The keys the tracker has servers or queued requests for (for error messages)."""
    tracker = connect_tracker(host, int(port), timeout=timeout)
    try:
        summary = tracker.summary()
    finally:
        tracker.close()
    keys = set(summary.get("queue_info", {}))
    keys.update(str(info.get("key", "")).partition(":")[2] for info in summary.get("server_info", [])
                if str(info.get("key", "")).startswith("server:"))
    return sorted(k for k in keys if k)


def set_session_deadline(remote: RPCSession, seconds: float | None) -> None:
    """Bound every later wait for a reply in ``remote`` by ``seconds`` (None: wait forever).

    The server enforces its own session timeout; this guards the client against a server that
    stops answering without closing the connection (a stopped process, a dead network).
    A wait that runs out raises RPCError and closes the session.
    """
    sock = getattr(getattr(remote, "_transport", None), "sock", None)
    if isinstance(sock, socket.socket):
        sock.settimeout(seconds)


@contextlib.contextmanager
def upload_and_load(remote: RPCSession, filename: str):
    """Upload a built library, load it on the server, and remove the file afterwards.

    Yields the remote module.
    """
    name = os.path.basename(filename)
    remote.upload(filename, name)
    try:
        yield remote.load_module(name)
    finally:
        if not remote.is_closed:
            try:
                remote.remove(name)
            except RPCError:
                pass


def remote_empty(dev: RemoteDevice, shape, dtype: str = "float32"):
    """An uninitialised array on a remote device."""
    if not isinstance(dev, RemoteDevice):
        raise RPCError(f"remote_empty: expected a device of an RPC session, got {dev!r}")
    return dev._rpc_sess._nd_empty(shape, dtype, dev)


def remote_array(source, dev: RemoteDevice, dtype=None):
    """Copy a numpy array (or local NDArray) to a remote device."""
    if not isinstance(dev, RemoteDevice):
        raise RPCError(f"remote_array: expected a device of an RPC session, got {dev!r}")
    return dev._rpc_sess._nd_array(source, dev, dtype)


def random_fill_args(remote: RPCSession, arg_info, dev: RemoteDevice | None = None, fill: bool = True) -> list:
    """Arrays for ``arg_info`` (``[(shape, dtype), ...]``) on the server, filled by the server's
    ``tvm.contrib.random.random_fill`` (no data crosses the network)."""
    dev = dev or remote.cpu(0)
    args = [remote_empty(dev, shape, dtype) for shape, dtype in arg_info]
    if fill:
        random_fill = remote.get_function("tvm.contrib.random.random_fill")
        for arg in args:
            random_fill(arg)
    if dev.local_device_type != 1:  # the server fills CPU arrays synchronously; other devices may queue
        dev.sync()
    return args


def run_remote_evaluation(remote: RPCSession, filename: str, arg_info, number: int = 1, repeat: int = 1,
                          min_repeat_ms: int = 0, cooldown_interval: float = 0.0,
                          enable_cpu_cache_flush: bool = False, ref_input=None, func_name: str | None = None,
                          dev_type: str = "cpu", fill_inputs: bool = True, drop_extremes: bool = True) -> tuple:
    """Upload ``filename``, time its entry function on the server, return the costs in seconds.

    Inputs are ``ref_input`` (numpy arrays copied to the server) or arrays random-filled on the server.
    With more than two repeats the fastest and slowest are dropped, as AutoTVM does.
    """
    dev = remote.device(dev_type, 0)
    with upload_and_load(remote, filename) as mod:
        name = func_name or mod.entry_name
        if not name:
            raise RPCError(f"run_remote_evaluation: {os.path.basename(filename)} has no entry function; pass func_name")
        f_preproc = "cache_flush_cpu_non_first_arg" if enable_cpu_cache_flush else ""
        timer = mod.time_evaluator(name, dev, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms,
                                   f_preproc=f_preproc)
        if ref_input is not None:
            args = [remote_array(x, dev) for x in ref_input]
        else:
            args = random_fill_args(remote, arg_info, dev, fill=fill_inputs)
        costs = list(timer(*args).results)
    if drop_extremes and len(costs) > 2:
        costs = sorted(costs)[1:-1]
    if cooldown_interval > 0:
        time.sleep(cooldown_interval)
    return tuple(costs)


def _free_port(host: str, port: int, port_end: int):
    """A port in ``[port, port_end)`` that nothing listens on right now (None if none is found)."""
    for candidate in range(port, max(port_end, port + 1)):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((host, candidate))
            return candidate
        except OSError:
            continue
        finally:
            sock.close()
    return None


class LocalCluster:
    """A tracker and ``n_servers`` servers on loopback, for local measurement over RPC and for tests.

    ``key`` defaults to ``$local$device$<tracker port>`` as TVM's LocalRunner names it.
    """

    def __init__(self, n_servers: int = 1, key: str | None = None, port: int = 9000, port_end: int = 10000,
                 silent: bool = True, server_init: str | None = None, wait: float = 10.0):
        exit_on_signals()  # SIGTERM unwinds (the children started from helper threads are stopped at exit)
        self.host = "127.0.0.1"
        self.tracker = None
        self.servers: list = []
        self._server_args = dict(port=port, port_end=port_end, silent=silent, server_init=server_init)
        try:
            self._start(n_servers, key, port, port_end, silent)
            self.wait_for_servers(n_servers, wait)
        except BaseException:
            self.terminate()
            raise

    def _start(self, n_servers: int, key: str | None, port: int, port_end: int, silent: bool) -> None:
        """Start the tracker and the servers at the same time (each child takes a second to import).

        The tracker's port is chosen up front so the servers can be told it; if another process
        takes that port in the meantime, fall back to starting the tracker first.
        """

        guess = _free_port(self.host, port, port_end)
        errors: list = []

        def start_tracker():
            try:
                self.tracker = Tracker(self.host, guess, guess + 1, silent=silent)
            except BaseException as err:  # noqa: BLE001 - re-raised below
                errors.append(err)

        if guess is not None:
            self.port = guess
            self.key = key or f"$local$device${guess}"
            # servers look for ports above the tracker's, so they cannot take it first
            self._server_args["port"] = min(guess + 1, max(port_end - 1, guess))
            thread = threading.Thread(target=start_tracker, daemon=True)
            thread.start()
            try:
                self.add_servers(n_servers)
            finally:
                thread.join()
            if self.tracker is not None and self.tracker.port == guess:
                if errors:
                    raise errors[0]
                return
            self._stop_servers()  # the port was taken: start over, the slow way
        self._server_args["port"] = port
        self.tracker = Tracker(self.host, port, port_end, silent=silent)
        self.port = self.tracker.port
        self.key = key or f"$local$device${self.port}"
        self.add_servers(n_servers)

    def add_servers(self, count: int) -> list:
        """Start ``count`` more servers of this cluster's key (in parallel); returns them."""

        started: list = [None] * count
        errors: list = []

        def start(i):
            try:
                started[i] = Server(self.host, self._server_args["port"], self._server_args["port_end"],
                                    tracker_addr=(self.host, self.port), key=self.key,
                                    silent=self._server_args["silent"], server_init=self._server_args["server_init"])
            except BaseException as err:  # noqa: BLE001 - re-raised below
                errors.append(err)

        threads = [threading.Thread(target=start, args=(i,), daemon=True) for i in range(count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        new = [s for s in started if s is not None]
        self.servers.extend(new)
        if errors:
            raise errors[0]
        return new

    def wait_for_servers(self, count: int, timeout: float = 10.0) -> None:
        """Block until ``count`` servers of our key are free at the tracker."""
        tracker = connect_tracker(self.host, self.port, timeout=5)
        try:
            deadline = time.time() + timeout
            while True:
                free = tracker.summary()["queue_info"].get(self.key, {}).get("free", 0)
                if free >= count:
                    return
                if time.time() > deadline:
                    raise RPCError(f"only {free} of {count} servers registered with the tracker within {timeout}s")
                time.sleep(0.05)
        finally:
            tracker.close()

    def request(self, priority: int = 1, session_timeout: float = 0, request_timeout: float | None = None):
        return request_remote(self.key, self.host, self.port, priority, session_timeout, request_timeout)

    def _stop_servers(self, parallel: bool = True) -> None:
        servers, self.servers = self.servers, []
        if not parallel or sys.is_finalizing():
            for s in servers:
                s.terminate()
            return
        threads = [threading.Thread(target=s.terminate) for s in servers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def terminate(self, parallel: bool = True) -> None:
        """Stop the servers (and their sessions) and the tracker; ``parallel=False`` starts no thread
        (for ``__del__``, which may run while the interpreter shuts down and can start none)."""
        self._stop_servers(parallel)
        if self.tracker is not None:
            self.tracker.terminate()
            self.tracker = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.terminate()

    def __del__(self):
        try:
            self.terminate(parallel=False)
        except Exception:  # noqa: BLE001
            pass
