"""RPC clients: sessions with a server (``connect``), the tracker (``connect_tracker``), ``LocalSession``.

A session hands out proxies for objects that live on the server: :class:`RemoteModule`,
:class:`RemoteFunction`, :class:`RemoteNDArray` and :class:`RemoteDevice`. Calling a proxy sends
one request and waits for its answer. Dropped proxies are freed on the server with the next request.
"""
from __future__ import annotations

import os
import socket
import struct
import threading
import time
import weakref

import numpy as np

from ..error import KilnError, RPCError
from ..runtime.benchmark import BenchmarkResult
from . import base
from .base import RPC_MAGIC, RPC_SESS_MASK, TrackerCode
from .protocol import (DEFAULT_MAX_BLOB_BYTES, BlobWriter, ProtocolError, SessionLost, blob_slice, raise_remote_error,
                       recv_frame, send_frame)
from ..runtime import ndarray as rt_nd
from ..runtime.device import Device, device as make_device
from .session_handler import SessionHandler, cleanup_workdir, register_server_functions
from .server import auth_digest
from .tracker import format_summary

# Sessions by table index: a remote device's type carries (index + 1) * RPC_SESS_MASK, as in TVM.
_SESSIONS: list = []
_SESSIONS_LOCK = threading.Lock()


def _register_session(sess) -> int:
    with _SESSIONS_LOCK:
        for i, ref in enumerate(_SESSIONS):
            if ref() is None:
                _SESSIONS[i] = weakref.ref(sess)
                return i
        _SESSIONS.append(weakref.ref(sess))
        return len(_SESSIONS) - 1


# ---------------------------------------------------------------------------------------------
# transports
# ---------------------------------------------------------------------------------------------
class _SocketTransport:
    """Frames over a connected socket."""

    def __init__(self, sock: socket.socket, peer: str, max_blob: int):
        self.sock = sock
        self.peer = peer
        self.max_blob = max_blob

    def request(self, message: dict, parts) -> tuple:
        try:
            send_frame(self.sock, message, parts)
            return recv_frame(self.sock, self.max_blob)
        except ProtocolError as err:
            raise SessionLost(f"RPC server {self.peer} sent a malformed reply to {message.get('op')!r}: {err}") from None
        except (SessionLost, OSError) as err:
            raise SessionLost(f"lost the connection to the RPC server {self.peer} during {message.get('op')!r} "
                              f"({err}); the server or its session worker is gone") from None

    def close(self) -> None:
        try:
            self.sock.settimeout(1.0)
            send_frame(self.sock, {"op": "shutdown", "args": {}})
            recv_frame(self.sock, 1 << 10)
        except (OSError, RPCError):
            pass
        try:
            self.sock.close()
        except OSError:
            pass


class _LocalTransport:
    """Requests handled in this process by a SessionHandler (for LocalSession)."""

    def __init__(self, handler):
        self.handler = handler
        self.peer = "local"

    def request(self, message: dict, parts) -> tuple:
        blob = b"".join(bytes(p) for p in parts) if parts else b""
        reply, out_parts = self.handler.handle(message, blob)
        return reply, b"".join(bytes(p) for p in out_parts) if out_parts else b""

    def close(self) -> None:
        pass


# ---------------------------------------------------------------------------------------------
# remote objects
# ---------------------------------------------------------------------------------------------
class _RemoteObject:
    """Base of proxies: a session and a handle id; freeing is deferred to the session's next request."""

    __slots__ = ("_sess", "_hid", "__weakref__")

    def __init__(self, sess: "RPCSession", hid: int):
        self._sess = sess
        self._hid = hid

    def __del__(self):
        sess = getattr(self, "_sess", None)
        if sess is not None:
            sess._defer_free(self._hid)

    def _handle_in(self, sess: "RPCSession", what: str) -> int:
        if sess is not self._sess:
            raise RPCError(f"{what} belongs to another RPC session ({self._sess}) than the one it is used with ({sess})")
        return self._hid


