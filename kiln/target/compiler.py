"""The one compiler driver: finds the system C compiler, compiles and links, and caches the results.

Outputs are content-addressed in ``$KILN_CACHE_DIR`` (default ``~/.cache/kiln``): the key is the
sha256 of the inputs, the flags and the compiler's identity (path + ``--version``). Every cache file
is written to a temporary name and moved into place with ``os.replace``, so processes building the
same thing at once never see half a file. Beside every entry, ``<entry>.sha256`` records its size and
digest (written atomically after the entry); every cache hit is checked against it, and an entry that fails
(truncated, altered, empty, bad record) is evicted and rebuilt, so a damaged cache never reaches the linker or
``dlopen``. An entry without a record (from an older kiln sharing the cache) is adopted only if its ELF
structure is whole. A failing compile raises :class:`kiln.error.CompileError` with the compiler's message
and the path of the kept source.
"""
from __future__ import annotations

import hashlib
import mmap
import logging
import os
import shlex
import shutil
import struct
import subprocess
import tempfile
import threading
from typing import Iterable, Sequence

from ..error import CompileError, KilnError
from ..runtime import disk_cache
from ..runtime.disk_cache import file_sha256

DEFAULT_CFLAGS = ("-O3", "-fPIC", "-fopenmp", "-std=gnu11")

# GCC 12 miscompiles if-converted conditional loads under AVX2 (masked loads with the wrong mask:
# `out[i] = a[i] > 0 ? b[i] : 0` gave wrong values at -O3 -march=haswell/znver3). kiln's own
# vectorization does not rely on gcc's if-conversion, so it is switched off for gcc.
GCC_WORKAROUND_CFLAGS = ("-fno-tree-loop-if-convert",)
DEFAULT_LDFLAGS = ("-shared", "-fPIC", "-fopenmp", "-lm")

_CANDIDATES = ("gcc", "cc", "clang")


class NoCompilerError(KilnError):
    """No C compiler could be found ($CC, gcc, cc, clang)."""


class CacheStats:
    """Counters tests read to observe the cache: hits, misses, compiles and links run."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.hits = 0
        self.misses = 0
        self.compiles = 0
        self.links = 0
        self.evictions = 0  # entries that failed their check and were rebuilt

    def as_dict(self) -> dict:
        return {"hits": self.hits, "misses": self.misses, "compiles": self.compiles, "links": self.links}

    def __repr__(self) -> str:
        return f"CacheStats({self.as_dict()})"


stats = CacheStats()
_identity_memo: dict = {}
_lock = threading.Lock()
_log = logging.getLogger("kiln.compiler")
_verified: dict = {}  # entry path -> (inode, mtime, size) at its last successful check in this process


# -- finding the compiler ----------------------------------------------------------------------
def find_compiler() -> list:
    """The compiler command as an argv prefix: ``$CC`` (may hold words), else gcc, cc, clang on PATH."""
    env_cc = os.environ.get("CC", "").strip()
    if env_cc:
        words = shlex.split(env_cc)
        exe = shutil.which(words[0])
        if exe is None:
            raise NoCompilerError(f"$CC is set to {env_cc!r} but {words[0]!r} is not an executable on PATH")
        return [exe] + words[1:]
    for name in _CANDIDATES:
        exe = shutil.which(name)
        if exe:
            return [exe]
    raise NoCompilerError(
        "no C compiler found: set $CC or put gcc, cc or clang on PATH "
        "(compiled modules that were already exported load without one)"
    )


def has_compiler() -> bool:
    try:
        find_compiler()
        return True
    except NoCompilerError:
        return False


def compiler_identity(cc: Sequence[str] | None = None) -> str:
    """Path plus ``--version`` output of the compiler (memoized): part of every cache key."""
    cc = list(cc or find_compiler())
    key = tuple(cc)
    with _lock:
        ident = _identity_memo.get(key)
    if ident is None:
        try:
            proc = subprocess.run(cc + ["--version"], capture_output=True, text=True, timeout=60)
            version = proc.stdout.strip()
        except (OSError, subprocess.SubprocessError) as err:
            version = f"<unknown: {err}>"
        ident = " ".join(cc) + "\n" + version
        with _lock:
            _identity_memo[key] = ident
    return ident


# -- cache ---------------------------------------------------------------------------------------
def cache_dir() -> str:
    return disk_cache.cache_root(create=True)


def _cache_path(kind: str, key: str, suffix: str) -> str:
    folder = os.path.join(cache_dir(), kind, key[:2])
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, key + suffix)


def _digest(*parts) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part if isinstance(part, bytes) else str(part).encode("utf-8")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def _record_path(entry: str) -> str:
    return entry + ".sha256"


def _record_entry(entry: str) -> None:
    """Write ``<entry>.sha256`` (size and digest of the entry now in place), atomically."""
    size, digest = os.path.getsize(entry), file_sha256(entry)
    _atomic_write_bytes(_record_path(entry), f"{size} {digest}\n".encode("ascii"))
    st = os.stat(entry)
    with _lock:
        _verified[entry] = (st.st_ino, st.st_mtime_ns, st.st_size)
    disk_cache.after_write()


def _entry_is_intact(entry: str) -> bool:
    """Whether ``entry`` exists and matches its size/digest record (memoized per file version)."""
    try:
        st = os.stat(entry)
    except OSError:
        return False
    sig = (st.st_ino, st.st_mtime_ns, st.st_size)
    with _lock:
        if _verified.get(entry) == sig:
            return True
    record = _record_path(entry)
    if not os.path.exists(record):
        # an entry from a kiln that wrote no records (or one whose writer has not recorded it yet): adopt it
        # when its ELF structure is whole (catches truncation and emptiness; later damage is then caught by
        # the record written now)
        if st.st_size == 0 or not _elf_is_whole(entry, st.st_size):
            return False
        try:
            _record_entry(entry)
        except OSError:
            pass
        return True
    try:
        with open(record, encoding="ascii") as f:
            size_text, digest = f.read().split()
        size = int(size_text)
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    if size <= 0 or size != st.st_size or file_sha256(entry) != digest:
        return False
    with _lock:
        _verified[entry] = sig
    return True


def _elf_is_whole(path: str, size: int) -> bool:
    """Whether ``path`` is a 64-bit little-endian ELF file whose header tables, sections and segments all
    lie inside its ``size`` bytes."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return False
            phoff, shoff = struct.unpack_from("<QQ", head, 0x20)
            phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", head, 0x36)
            if phoff + phnum * phentsize > size or shoff + shnum * shentsize > size:
                return False
            if shnum and shentsize < 64 or phnum and phentsize < 56:
                return False
            f.seek(shoff)
            sections = f.read(shnum * shentsize)
            f.seek(phoff)
            segments = f.read(phnum * phentsize)
    except OSError:
        return False
    for i in range(shnum):
        sh_type, = struct.unpack_from("<I", sections, i * shentsize + 4)
        sh_offset, sh_size = struct.unpack_from("<QQ", sections, i * shentsize + 24)
        if sh_type != 8 and sh_offset + sh_size > size:  # 8: SHT_NOBITS (.bss) has no bytes in the file
            return False
    for i in range(phnum):
        p_offset, = struct.unpack_from("<Q", segments, i * phentsize + 8)
        p_filesz, = struct.unpack_from("<Q", segments, i * phentsize + 32)
        if p_offset + p_filesz > size:
            return False
    return True


