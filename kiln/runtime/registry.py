"""The global function registry (TVM's PackedFunc registry) and the C callback into it.

``register_func`` adds a Python callable under a name; compiled kernels reach it through the
``__kiln_call_packed`` function pointer that the loader points at :data:`CALL_PACKED_CALLBACK`.
"""
from __future__ import annotations

import ctypes
import difflib
import threading
from typing import Callable

import numpy as np

from ..error import KilnError
from . import abi
from .device import Device
from .dtype import DataType
from .ndarray import NDArray


class GlobalFuncNotFound(KilnError, ValueError):
    """``get_global_func`` was asked for a name nobody registered."""


class PackedFunc:
    """A callable in the registry (or a compiled kernel); call it with positional arguments."""

    __slots__ = ("_func", "name")

    def __init__(self, func: Callable, name: str | None = None):
        self._func = func
        self.name = name or getattr(func, "__name__", "<packed>")

    def __call__(self, *args):
        return self._func(*args)

    def __repr__(self) -> str:
        return f"PackedFunc({self.name})"


_REGISTRY: dict[str, PackedFunc] = {}
_LOCK = threading.Lock()


def register_func(func_name, f: Callable | None = None, override: bool = False):
    """Register ``f`` as a global function named ``func_name``.

    Usable as ``register_func("name", f)``, ``@register_func("name")``, ``@register_func`` (the
    function's own name), with ``override=True`` to replace an existing entry.
    """
    if callable(func_name) and f is None:
        f, func_name = func_name, func_name.__name__
    if not isinstance(func_name, str):
        raise KilnError(f"register_func: the name must be a string, got {type(func_name).__name__}")

    def register(func: Callable):
        if not callable(func):
            raise KilnError(f"register_func({func_name!r}): {func!r} is not callable")
        with _LOCK:
            if func_name in _REGISTRY and not override:
                raise KilnError(f"global function {func_name!r} is already registered; "
                                "pass override=True to replace it")
            _REGISTRY[func_name] = func if isinstance(func, PackedFunc) else PackedFunc(func, func_name)
        return func

    return register(f) if f is not None else register


def get_global_func(name: str, allow_missing: bool = False) -> PackedFunc | None:
    """The function registered as ``name``; missing -> KilnError (or None with ``allow_missing``)."""
    func = _REGISTRY.get(name)
    if func is not None or allow_missing:
        return func
    close = difflib.get_close_matches(name, list(_REGISTRY), n=5, cutoff=0.6)
    hint = f"; close matches: {', '.join(close)}" if close else ""
    raise GlobalFuncNotFound(f"cannot find global function {name!r}{hint}")


def list_global_func_names() -> list:
    return sorted(_REGISTRY)


def remove_global_func(name: str) -> None:
    """Remove a global function (no-op when absent, as in TVM)."""
    with _LOCK:
        _REGISTRY.pop(name, None)


# ---------------------------------------------------------------------------------------------
# The callback compiled code calls through __kiln_call_packed.
# ---------------------------------------------------------------------------------------------
_state = threading.local()
# A callback may run on an OpenMP worker thread, not the thread that called the kernel: the latest
# failure is also kept process-wide so the caller can still report it.
_last_failure: list = [None]


def take_pending_error():
    """The (function name, exception) a failed callback left (cleared), or None."""
    pending = getattr(_state, "pending", None)
    _state.pending = None
    if pending is None:
        pending = _last_failure[0]
    _last_failure[0] = None
    return pending


def _dltensor_to_ndarray(addr: int):

    t = abi.DLTensor.from_address(addr)
    code, bits, lanes = t.dtype.code, t.dtype.bits, t.dtype.lanes
    if lanes != 1:
        raise KilnError(f"DLTensor argument with vector dtype (lanes={lanes}) is not supported")
    if code == 6 or (code == 1 and bits == 1):
        np_dtype = np.dtype(np.bool_)
    elif code in (0, 1, 2):
        np_dtype = DataType(("int", "uint", "float")[code], bits).numpy_dtype()
    else:
        raise KilnError(f"DLTensor argument with unsupported dtype code {code}")
    shape = tuple(t.shape[i] for i in range(t.ndim))
    itemsize = np_dtype.itemsize
    data = (t.data or 0) + t.byte_offset
    if t.strides:
        strides = tuple(t.strides[i] * itemsize for i in range(t.ndim))
        if any(st < 0 for st in strides):
            raise KilnError("DLTensor argument with negative strides is not supported")
        span = 1 + sum((s - 1) * st for s, st in zip(shape, strides)) // itemsize if all(shape) else 0
    else:
        strides = None
        span = int(np.prod(shape, dtype=np.int64))
    buf = (ctypes.c_uint8 * (span * itemsize)).from_address(data) if span else bytearray(0)
    flat = np.frombuffer(buf, dtype=np_dtype, count=span)
    if strides is None:
        view = flat.reshape(shape)
    else:
        view = np.lib.stride_tricks.as_strided(flat, shape=shape, strides=strides)
    return NDArray(view, Device(t.device.device_type or 1, t.device.device_id))


def _convert_arg(value: abi.KilnValue, code: int):
    if code == abi.kInt:
        return value.v_int64
    if code == abi.kUInt:
        return value.v_int64 & 0xFFFFFFFFFFFFFFFF
    if code == abi.kFloat:
        return value.v_float64
    if code == abi.kNull:
        return None
    if code == abi.kHandle:
        return value.v_handle
    if code in (abi.kDLTensorHandle, abi.kNDArrayHandle):
        if not value.v_handle:
            return None
        return _dltensor_to_ndarray(value.v_handle)
    if code == abi.kStr:
        return ctypes.string_at(value.v_handle).decode("utf-8") if value.v_handle else None
    raise KilnError(f"unsupported packed-call argument type code {code}")


def _write_return(result, ret, ret_code) -> None:

    if result is None:
        ret[0].v_int64 = 0
        ret_code[0] = abi.kNull
    elif isinstance(result, (bool, np.bool_, int, np.integer)):
        ret[0].v_int64 = int(result)
        ret_code[0] = abi.kInt
    elif isinstance(result, (float, np.floating)):
        ret[0].v_float64 = float(result)
        ret_code[0] = abi.kFloat
    elif isinstance(result, str):
        buf = ctypes.create_string_buffer(result.encode("utf-8"))
        _state.ret_keepalive = buf  # valid until this thread's next packed call
        ret[0].v_handle = ctypes.addressof(buf)
        ret_code[0] = abi.kStr
    elif isinstance(result, NDArray):
        _state.ret_keepalive = result
        ret[0].v_handle = ctypes.addressof(result.handle)
        ret_code[0] = abi.kDLTensorHandle
    else:
        raise KilnError(f"a packed function returned {type(result).__name__}; compiled code accepts "
                        "None, int, float, str or NDArray")


def _call_packed(name, args, type_codes, num_args, ret, ret_code) -> int:
    fname = "<unknown>"
    try:
        fname = name.decode("utf-8") if name else "<null>"
        func = get_global_func(fname)
        py_args = [_convert_arg(args[i], type_codes[i]) for i in range(num_args)]
        result = func(*py_args)
        if ret:
            _write_return(result, ret, ret_code)
        return 0
    except BaseException as exc:  # noqa: BLE001 - everything must stop at the C boundary
        _state.pending = _last_failure[0] = (fname, exc)
        return -1


CALL_PACKED_CALLBACK = abi.CALL_PACKED_FN(_call_packed)
CALL_PACKED_ADDRESS = ctypes.cast(CALL_PACKED_CALLBACK, ctypes.c_void_p).value