class RemoteDevice(Device):
    """A device of a remote session; its ``device_type`` carries the session mask as in TVM."""

    __slots__ = ("_rpc_sess", "local_device_type")

    def __init__(self, sess: "RPCSession", dev_type: int, dev_id: int = 0):
        Device(dev_type, dev_id)  # validates the type code
        self._rpc_sess = sess
        self.local_device_type = int(dev_type)
        self.device_type = int(dev_type) + (sess._tbl_index + 1) * RPC_SESS_MASK
        self.device_id = int(dev_id)

    @property
    def exist(self) -> bool:
        return bool(self._rpc_sess._call("dev_exist", dev=self._wire())[0])

    def sync(self) -> None:
        self._rpc_sess._call("dev_sync", dev=self._wire())

    @property
    def device_name(self):
        return Device.MASK2STR[self.local_device_type]

    def _wire(self) -> dict:
        return {"$dev": [self.local_device_type, self.device_id]}

    def __str__(self) -> str:
        return f"remote[{self._rpc_sess._tbl_index}]:{Device.MASK2STR[self.local_device_type]}({self.device_id})"

    __repr__ = __str__

    def __eq__(self, other) -> bool:
        return Device.__eq__(self, other)

    def __hash__(self) -> int:
        return Device.__hash__(self)


class RemoteNDArray(_RemoteObject):
    """An array that lives on the server; ``numpy()`` copies it back."""

    __slots__ = ("shape", "dtype", "device")

    def __init__(self, sess: "RPCSession", hid: int, shape, dtype: str, dev: RemoteDevice):
        super().__init__(sess, hid)
        self.shape = tuple(int(s) for s in shape)
        self.dtype = str(dtype)
        self.device = dev

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    ctx = property(lambda self: self.device)

    def numpy(self) -> np.ndarray:
        ret, blob = self._sess._call("nd_numpy", nd=self._hid)
        raw = blob_slice(blob, ret["data"])
        return np.frombuffer(raw, dtype=np.dtype(ret["dtype"])).reshape(ret["shape"]).copy()

    def asnumpy(self) -> np.ndarray:
        return self.numpy()

    def copyfrom(self, source) -> "RemoteNDArray":
        """Copy a numpy array, a local NDArray, a list, or another array of this session into this one."""
        if isinstance(source, RemoteNDArray):
            self._sess._call("nd_copy_between", src=source._handle_in(self._sess, "source array"), dst=self._hid)
            return self
        arr = _as_numpy(source, self.dtype)
        if tuple(arr.shape) != self.shape:
            raise KilnError(f"copyfrom: shape mismatch, source has shape {tuple(arr.shape)}, "
                            f"destination has shape {self.shape}")
        blobs = BlobWriter()
        data = {"dtype": arr.dtype.str, "data": blobs.add(arr)}
        self._sess._call("nd_copyfrom", blobs.parts, nd=self._hid, data=data)
        return self

    def copyto(self, target):
        """Copy into an array (local or of this session) or onto a device (local or remote)."""
        if isinstance(target, RemoteNDArray):
            return target.copyfrom(self)
        if isinstance(target, RemoteDevice):
            out = target._rpc_sess._nd_empty(self.shape, self.dtype, target)
            return out.copyfrom(self) if target._rpc_sess is self._sess else out.copyfrom(self.numpy())
        if isinstance(target, Device):

            return rt_nd.array(self.numpy(), target)
        if hasattr(target, "copyfrom"):
            return target.copyfrom(self.numpy())
        raise KilnError(f"copyto: expected an NDArray or a Device, got {type(target).__name__}")

    def __setitem__(self, key, value) -> None:
        if not (isinstance(key, slice) and key == slice(None)):
            raise KilnError("NDArray supports only whole-array assignment: arr[:] = value")
        if isinstance(value, (int, float, bool, np.generic)):
            value = np.full(self.shape, value, dtype=np.dtype(self.dtype if self.dtype != "bool" else np.bool_))
        self.copyfrom(value)

    def same_as(self, other) -> bool:
        return isinstance(other, RemoteNDArray) and other._sess is self._sess and other._hid == self._hid

    def __repr__(self) -> str:
        return f"<kiln.rpc.RemoteNDArray shape={self.shape}, dtype={self.dtype}, {self.device}>"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d NDArray")
        return self.shape[0]


class RemoteFunction(_RemoteObject):
    """A function on the server (a kernel, a registry function, a timer); call it like a local one."""

    __slots__ = ("name",)

    def __init__(self, sess: "RPCSession", hid: int, name: str = "<remote>"):
        super().__init__(sess, hid)
        self.name = name

    def __call__(self, *args):
        blobs = BlobWriter()
        wire = [self._sess._encode(a, blobs, i) for i, a in enumerate(args)]
        ret, blob = self._sess._call("call", blobs.parts, _context=self.name, func=self._hid, args=wire)
        return self._sess._decode(ret, blob)

    def __repr__(self) -> str:
        return f"<kiln.rpc.RemoteFunction {self.name}>"