def is_damaged_cache_entry(path: str) -> bool:
    """Whether ``path`` is a file of the compile cache that no longer matches its size/digest record (for
    callers that hold a cache path from an earlier build, such as ``export_library``)."""
    real = os.path.realpath(path)
    root = os.path.realpath(cache_dir())
    if not real.startswith(root + os.sep) or not os.path.exists(_record_path(real)):
        return False
    return not _entry_is_intact(real)


def _cache_hit(entry: str) -> bool:
    """Count and return a verified hit; a present entry that fails its check is evicted (a miss)."""
    if _entry_is_intact(entry):
        stats.hits += 1
        disk_cache.touch(_record_path(entry))  # recently used: the size cap keeps it
        return True
    if os.path.exists(entry) or os.path.exists(_record_path(entry)):
        _log.warning("kiln compile cache: %s is damaged or unrecorded (truncated, altered or empty); "
                     "evicting and rebuilding it", entry)
        stats.evictions += 1
        _silent_remove(entry)
        _silent_remove(_record_path(entry))
    stats.misses += 1
    return False


def _temp_sibling(path: str) -> str:
    """A path to write ``path``'s new content to: a not-yet-existing file in a private directory beside
    ``path`` (same file system, so ``os.replace`` is atomic). The file does not exist beforehand, so the
    compiler, the linker or ``open`` creates it with its usual mode under the umask (0755 for a shared
    library, 0644 for data), not the 0600 of a ``mkstemp`` file (which the linker turned into 0711)."""
    folder = tempfile.mkdtemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=os.path.dirname(path))
    return os.path.join(folder, os.path.basename(path))


def _discard_temp(tmp: str) -> None:
    """Remove what :func:`_temp_sibling` made (the file, if it was not moved into place, and its folder)."""
    _silent_remove(tmp)
    try:
        os.rmdir(os.path.dirname(tmp))
    except OSError:
        pass


