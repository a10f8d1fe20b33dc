"""The server side of a session: a table of objects the client holds handles to, and the operations.

One :class:`SessionHandler` serves one session. It runs inside the server's isolated worker
process (or in-process, for :class:`kiln.rpc.LocalSession`). Each request is
``{"op": name, "args": {...}, "free": [ids]}`` and is dispatched to ``op_<name>``; the answer is
``{"ok": true, "ret": value}`` or ``{"ok": false, "error": {...}}`` (see docs/rpc.md).
"""
from __future__ import annotations

import logging
import os
import shutil
import time
import traceback

import numpy as np
import numpy.random  # noqa: F401 - import once in the server, not in every forked session worker

from ..error import KilnError, RPCError
from ..runtime import ndarray as rt_nd
from ..runtime.device import Device
from ..runtime.module import load_module
from .protocol import BlobWriter, ProtocolError, blob_slice, error_payload
from ..runtime.registry import get_global_func, register_func

logger = logging.getLogger("kiln.rpc.server")


class PathEscapeError(RPCError, ValueError):
    """A session path that would leave the session's working directory."""


def resolve_session_path(workdir: str, path: str) -> str:
    """The absolute path of ``path`` inside ``workdir``; refuses absolute paths, '..' and symlink escapes."""
    if not isinstance(path, str) or not path or "\x00" in path:
        raise PathEscapeError(f"invalid session path {path!r}: expected a non-empty relative path")
    if os.path.isabs(path) or path.startswith("~"):
        raise PathEscapeError(f"session path {path!r} is absolute; paths are relative to the session's "
                              "working directory (e.g. 'lib.so' or 'sub/lib.so')")
    parts = path.replace("\\", "/").split("/")
    if ".." in parts:
        raise PathEscapeError(f"session path {path!r} contains '..'; paths may not leave the session's "
                              "working directory")
    root = os.path.realpath(workdir)
    full = os.path.realpath(os.path.join(root, path))
    if full != root and not full.startswith(root + os.sep):
        raise PathEscapeError(f"session path {path!r} resolves outside the session's working directory")
    return full


def random_fill(arr) -> None:
    """Fill an NDArray with random values, as TVM's ``tvm.contrib.random.random_fill``.

    Floats are uniform in [1, 10) (no zeros or denormals to distort timing), integers uniform in
    [1, 10] clipped to the type's range, booleans random.
    """
    rng = np.random.default_rng()
    shape, dtype = tuple(arr.shape), np.dtype(arr.dtype if arr.dtype != "bool" else np.bool_)
    if dtype.kind == "f":
        data = rng.uniform(1.0, 10.0, size=shape).astype(dtype)
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        data = rng.integers(max(1, int(info.min)), min(10, int(info.max)) + 1, size=shape).astype(dtype)
    elif dtype.kind == "b":
        data = rng.integers(0, 2, size=shape).astype(np.bool_)
    else:
        raise KilnError(f"random_fill: unsupported dtype {arr.dtype}")
    arr.copyfrom(data)


def _load_module(path: str):
    return load_module(path)


