"""RPC tracker: keeps a queue of free servers per key and hands them to clients by priority.

Wire protocol (the same as Apache TVM's, so TVM's tools can talk to it): a connection starts with
``RPC_TRACKER_MAGIC`` from the peer, echoed back; then each message is ``[nbytes:int32][json]``,
initiated by the peer and answered with one JSON value:

============================  ===========================================  ==========================
message                       meaning                                      answer
============================  ===========================================  ==========================
``[PING]``                    is the tracker alive                         ``SUCCESS``
``[PUT, key, [port, mk], a]`` a server under ``key`` is free at            ``SUCCESS``
                              ``a`` (or the peer address) : ``port``,
                              clients must present match key ``mk``
``[REQUEST, key, user, p]``   a client wants a server of ``key``,          ``[SUCCESS, [host, port,
                              priority ``p`` (higher first, then FIFO)     mk]]`` once one is free
``[UPDATE_INFO, {...}]``      describe this connection (``key``,           ``SUCCESS``
                              ``addr``); ``addr[0] = None`` means the
                              peer address
``[SUMMARY]``                 queues and servers                           ``[SUCCESS, {...}]``
``[GET_PENDING_MATCHKEYS]``   match keys of this connection not yet        list of keys
                              handed to a client
``[STOP, stop_key]``          stop the tracker                             ``SUCCESS`` / ``FAIL``
============================  ===========================================  ==========================

A malformed message (bad size, bad JSON, unknown code) closes that connection only. When a
connection closes, its free-server entries and its pending requests are dropped. A free entry
whose owner has been silent for ``stale_timeout`` seconds is dropped too (free servers ping
every couple of seconds; a silent one has vanished without closing its socket). A server whose
entry was dropped notices that its match key is no longer pending and registers again.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import json
import logging
import socket
import struct
import time

from ..error import RPCError
from . import base
from .base import RPC_TRACKER_MAGIC, TrackerCode
from .launcher import launch

logger = logging.getLogger("kiln.rpc.tracker")


class _ServerEntry:
    """One free server slot: who put it, where clients connect, and the match key they present."""

    __slots__ = ("conn", "host", "port", "matchkey")

    def __init__(self, conn: "_TrackerConn", host: str, port: int, matchkey: str):
        self.conn, self.host, self.port, self.matchkey = conn, host, port, matchkey

    def value(self) -> list:
        return [self.host, self.port, self.matchkey]


class _Request:
    """A client waiting for a server."""

    __slots__ = ("conn", "user", "priority", "done")

    def __init__(self, conn: "_TrackerConn", user: str, priority: int):
        self.conn, self.user, self.priority, self.done = conn, user, priority, False


class PriorityScheduler:
    """Free servers of one key (FIFO) and waiting requests (highest priority first, then FIFO)."""

    def __init__(self, key: str):
        self.key = key
        self._values: list = []
        self._requests: list = []
        self._counter = itertools.count()

    def put(self, entry: _ServerEntry) -> None:
        self._values.append(entry)
        self._schedule()

    def request(self, req: _Request) -> None:
        heapq.heappush(self._requests, (-req.priority, next(self._counter), req))
        self._schedule()

    def remove(self, entry: _ServerEntry) -> None:
        if entry in self._values:
            self._values.remove(entry)

    def drop_requests_of(self, conn: "_TrackerConn") -> None:
        """Forget the requests of a client that went away."""
        for _, _, req in self._requests:
            if req.conn is conn:
                req.done = True
        self._requests = [item for item in self._requests if not item[2].done]
        heapq.heapify(self._requests)

    def entries(self) -> list:
        return list(self._values)

    def _schedule(self) -> None:
        while self._values and self._requests:
            _, _, req = self._requests[0]
            if req.done or req.conn.closed:
                heapq.heappop(self._requests)
                continue
            entry = self._values.pop(0)
            if entry.conn.closed:
                continue
            heapq.heappop(self._requests)
            if req.conn.reply([TrackerCode.SUCCESS, entry.value()]):
                req.done = True
                entry.conn.pending_matchkeys.discard(entry.matchkey)
                logger.info("matched %s:%d (%s) to %s", entry.host, entry.port, self.key, req.conn.name)
            else:
                # The client vanished while waiting: the server stays free.
                self._values.insert(0, entry)

    def summary(self) -> dict:
        pending = sum(1 for _, _, req in self._requests if not req.done and not req.conn.closed)
        return {"free": len(self._values), "pending": pending}


class _TrackerConn:
    """One peer connection (a server, a client or a query tool)."""

    def __init__(self, tracker: "TrackerServer", reader, writer):
        self.tracker = tracker
        self.reader, self.writer = reader, writer
        peer = writer.get_extra_info("peername") or ("?", 0)
        self.addr = (peer[0], peer[1])
        self.name = f"{peer[0]}:{peer[1]}"
        self.info: dict = {}
        self.pending_matchkeys: set = set()
        self.put_entries: list = []
        self.request_keys: set = set()
        self.closed = False
        self.last_seen = time.monotonic()

    def reply(self, value) -> bool:
        """Send one JSON message; False when the connection is gone."""
        if self.closed or self.writer.is_closing():
            return False
        data = json.dumps(value).encode("utf-8")
        try:
            self.writer.write(struct.pack("<i", len(data)) + data)
        except (OSError, RuntimeError):
            return False
        return True

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.writer.close()

    async def serve(self) -> None:
        try:
            magic = await asyncio.wait_for(self.reader.readexactly(4), self.tracker.handshake_timeout)
            if struct.unpack("<i", magic)[0] != RPC_TRACKER_MAGIC:
                logger.warning("%s: not a tracker client (bad magic), closing", self.name)
                return
            self.writer.write(struct.pack("<i", RPC_TRACKER_MAGIC))
            while not self.closed:
                size = struct.unpack("<i", await self.reader.readexactly(4))[0]
                if size <= 0 or size > base.MAX_TRACKER_MSG_BYTES:
                    logger.warning("%s: invalid message size %d, closing", self.name, size)
                    return
                data = await self.reader.readexactly(size)
                self.last_seen = time.monotonic()
                try:
                    message = json.loads(data.decode("utf-8"))
                    self._handle(message)
                except _Malformed as err:
                    logger.warning("%s: %s, closing", self.name, err)
                    return
                except (UnicodeDecodeError, json.JSONDecodeError, TypeError, ValueError, KeyError, IndexError) as err:
                    logger.warning("%s: malformed message (%s), closing", self.name, err)
                    return
                await self.writer.drain()
        except (asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError, OSError):
            pass
        finally:
            self.close()
            self.tracker.on_close(self)

    def _handle(self, msg) -> None:
        if not isinstance(msg, list) or not msg or not isinstance(msg[0], int):
            raise _Malformed(f"expected a JSON list starting with a tracker code, got {str(msg)[:80]!r}")
        code = msg[0]
        if code == TrackerCode.PING:
            self.reply(TrackerCode.SUCCESS)
        elif code == TrackerCode.PUT:
            key = _expect(msg[1], str, "PUT key")
            port, matchkey = msg[2]
            port = _expect(port, int, "PUT port")
            matchkey = _expect(matchkey, str, "PUT match key")
            host = msg[3] if len(msg) >= 4 and msg[3] is not None else self.addr[0]
            entry = _ServerEntry(self, _expect(host, str, "PUT address"), port, matchkey)
            self.pending_matchkeys.add(matchkey)
            self.put_entries.append(entry)
            self.reply(TrackerCode.SUCCESS)
            self.tracker.scheduler(key).put(entry)
        elif code == TrackerCode.REQUEST:
            key = _expect(msg[1], str, "REQUEST key")
            user = msg[2] if len(msg) > 2 else ""
            priority = _expect(msg[3] if len(msg) > 3 else 1, (int, float), "REQUEST priority")
            self.request_keys.add(key)
            self.tracker.scheduler(key).request(_Request(self, str(user), priority))
        elif code == TrackerCode.UPDATE_INFO:
            info = _expect(msg[1], dict, "UPDATE_INFO argument")
            if "addr" in info:
                addr = list(info["addr"])
                if addr and addr[0] is None:
                    addr[0] = self.addr[0]
                info["addr"] = addr
            self.info.update(info)
            self.reply(TrackerCode.SUCCESS)
        elif code == TrackerCode.SUMMARY:
            self.reply([TrackerCode.SUCCESS, self.tracker.summary()])
        elif code == TrackerCode.GET_PENDING_MATCHKEYS:
            self.reply(sorted(self.pending_matchkeys))
        elif code == TrackerCode.STOP:
            if len(msg) > 1 and msg[1] == self.tracker.stop_key:
                self.reply(TrackerCode.SUCCESS)
                self.tracker.stop()
            else:
                self.reply(TrackerCode.FAIL)
        else:
            raise _Malformed(f"unknown tracker code {code}")


class _Malformed(Exception):
    pass


def _expect(value, types, what: str):
    if not isinstance(value, types) or isinstance(value, bool):
        raise _Malformed(f"{what} has type {type(value).__name__}")
    return value


class TrackerServer:
    """The tracker itself, running an asyncio loop in the calling thread (see :meth:`run`)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 9190, port_end: int = 9199,
                 stale_timeout: float = 30.0, handshake_timeout: float = 10.0, stop_key: str | None = None):
        self.host = host
        self.stale_timeout = stale_timeout
        self.handshake_timeout = handshake_timeout
        self.stop_key = stop_key or base.random_key("tracker")
        self._schedulers: dict = {}
        self._conns: set = set()
        self._sock = socket.socket(base.get_addr_family((host, port)), socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.port = base.bind_port(self._sock, host, port, port_end)
        self._sock.listen(128)
        self._loop = None
        self._stopped = None

    def scheduler(self, key: str) -> PriorityScheduler:
        if key not in self._schedulers:
            self._schedulers[key] = PriorityScheduler(key)
        return self._schedulers[key]

    def on_close(self, conn: _TrackerConn) -> None:
        self._conns.discard(conn)
        for entry in conn.put_entries:
            for sched in self._schedulers.values():
                sched.remove(entry)
        for key in conn.request_keys:
            if key in self._schedulers:
                self._schedulers[key].drop_requests_of(conn)
        if conn.info.get("key", "").startswith("server"):
            logger.info("server %s (%s) left", conn.name, conn.info.get("key"))

    def summary(self) -> dict:
        queue_info = {key: sched.summary() for key, sched in self._schedulers.items()}
        server_info = [dict(c.info) for c in self._conns
                       if not c.closed and str(c.info.get("key", "")).startswith("server")]
        return {"queue_info": queue_info, "server_info": server_info}

    def text_summary(self) -> str:
        return format_summary(self.summary())

    def _expire_stale(self) -> None:
        now = time.monotonic()
        for sched in self._schedulers.values():
            for entry in sched.entries():
                if now - entry.conn.last_seen > self.stale_timeout:
                    logger.warning("dropping stale server %s:%d (%s): silent for %.0fs",
                                   entry.host, entry.port, sched.key, now - entry.conn.last_seen)
                    sched.remove(entry)
                    entry.conn.pending_matchkeys.discard(entry.matchkey)

    async def _sweeper(self) -> None:
        period = max(0.2, min(5.0, self.stale_timeout / 3))
        while True:
            await asyncio.sleep(period)
            self._expire_stale()

    async def _main(self) -> None:
        self._stopped = asyncio.Event()

        tasks: set = set()

        async def on_connect(reader, writer):
            sock = writer.get_extra_info("socket")
            if sock is not None:
                _enable_keepalive(sock)
            conn = _TrackerConn(self, reader, writer)
            self._conns.add(conn)
            task = asyncio.current_task()
            tasks.add(task)
            try:
                await conn.serve()
            finally:
                tasks.discard(task)

        server = await asyncio.start_server(on_connect, sock=self._sock, limit=base.MAX_TRACKER_MSG_BYTES + 16)
        sweeper = asyncio.ensure_future(self._sweeper())
        logger.info("tracker listening on %s:%d", self.host, self.port)
        async with server:
            await self._stopped.wait()
            # Close every client connection before the server context exits: from Python 3.12 on, leaving it
            # waits until all connections are closed, so a client still connected (the one that sent STOP, a
            # server waiting in the queue) would keep the tracker alive forever.
            server.close()
            sweeper.cancel()
            for conn in list(self._conns):
                conn.close()
            for task in list(tasks):
                task.cancel()
            await asyncio.gather(*tasks, sweeper, return_exceptions=True)

    def run(self) -> None:
        """Serve until :meth:`stop` (or a STOP message with the stop key)."""
        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(self._main())
        finally:
            self._loop.close()

    def stop(self) -> None:
        if self._stopped is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)


