"""The session worker: a child process of the server that serves exactly one session.

Kernels run here, so a crash (a segfault in generated code, an abort in a loaded library) ends
this process only; the server notices, tells the client, cleans up and registers again.
"""
from __future__ import annotations

import ctypes
import importlib
import logging
import os
import signal
import socket
import sys

from .protocol import DEFAULT_MAX_BLOB_BYTES, ProtocolError, SessionLost, error_payload, recv_frame, send_frame
from .session_handler import SessionHandler, register_server_functions

logger = logging.getLogger("kiln.rpc.server")

# Exit codes the server understands.
EXIT_OK = 0
EXIT_PROTOCOL_ERROR = 3
EXIT_SETUP_ERROR = 4


def run_server_init(spec: str | None) -> None:
    """Call a ``module:function`` hook that registers extra global functions (TVM's server_init_callback)."""
    if not spec:
        return
    mod_name, _, func_name = spec.partition(":")
    func = getattr(importlib.import_module(mod_name), func_name or "register")
    func()


def load_libraries(load_library: str | None) -> list:
    """``--load-library a.so:b.so``: dlopen each with RTLD_GLOBAL, as TVM's server does."""
    libs = []
    for path in (load_library or "").split(":"):
        if path:
            libs.append(ctypes.CDLL(os.path.abspath(path), ctypes.RTLD_GLOBAL))
            logger.info("loaded library %s", path)
    return libs


def serve_session(sock: socket.socket, workdir: str, server_key: str = "", load_library: str | None = None,
                  max_blob: int = DEFAULT_MAX_BLOB_BYTES, server_init: str | None = None) -> int:
    """Answer requests on ``sock`` until the client leaves; returns the worker's exit code."""
    handler = SessionHandler(workdir, server_key)
    try:
        os.chdir(handler.workdir)
        register_server_functions(lambda: handler)
        run_server_init(server_init)
        libs = load_libraries(load_library)  # noqa: F841 - keep the libraries loaded for the session
    except Exception as err:  # noqa: BLE001 - reported to the client, then the session ends
        logger.error("session setup failed: %s", err)
        try:
            send_frame(sock, {"ok": False, "fatal": True, "error": error_payload(err)})
        except OSError:
            pass
        return EXIT_SETUP_ERROR
    while True:
        try:
            message, blob = recv_frame(sock, max_blob)
        except SessionLost:
            return EXIT_OK
        except OSError:
            return EXIT_OK
        except ProtocolError as err:
            logger.warning("malformed message, closing the session: %s", err)
            try:
                send_frame(sock, {"ok": False, "fatal": True, "error": error_payload(err)})
            except OSError:
                pass
            return EXIT_PROTOCOL_ERROR
        if message.get("op") == "shutdown":
            try:
                send_frame(sock, {"ok": True, "ret": None})
            except OSError:
                pass
            return EXIT_OK
        try:
            reply, parts = handler.handle(message, blob)
        except ProtocolError as err:
            reply, parts = {"ok": False, "fatal": True, "error": error_payload(err)}, []
            try:
                send_frame(sock, reply, parts)
            except OSError:
                pass
            return EXIT_PROTOCOL_ERROR
        try:
            send_frame(sock, reply, parts)
        except OSError:
            return EXIT_OK


def _die_with_parent() -> None:
    """Ask Linux to kill this worker when the server process dies (so a killed server ends its session)."""
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the server died before prctl took effect
        os._exit(EXIT_OK)


def worker_main(sock: socket.socket, workdir: str, server_key: str, load_library: str | None, max_blob: int,
                server_init: str | None, silent: bool, inherited_fds: list = ()) -> None:
    """Entry point of the worker process (fork or spawn)."""
    _die_with_parent()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the server's handler is not ours
    for fd in inherited_fds:
        try:
            os.close(fd)
        except OSError:
            pass
    logging.basicConfig(level=logging.WARNING if silent else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s[worker %(process)d]: %(message)s",
                        stream=sys.stderr)
    code = serve_session(sock, workdir, server_key, load_library, max_blob, server_init)
    try:
        sock.close()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