class SessionHandler:
    """Executes session requests against the local runtime, relative to ``workdir``."""

    def __init__(self, workdir: str, server_key: str = ""):
        self.workdir = os.path.realpath(workdir)
        self.server_key = server_key
        self._objects: dict = {}
        self._next_id = 1

    # -- handle table ----------------------------------------------------------------------------
    def _put(self, obj) -> int:
        hid = self._next_id
        self._next_id += 1
        self._objects[hid] = obj
        return hid

    def _get(self, hid, kind: str = "object"):
        if not isinstance(hid, int) or isinstance(hid, bool) or hid not in self._objects:
            raise RPCError(f"unknown remote {kind} handle {hid!r} (already freed, or from another session)")
        return self._objects[hid]

    def free(self, ids) -> None:
        for hid in ids if isinstance(ids, list) else []:
            if isinstance(hid, int):
                self._objects.pop(hid, None)

    @property
    def num_objects(self) -> int:
        return len(self._objects)

    # -- value codec -----------------------------------------------------------------------------
    def decode(self, value, blob):
        """Turn a wire value of a request into a local Python value."""
        if isinstance(value, list):
            return [self.decode(v, blob) for v in value]
        if isinstance(value, dict):
            if len(value) == 0:
                raise ProtocolError("empty object is not a valid argument")
            tag = next(iter(value))
            if tag == "$nd":
                return self._get(value["$nd"], "array")
            if tag == "$func":
                return self._get(value["$func"], "function")
            if tag == "$mod":
                return self._get(value["$mod"], "module")
            if tag == "$dev":
                dev_type, dev_id = value["$dev"]
                return Device(int(dev_type), int(dev_id))
            if tag == "$bytes":
                return bytearray(blob_slice(blob, value["$bytes"]))
            if tag == "$np":
                spec = value["$np"]
                raw = blob_slice(blob, spec["data"])
                return np.frombuffer(raw, dtype=np.dtype(spec["dtype"])).reshape(spec["shape"]).copy()
            raise ProtocolError(f"unknown value tag {tag!r}")
        return value

    def encode(self, value, blobs: BlobWriter):
        """Turn a local result into a wire value (objects stay here; the client gets a handle)."""
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, (np.integer, np.bool_)):
            return int(value) if not isinstance(value, np.bool_) else bool(value)
        if isinstance(value, np.floating):
            return float(value)
        if isinstance(value, (list, tuple)):
            return [self.encode(v, blobs) for v in value]
        if isinstance(value, (bytes, bytearray, memoryview)):
            return {"$bytes": blobs.add(value)}
        if isinstance(value, rt_nd.NDArray):
            dev = value.device
            return {"$nd": self._put(value), "shape": list(value.shape), "dtype": value.dtype,
                    "dev": [dev.device_type, dev.device_id]}
        if isinstance(value, Device):
            return {"$dev": [value.device_type, value.device_id]}
        if isinstance(value, np.ndarray):
            arr = np.ascontiguousarray(value)
            return {"$np": {"dtype": arr.dtype.str, "shape": list(arr.shape), "data": blobs.add(arr.tobytes())}}
        if hasattr(value, "results") and type(value).__name__ == "BenchmarkResult":
            return {"$bench": [float(x) for x in value.results]}
        if hasattr(value, "get_function") and hasattr(value, "type_key"):
            return {"$mod": self._put(value), "type_key": str(value.type_key),
                    "entry_name": str(getattr(value, "entry_name", "") or "")}
        if callable(value):
            return {"$func": self._put(value)}
        if hasattr(value, "dtype") and hasattr(value, "bits"):  # a DataType
            return str(value)
        raise RPCError(f"cannot send a {type(value).__name__} back to the client")

    # -- dispatch --------------------------------------------------------------------------------
    def handle(self, message: dict, blob) -> tuple:
        """Run one request; returns ``(reply dict, blob parts)``. Never raises for a request's own error."""
        blobs = BlobWriter()
        self.free(message.get("free", []))
        op = message.get("op")
        method = getattr(self, f"op_{op}", None) if isinstance(op, str) else None
        if method is None:
            return {"ok": False, "error": {"type": "RPCError", "message": f"unknown session operation {op!r}",
                                           "traceback": ""}}, []
        args = message.get("args", {})
        if not isinstance(args, dict):
            return {"ok": False, "error": {"type": "ProtocolError", "message": "request args must be an object",
                                           "traceback": ""}}, []
        try:
            ret = method(blob=blob, blobs=blobs, **args)
            return {"ok": True, "ret": ret}, blobs.parts
        except ProtocolError:
            raise
        except Exception as err:  # noqa: BLE001 - every error of a request goes back to the client
            return {"ok": False, "error": error_payload(err, traceback.format_exc(limit=20))}, []

    # -- operations ------------------------------------------------------------------------------
    def op_ping(self, blob, blobs):
        return {"pid": os.getpid(), "server_pid": os.getppid(), "key": self.server_key}

    def op_upload(self, blob, blobs, path):
        full = resolve_session_path(self.workdir, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        tmp = full + ".part"
        with open(tmp, "wb") as f:
            f.write(blob)
        os.replace(tmp, full)
        logger.info("upload %s (%d bytes)", path, len(blob))
        return None

    def op_download(self, blob, blobs, path):
        full = resolve_session_path(self.workdir, path)
        if not os.path.isfile(full):
            raise RPCError(f"download: no file {path!r} in the session's working directory")
        with open(full, "rb") as f:
            return {"$bytes": blobs.add(f.read())}

    def op_remove(self, blob, blobs, path):
        full = resolve_session_path(self.workdir, path)
        if full == self.workdir:
            raise PathEscapeError("remove: refusing to remove the session's working directory itself")
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full)
        elif os.path.lexists(full):
            os.remove(full)
        else:
            raise RPCError(f"remove: no file {path!r} in the session's working directory")
        return None

    def op_listdir(self, blob, blobs, path="."):
        full = self.workdir if path in (".", "") else resolve_session_path(self.workdir, path)
        if not os.path.isdir(full):
            raise RPCError(f"listdir: {path!r} is not a directory of the session")
        prefix = "" if path in (".", "") else path.rstrip("/") + "/"
        return ",".join(prefix + name for name in sorted(os.listdir(full)))

    def op_workpath(self, blob, blobs, path):
        return resolve_session_path(self.workdir, path)

    def op_load_module(self, blob, blobs, path):
        full = resolve_session_path(self.workdir, path)
        if not os.path.exists(full):
            raise RPCError(f"load_module: no file {path!r} in the session's working directory; upload it first")
        mod = _load_module(full)
        logger.info("load_module %s", path)
        return self.encode(mod, blobs)

    def op_get_global_func(self, blob, blobs, name, allow_missing=False):

        func = get_global_func(name, allow_missing=True)
        if func is None:
            if allow_missing:
                return None
            get_global_func(name)  # raises the registry's error with close matches
        return {"$func": self._put(func)}

    def op_mod_get_function(self, blob, blobs, mod, name, query_imports=False):
        module = self._get(mod, "module")
        try:
            func = module.get_function(name, query_imports)
        except TypeError:
            func = module.get_function(name)
        if func is None:
            raise RPCError(f"module has no function {name!r}")
        return {"$func": self._put(func)}

    def op_mod_info(self, blob, blobs, mod):
        module = self._get(mod, "module")
        return {"type_key": str(getattr(module, "type_key", "")),
                "entry_name": str(getattr(module, "entry_name", "") or "")}

    def op_call(self, blob, blobs, func, args=()):
        target = self._get(func, "function")
        values = self.decode(list(args), blob)
        return self.encode(target(*values), blobs)

    def op_time_evaluator(self, blob, blobs, mod, name, dev, number=10, repeat=1, min_repeat_ms=0,
                          limit_zero_time_iterations=100, cooldown_interval_ms=0, repeats_to_cooldown=1,
                          f_preproc=""):
        module = self._get(mod, "module")
        device = self.decode(dev, blob)
        timer = module.time_evaluator(name, device, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms,
                                      limit_zero_time_iterations=limit_zero_time_iterations,
                                      cooldown_interval_ms=cooldown_interval_ms,
                                      repeats_to_cooldown=repeats_to_cooldown, f_preproc=f_preproc)
        return {"$func": self._put(timer)}

    def op_nd_empty(self, blob, blobs, shape, dtype, dev):
        return self.encode(rt_nd.empty(tuple(shape), dtype, self.decode(dev, blob)), blobs)

    def op_nd_array(self, blob, blobs, shape, dtype, dev, data):
        """Create an array on the server from bytes (one round trip for ``nd.array(x, remote_dev)``)."""
        arr = rt_nd.empty(tuple(shape), dtype, self.decode(dev, blob))
        arr.copyfrom(self._np_from(blob, data, arr))
        return self.encode(arr, blobs)

    def op_nd_copyfrom(self, blob, blobs, nd, data):
        arr = self._get(nd, "array")
        arr.copyfrom(self._np_from(blob, data, arr))
        return None

    def op_nd_copy_between(self, blob, blobs, src, dst):
        self._get(dst, "array").copyfrom(self._get(src, "array"))
        return None

    def op_nd_numpy(self, blob, blobs, nd):
        arr = self._get(nd, "array").numpy()
        return {"dtype": arr.dtype.str, "shape": list(arr.shape), "data": blobs.add(np.ascontiguousarray(arr))}

    def op_dev_exist(self, blob, blobs, dev):
        return bool(self.decode(dev, blob).exist)

    def op_dev_sync(self, blob, blobs, dev):
        self.decode(dev, blob).sync()
        return None

    def op_random_fill(self, blob, blobs, nd):
        random_fill(self._get(nd, "array"))
        return None

    @staticmethod
    def _np_from(blob, data: dict, arr) -> np.ndarray:
        raw = blob_slice(blob, data["data"])
        src_dtype = np.dtype(data["dtype"])
        count = int(np.prod(arr.shape, dtype=np.int64))
        if len(raw) != count * src_dtype.itemsize:
            raise RPCError(f"array data of {len(raw)} bytes does not match shape {tuple(arr.shape)} "
                           f"and dtype {src_dtype}")
        return np.frombuffer(raw, dtype=src_dtype).reshape(arr.shape)