def _enable_keepalive(sock: socket.socket) -> None:
    """Detect peers that vanish without closing (a powered-off board) within about a minute."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if hasattr(socket, "TCP_KEEPIDLE"):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 30)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 10)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3)
    except OSError:
        pass


def format_summary(data: dict) -> str:
    """The tracker summary as the table TVM's ``query_rpc_tracker`` prints."""
    servers = sorted(data.get("server_info", []), key=lambda item: str(item.get("key", "")))
    per_key: dict = {}
    lines = ["Server List", "-" * 30, "server-address           key", "-" * 30]
    for item in servers:
        addr = ":".join(str(x) for x in item.get("addr", ["?", "?"]))
        lines.append(f"{addr:21s}    {item.get('key', '')}")
        parts = str(item.get("key", "")).split(":")
        if len(parts) > 1:
            per_key[parts[1]] = per_key.get(parts[1], 0) + 1
    lines += ["-" * 30, ""]
    queue = data.get("queue_info", {})
    width = max((len(k) for k in queue), default=0)
    title = f"{'key':<{width}s}   total  free  pending"
    sep = "-" * (len(title) + 1)
    lines += ["Queue Status", sep, title, sep]
    for key in sorted(queue):
        total = per_key.get(key, 0)
        free, pending = queue[key]["free"], queue[key]["pending"]
        if total or pending:
            lines.append(f"{key:<{width}}   {total:<5d}  {free:<4d}  {pending:<7d}")
    lines.append(sep)
    return "\n".join(lines) + "\n"


