"""NDArray: a dense tensor on a device, backed (on the CPU) by a 64-byte-aligned numpy buffer (the runtime's own
long-lived buffers from 2 MiB up: 2 MiB-aligned in a mapping advised for transparent huge pages; ``_huge_empty``).

Arrays made here are compact row-major; arrays imported through DLPack may view foreign, possibly
strided memory (``is_contiguous`` says which), which the kernel wrapper refuses.
"""
from __future__ import annotations

import ctypes
import math
import mmap
import os
import re
import sys
from typing import Sequence

import numpy as np

from ..error import DataTypeError, DeviceError, KilnError
from .device import Device, cpu, cuda, device, gpu  # noqa: F401  (TVM re-exports these from tvm.nd)
from .dtype import parse_dtype
from .abi import DLDataType, DLDevice, DLTensor

_ALIGN = 64

# -- transparent huge pages ----------------------------------------------------------------------------------
# An inference streams its parameters (~150 MB of resnet50 buffers here, ~440 MB of BERT-base) once per run; on 4 KiB
# pages that is tens of thousands of pages, each a TLB miss. The runtime's long-lived buffers (executor storage,
# which holds the parameters; the VM's pool and constants) of at least HUGE_MIN_BYTES therefore come from
# their own anonymous private mapping, start on a 2 MiB boundary and are madvise(MADV_HUGEPAGE)'d, so with THP in
# "madvise" (or "always") mode the kernel backs each whole 2 MiB of them with one huge page (docs/architecture.md,
# "Runtime memory"). numpy's allocator advises huge pages for its big blocks too, but they are not 2 MiB aligned,
# so a 4 MiB buffer holds one whole huge page at best. Without THP, off Linux, or when mmap / madvise fail, the
# buffer silently comes from numpy as every smaller one does. KILN_HUGEPAGES=0 in the environment (read at each
# such allocation) turns it off.
HUGE_PAGE = 2 << 20
HUGE_MIN_BYTES = 2 << 20
# None: not yet known; False: unavailable in this process (no THP, not Linux, madvise refused); True: works
_huge_state = None


