"""Start the tracker or a server as a child process and learn the port it bound.

The child (``python -m kiln.exec.rpc_tracker`` / ``kiln.exec.rpc_server``) prints one line
``KILN_RPC_READY <port>`` on stdout once it listens; everything else it logs goes to stderr.
The child runs in its own process group so that stopping it also stops its session workers.
"""
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

from ..error import RPCError

READY_PREFIX = "KILN_RPC_READY"


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
        if proc is None:
            return
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
        if proc.stdout is not None:
            proc.stdout.close()


def launch(module: str, args: list, silent: bool = False, timeout: float = 30.0,
           env_extra: dict | None = None) -> ChildProcess:
    """Run ``python -m <module> <args>`` and wait for its ready line."""
    cmd = [sys.executable, "-m", module, *args]
    env = dict(os.environ)
    # Make the child import this very kiln, wherever the parent found it.
    pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(env_extra or {})
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL if silent else None,
        stdin=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    deadline = time.time() + timeout
    buf = b""
    fd = proc.stdout.fileno()
    while True:
        left = deadline - time.time()
        if left <= 0:
            ChildProcess(proc, 0, module).terminate()
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