def register_server_functions(handler_getter) -> None:
    """Register TVM's server-side global functions in this process's registry.

    ``handler_getter()`` returns the current session's handler (functions act on its directory).
    Names follow TVM: ``tvm.rpc.server.{workpath,upload,download,remove,listdir,load_module}`` and
    ``tvm.contrib.random.random_fill``.
    """

    def workpath(path):
        return resolve_session_path(handler_getter().workdir, path)

    def upload(path, data):
        handler_getter().op_upload(blob=data, blobs=None, path=path)

    def download(path):
        full = resolve_session_path(handler_getter().workdir, path)
        with open(full, "rb") as f:
            return bytearray(f.read())

    def remove(path):
        handler_getter().op_remove(blob=None, blobs=None, path=path)

    def listdir(path):
        return handler_getter().op_listdir(blob=None, blobs=None, path=path)

    def load_module(path):
        return _load_module(resolve_session_path(handler_getter().workdir, path))

    funcs = {
        "tvm.rpc.server.workpath": workpath,
        "tvm.rpc.server.upload": upload,
        "tvm.rpc.server.download": download,
        "tvm.rpc.server.remove": remove,
        "tvm.rpc.server.listdir": listdir,
        "tvm.rpc.server.load_module": load_module,
        "tvm.contrib.random.random_fill": random_fill,
    }
    for name, func in funcs.items():
        register_func(name, func, override=True)


def cleanup_workdir(path: str) -> None:
    """Remove a session directory, retrying briefly (files may still be closing)."""
    for _ in range(3):
        try:
            shutil.rmtree(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.05)
    shutil.rmtree(path, ignore_errors=True)
