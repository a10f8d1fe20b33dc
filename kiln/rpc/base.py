"""Constants and socket helpers shared by the tracker, the server and the clients.

The tracker protocol and the connection handshake follow Apache TVM v0.13 byte for byte, so
TVM's tracker tools and kiln's interoperate:

* tracker connection: the client sends ``RPC_TRACKER_MAGIC`` (int32, little endian), the tracker
  echoes it; after that every message in both directions is ``[nbytes:int32][json utf-8]``.
* server handshake: the client sends ``[RPC_MAGIC][keylen][b"client:<matchkey> [-timeout=N]"]``;
  the server answers ``RPC_CODE_SUCCESS`` followed by ``[keylen]["server:<key>"]`` or
  ``RPC_CODE_MISMATCH`` and closes.
"""
from __future__ import annotations

import errno
import json
import logging
import random
import socket
import struct
import time

from ..error import RPCError

# Magic of the data plane (server handshake) and of the control plane (tracker), as in TVM.
RPC_MAGIC = 0xFF271
RPC_TRACKER_MAGIC = 0x2F271
RPC_CODE_SUCCESS = RPC_MAGIC + 0
RPC_CODE_DUPLICATE = RPC_MAGIC + 1
RPC_CODE_MISMATCH = RPC_MAGIC + 2

# A remote device's type is the local type plus (session index + 1) * RPC_SESS_MASK, as in TVM.
RPC_SESS_MASK = 128

# Tracker messages are small JSON documents; anything larger is malformed.
MAX_TRACKER_MSG_BYTES = 1 << 20
# The handshake key ("client:<matchkey> -timeout=N ...") is short.
MAX_HANDSHAKE_KEY_BYTES = 4096

logger = logging.getLogger("kiln.rpc")


class TrackerCode:
    """Codes of the tracker protocol (same numbers as TVM)."""

    FAIL = -1
    SUCCESS = 0
    PING = 1
    STOP = 2
    PUT = 3
    REQUEST = 4
    UPDATE_INFO = 5
    SUMMARY = 6
    GET_PENDING_MATCHKEYS = 7


def get_addr_family(addr: tuple) -> int:
    """Address family (IPv4/IPv6) to use for ``(host, port)``."""
    res = socket.getaddrinfo(addr[0], addr[1], 0, 0, socket.IPPROTO_TCP)
    return res[0][0]


def recvall(sock: socket.socket, nbytes: int) -> bytes:
    """Receive exactly ``nbytes`` bytes; raises ConnectionError when the peer closes first."""
    chunks = []
    remaining = nbytes
    while remaining > 0:
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            raise ConnectionError("connection closed by peer")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def sendjson(sock: socket.socket, data) -> None:
    """Send one tracker message: ``[nbytes:int32][json]``."""
    payload = json.dumps(data).encode("utf-8")
    sock.sendall(struct.pack("<i", len(payload)) + payload)


def recvjson(sock: socket.socket):
    """Receive one tracker message; a bad size or bad JSON raises RPCError."""
    size = struct.unpack("<i", recvall(sock, 4))[0]
    if size <= 0 or size > MAX_TRACKER_MSG_BYTES:
        raise RPCError(f"invalid tracker message size {size} (expected 1..{MAX_TRACKER_MSG_BYTES} bytes)")
    try:
        return json.loads(recvall(sock, size).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise RPCError(f"malformed tracker message: {err}") from None


def random_key(prefix: str, delimiter: str = ":", cmap=None) -> str:
    """``<prefix><delimiter><random>``, avoiding keys in ``cmap``."""
    while True:
        key = f"{prefix}{delimiter}{random.random()}"
        if not cmap or key not in cmap:
            return key


def split_random_key(key: str, delimiter: str = ":") -> list:
    """Inverse of :func:`random_key`: ``[prefix, random part]``."""
    return key.rsplit(delimiter, 1)


def connect_with_retry(addr: tuple, timeout: float = 60, retry_period: float = 5) -> socket.socket:
    """Connect to ``addr``, retrying while the connection is refused (a restarting peer)."""
    start = time.time()
    while True:
        sock = socket.socket(get_addr_family(addr), socket.SOCK_STREAM)
        try:
            sock.connect(addr)
            return sock
        except OSError as err:
            sock.close()
            if err.errno not in (errno.ECONNREFUSED,):
                raise
            if time.time() - start > timeout:
                raise RPCError(f"cannot connect to {addr[0]}:{addr[1]}: connection refused for {timeout}s") from None
            logger.warning("cannot connect to %s:%s, retrying in %gs", addr[0], addr[1], retry_period)
            time.sleep(retry_period)


def bind_port(sock: socket.socket, host: str, port: int, port_end: int) -> int:
    """Bind ``sock`` to the first free port in ``[port, port_end)`` (``port_end <= port`` means just ``port``)."""
    ports = range(port, max(port_end, port + 1))
    for candidate in ports:
        try:
            sock.bind((host, candidate))
            return sock.getsockname()[1]
        except OSError as err:
            if err.errno in (errno.EADDRINUSE, errno.EACCES):
                continue
            raise
    raise RPCError(f"cannot bind to any port in [{port}, {max(port_end, port + 1)}) on {host}")


def is_loopback(host: str) -> bool:
    """True when ``host`` names a loopback address."""
    if host in ("localhost", "::1"):
        return True
    return host.startswith("127.")


def parse_handshake_opts(opts: list) -> dict:
    """Options after the handshake key: ``-timeout=<seconds>`` (as TVM)."""
    result = {}
    for item in opts:
        if item.startswith("-timeout="):
            try:
                result["timeout"] = float(item[len("-timeout="):])
            except ValueError:
                raise RPCError(f"invalid session timeout {item!r} in handshake") from None
    return result