def _thp_mode() -> str | None:
    """The kernel's THP mode ('always', 'madvise', 'never'), None where there is no such file (not Linux, no THP)."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            text = f.read()
    except OSError:
        return None
    m = re.search(r"\[(\w+)\]", text)
    return m.group(1) if m else None


def _huge_available() -> bool:
    global _huge_state
    if _huge_state is None:
        _huge_state = (sys.platform.startswith("linux") and hasattr(mmap, "MADV_HUGEPAGE")
                       and _thp_mode() in ("always", "madvise"))
    return _huge_state


def _madvise_huge(mm, start: int, length: int) -> None:
    """madvise(MADV_HUGEPAGE) on [start, start + length) of ``mm`` (offsets); raises OSError when refused."""
    mm.madvise(mmap.MADV_HUGEPAGE, start, length)


def _huge_empty(nbytes: int):
    """``(uint8 array of nbytes, its address)`` starting on a 2 MiB boundary of a private anonymous mapping whose
    whole 2 MiB pages are advised for huge pages; None when huge pages are off or unavailable (the caller falls
    back to numpy). The array's base chain holds the mapping, which is unmapped when the last view dies."""
    global _huge_state
    if os.environ.get("KILN_HUGEPAGES", "1").strip().lower() in ("0", "off", "no", "false") \
            or not _huge_available():
        return None
    try:
        # private: copy-on-write across fork like malloc'd memory (a shared anonymous mapping would be shmem,
        # whose huge pages obey another switch)
        mm = mmap.mmap(-1, nbytes + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                       prot=mmap.PROT_READ | mmap.PROT_WRITE)
    except (OSError, ValueError, OverflowError):
        return None
    whole = np.frombuffer(mm, dtype=np.uint8)
    base = whole.__array_interface__["data"][0]
    offset = (-base) % HUGE_PAGE  # a multiple of the 4 KiB page: mmap returns page-aligned memory
    # only the whole huge pages inside the buffer: advising the tail too would let the kernel back its last
    # partial 2 MiB with a whole huge page, up to 2 MiB more resident memory per buffer
    try:
        _madvise_huge(mm, offset, nbytes // HUGE_PAGE * HUGE_PAGE)
    except (OSError, ValueError):
        _huge_state = False  # the kernel refuses (THP compiled out, a seccomp filter, ...): stop trying
        return None  # the mapping goes with the last reference to it, here
    return whole[offset:offset + nbytes], base + offset


def _aligned_empty(shape: tuple, np_dtype: np.dtype, huge: bool = False) -> np.ndarray:
    """An uninitialised C-contiguous array whose data pointer is a multiple of 64 (``huge``: see below)."""
    return _aligned_empty_ptr(shape, np_dtype, huge)[0]


def _aligned_empty_ptr(shape: tuple, np_dtype: np.dtype, huge: bool = False) -> tuple:
    """``(array, address of its first element)`` of :func:`_aligned_empty`: the address is known here, so the
    caller need not ask numpy again (``__array_interface__`` costs microseconds; see docs/call_overhead.md).
    With ``huge`` (the runtime's long-lived buffers: executor storage, the VM's pool and constants), buffers of at
    least :data:`HUGE_MIN_BYTES` start on a 2 MiB boundary in memory advised for transparent huge pages
    (:func:`_huge_empty`) where the host allows it. Arrays made per call (nd.array, nd.empty) do not: a fresh
    mapping is faulted in and zeroed at every allocation, where numpy's heap hands back memory already mapped
    (an 8 MiB nd.array: 0.30 ms against 0.145 ms on Zen 5)."""
    nbytes = math.prod(shape) * np_dtype.itemsize
    if huge and nbytes >= HUGE_MIN_BYTES and _huge_state is not False:
        got = _huge_empty(nbytes)
        if got is not None:
            raw, base = got
            return raw[:nbytes].view(np_dtype).reshape(shape), base
    raw = np.empty(nbytes + _ALIGN, dtype=np.uint8)
    base = ctypes.addressof(ctypes.c_char.from_buffer(raw))  # a fresh writable buffer: its address, cheaply
    offset = (-base) % _ALIGN
    return raw[offset:offset + nbytes].view(np_dtype).reshape(shape), base + offset


_DTYPE_NAMES: dict = {}


def _dtype_name(np_dtype: np.dtype) -> str:
    """kiln's name of a numpy dtype (``str(dtype)``, ``bool`` for ``np.bool_``), cached per dtype: numpy 2's
    ``str(dtype)`` runs Python code (~8 us), and every NDArray and every set_input asks."""
    name = _DTYPE_NAMES.get(np_dtype)
    if name is None:
        name = "bool" if np_dtype == np.bool_ else str(np_dtype)
        if np_dtype.isbuiltin == 1 and len(_DTYPE_NAMES) < 256:  # equal builtin dtypes print alike
            _DTYPE_NAMES[np_dtype] = name
    return name


_NP_DTYPES: dict = {}


def _np_dtype_of(dtype) -> np.dtype:
    """numpy's dtype for a kiln dtype (string, DataType, numpy dtype, ...); strings are cached, since nd.empty
    and the VM's argument check convert the same few on every call."""
    if type(dtype) is str:
        got = _NP_DTYPES.get(dtype)
        if got is None:
            got = _NP_DTYPES[dtype] = parse_dtype(dtype).numpy_dtype()
        return got
    return parse_dtype(dtype).numpy_dtype()


def _check_device(dev) -> Device:
    dev = cpu(0) if dev is None else device(dev)
    if not dev.exist:
        raise DeviceError(f"cannot allocate on {dev}: kiln's runtime supports cpu(0) only")
    return dev


class NDArray:
    """A tensor: ``shape``, ``dtype``, ``device``; ``numpy()`` copies it out."""

    __slots__ = ("_arr", "_shape", "_dtype", "_device", "_ptr", "_kernel_ok", "_writable", "_out_ok", "_lo", "_hi",
                 "_dltensor", "__weakref__")

    def __init__(self, arr: np.ndarray, dev: Device | None = None):
        """Wrap ``arr`` without copying (internal: use nd.array / nd.empty / from_dlpack)."""
        self._set(arr, dev or cpu(0))

    def _set(self, arr: np.ndarray, dev: Device) -> None:
        self._arr = arr
        self._shape = tuple(int(s) for s in arr.shape)
        self._dtype = _dtype_name(arr.dtype)
        self._device = dev
        self._ptr = arr.__array_interface__["data"][0]
        # what a kernel may be handed: compact row-major, naturally aligned
        self._kernel_ok = bool(arr.flags.c_contiguous) and self._ptr % max(arr.dtype.itemsize, 1) == 0
        # read-only memory (np.frombuffer of bytes, a read-only memmap, a DLPack tensor flagged read-only)
        # may be read by a kernel but never written: outputs need _out_ok
        self._writable = bool(arr.flags.writeable)
        self._out_ok = self._kernel_ok and self._writable
        # the byte range [_lo, _hi) a kernel touches, for the no-overlap check of outputs ((0, 0) if empty)
        nbytes = int(arr.nbytes)
        self._lo, self._hi = (self._ptr, self._ptr + nbytes) if nbytes else (0, 0)
        self._dltensor = None

    @classmethod
    def _compact(cls, arr: np.ndarray, shape: tuple, dtype: str, ptr: int, nbytes: int, dev: Device) -> "NDArray":
        """Wrap a writable, C-contiguous, aligned ``arr`` whose shape (ints), dtype name, address and size the
        caller knows (the VM's pooled allocations): ``_set`` without re-deriving them."""
        self = cls.__new__(cls)
        self._arr = arr
        self._shape = shape
        self._dtype = dtype
        self._device = dev
        self._ptr = ptr
        self._kernel_ok = self._writable = self._out_ok = True
        self._lo, self._hi = (ptr, ptr + nbytes) if nbytes else (0, 0)
        self._dltensor = None
        return self

    # -- properties --------------------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return self._shape

    @property
    def dtype(self) -> str:
        return self._dtype

    @property
    def device(self) -> Device:
        return self._device

    ctx = device  # pre-0.8 spelling

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return int(self._arr.size)

    @property
    def is_contiguous(self) -> bool:
        return bool(self._arr.flags.c_contiguous)

    @property
    def is_writable(self) -> bool:
        """False for arrays viewing read-only memory; kernels and copies refuse to write into them."""
        return self._writable

    @property
    def data_ptr(self) -> int:
        """Address of the first element (what a kernel receives)."""
        return self._ptr

    @property
    def handle(self):
        """A ctypes ``DLTensor`` describing this array (kept alive by the array)."""
        if self._dltensor is None:
            self._dltensor = _make_dltensor(self)
        return self._dltensor[0]

    # -- conversion --------------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """A numpy copy of the contents."""
        return np.array(self._arr, copy=True, order="C")

    def asnumpy(self) -> np.ndarray:
        """Old spelling of :meth:`numpy`."""
        return self.numpy()

    def _check_writable(self, what: str) -> None:
        if not self._writable:
            raise KilnError(f"{what}: the destination array (shape {self._shape}, {self._dtype}) views read-only "
                            "memory (e.g. np.frombuffer of bytes, a read-only memmap or DLPack tensor); copy it "
                            "into a writable array first (kiln.nd.array(...))")

    def copyfrom(self, source) -> "NDArray":
        """Copy ``source`` (NDArray, numpy array, or nested list) into this array; returns self."""
        self._check_writable("copyfrom")
        if isinstance(source, NDArray):
            if source._shape != self._shape:
                raise KilnError(f"copyfrom: shape mismatch, source has shape {source._shape}, "
                                f"destination has shape {self._shape}")
            if source._dtype != self._dtype:
                raise DataTypeError(f"copyfrom: dtype mismatch, source is {source._dtype}, "
                                    f"destination is {self._dtype}")
            np.copyto(self._arr, source._arr)
            return self
        src = source
        if not isinstance(src, np.ndarray):
            try:
                src = np.asarray(src, dtype=self._arr.dtype)
            except (TypeError, ValueError) as err:
                raise DataTypeError(f"copyfrom: cannot convert {type(source).__name__} to "
                                    f"{self._dtype}: {err}") from None
        if src.dtype != self._arr.dtype:
            if not (np.can_cast(src.dtype, self._arr.dtype, "unsafe") and src.dtype.kind in "biuf"):
                raise DataTypeError(f"copyfrom: cannot copy a {src.dtype} array into a {self._dtype} NDArray")
        if tuple(src.shape) != self._shape:
            raise KilnError(f"copyfrom: shape mismatch, source has shape {tuple(src.shape)}, "
                            f"destination has shape {self._shape}")
        np.copyto(self._arr, src, casting="unsafe")
        return self

    def copyto(self, target) -> "NDArray":
        """Copy into another NDArray (returns it) or onto a Device (returns the new array)."""
        if isinstance(target, NDArray):
            return target.copyfrom(self)
        if getattr(target, "_rpc_sess", None) is not None:
            return target._rpc_sess._nd_array(self._arr, target)
        if isinstance(target, Device):
            out = empty(self._shape, self._dtype, target)
            np.copyto(out._arr, self._arr)
            return out
        raise KilnError(f"copyto: expected an NDArray or a Device, got {type(target).__name__}")

    def __setitem__(self, key, value) -> None:
        if not (isinstance(key, slice) and key == slice(None)):
            raise KilnError("NDArray supports only whole-array assignment: arr[:] = value")
        self._check_writable("arr[:] = value")
        if isinstance(value, (int, float, bool, np.generic)):
            self._arr[...] = value
        else:
            self.copyfrom(value)

    # -- DLPack ------------------------------------------------------------------------------
    def __dlpack__(self, *, stream=None, **kwargs):
        if stream is not None and stream != -1:
            raise BufferError("kiln NDArrays live on the CPU; a stream makes no sense here")
        return self._arr.__dlpack__(stream=None, **kwargs)

    def __dlpack_device__(self):
        return (self._device.device_type, self._device.device_id)

    def to_dlpack(self):
        """A DLPack capsule viewing this array's memory (zero copy)."""
        return self._arr.__dlpack__()

    # -- misc --------------------------------------------------------------------------------
    def same_as(self, other) -> bool:
        return isinstance(other, NDArray) and other._ptr == self._ptr and other._shape == self._shape

    def __repr__(self) -> str:
        return f"<kiln.nd.NDArray shape={self._shape}, {self._device}>\n{self._arr!r}"

    def __str__(self) -> str:
        return str(self._arr)

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d NDArray")
        return self._shape[0]

    def __array__(self, dtype=None, copy=None):
        out = self.numpy()
        return out if dtype is None else out.astype(dtype)


def _make_dltensor(arr: NDArray):
    import ctypes


    dt = parse_dtype(arr._dtype)
    ndim = len(arr._shape)
    shape = (ctypes.c_int64 * max(ndim, 1))(*arr._shape)
    strides = None
    if not arr._arr.flags.c_contiguous:
        itemsize = arr._arr.dtype.itemsize
        strides = (ctypes.c_int64 * max(ndim, 1))(*[s // itemsize for s in arr._arr.strides])
    t = DLTensor()
    t.data = arr._ptr
    t.device = DLDevice(arr._device.device_type, arr._device.device_id)
    t.ndim = ndim
    t.dtype = DLDataType(dt.dl_code, dt.bits if not dt.is_bool else 8, dt.lanes)
    t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64)) if strides is not None else None
    t.byte_offset = 0
    return (t, shape, strides)


# -- constructors ------------------------------------------------------------------------------
def empty(shape, dtype="float32", device: Device | None = None, mem_scope=None) -> NDArray:
    """An uninitialised array of ``shape`` and ``dtype`` on ``device``."""
    sess = getattr(device, "_rpc_sess", None)
    if sess is not None:  # a remote device: the array lives on the RPC server
        return sess._nd_empty(shape, dtype, device)
    dev = _check_device(device)
    if isinstance(shape, int):
        shape = (shape,)
    try:
        shape = tuple(int(s) for s in shape)
    except (TypeError, ValueError):
        raise KilnError(f"nd.empty: shape must be a sequence of ints, got {shape!r}") from None
    if any(s < 0 for s in shape):
        raise KilnError(f"nd.empty: negative extent in shape {shape}")
    np_dtype = _np_dtype_of(dtype)
    out, ptr = _aligned_empty_ptr(shape, np_dtype)
    return NDArray._compact(out, shape, _dtype_name(np_dtype), ptr, out.nbytes, dev)


def array(arr, device: Device | None = None, dtype=None, ctx: Device | None = None) -> NDArray:
    """Copy ``arr`` (numpy array, nested list, scalar, or NDArray) into a new compact NDArray."""
    sess = getattr(device if device is not None else ctx, "_rpc_sess", None)
    if sess is not None:  # a remote device: the array lives on the RPC server
        return sess._nd_array(arr._arr if isinstance(arr, NDArray) else arr, device if device is not None else ctx,
                              dtype)
    dev = _check_device(device if device is not None else ctx)
    if isinstance(arr, NDArray):
        arr = arr._arr
    if dtype is not None:
        np_dt = _np_dtype_of(dtype)
        src = np.asarray(arr, dtype=np_dt)
    else:
        src = np.asarray(arr)
        np_dt = src.dtype
        if np_dt not in _KNOWN_NP_DTYPES:
            try:
                parse_dtype(np_dt)
            except DataTypeError:
                raise DataTypeError(f"nd.array: numpy dtype {np_dt} has no kiln equivalent") from None
            if np_dt.isbuiltin == 1:
                _KNOWN_NP_DTYPES.add(np_dt)
    np_dt = np.dtype(np_dt)
    shape = tuple(src.shape)
    out, ptr = _aligned_empty_ptr(shape, np_dt)
    np.copyto(out, src)
    return NDArray._compact(out, shape, _dtype_name(np_dt), ptr, out.nbytes, dev)


def _resident_array(src: np.ndarray) -> NDArray:
    """A compact copy of numpy array ``src`` that lives as long as a module does (the VM's constants): in
    huge-page memory when it is big enough (:func:`_aligned_empty_ptr`)."""
    shape = tuple(src.shape)
    out, ptr = _aligned_empty_ptr(shape, src.dtype, huge=True)
    np.copyto(out, src)
    return NDArray._compact(out, shape, _dtype_name(src.dtype), ptr, out.nbytes, cpu(0))


# numpy dtypes nd.array has checked to have a kiln equivalent (parse_dtype costs microseconds)
_KNOWN_NP_DTYPES: set = set()


def numpyasarray(np_data: np.ndarray) -> NDArray:
    return array(np_data)


class _CapsuleHolder:
    """Adapts a bare DLPack capsule to the ``__dlpack__`` protocol numpy consumes."""

    def __init__(self, capsule):
        self._capsule = capsule

    def __dlpack__(self, **kwargs):
        return self._capsule

    def __dlpack_device__(self):
        return (1, 0)


def from_dlpack(obj) -> NDArray:
    """Zero-copy import of a DLPack producer (torch tensor, numpy array, ...) or a DLPack capsule."""
    if isinstance(obj, NDArray):
        return obj
    if hasattr(obj, "__dlpack_device__"):
        dev_type, dev_id = obj.__dlpack_device__()
        if int(dev_type) != Device.kDLCPU:
            raise DeviceError(f"from_dlpack: tensor lives on {Device(int(dev_type), int(dev_id))}; "
                              "kiln supports cpu(0) only")
    src = obj if hasattr(obj, "__dlpack__") else _CapsuleHolder(obj)
    try:
        view = np.from_dlpack(src)
    except (BufferError, TypeError, RuntimeError, ValueError) as err:
        raise KilnError(f"from_dlpack: cannot import {type(obj).__name__}: {err}") from None
    return NDArray(view, cpu(0))


def _from_numpy_view(view: np.ndarray) -> NDArray:
    """Wrap an existing numpy array (no copy)."""
    return NDArray(view, cpu(0))


def asarrays(values: Sequence) -> list:
    return [v if isinstance(v, NDArray) else array(v) for v in values]
