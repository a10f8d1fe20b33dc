"""Loading a compiled shared library: integrity checks, dlopen, and wiring of the ABI symbols.

A library kiln exports ends with an integrity trailer (sha256 of everything before it), checked before
the dynamic loader ever sees the file; other ELF files get a bounds check of their headers. Either way
a truncated or corrupt file raises ModuleLoadError instead of crashing in dlopen.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import struct
import tempfile
import threading
import weakref

from ..error import KilnError, ModuleLoadError
from .registry import CALL_PACKED_ADDRESS

TRAILER_MAGIC = b"KILNSO\x01\x00"
_TRAILER = struct.Struct("<32sQ8s")  # sha256, length of the content before the trailer, magic


_live_libraries: "weakref.WeakSet" = weakref.WeakSet()
_threads_override: list = []


def set_num_threads(n: int | None) -> None:
    """Set the threads of kiln's parallel loops, for every library loaded now and later (None: back to
    $KILN_NUM_THREADS / $TVM_NUM_THREADS / the CPUs usable here). Under the adaptive thread policy
    (``kiln.runtime.thread_policy``) this is the most threads used; libraries built for OpenMP get fewer while other
    processes keep cores busy (loops on kiln's thread pool keep this count)."""
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise KilnError(f"set_num_threads expects a positive integer or None, got {n!r}")
    _threads_override[:] = [] if n is None else [n]
    apply_effective_threads()  # under the adaptive policy n is the most threads used (thread_policy)


def apply_effective_threads() -> None:
    """Write the thread count in use now (:func:`kiln.runtime.thread_policy.effective_threads` for the library's
    parallel backend) into every loaded library; its next parallel region runs with it."""
    from .thread_policy import effective_threads
    requested = num_threads()
    values = {}
    for lib in list(_live_libraries):
        backend = lib.parallel_backend
        if backend not in values:
            values[backend] = effective_threads(requested, backend=backend)
        lib.set_num_threads(values[backend])


def num_threads() -> int:
    """Threads for parallel loops: the value of :func:`set_num_threads`, else $KILN_NUM_THREADS,
    $TVM_NUM_THREADS, else the CPUs usable here."""
    if _threads_override:
        return _threads_override[0]
    for var in ("KILN_NUM_THREADS", "TVM_NUM_THREADS"):
        text = os.environ.get(var, "").strip()
        if text:
            try:
                value = int(text)
            except ValueError:
                raise KilnError(f"${var} must be an integer, got {text!r}") from None
            if value > 0:
                return value
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# -- integrity -----------------------------------------------------------------------------------
def append_trailer(path: str) -> None:
    """Append the integrity trailer to ``path`` (in place)."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
            size += len(chunk)
    with open(path, "ab") as f:
        f.write(_TRAILER.pack(h.digest(), size, TRAILER_MAGIC))


def verify_file(path: str) -> None:
    """Raise ModuleLoadError unless ``path`` looks like an intact shared library."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(64)
            tail = b""
            if size >= _TRAILER.size:
                f.seek(size - _TRAILER.size)
                tail = f.read(_TRAILER.size)
    except OSError as err:
        raise ModuleLoadError(f"cannot read {path}: {err}") from None
    if len(tail) == _TRAILER.size and tail.endswith(TRAILER_MAGIC):
        digest, length, _ = _TRAILER.unpack(tail)
        if length != size - _TRAILER.size:
            raise ModuleLoadError(f"{path} is truncated or extended: expected {length + _TRAILER.size} bytes, "
                                  f"found {size}")
        h = hashlib.sha256()
        with open(path, "rb") as f:
            remaining = length
            while remaining:
                chunk = f.read(min(remaining, 1 << 20))
                if not chunk:
                    break
                h.update(chunk)
                remaining -= len(chunk)
        if h.digest() != digest:
            raise ModuleLoadError(f"{path} is corrupt: checksum mismatch")
        return
    _check_elf_bounds(path, head, size)


def _check_elf_bounds(path: str, head: bytes, size: int) -> None:
    if len(head) < 64 or head[:4] != b"\x7fELF":
        raise ModuleLoadError(f"{path} is not a shared library (no ELF header; truncated or corrupt?)")
    if head[4] != 2 or head[5] != 1:
        raise ModuleLoadError(f"{path}: only 64-bit little-endian ELF libraries are supported")
    phoff, shoff = struct.unpack_from("<QQ", head, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", head, 0x36)
    if phoff + phnum * phentsize > size or shoff + shnum * shentsize > size:
        raise ModuleLoadError(f"{path} is truncated: its ELF headers reach past the end of the file ({size} bytes)")
    with open(path, "rb") as f:
        f.seek(phoff)
        table = f.read(phnum * phentsize)
    end = shoff + shnum * shentsize
    for i in range(phnum):
        p_offset, = struct.unpack_from("<Q", table, i * phentsize + 8)
        p_filesz, = struct.unpack_from("<Q", table, i * phentsize + 32)
        if p_offset + p_filesz > size:
            raise ModuleLoadError(f"{path} is truncated: segment {i} reaches past the end of the file")
        end = max(end, p_offset + p_filesz)
    if size > end:
        # kiln's linker output ends with its section headers; extra bytes mean a damaged trailer
        raise ModuleLoadError(f"{path} has {size - end} unexpected trailing bytes and no valid kiln integrity "
                              "trailer: truncated or corrupt")


# -- reading the module blob without loading the library -----------------------------------------
_SHDR = struct.Struct("<IIQQQQIIQQ")  # ELF64 section header
_SYM = struct.Struct("<IBBHQQ")       # ELF64 symbol


def read_blob_from_file(path: str, symbol: str = "__kiln_dev_mblob") -> bytes | None:
    """The bytes of the ``__kiln_dev_mblob`` blob read from the ELF file (symbol table, then the section holding
    it), without dlopen: the loader checks what a library needs before any of its code is mapped. None when
    the file has no such symbol."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as err:
        raise ModuleLoadError(f"cannot read {path}: {err}") from None
    try:
        if data[:4] != b"\x7fELF" or data[4] != 2:
            return None
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
        sections = [_SHDR.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
        found = {}
        for sh in sections:
            if sh[1] not in (2, 11):  # SHT_SYMTAB, SHT_DYNSYM
                continue
            strtab = sections[sh[6]]
            for off in range(sh[4], sh[4] + sh[5], _SYM.size):
                st_name, _, _, shndx, value, size = _SYM.unpack_from(data, off)
                start = strtab[4] + st_name
                name = data[start:data.index(b"\0", start)].decode("ascii", "replace")
                if name in (symbol, symbol + "_size") and 0 < shndx < len(sections):
                    sec = sections[shndx]
                    found[name] = sec[4] + (value - sec[3]) if sec[3] else sec[4] + value
            if len(found) == 2:
                break
        if len(found) != 2:
            return None
        size, = struct.unpack_from("<Q", data, found[symbol + "_size"])
        start = found[symbol]
        if start + size > len(data):
            raise ModuleLoadError(f"{path}: module blob size {size} exceeds the file size; corrupt library")
        return data[start:start + size]
    except (struct.error, IndexError, ValueError):
        raise ModuleLoadError(f"{path}: its ELF section or symbol tables are malformed (truncated or corrupt?)") \
            from None


class UnrunnableLibrary:
    """Stands in for a library built for a CPU this machine is not: it is never mapped; calling a kernel raises
    ModuleLoadError with ``message`` (code for another ISA is compiled, not run)."""

    can_time = False

    def __init__(self, path: str, message: str):
        self.path = path
        self.message = message

    def kernel(self, symbol: str):
        def refuse(*_args):
            raise ModuleLoadError(f"cannot run {symbol!r}: {self.message}")
        return refuse

    def address(self, symbol: str) -> int:
        raise ModuleLoadError(f"cannot run {symbol!r}: {self.message}")

    def last_error(self) -> str:
        return ""

    def read_blob(self):
        return None

    def __repr__(self) -> str:
        return f"UnrunnableLibrary({self.path!r})"


# -- the loaded library --------------------------------------------------------------------------
_loaded_signature: dict = {}
_load_lock = threading.Lock()
_copies_dir: list = []


def _dlopen_path(path: str) -> str:
    """The path to hand dlopen: the file itself, or a private copy if this path was loaded before and
    the file has changed since (the dynamic loader would otherwise return the stale library)."""
    real = os.path.realpath(path)
    st = os.stat(real)
    sig = (st.st_ino, st.st_mtime_ns, st.st_size)
    with _load_lock:
        previous = _loaded_signature.get(real)
        if previous is None or previous == sig:
            _loaded_signature[real] = sig
            return real
        if not _copies_dir:
            _copies_dir.append(tempfile.mkdtemp(prefix="kiln-lib-"))
        fd, copy = tempfile.mkstemp(suffix=".so", dir=_copies_dir[0])
        os.close(fd)
        shutil.copyfile(real, copy)
        return copy


class Library:
    """A dlopen'ed kiln library with its ABI symbols wired to this process."""

    def __init__(self, path: str, verify: bool = True):
        if not os.path.isfile(path):
            raise ModuleLoadError(f"cannot load {path}: no such file")
        if verify:
            verify_file(path)
        self.path = path
        try:
            self._cdll = ctypes.CDLL(_dlopen_path(path), mode=os.RTLD_NOW | os.RTLD_LOCAL)
        except OSError as err:
            raise ModuleLoadError(f"cannot load {path}: {err}") from None
        self._set_pointer("__kiln_call_packed", CALL_PACKED_ADDRESS)
        # who runs its parallel loops: kiln's pool (a library with the launch pointer) or OpenMP
        self.parallel_backend = "pool" if self._wire_thread_pool() else "openmp"
        self._threads = self._optional_int("__kiln_num_threads")
        if self._threads is not None:
            from .thread_policy import effective_threads
            self._threads.value = effective_threads(num_threads(), backend=self.parallel_backend)
        _live_libraries.add(self)
        self._get_error = self._optional("__kiln_get_last_error", ctypes.c_char_p, [])
        self._time_call = self._optional("__kiln_time_call", ctypes.c_double,
                                         [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32])

    def _set_pointer(self, name: str, address: int) -> None:
        try:
            ctypes.c_void_p.in_dll(self._cdll, name).value = address
        except ValueError:
            pass

    def _wire_thread_pool(self) -> bool:
        """Point the library's ``__kiln_parallel_launch`` (kernels built for the pool backend) at the process's
        thread pool (one pool per process), building it on first use. Without one, a pool linked into this
        library (an export) becomes the process's pool; with neither the pointer stays null (serial loops).
        Returns whether the library has the pointer (its parallel loops are the pool's)."""
        try:
            slot = ctypes.c_void_p.in_dll(self._cdll, "__kiln_parallel_launch")
        except ValueError:
            return False  # no parallel loop, or built for OpenMP
        from .thread_pool import adopt_library_pool
        address = adopt_library_pool(self._cdll)
        if address is not None:
            slot.value = address
        return True

    def _optional_int(self, name: str):
        try:
            return ctypes.c_int32.in_dll(self._cdll, name)
        except ValueError:
            return None

    def set_num_threads(self, n: int) -> None:
        """Threads of this library's parallel loops, thread pool or OpenMP (0: the backend's default)."""
        if self._threads is not None:
            self._threads.value = int(n)

    def _optional(self, name: str, restype, argtypes):
        try:
            fn = getattr(self._cdll, name)
        except AttributeError:
            return None
        fn.restype = restype
        fn.argtypes = argtypes
        return fn

    def kernel(self, symbol: str):
        """The ctypes function for kernel ``symbol`` (``int32_t(KilnValue*, int32_t)``)."""
        try:
            fn = getattr(self._cdll, symbol)
        except AttributeError:
            raise ModuleLoadError(f"{self.path} has no symbol {symbol!r}") from None
        fn.restype = ctypes.c_int32
        fn.argtypes = [ctypes.c_void_p, ctypes.c_int32]
        return fn

    def address(self, symbol: str) -> int:
        return ctypes.cast(getattr(self._cdll, symbol), ctypes.c_void_p).value

    def last_error(self) -> str:
        if self._get_error is None:
            return ""
        raw = self._get_error()
        return raw.decode("utf-8", "replace") if raw else ""

    @property
    def can_time(self) -> bool:
        return self._time_call is not None

    def time_call(self, fn_address: int, args, num_args: int, number: int) -> float:
        return self._time_call(fn_address, ctypes.cast(args, ctypes.c_void_p), num_args, number)

    def read_blob(self) -> bytes | None:
        """The bytes of ``__kiln_dev_mblob``, or None when the library has none."""
        try:
            size = ctypes.c_uint64.in_dll(self._cdll, "__kiln_dev_mblob_size").value
            start = ctypes.addressof(ctypes.c_uint8.in_dll(self._cdll, "__kiln_dev_mblob"))
        except ValueError:
            return None
        if size > os.path.getsize(self.path):
            raise ModuleLoadError(f"{self.path}: module blob size {size} exceeds the file size; corrupt library")
        return ctypes.string_at(start, size)

    def __repr__(self) -> str:
        return f"Library({self.path!r})"

