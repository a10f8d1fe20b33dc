"""TVM's binary parameter-dict format (``relay.save_param_dict`` / ``GraphModule.load_params``).

Layout, little-endian (TVM's ``SaveParams``)::

    u64 0xF7E58D4F05049CB7   list magic
    u64 0                    reserved
    u64 N, then N names      each: u64 length + UTF-8 bytes
    u64 N, then N arrays     each (TVM's ``SaveDLTensor``):
        u64 0xDD5E40F096B4A13F   array magic
        u64 0                    reserved
        i32 device_type, i32 device_id   (always written as CPU 1, 0)
        i32 ndim
        u8 type code, u8 bits, u16 lanes
        i64 shape[ndim]
        i64 data byte size, then the data (row-major)

Lives in the runtime so a deployed model can load parameters with no compiler installed.
"""
from __future__ import annotations

import struct

import numpy as np

from ..error import ModuleLoadError
from .dtype import parse_dtype
from .ndarray import array

LIST_MAGIC = 0xF7E58D4F05049CB7
ARRAY_MAGIC = 0xDD5E40F096B4A13F

# DLDataType codes: 0 int, 1 uint, 2 float, 4 bfloat; bool is stored as uint1 (TVM writes bool as (1, 1)).
_CODE_OF_KIND = {"i": 0, "u": 1, "f": 2, "b": 1}


def _dtype_triple(arr: np.ndarray) -> tuple:
    kind = arr.dtype.kind
    if kind not in _CODE_OF_KIND:
        raise ModuleLoadError(f"save_param_dict: unsupported dtype {arr.dtype}")
    bits = 1 if kind == "b" else arr.dtype.itemsize * 8
    return _CODE_OF_KIND[kind], bits, 1


def _numpy_dtype(code: int, bits: int, lanes: int, name: str) -> np.dtype:
    if lanes != 1:
        raise ModuleLoadError(f"parameter {name!r}: vector dtype lanes={lanes} is not supported")
    if code == 1 and bits == 1:
        return np.dtype(np.bool_)
    prefix = {0: "int", 1: "uint", 2: "float"}.get(code)
    if prefix is None or bits not in (8, 16, 32, 64) or (prefix == "float" and bits == 8):
        raise ModuleLoadError(f"parameter {name!r}: unsupported data type (code={code}, bits={bits})")
    return parse_dtype(f"{prefix}{bits}").numpy_dtype()


def _as_numpy(value) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "numpy"):
        return value.numpy()
    return np.asarray(value)


def save_params(params: dict) -> bytes:
    """Serialize ``{name: NDArray | numpy array}`` to TVM's parameter-dict bytes."""
    out = [struct.pack("<QQ", LIST_MAGIC, 0), struct.pack("<Q", len(params))]
    arrays = []
    for name, value in params.items():
        raw = str(name).encode("utf-8")
        out.append(struct.pack("<Q", len(raw)) + raw)
        arr = _as_numpy(value)
        arrays.append(arr if arr.flags.c_contiguous else np.array(arr, order="C"))  # keeps 0-d arrays 0-d
    out.append(struct.pack("<Q", len(arrays)))
    for arr in arrays:
        code, bits, lanes = _dtype_triple(arr)
        out.append(struct.pack("<QQiii", ARRAY_MAGIC, 0, 1, 0, arr.ndim))
        out.append(struct.pack("<BBH", code, bits, lanes))
        out.append(struct.pack(f"<{arr.ndim}q", *arr.shape))
        data = arr.tobytes()
        out.append(struct.pack("<q", len(data)))
        out.append(data)
    return b"".join(out)


class _Reader:
    def __init__(self, data: bytes):
        self.data = memoryview(data)
        self.pos = 0

    def take(self, n: int, what: str) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise ModuleLoadError(f"parameter blob is truncated: {what} needs {n} bytes at offset {self.pos}, "
                                  f"only {len(self.data) - self.pos} remain")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: str, what: str) -> tuple:
        s = struct.Struct(fmt)
        return s.unpack(self.take(s.size, what))


def load_params(data) -> dict:
    """Parse TVM parameter-dict bytes into ``{name: numpy array}`` (raises ModuleLoadError on bad input)."""
    if isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    if not isinstance(data, bytes):
        raise ModuleLoadError(f"load_param_dict expects bytes, got {type(data).__name__}")
    r = _Reader(data)
    magic, _ = r.unpack("<QQ", "the header")
    if magic != LIST_MAGIC:
        raise ModuleLoadError(f"not a parameter dict: bad magic 0x{magic:016X} (expected 0x{LIST_MAGIC:016X})")
    (count,) = r.unpack("<Q", "the name count")
    if count > len(data):
        raise ModuleLoadError(f"parameter blob is corrupt: it claims {count} names")
    names = []
    for i in range(count):
        (n,) = r.unpack("<Q", f"the length of name {i}")
        try:
            names.append(bytes(r.take(n, f"name {i}")).decode("utf-8"))
        except UnicodeDecodeError:
            raise ModuleLoadError(f"parameter blob is corrupt: name {i} is not UTF-8") from None
    (num_arrays,) = r.unpack("<Q", "the array count")
    if num_arrays != count:
        raise ModuleLoadError(f"parameter blob is corrupt: {count} names but {num_arrays} arrays")
    out = {}
    for name in names:
        magic, _, _dev_type, _dev_id, ndim = r.unpack("<QQiii", f"the header of {name!r}")
        if magic != ARRAY_MAGIC:
            raise ModuleLoadError(f"parameter {name!r}: bad array magic 0x{magic:016X}")
        if not 0 <= ndim <= 32:
            raise ModuleLoadError(f"parameter {name!r}: corrupt ndim {ndim}")
        code, bits, lanes = r.unpack("<BBH", f"the dtype of {name!r}")
        dtype = _numpy_dtype(code, bits, lanes, name)
        shape = r.unpack(f"<{ndim}q", f"the shape of {name!r}") if ndim else ()
        if any(s < 0 for s in shape):
            raise ModuleLoadError(f"parameter {name!r}: negative extent in shape {shape}")
        (nbytes,) = r.unpack("<q", f"the size of {name!r}")
        expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if nbytes != expected:
            raise ModuleLoadError(f"parameter {name!r}: data size {nbytes} does not match shape {tuple(shape)} "
                                  f"of {dtype} ({expected} bytes)")
        raw = r.take(nbytes, f"the data of {name!r}")
        out[name] = np.frombuffer(bytes(raw), dtype=dtype).reshape(shape).copy()
    return out


def save_param_dict(params: dict) -> bytearray:
    """Serialize ``{name: NDArray | numpy array}`` to bytes in TVM's format (``tvm.runtime.save_param_dict``)."""
    return bytearray(save_params(params))


def load_param_dict(param_bytes) -> dict:
    """``{name: NDArray}`` from bytes written by ``save_param_dict`` (or by TVM)."""
    return {k: array(v) for k, v in load_params(param_bytes).items()}
