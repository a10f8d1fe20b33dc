"""Start the tracker or a server as a child process and learn the port it bound.

The child (``python -m kiln.exec.rpc_tracker`` / ``kiln.exec.rpc_server``) prints one line
``KILN_RPC_READY <port>`` on stdout once it listens; everything else it logs goes to stderr.
The child runs in its own process group so that stopping it also stops its session workers.

Everything started here is recorded until it is stopped; at interpreter exit (normal, an exception,
Ctrl-C) :func:`stop_all_children` stops whatever is left, and :func:`exit_on_signals` makes SIGTERM and
SIGHUP unwind the same way, so no tracker or server outlives the process that started it.
"""
from __future__ import annotations

import atexit
import os
import select
import signal
import subprocess
import sys
import threading
import time

from ..error import RPCError

READY_PREFIX = "KILN_RPC_READY"

_LIVE: set = set()  # Popen objects of children started and not yet stopped
_LIVE_LOCK = threading.Lock()
_EXITING = False


def _stop_group(proc: subprocess.Popen, grace: float) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(grace)
    else:
        # The leader is gone; make sure nothing of its group is left behind.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    with _LIVE_LOCK:
        _LIVE.discard(proc)
    if proc.stdout is not None:
        proc.stdout.close()


@atexit.register
def stop_all_children(grace: float = 2.0) -> None:
    """Stop every tracker and server this process started and has not stopped (runs at exit); no
    child is started after it ran."""
    global _EXITING
    with _LIVE_LOCK:
        _EXITING = True
        procs = list(_LIVE)
    for proc in procs:
        try:
            _stop_group(proc, grace)
        except Exception:  # noqa: BLE001 - stop the others anyway
            pass


def _exit_on_signal(signum, frame):
    raise SystemExit(128 + signum)


def exit_on_signals() -> None:
    """Make SIGTERM and SIGHUP raise SystemExit (where they would otherwise kill the process outright),
    so ``finally`` blocks and :func:`stop_all_children` run. Only from the main thread; handlers a
    program installed itself are kept."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            signal.signal(sig, _exit_on_signal)


def announce_ready(port: int) -> None:
    """Called by the child once it listens."""
    sys.stdout.write(f"{READY_PREFIX} {port}\n")
    sys.stdout.flush()


class ChildProcess:
    """A tracker or server process started by :func:`launch`."""

    def __init__(self, proc: subprocess.Popen, port: int, what: str):
        self.proc = proc
        self.port = port
        self.what = what

    @property
    def pid(self) -> int:
        return self.proc.pid

    def is_alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def terminate(self, grace: float = 2.0) -> None:
        """Stop the process group: SIGTERM, then SIGKILL after ``grace`` seconds."""
        proc, self.proc = self.proc, None
        if proc is not None:
            _stop_group(proc, grace)


def launch(module: str, args: list, silent: bool = False, timeout: float = 30.0,
           env_extra: dict | None = None) -> ChildProcess:
    """Run ``python -m <module> <args>`` and wait for its ready line."""
    cmd = [sys.executable, "-m", module, *args]
    env = dict(os.environ)
    # Make the child import this very kiln, wherever the parent found it.
    pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(env_extra or {})
    exit_on_signals()
    with _LIVE_LOCK:
        if _EXITING:
            raise RPCError(f"not starting {module}: the process is exiting")
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL if silent else None,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        _LIVE.add(proc)
    try:
        return _wait_ready(proc, module, cmd, timeout)
    except BaseException:  # not ready, an error, or Ctrl-C while waiting: stop what was started
        _stop_group(proc, 2.0)
        raise


def _wait_ready(proc, module: str, cmd: list, timeout: float) -> ChildProcess:
    deadline = time.time() + timeout
    buf = b""
    fd = proc.stdout.fileno()
    while True:
        left = deadline - time.time()
        if left <= 0:
            raise RPCError(f"{module} did not report ready within {timeout}s")
        ready, _, _ = select.select([fd], [], [], min(left, 0.5))
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                code = proc.wait()
                raise RPCError(f"{module} exited with code {code} before it was ready: {' '.join(cmd)}")
            buf += chunk
            for line in buf.decode("utf-8", "replace").splitlines():
                if line.startswith(READY_PREFIX):
                    return ChildProcess(proc, int(line.split()[1]), module)
        elif proc.poll() is not None:
            raise RPCError(f"{module} exited with code {proc.returncode} before it was ready: {' '.join(cmd)}")