class RemoteModule(_RemoteObject):
    """A runtime module loaded on the server (``remote.load_module(path)``)."""

    __slots__ = ("type_key", "entry_name", "_entry", "_funcs")

    def __init__(self, sess: "RPCSession", hid: int, type_key: str = "", entry_name: str = ""):
        super().__init__(sess, hid)
        self.type_key = type_key
        self.entry_name = entry_name
        self._entry = None
        self._funcs: dict = {}

    def get_function(self, name: str, query_imports: bool = False) -> RemoteFunction:
        func = self._funcs.get(name)
        if func is None:
            ret, _ = self._sess._call("mod_get_function", _context=f"get_function({name!r})", mod=self._hid,
                                      name=name, query_imports=query_imports)
            func = RemoteFunction(self._sess, ret["$func"], name)
            self._funcs[name] = func
        return func

    def __getitem__(self, name: str) -> RemoteFunction:
        if not isinstance(name, str):
            raise KilnError(f"module functions are looked up by name, got {type(name).__name__}")
        return self.get_function(name)

    def __call__(self, *args):
        if self._entry is None:
            if not self.entry_name:
                raise RPCError("this remote module has no entry function; use get_function(name)")
            self._entry = self.get_function(self.entry_name)
        return self._entry(*args)

    def time_evaluator(self, func_name: str, dev, number: int = 10, repeat: int = 1, min_repeat_ms: int = 0,
                       limit_zero_time_iterations: int = 100, cooldown_interval_ms: int = 0,
                       repeats_to_cooldown: int = 1, f_preproc: str = ""):
        """A timer for ``func_name`` that runs on the server; calling it returns a BenchmarkResult."""
        if isinstance(dev, RemoteDevice):
            if dev._rpc_sess is not self._sess:
                raise RPCError(f"time_evaluator: device {dev} belongs to another session")
            wire_dev = dev._wire()
        elif isinstance(dev, Device):
            wire_dev = {"$dev": [dev.device_type, dev.device_id]}
        else:
            raise KilnError(f"time_evaluator: expected a device, got {type(dev).__name__}")
        ret, _ = self._sess._call("time_evaluator", _context=f"time_evaluator({func_name!r})", mod=self._hid,
                                  name=func_name, dev=wire_dev, number=int(number), repeat=int(repeat),
                                  min_repeat_ms=int(min_repeat_ms),
                                  limit_zero_time_iterations=int(limit_zero_time_iterations),
                                  cooldown_interval_ms=int(cooldown_interval_ms),
                                  repeats_to_cooldown=int(repeats_to_cooldown), f_preproc=f_preproc)
        return RemoteFunction(self._sess, ret["$func"], f"time_evaluator({func_name})")

    def export_library(self, *args, **kwargs):
        raise RPCError("export_library: this module lives on an RPC server; export the local module before uploading")

    def __repr__(self) -> str:
        return f"<kiln.rpc.RemoteModule {self.type_key} on {self._sess}>"


def _as_numpy(source, dtype: str) -> np.ndarray:
    np_dtype = np.dtype(np.bool_) if dtype == "bool" else np.dtype(dtype)
    if hasattr(source, "numpy") and not isinstance(source, np.ndarray):
        source = source.numpy()
    arr = np.ascontiguousarray(np.asarray(source))
    if arr.dtype != np_dtype:
        if arr.dtype.kind not in "biuf":
            raise KilnError(f"cannot copy a {arr.dtype} array into a {dtype} array")
        arr = arr.astype(np_dtype)
    return arr


def _benchmark_result(costs: list):
    return BenchmarkResult(costs)


