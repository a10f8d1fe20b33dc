"""RPC server: listens (and registers with a tracker), serves one session at a time in a worker.

The listening process never runs user code. For each session it forks (or, with ``no_fork``,
spawns) a worker that owns the connection; the server waits for the worker with the session's
timeout, tells the client when the worker crashed or timed out, removes the session's working
directory and offers itself to the tracker again.

Handshake (TVM's): the client sends ``[RPC_MAGIC][len]["client:<matchkey> [-timeout=N]"]``; the
server checks the match key, answers ``RPC_CODE_SUCCESS [len]["server:<key>"]``, then kiln's
session protocol starts with a hello frame (and the token check when the server has a token).
"""
from __future__ import annotations

import hashlib
import hmac
import importlib
import logging
import multiprocessing
import os
import secrets
import select
import signal
import socket
import struct
import tempfile
import threading
from collections import deque

from ..error import RPCError
from . import base
from .base import RPC_MAGIC, TrackerCode
from .protocol import DEFAULT_MAX_BLOB_BYTES, PROTOCOL_VERSION, ProtocolError, SessionLost, recv_frame, send_frame
from .session_handler import cleanup_workdir
from .worker import EXIT_OK, EXIT_PROTOCOL_ERROR, EXIT_SETUP_ERROR, worker_main
from .launcher import launch

logger = logging.getLogger("kiln.rpc.server")

SESSION_DIR_PREFIX = "kiln-rpc-session-"
# Handshakes run one thread each, so a silent connection delays nobody; past this many pending at once,
# new connections are closed at once (a flood cannot exhaust the server's threads).
MAX_PENDING_HANDSHAKES = 64


def sweep_orphan_session_dirs() -> None:
    """Remove session directories left by servers that were killed outright (SIGKILL) mid-session.

    Directories are named ``kiln-rpc-session-<server pid>-<random>``; those of dead pids go.
    """
    base_dir = tempfile.gettempdir()
    try:
        names = os.listdir(base_dir)
    except OSError:
        return
    for name in names:
        if not name.startswith(SESSION_DIR_PREFIX):
            continue
        pid_text = name[len(SESSION_DIR_PREFIX):].split("-", 1)[0]
        if not pid_text.isdigit():
            continue
        try:
            os.kill(int(pid_text), 0)
        except ProcessLookupError:
            cleanup_workdir(os.path.join(base_dir, name))
        except OSError:
            pass


def auth_digest(token: str, nonce: str) -> str:
    """What a client proves it knows the token with: HMAC-SHA256(token, nonce), hex."""
    return hmac.new(token.encode("utf-8"), nonce.encode("utf-8"), hashlib.sha256).hexdigest()