def _atomic_write_bytes(path: str, data: bytes) -> None:
    tmp = _temp_sibling(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    finally:
        _discard_temp(tmp)


def _silent_remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def _run(argv: list, what: str, source_path: str | None) -> None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True)
    except OSError as err:
        raise CompileError(f"{what}: could not run {argv[0]}: {err}", source_path, str(err)) from None
    if proc.returncode != 0:
        output = (proc.stderr or "") + (proc.stdout or "")
        where = f"\nsource kept at: {source_path}" if source_path else ""
        if proc.returncode < 0 or "internal compiler error" in output:
            where += ("\nthe C compiler itself crashed. A usual cause is an expression nested thousands deep "
                      "(kiln prints nested TIR as nested C, and the compiler recurses on it): compute the "
                      "expression in stages (several te.compute / LetStmt bindings) instead of one nest")
        raise CompileError(
            f"{what} failed (exit {proc.returncode}):\n{' '.join(argv)}\n{output.strip()}{where}",
            source_path,
            output,
        )


def _keep_failed_source(key: str, source: str, suffix: str) -> str:
    folder = os.path.join(cache_dir(), "failed")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, key + suffix)
    _atomic_write_bytes(path, source.encode("utf-8"))
    return path


def _workaround_flags(cc: Sequence[str]) -> tuple:
    """Flags that avoid known miscompilations of the compiler in use (gcc only)."""
    ident = compiler_identity(cc)
    is_gcc = "Free Software Foundation" in ident and "clang" not in ident.lower()
    return GCC_WORKAROUND_CFLAGS if is_gcc else ()


# -- public API ----------------------------------------------------------------------------------
def compile_object(source: str, cflags: Iterable[str] = (), suffix: str = ".c") -> str:
    """Compile C ``source`` to an object file; returns the cached ``.o`` path."""
    cc = find_compiler()
    flags = list(DEFAULT_CFLAGS) + list(_workaround_flags(cc)) + list(cflags)
    key = _digest("object", compiler_identity(cc), "\0".join(flags), suffix, source)
    out = _cache_path("obj", key, ".o")
    if _cache_hit(out):
        return out
    with tempfile.TemporaryDirectory(prefix="kiln-cc-") as work:
        src = os.path.join(work, "kernel" + suffix)
        with open(src, "w", encoding="utf-8") as f:
            f.write(source)
        tmp_out = _temp_sibling(out)
        try:
            stats.compiles += 1
            try:
                _run(cc + flags + ["-c", src, "-o", tmp_out], "C compilation", None)
            except CompileError as err:
                kept = _keep_failed_source(key, source, suffix)
                msg = str(err).replace(src, kept) + f"\nsource kept at: {kept}"
                raise CompileError(msg, kept, err.compiler_output.replace(src, kept)) from None
            os.replace(tmp_out, out)
        finally:
            _discard_temp(tmp_out)
    _record_entry(out)
    return out


def link_shared(objects: Sequence[str], output: str, ldflags: Iterable[str] = (), cc: Sequence[str] | None = None) -> str:
    """Link object (or source) files into the shared library ``output``, written atomically."""
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    return _link(objects, output, list(DEFAULT_LDFLAGS) + list(ldflags), cc, os.path.basename(output))


def link_executable(objects: Sequence[str], output: str, ldflags: Iterable[str] = (), cc: Sequence[str] | None = None) -> str:
    """Link object (or source) files into the executable ``output``, written atomically. Kernels with parallel
    loops (pool backend) get kiln's thread pool linked in beside them, wired at start-up
    (:func:`thread_pool_link_objects`)."""
    pool = thread_pool_link_objects(objects)
    _link(list(objects) + pool, output, list(ldflags) + (["-pthread"] if pool else []), cc, output)
    os.chmod(output, 0o755)
    return output


def link_relocatable(objects: Sequence[str], output: str) -> str:
    """Combine object files into the one relocatable object ``output`` (``cc -r``), written atomically."""
    return _link(objects, output, ["-r", "-nostdlib"], None, os.path.basename(output))


def _link(objects, output: str, flags: list, cc, what: str) -> str:
    """Run the linker into a temporary sibling of ``output`` and move it into place, so a parallel
    reader never sees a half-written file."""
    cc = list(cc) if cc else find_compiler()
    tmp_out = _temp_sibling(os.path.abspath(output))
    try:
        stats.links += 1
        _run(cc + [str(o) for o in objects] + ["-o", tmp_out] + flags, "linking " + what, None)
        os.replace(tmp_out, output)
    finally:
        _discard_temp(tmp_out)
    return output


def build_shared(sources: Sequence[str], cflags: Iterable[str] = (), ldflags: Iterable[str] = ()) -> str:
    """Compile C ``sources`` and link them into a shared library; returns the cached ``.so`` path."""
    cflags, ldflags = list(cflags), list(ldflags)
    objects = [compile_object(src, cflags) for src in sources]
    return link_cached(objects, ldflags)