# ---------------------------------------------------------------------------------------------
# sessions
# ---------------------------------------------------------------------------------------------
class RPCSession:
    """A session with one server (do not construct directly: use :func:`connect` or the tracker)."""

    def __init__(self, transport, server_key: str = "", max_blob: int = DEFAULT_MAX_BLOB_BYTES):
        self._transport = transport
        self._lock = threading.RLock()
        self._pending_free: list = []
        self._closed = False
        self._close_reason = ""
        self.server_key = server_key
        self.max_blob = max_blob
        self._tbl_index = _register_session(self)

    # -- plumbing --------------------------------------------------------------------------------
    def _defer_free(self, hid: int) -> None:
        if not self._closed:
            self._pending_free.append(hid)

    def _call(self, op: str, parts=(), _context: str | None = None, **args) -> tuple:
        with self._lock:
            if self._closed:
                raise RPCError(f"the RPC session is closed{': ' + self._close_reason if self._close_reason else ''}")
            message = {"op": op, "args": args}
            if self._pending_free:
                message["free"], self._pending_free = self._pending_free, []
            try:
                reply, blob = self._transport.request(message, list(parts))
            except SessionLost as err:
                self._mark_closed(str(err))
                raise
            if not reply.get("ok"):
                if reply.get("fatal"):
                    self._mark_closed(str(reply.get("error", {}).get("message", "")))
                raise_remote_error(reply.get("error", {}), _context or op)
            return reply.get("ret"), blob

    def _mark_closed(self, reason: str) -> None:
        self._closed = True
        self._close_reason = reason
        self._pending_free = []
        try:
            self._transport.close()
        except Exception:  # noqa: BLE001
            pass

    def _encode(self, value, blobs: BlobWriter, index: int = 0):
        if isinstance(value, (RemoteNDArray, RemoteFunction, RemoteModule)):
            tag = {RemoteNDArray: "$nd", RemoteFunction: "$func", RemoteModule: "$mod"}[type(value)]
            return {tag: value._handle_in(self, f"argument {index}")}
        if isinstance(value, RemoteDevice):
            if value._rpc_sess is not self:
                raise RPCError(f"argument {index}: device {value} belongs to another session")
            return value._wire()
        if isinstance(value, Device):
            return {"$dev": [value.device_type, value.device_id]}
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, np.generic) and value.dtype.kind in "biuf":
            return value.item()
        if isinstance(value, (bytes, bytearray, memoryview)):
            return {"$bytes": blobs.add(value)}
        if isinstance(value, (list, tuple)):
            return [self._encode(v, blobs, index) for v in value]
        if hasattr(value, "bits") and hasattr(value, "lanes"):  # DataType
            return str(value)
        if isinstance(value, np.ndarray) or type(value).__name__ == "NDArray":
            raise RPCError(f"argument {index} is a local {type(value).__name__}; a remote function needs arrays "
                           "on the server: create them with kiln.nd.array(x, remote.cpu())")
        raise RPCError(f"argument {index}: cannot send a {type(value).__name__} to an RPC server")

    def _decode(self, value, blob):
        if isinstance(value, list):
            return [self._decode(v, blob) for v in value]
        if not isinstance(value, dict):
            return value
        if "$nd" in value:
            dev_type, dev_id = value["dev"]
            return RemoteNDArray(self, value["$nd"], value["shape"], value["dtype"], self.device(dev_type, dev_id))
        if "$func" in value:
            return RemoteFunction(self, value["$func"])
        if "$mod" in value:
            return RemoteModule(self, value["$mod"], value.get("type_key", ""), value.get("entry_name", ""))
        if "$dev" in value:
            return self.device(*value["$dev"])
        if "$bytes" in value:
            return bytearray(blob_slice(blob, value["$bytes"]))
        if "$np" in value:
            spec = value["$np"]
            raw = blob_slice(blob, spec["data"])
            return np.frombuffer(raw, dtype=np.dtype(spec["dtype"])).reshape(spec["shape"]).copy()
        if "$bench" in value:
            return _benchmark_result(value["$bench"])
        raise ProtocolError(f"unknown value tag in reply: {sorted(value)}")

    # remote arrays (kiln.nd.array / kiln.nd.empty on a remote device end up here)
    def _nd_empty(self, shape, dtype, dev: RemoteDevice) -> RemoteNDArray:
        shape = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
        ret, blob = self._call("nd_empty", shape=list(shape), dtype=str(dtype), dev=dev._wire())
        return self._decode(ret, blob)

    def _nd_array(self, source, dev: RemoteDevice, dtype=None) -> RemoteNDArray:
        if isinstance(source, RemoteNDArray):
            source = source.numpy()
        elif hasattr(source, "numpy") and not isinstance(source, np.ndarray):
            source = source.numpy()
        arr = np.asarray(source) if dtype is None else np.asarray(source, dtype=np.dtype(str(dtype)))
        arr = np.ascontiguousarray(arr)
        blobs = BlobWriter()
        data = {"dtype": arr.dtype.str, "data": blobs.add(arr)}
        dtype_str = "bool" if arr.dtype == np.bool_ else str(arr.dtype)
        ret, blob = self._call("nd_array", blobs.parts, shape=list(arr.shape), dtype=dtype_str, dev=dev._wire(),
                               data=data)
        return self._decode(ret, blob)

    # -- public API (TVM's RPCSession) ----------------------------------------------------------
    def get_function(self, name: str) -> RemoteFunction:
        """A function of the server's global registry (``register_func`` on the server side)."""
        ret, _ = self._call("get_global_func", _context=f"get_function({name!r})", name=name)
        return RemoteFunction(self, ret["$func"], name)

    def device(self, dev_type, dev_id: int = 0) -> RemoteDevice:
        """A device of the server: ``remote.device("cpu", 0)`` or ``remote.device(1, 0)``."""

        if isinstance(dev_type, int) and dev_type >= RPC_SESS_MASK:
            dev_type = dev_type % RPC_SESS_MASK
        local = make_device(dev_type, dev_id)
        return RemoteDevice(self, local.device_type, local.device_id)

    def cpu(self, dev_id: int = 0) -> RemoteDevice:
        return self.device(Device.kDLCPU, dev_id)

    def cuda(self, dev_id: int = 0) -> RemoteDevice:
        return self.device(Device.kDLCUDA, dev_id)

    gpu = cuda

    def cl(self, dev_id: int = 0) -> RemoteDevice:
        return self.device(Device.kDLOpenCL, dev_id)

    def vulkan(self, dev_id: int = 0) -> RemoteDevice:
        return self.device(Device.kDLVulkan, dev_id)

    def metal(self, dev_id: int = 0) -> RemoteDevice:
        return self.device(Device.kDLMetal, dev_id)

    def rocm(self, dev_id: int = 0) -> RemoteDevice:
        return self.device(Device.kDLROCM, dev_id)

    def ext_dev(self, dev_id: int = 0) -> RemoteDevice:
        return self.device(Device.kDLExtDev, dev_id)

    def upload(self, data, target: str | None = None) -> None:
        """Copy a local file (path) or bytes to the session's working directory on the server."""
        if isinstance(data, (bytes, bytearray, memoryview)):
            if not target:
                raise RPCError("upload: target must be given when uploading bytes")
            blob = data
        else:
            path = os.fspath(data)
            if not os.path.isfile(path):
                raise RPCError(f"upload: no local file {path!r}")
            with open(path, "rb") as f:
                blob = f.read()
            target = target or os.path.basename(path)
        if len(blob) > self.max_blob:
            raise RPCError(f"upload: {len(blob)} bytes exceed the server's message limit of {self.max_blob} bytes")
        self._call("upload", [blob], _context=f"upload({target!r})", path=target)

    def download(self, path: str) -> bytearray:
        """The contents of a file in the session's working directory."""
        ret, blob = self._call("download", _context=f"download({path!r})", path=path)
        return bytearray(blob_slice(blob, ret["$bytes"]))

    def remove(self, path: str) -> None:
        """Delete a file (or directory) of the session's working directory."""
        self._call("remove", _context=f"remove({path!r})", path=path)

    def listdir(self, path: str = ".") -> str:
        """Entries of a directory of the session, comma separated (as TVM returns them)."""
        return self._call("listdir", _context=f"listdir({path!r})", path=path)[0]

    def load_module(self, path: str) -> RemoteModule:
        """Load an uploaded library on the server."""
        ret, _ = self._call("load_module", _context=f"load_module({path!r})", path=path)
        return RemoteModule(self, ret["$mod"], ret.get("type_key", ""), ret.get("entry_name", ""))

    def system_lib(self):
        raise RPCError("system_lib is not supported by kiln's RPC server: upload a library and use load_module")

    def ping(self) -> dict:
        """Round trip to the server; returns the worker's pid and key."""
        return self._call("ping")[0]

    @property
    def is_closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """End the session (the server cleans its working directory)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._close_reason = "closed by the client"
                self._transport.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass

    def __repr__(self) -> str:
        return f"<RPCSession {self._transport.peer} key={self.server_key!r}>"


class LocalSession(RPCSession):
    """The RPCSession API on this process (same code path as a server, no network or isolation)."""

    def __init__(self):
        import tempfile


        self._workdir = tempfile.mkdtemp(prefix="kiln-rpc-local-")
        handler = SessionHandler(self._workdir, "local")
        register_server_functions(lambda: handler)
        self._finalizer = weakref.finalize(self, cleanup_workdir, self._workdir)
        super().__init__(_LocalTransport(handler), "local")

    def close(self) -> None:
        super().close()
        self._finalizer()


def _handshake(sock: socket.socket, key: str, peer: str) -> str:
    data = ("client:" + key).encode("utf-8")
    sock.sendall(struct.pack("<ii", RPC_MAGIC, len(data)) + data)
    code = struct.unpack("<i", base.recvall(sock, 4))[0]
    if code == base.RPC_CODE_MISMATCH:
        raise RPCError(f"RPC server {peer} rejected the key {key.split()[0] if key.split() else key!r} "
                       "(it serves another key, or its tracker slot was taken)")
    if code != base.RPC_CODE_SUCCESS:
        raise RPCError(f"{peer} is not an RPC server (handshake code {code:#x})")
    keylen = struct.unpack("<i", base.recvall(sock, 4))[0]
    if keylen < 0 or keylen > base.MAX_HANDSHAKE_KEY_BYTES:
        raise RPCError(f"{peer} sent a bad server key length {keylen}")
    return base.recvall(sock, keylen).decode("utf-8", "replace")


def connect(url: str, port: int, key: str = "", session_timeout: float = 0, session_constructor_args=None,
            enable_logging: bool = False, *, token: str | None = None, timeout: float = 30.0) -> RPCSession:
    """Open a session with the server at ``url:port``.

    ``key`` is the match key (the server's key when it runs without a tracker). ``session_timeout``
    (seconds, 0 = none) lets the server end a session that runs too long. ``token`` (default
    ``$KILN_RPC_TOKEN``) is the shared secret of a server started with one. ``timeout`` bounds
    connecting and the handshake.
    """
    if session_constructor_args:
        raise RPCError("session_constructor_args (RPC proxies) are not supported by kiln")
    peer = f"{url}:{port}"
    if session_timeout:
        key = f"{key} -timeout={session_timeout}"
    token = token if token is not None else os.environ.get("KILN_RPC_TOKEN")
    try:
        sock = socket.create_connection((url, int(port)), timeout=timeout)
    except OSError as err:
        raise RPCError(f"cannot connect to RPC server {peer}: {err}") from None
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        server_key = _handshake(sock, key, peer)
        hello, _ = recv_frame(sock, 1 << 16)
        if "kiln_rpc" not in hello:
            raise RPCError(f"{peer} is not a kiln RPC server (unexpected hello {str(hello)[:80]!r})")
        nonce = hello.get("nonce")
        auth = None
        if nonce:
            if not token:
                raise RPCError(f"RPC server {peer} requires a token: pass token=... or set KILN_RPC_TOKEN")

            auth = auth_digest(token, nonce)
        send_frame(sock, {"auth": auth})
        reply, _ = recv_frame(sock, 1 << 16)
        if not reply.get("ok"):
            raise RPCError(f"RPC server {peer} refused the session: {reply.get('error', {}).get('message', '')}")
        sock.settimeout(None)
    except (OSError, ProtocolError, SessionLost, RPCError) as err:
        sock.close()
        if isinstance(err, RPCError) and not isinstance(err, (ProtocolError, SessionLost)):
            raise
        raise RPCError(f"handshake with RPC server {peer} failed: {err}") from None
    max_blob = int(hello.get("max_blob") or DEFAULT_MAX_BLOB_BYTES)
    sess = RPCSession(_SocketTransport(sock, peer, max_blob), server_key.partition(":")[2], max_blob)
    return sess


class TrackerSession:
    """A connection to a tracker (TVM's ``TrackerSession``)."""

    def __init__(self, addr: tuple, timeout: float | None = None):
        self._addr = (addr[0], int(addr[1]))
        self._timeout = timeout
        self._sock = None
        self._connect()

    def _connect(self) -> None:
        try:
            if self._timeout is not None:
                sock = socket.create_connection(self._addr, timeout=self._timeout)
            else:
                sock = base.connect_with_retry(self._addr)
            sock.sendall(struct.pack("<i", base.RPC_TRACKER_MAGIC))
            magic = struct.unpack("<i", base.recvall(sock, 4))[0]
        except OSError as err:
            raise RPCError(f"cannot connect to the RPC tracker at {self._addr[0]}:{self._addr[1]}: {err}") from None
        if magic != base.RPC_TRACKER_MAGIC:
            sock.close()
            raise RPCError(f"{self._addr[0]}:{self._addr[1]} is not an RPC tracker")
        self._sock = sock

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def __del__(self):
        self.close()

    def _ask(self, message):
        if self._sock is None:
            self._connect()
        try:
            base.sendjson(self._sock, message)
            return base.recvjson(self._sock)
        except OSError as err:
            self.close()
            raise RPCError(f"lost the connection to the tracker {self._addr[0]}:{self._addr[1]}: {err}") from None

    def ping(self) -> bool:
        return self._ask([TrackerCode.PING]) == TrackerCode.SUCCESS

    def summary(self) -> dict:
        """The tracker's state: ``{"queue_info": {key: {free, pending}}, "server_info": [...]}``."""
        value = self._ask([TrackerCode.SUMMARY])
        if not isinstance(value, list) or value[0] != TrackerCode.SUCCESS:
            raise RPCError(f"unexpected SUMMARY answer from the tracker: {value!r}")
        return value[1]

    def text_summary(self) -> str:
        """The summary as a table of servers and queues."""

        return format_summary(self.summary())

    def _request_once(self, key: str, priority, request_timeout: float | None):
        if self._sock is None:
            self._connect()
        base.sendjson(self._sock, [TrackerCode.REQUEST, key, "", priority])
        self._sock.settimeout(request_timeout)
        try:
            value = base.recvjson(self._sock)
        except socket.timeout:
            self.close()  # the tracker drops our queued request when we disconnect
            raise RPCError(f"no server with key {key!r} became free within {request_timeout}s "
                           f"(tracker {self._addr[0]}:{self._addr[1]})") from None
        finally:
            if self._sock is not None:
                self._sock.settimeout(self._timeout)
        if not isinstance(value, list) or value[0] != TrackerCode.SUCCESS:
            raise RPCError(f"unexpected REQUEST answer from the tracker: {value!r}")
        return value[1]

    def request(self, key: str, priority: int = 1, session_timeout: float = 0, max_retry: int = 5,
                session_constructor_args=None, *, request_timeout: float | None = None,
                token: str | None = None) -> RPCSession:
        """Wait for a free server of ``key`` (higher ``priority`` first) and open a session with it.

        ``request_timeout`` (kiln extension) bounds the wait in the queue; the default waits forever,
        as TVM does.
        """
        last_err = None
        for _ in range(max(1, max_retry)):
            try:
                url, port, matchkey = self._request_once(key, priority, request_timeout)
                return connect(url, port, matchkey, session_timeout, session_constructor_args, token=token)
            except OSError as err:
                self.close()
                last_err = err
            except RPCError as err:
                if "became free within" in str(err) or "requires a token" in str(err):
                    raise
                last_err = err
        raise RPCError(f"cannot get a session with a {key!r} server after {max_retry} tries; last error: {last_err}")

    def request_and_run(self, key: str, func, priority: int = 1, session_timeout: float = 0, max_retry: int = 2):
        """Run ``func(session)`` on a server of ``key``, on another server if the first one drops out."""
        last_err = None
        for _ in range(max(1, max_retry)):
            start = time.time()
            try:
                sess = self.request(key, priority=priority, session_timeout=session_timeout)
                return func(sess)
            except RPCError as err:
                if session_timeout and time.time() - start >= session_timeout * 0.95:
                    raise RPCError(f"session timeout when running {getattr(func, '__name__', func)}") from err
                last_err = err
        raise RPCError(f"failed to run on {key!r} after {max_retry} tries; last error: {last_err}")

    def __repr__(self) -> str:
        return f"<TrackerSession {self._addr[0]}:{self._addr[1]}>"


def connect_tracker(url: str, port: int, timeout: float | None = None) -> TrackerSession:
    """Connect to a tracker (TVM retries refused connections for a minute; ``timeout`` bounds it)."""
    return TrackerSession((url, port), timeout)