class ServerLoop:
    """The server's main loop (runs in the calling process; see :class:`Server` for a child process)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 9091, port_end: int = 9199, tracker_addr=None,
                 key: str = "", load_library: str | None = None, custom_addr: str | None = None,
                 silent: bool = False, no_fork: bool = False, token: str | None = None,
                 max_blob: int = DEFAULT_MAX_BLOB_BYTES, server_init: str | None = None,
                 ping_period: float = 2.0, unmatch_timeout: float = 4.0, handshake_timeout: float = 10.0):
        if tracker_addr and not key:
            raise RPCError("a server that registers with a tracker needs a key (--key)")
        self.host = host
        self.tracker_addr = tuple(tracker_addr) if tracker_addr else None
        self.key = key
        self.load_library = load_library
        self.custom_addr = custom_addr
        self.silent = silent
        self.no_fork = no_fork
        self.token = token or None
        self.max_blob = max_blob
        self.server_init = server_init
        self.ping_period = ping_period
        self.unmatch_timeout = unmatch_timeout
        self.handshake_timeout = handshake_timeout
        self._worker = None
        self._workdir = None
        self._tracker_conn = None
        self._matchkey = key
        self._ready: deque = deque()  # handshaken (conn, addr, opts), oldest first
        self._pending = 0
        self._handshaking: set = set()  # connections whose handshake thread is running
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._check_setup()
        sweep_orphan_session_dirs()
        self.sock = socket.socket(base.get_addr_family((host, port)), socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.port = base.bind_port(self.sock, host, port, port_end)
        self.sock.listen(16)
        if not base.is_loopback(host) and not self.token:
            logger.warning("listening on %s without a token: anyone who can reach port %d can run code here; "
                           "pass --token (or set KILN_RPC_TOKEN) on a shared network", host, self.port)
        logger.info("bind to %s:%d", host, self.port)

    def _check_setup(self) -> None:
        for path in (self.load_library or "").split(":"):
            if path and not os.path.isfile(path):
                raise RPCError(f"--load-library: no such file {path!r}")
        if self.server_init:
            mod_name, _, func_name = self.server_init.partition(":")
            try:
                mod = importlib.import_module(mod_name)
            except ImportError as err:
                raise RPCError(f"server init hook {self.server_init!r}: cannot import {mod_name}: {err}") from None
            if not callable(getattr(mod, func_name or "register", None)):
                raise RPCError(f"server init hook {self.server_init!r}: {mod_name} has no function "
                               f"{func_name or 'register'!r}")

    # -- tracker ---------------------------------------------------------------------------------
    def _connect_tracker(self) -> socket.socket:
        conn = base.connect_with_retry(self.tracker_addr, timeout=60, retry_period=1)
        conn.settimeout(30)
        conn.sendall(struct.pack("<i", base.RPC_TRACKER_MAGIC))
        if struct.unpack("<i", base.recvall(conn, 4))[0] != base.RPC_TRACKER_MAGIC:
            conn.close()
            raise RPCError(f"{self.tracker_addr[0]}:{self.tracker_addr[1]} is not an RPC tracker")
        base.sendjson(conn, [TrackerCode.UPDATE_INFO, {"key": "server:" + self.key,
                                                       "addr": [self.custom_addr, self.port]}])
        if base.recvjson(conn) != TrackerCode.SUCCESS:
            raise RPCError("tracker refused UPDATE_INFO")
        logger.info("registered with tracker %s:%d as %r", *self.tracker_addr, self.key)
        return conn

    def _put(self, tracker_conn: socket.socket, matchkey: str) -> None:
        base.sendjson(tracker_conn, [TrackerCode.PUT, self.key, [self.port, matchkey], self.custom_addr])
        if base.recvjson(tracker_conn) != TrackerCode.SUCCESS:
            raise RPCError("tracker refused PUT")

    # -- accepting -------------------------------------------------------------------------------
    def _accept(self, tracker_conn):
        """Wait for a client presenting the current match key; returns ``(conn, addr, opts)``.

        Each connection is handshaken in its own thread (bounded by ``handshake_timeout``), so an idle or
        slow connection never delays another client; this loop only accepts, pings the tracker and
        takes the first client whose handshake succeeded."""
        import time

        old_keys: set = set()
        if tracker_conn is not None:
            self._matchkey = base.random_key(self.key)
            self._put(tracker_conn, self._matchkey)
        else:
            self._matchkey = self.key
        unmatched = 0
        next_ping = time.monotonic() + self.ping_period
        while True:
            with self._lock:
                if self._ready:
                    return self._ready.popleft()
            wait = max(0.0, next_ping - time.monotonic()) if tracker_conn is not None else None
            ready, _, _ = select.select([self.sock, self._wake_r], [], [], wait)
            if self._wake_r in ready:
                try:
                    while self._wake_r.recv(256):
                        pass
                except (BlockingIOError, InterruptedError):
                    pass
            if self.sock in ready:
                self._start_handshake()
            if tracker_conn is not None and time.monotonic() >= next_ping:
                next_ping = time.monotonic() + self.ping_period
                base.sendjson(tracker_conn, [TrackerCode.GET_PENDING_MATCHKEYS])
                pending = base.recvjson(tracker_conn)
                old_keys.add(self._matchkey)
                unmatched = 0 if self._matchkey in pending else unmatched + 1
                # A client took our key but never came (or the tracker dropped it): offer a new one.
                if unmatched * self.ping_period > self.unmatch_timeout + self.ping_period:
                    logger.info("match key unused, registering a new one")
                    self._matchkey = base.random_key(self.key, cmap=old_keys)
                    self._put(tracker_conn, self._matchkey)
                    unmatched = 0

    def _start_handshake(self) -> None:
        try:
            conn, addr = self.sock.accept()
        except (BlockingIOError, InterruptedError):
            return
        with self._lock:
            if self._pending >= MAX_PENDING_HANDSHAKES:
                logger.warning("%d handshakes pending; closing the connection from %s", self._pending, addr)
                conn.close()
                return
            self._pending += 1
            self._handshaking.add(conn)
        threading.Thread(target=self._handshake_thread, args=(conn, addr), name="kiln-rpc-handshake",
                         daemon=True).start()

    def _handshake_thread(self, conn: socket.socket, addr) -> None:
        try:
            opts = self._handshake(conn, addr, self._matchkey)
        finally:
            with self._lock:
                self._pending -= 1
                self._handshaking.discard(conn)
        if opts is None:
            return
        with self._lock:
            self._ready.append((conn, addr, opts))
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def _handshake(self, conn: socket.socket, addr, matchkey: str):
        """TVM handshake, then kiln hello/auth; None (connection closed) when anything is wrong."""
        try:
            conn.settimeout(self.handshake_timeout)
            magic = struct.unpack("<i", base.recvall(conn, 4))[0]
            if magic != RPC_MAGIC:
                logger.warning("connection from %s is not an RPC client (bad magic)", addr)
                conn.close()
                return None
            keylen = struct.unpack("<i", base.recvall(conn, 4))[0]
            if keylen <= 0 or keylen > base.MAX_HANDSHAKE_KEY_BYTES:
                logger.warning("bad handshake key length %d from %s", keylen, addr)
                conn.close()
                return None
            words = base.recvall(conn, keylen).decode("utf-8").split()
            if not words or words[0] != "client:" + matchkey:
                conn.sendall(struct.pack("<i", base.RPC_CODE_MISMATCH))
                logger.warning("mismatched key from %s", addr)
                conn.close()
                return None
            opts = base.parse_handshake_opts(words[1:])
            server_key = ("server:" + self.key).encode("utf-8")
            conn.sendall(struct.pack("<ii", base.RPC_CODE_SUCCESS, len(server_key)) + server_key)
            nonce = secrets.token_hex(16) if self.token else None
            send_frame(conn, {"kiln_rpc": PROTOCOL_VERSION, "server_key": self.key, "nonce": nonce,
                              "max_blob": self.max_blob})
            reply, _ = recv_frame(conn, 0)
            if self.token and not hmac.compare_digest(str(reply.get("auth") or ""), auth_digest(self.token, nonce)):
                send_frame(conn, {"ok": False, "error": {"type": "RPCError", "traceback": "",
                                                         "message": "authentication failed: wrong or missing token"}})
                logger.warning("authentication failed for %s", addr)
                conn.close()
                return None
            send_frame(conn, {"ok": True})
            conn.settimeout(None)
            return opts
        except (OSError, UnicodeDecodeError, struct.error, RPCError, ProtocolError, SessionLost) as err:
            logger.warning("handshake with %s failed: %s", addr, err)
            conn.close()
            return None

    # -- serving ---------------------------------------------------------------------------------
    def _serve(self, conn: socket.socket, addr, opts: dict) -> None:
        workdir = tempfile.mkdtemp(prefix=f"{SESSION_DIR_PREFIX}{os.getpid()}-")
        self._workdir = workdir
        ctx = multiprocessing.get_context("spawn" if self.no_fork else "fork")
        # A forked worker must not keep the server's own sockets open: if the server dies, the
        # tracker has to see its connection close, and new clients must not reach a dead listener.
        inherited = []
        if not self.no_fork:
            inherited = [self.sock.fileno(), self._wake_r.fileno(), self._wake_w.fileno()] + (
                [self._tracker_conn.fileno()] if self._tracker_conn is not None else [])
            with self._lock:  # other clients' connections stay the server's alone
                others = list(self._handshaking) + [c for c, _, _ in self._ready]
            inherited += [c.fileno() for c in others if c.fileno() >= 0]
        worker = ctx.Process(target=worker_main, name="kiln-rpc-session", daemon=True,
                             args=(conn, workdir, self.key, self.load_library, self.max_blob, self.server_init,
                                   self.silent, inherited))
        logger.info("session from %s:%s in %s", addr[0], addr[1], workdir)
        try:
            worker.start()
            self._worker = worker
            timeout = opts.get("timeout") or None
            worker.join(timeout)
            notice = None
            if worker.is_alive():
                logger.warning("session from %s timed out after %gs, stopping it", addr, timeout)
                worker.kill()
                worker.join(5)
                notice = (f"RPCSessionTimeoutError: the session's {timeout:g}s timeout expired and the server "
                          "stopped it; pass a larger session_timeout")
            elif worker.exitcode not in (EXIT_OK, EXIT_PROTOCOL_ERROR, EXIT_SETUP_ERROR):
                code = worker.exitcode
                how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
                logger.warning("session worker died with %s", how)
                notice = (f"the server's session worker died with {how} (a crash in the code it was running); "
                          "the server itself is still up")
            if notice:
                try:
                    conn.settimeout(2)
                    send_frame(conn, {"ok": False, "fatal": True,
                                      "error": {"type": "RPCError", "message": notice, "traceback": ""}})
                except OSError:
                    pass
        finally:
            self._worker = None
            self._workdir = None
            try:
                conn.close()
            except OSError:
                pass
            cleanup_workdir(workdir)
            logger.info("session from %s:%s finished", addr[0], addr[1])

    def run(self) -> None:
        """Serve forever: register, accept, serve, repeat; reconnect when the tracker goes away."""
        while True:
            try:
                if self.tracker_addr and self._tracker_conn is None:
                    self._tracker_conn = self._connect_tracker()
                conn, addr, opts = self._accept(self._tracker_conn)
            except (OSError, ValueError, RPCError) as err:
                if self._tracker_conn is not None:
                    logger.warning("lost the tracker (%s); reconnecting", err)
                    self._tracker_conn.close()
                    self._tracker_conn = None
                    continue
                raise
            self._serve(conn, addr, opts)

    def stop_worker(self) -> None:
        """Kill the running session (if any) and remove its directory: the server is shutting down."""
        worker, workdir = self._worker, self._workdir
        if worker is not None and worker.is_alive():
            worker.kill()
            worker.join(2)
        if workdir:
            cleanup_workdir(workdir)


class Server:
    """Start an RPC server in a child process (TVM's ``rpc.Server``).

    Binds to loopback unless ``host`` says otherwise. With ``tracker_addr=(host, port)`` it registers
    under ``key``; otherwise clients connect directly with ``rpc.connect(host, port, key)``.
    ``server_init="module:function"`` runs in each session worker to register extra functions.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 9091, port_end: int = 9199, is_proxy: bool = False,
                 tracker_addr=None, key: str = "", load_library: str | None = None, custom_addr: str | None = None,
                 silent: bool = False, no_fork: bool = False, server_init_callback=None, reuse_addr: bool = True,
                 timeout=None, token: str | None = None, server_init: str | None = None, ping_period: float = 2.0,
                 unmatch_timeout: float = 4.0):

        if is_proxy:
            raise RPCError("kiln has no RPC proxy; connect servers to a tracker instead")
        if server_init_callback is not None:
            mod = getattr(server_init_callback, "__module__", None)
            name = getattr(server_init_callback, "__qualname__", "")
            if not mod or "." in name or mod == "__main__":
                raise RPCError("server_init_callback must be a top-level function of an importable module "
                               "(it runs in a separate process); or pass server_init='module:function'")
            server_init = f"{mod}:{name}"
        args = [f"--host={host}", f"--port={port}", f"--port-end={port_end}"]
        if tracker_addr:
            args.append(f"--tracker={tracker_addr[0]}:{tracker_addr[1]}")
        if key:
            args.append(f"--key={key}")
        if load_library:
            args.append(f"--load-library={load_library}")
        if custom_addr:
            args.append(f"--custom-addr={custom_addr}")
        if silent:
            args.append("--silent")
        if no_fork:
            args.append("--no-fork")
        if server_init:
            args.append(f"--server-init={server_init}")
        args += [f"--ping-period={ping_period}", f"--unmatch-timeout={unmatch_timeout}"]
        # The token travels in the environment, not on the command line (where `ps` shows it).
        env = {"KILN_RPC_TOKEN": token} if token else None
        self.host = host
        self.key = key
        self._child = launch("kiln.exec.rpc_server", args, silent=silent, env_extra=env)
        self.port = self._child.port

    @property
    def proc(self):
        return self._child.proc if self._child else None

    @property
    def pid(self) -> int:
        return self._child.pid

    def terminate(self) -> None:
        """Stop the server and its session worker."""
        if self._child is not None:
            self._child.terminate()
            self._child = None

    def __del__(self):
        try:
            self.terminate()
        except Exception:  # noqa: BLE001
            pass