class Tracker:
    """Start a tracker in a child process (TVM's ``rpc.tracker.Tracker``).

    ``host`` defaults to loopback; pass ``"0.0.0.0"`` to accept servers from the network.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 9190, port_end: int = 9199, silent: bool = False,
                 stale_timeout: float = 30.0):

        self.host = host
        self.stop_key = base.random_key("tracker")
        args = [f"--host={host}", f"--port={port}", f"--port-end={port_end}",
                f"--stale-timeout={stale_timeout}", f"--stop-key={self.stop_key}"]
        if silent:
            args.append("--silent")
        self._child = launch("kiln.exec.rpc_tracker", args, silent=silent)
        self.port = self._child.port

    @property
    def proc(self):
        return self._child.proc if self._child else None

    def _stop_tracker(self) -> None:
        sock = socket.create_connection((self.host if self.host != "0.0.0.0" else "127.0.0.1", self.port), timeout=2)
        try:
            sock.sendall(struct.pack("<i", RPC_TRACKER_MAGIC))
            base.recvall(sock, 4)
            base.sendjson(sock, [TrackerCode.STOP, self.stop_key])
            if base.recvjson(sock) != TrackerCode.SUCCESS:
                raise RPCError("tracker refused to stop")
        finally:
            sock.close()

    def terminate(self) -> None:
        """Stop the tracker (politely first, then by signal)."""
        if self._child is None:
            return
        if self._child.is_alive():
            try:
                self._stop_tracker()
                self._child.proc.wait(2)
            except Exception:  # noqa: BLE001 - falls back to the signal below
                pass
        self._child.terminate()
        self._child = None

    def __del__(self):
        try:
            self.terminate()
        except Exception:  # noqa: BLE001
            pass