def link_cached(objects: Sequence[str], ldflags: Iterable[str] = ()) -> str:
    """Link objects into a cached shared library keyed by their contents and the flags."""
    cc = find_compiler()
    ldflags = list(ldflags)
    key = _digest("shared", compiler_identity(cc), "\0".join(list(DEFAULT_LDFLAGS) + ldflags),
                  *[file_sha256(o) for o in objects])
    out = _cache_path("lib", key, ".so")
    if _cache_hit(out):
        return out
    link_shared(objects, out, ldflags, cc)
    _record_entry(out)
    return out


def blob_object(data: bytes, output: str, symbol: str = "__kiln_dev_mblob") -> str:
    """Assemble ``data`` into an object file defining ``<symbol>`` (bytes, 64-byte aligned) and
    ``<symbol>_size`` (uint64), via ``.incbin`` so that no C compiler parses the payload."""
    cc = find_compiler()
    out_dir = os.path.dirname(os.path.abspath(output))
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kiln-blob-", dir=out_dir) as work:
        bin_path = os.path.join(work, "blob.bin")
        with open(bin_path, "wb") as f:
            f.write(data)
        quoted = bin_path.replace("\\", "\\\\").replace('"', '\\"')
        asm = (
            '\t.section .rodata\n'
            f'\t.globl {symbol}\n'
            f'\t.type {symbol}, @object\n'
            '\t.balign 64\n'
            f'{symbol}:\n'
            f'\t.incbin "{quoted}"\n'
            f'\t.size {symbol}, . - {symbol}\n'
            f'\t.globl {symbol}_size\n'
            f'\t.type {symbol}_size, @object\n'
            '\t.balign 8\n'
            f'{symbol}_size:\n'
            f'\t.quad {len(data)}\n'
            f'\t.size {symbol}_size, 8\n'
            '\t.section .note.GNU-stack,"",@progbits\n'
        )
        asm_path = os.path.join(work, "blob.s")
        with open(asm_path, "w", encoding="utf-8") as f:
            f.write(asm)
        tmp_out = _temp_sibling(os.path.abspath(output))
        try:
            stats.compiles += 1
            _run(cc + ["-c", asm_path, "-o", tmp_out], "assembling the module blob", asm_path)
            os.replace(tmp_out, output)
        finally:
            _discard_temp(tmp_out)
    return output


# -- kiln's thread pool ----------------------------------------------------------------------------
THREAD_POOL_SOURCE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "runtime",
                                  "thread_pool.c")


def build_thread_pool() -> str:
    """Compile ``kiln/runtime/thread_pool.c`` (once; cached like kernels and rebuilt when missing or damaged)
    and return the path of the shared library. A copy named after the source's digest is kept in
    ``$KILN_CACHE_DIR/runtime/`` for processes without the compiler packages (kiln.runtime.thread_pool)."""
    with open(THREAD_POOL_SOURCE, encoding="utf-8") as f:
        source = f.read()
    obj = compile_object(source, ["-pthread"])
    path = link_cached([obj], ["-pthread"])
    folder = os.path.join(cache_dir(), "runtime")
    os.makedirs(folder, exist_ok=True)
    copy = os.path.join(folder, f"thread_pool-{hashlib.sha256(source.encode('utf-8')).hexdigest()[:16]}.so")
    if not _entry_is_intact(copy):
        tmp = _temp_sibling(copy)
        try:
            shutil.copyfile(path, tmp)
            os.replace(tmp, copy)
        finally:
            _discard_temp(tmp)
        _record_entry(copy)
    return path


def _uses_parallel_launch(path: str) -> bool:
    """Whether the object (or C source) file refers to ``__kiln_parallel_launch`` (kernels with a parallel loop
    built for the pool backend; the name sits in an object's symbol table)."""
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return False
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:  # a blob object may be large
                return data.find(b"__kiln_parallel_launch") >= 0
    except (OSError, ValueError):
        return False


def thread_pool_link_objects(objects: Sequence[str]) -> list:
    """Object files to link beside ``objects`` so that their parallel loops run on kiln's thread pool without a
    loader: the pool compiled with ``KILN_POOL_WIRE_LAUNCH`` (a strong ``__kiln_parallel_launch`` that points
    at it, overriding the kernels' weak null one). Empty when no object has a pool-backend parallel loop, or
    when one already carries the pool."""
    paths = [str(o) for o in objects]
    if not any(_uses_parallel_launch(p) for p in paths):
        return []
    with open(THREAD_POOL_SOURCE, encoding="utf-8") as f:
        source = f.read()
    obj = compile_object(source, ["-pthread", "-DKILN_POOL_WIRE_LAUNCH"])
    if obj in paths:
        return []
    return [obj]


def _register_thread_pool_builder() -> None:
    from ..runtime.registry import register_func
    register_func("runtime.thread_pool.build", build_thread_pool, override=True)


_register_thread_pool_builder()
