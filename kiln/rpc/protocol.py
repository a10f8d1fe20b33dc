"""kiln's session wire protocol: frames and the encoding of values inside them.

A frame is a 16-byte header ``<magic:u32><json_len:u32><blob_len:u64>`` (little endian,
magic ``0x314E4C4B`` = ``b"KLN1"``), then ``json_len`` bytes of a UTF-8 JSON object, then
``blob_len`` raw bytes (file contents, array data). Sizes are bounded: a JSON part over
``MAX_JSON_BYTES`` or a blob over the session's limit is a protocol error, which closes the
connection. See docs/rpc.md for the messages.

Values that cross the wire are JSON (None, bool, int, float, str, lists) plus tagged objects,
single-key dicts whose key starts with ``$``:

* ``{"$bytes": [offset, length]}`` bytes stored in the frame's blob;
* ``{"$nd": id, "shape": [...], "dtype": "float32", "dev": [type, index]}`` an array living on
  the server (requests carry just ``{"$nd": id}``);
* ``{"$mod": id, "type_key": ..., "entry_name": ...}`` a module on the server;
* ``{"$func": id}`` a function on the server;
* ``{"$dev": [type, index]}`` a device (the server's own numbering, no session mask);
* ``{"$np": {"dtype", "shape", "data": [offset, length]}}`` a numpy array copied by value;
* ``{"$bench": [seconds, ...]}`` a time_evaluator result.
"""
from __future__ import annotations

import json
import socket
import struct

from ..error import RPCError
from .. import error as kerr

FRAME_MAGIC = 0x314E4C4B
_HEADER = struct.Struct("<IIQ")
HEADER_BYTES = _HEADER.size
MAX_JSON_BYTES = 16 << 20
DEFAULT_MAX_BLOB_BYTES = 1 << 30
PROTOCOL_VERSION = 1


class ProtocolError(RPCError):
    """A frame that does not follow the session protocol (bad magic, size over the limit, bad JSON)."""


class SessionLost(RPCError):
    """The connection to the other side closed or failed in the middle of a session."""


_RECV_CHUNK = 1 << 22


def _recv_exact(sock: socket.socket, nbytes: int) -> bytearray:
    """Exactly ``nbytes`` bytes. Memory grows with the data that actually arrives (chunks joined at
    the end), never with what a header claims: a peer announcing 900 MB and sending nothing costs
    nothing."""
    if nbytes <= _RECV_CHUNK:
        buf = bytearray(nbytes)
        view = memoryview(buf)
        got = 0
        while got < nbytes:
            n = sock.recv_into(view[got:], nbytes - got)
            if n == 0:
                raise SessionLost("connection closed by peer")
            got += n
        return buf
    parts = []
    remaining = nbytes
    while remaining > 0:
        chunk = sock.recv(min(remaining, _RECV_CHUNK))
        if not chunk:
            raise SessionLost("connection closed by peer")
        parts.append(chunk)
        remaining -= len(chunk)
    return bytearray().join(parts)


def send_frame(sock: socket.socket, message: dict, blob_parts=()) -> None:
    """Send one frame; ``blob_parts`` is a sequence of bytes-like objects concatenated as the blob."""
    data = json.dumps(message, separators=(",", ":")).encode("utf-8")
    blob_len = sum(len(memoryview(p).cast("B")) for p in blob_parts)
    sock.sendall(_HEADER.pack(FRAME_MAGIC, len(data), blob_len) + data)
    for part in blob_parts:
        if len(part):
            sock.sendall(part)


def recv_frame(sock: socket.socket, max_blob: int = DEFAULT_MAX_BLOB_BYTES) -> tuple:
    """Receive one frame as ``(message dict, blob bytearray)``.

    Raises ProtocolError for a malformed frame and SessionLost when the peer closes.
    """
    magic, json_len, blob_len = _HEADER.unpack(bytes(_recv_exact(sock, HEADER_BYTES)))
    if magic != FRAME_MAGIC:
        raise ProtocolError(f"bad frame magic 0x{magic:08x} (expected 0x{FRAME_MAGIC:08x}): not a kiln RPC peer")
    if json_len == 0 or json_len > MAX_JSON_BYTES:
        raise ProtocolError(f"frame JSON part of {json_len} bytes (allowed 1..{MAX_JSON_BYTES})")
    if blob_len > max_blob:
        raise ProtocolError(f"frame blob of {blob_len} bytes exceeds the limit of {max_blob} bytes")
    raw = _recv_exact(sock, json_len)
    try:
        message = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ProtocolError(f"frame JSON part is not valid JSON: {err}") from None
    if not isinstance(message, dict):
        raise ProtocolError(f"frame JSON part must be an object, got {type(message).__name__}")
    blob = _recv_exact(sock, blob_len) if blob_len else bytearray()
    return message, blob


class BlobWriter:
    """Collects the blob parts of a frame being built and hands out ``[offset, length]`` refs."""

    def __init__(self):
        self.parts: list = []
        self.size = 0

    def add(self, data) -> list:
        view = memoryview(data).cast("B")
        ref = [self.size, len(view)]
        if len(view):
            self.parts.append(view)
            self.size += len(view)
        return ref


def blob_slice(blob, ref) -> memoryview:
    """The bytes a ``[offset, length]`` ref points at, checked against the blob's size."""
    if (not isinstance(ref, list) or len(ref) != 2 or not all(isinstance(x, int) and x >= 0 for x in ref)
            or ref[0] + ref[1] > len(blob)):
        raise ProtocolError(f"blob reference {ref!r} is outside the frame's blob of {len(blob)} bytes")
    return memoryview(blob)[ref[0]:ref[0] + ref[1]]


def error_payload(err: BaseException, traceback_text: str = "") -> dict:
    """How an exception travels back to the client."""
    return {"type": type(err).__name__, "message": str(err), "traceback": traceback_text}


def raise_remote_error(payload: dict, context: str = ""):
    """Re-raise an error sent by the server: the same kiln error class when it is one, else RPCError."""

    name = str(payload.get("type", "RPCError"))
    message = str(payload.get("message", ""))
    where = f" in {context}" if context else ""
    cls = getattr(kerr, name, None)
    if isinstance(cls, type) and issubclass(cls, kerr.KilnError):
        try:
            exc = cls(f"remote error{where}: {message}")
        except TypeError:
            exc = RPCError(f"remote {name}{where}: {message}")
    else:
        exc = RPCError(f"remote {name}{where}: {message}")
    exc.remote_traceback = payload.get("traceback", "")
    raise exc
