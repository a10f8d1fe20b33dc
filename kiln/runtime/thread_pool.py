"""kiln's thread pool for parallel loops: builds ``thread_pool.c`` once (cached on disk like kernels) and
hands its launch function to every loaded kernel library (``__kiln_parallel_launch``).

The pool's design is in the comment at the top of ``thread_pool.c`` and in the module doc of
:mod:`kiln.runtime.thread_policy`. The runtime never compiles: the library is built on first use by the
compiler side (``runtime.thread_pool.build``, registered by ``kiln.target.compiler``), which also leaves a copy
named after the source's digest in ``$KILN_CACHE_DIR/runtime/``; a process without the compiler packages loads
that copy. Where neither exists (a deploy machine that only loads exported modules and never built anything)
the pool linked into an exported library (``export_library`` adds it) becomes the process's pool
(:func:`adopt_library_pool`): the first such library's copy serves it and every library loaded after it. Only
a library with neither runs its parallel loops serially (logged once).
"""
from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import threading

from .registry import get_global_func

_log = logging.getLogger("kiln.thread_pool")
_lock = threading.Lock()
_state: dict = {}
SOURCE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "thread_pool.c")
STATS_FIELDS = ("workers", "jobs", "serial_jobs", "chunks_by_caller", "chunks_by_workers", "wakeups", "spin_us",
                "caller_waits", "caller_moves")


def _load():
    """The pool library (ctypes.CDLL), building it on first use; None when it cannot be built."""
    with _lock:
        if "lib" in _state:
            return _state["lib"]
        lib = None
        try:
            path = _library_path()
            if path is None:
                raise FileNotFoundError("no C compiler side to build it and no copy in $KILN_CACHE_DIR/runtime")
            lib = _typed(ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL))
            if not _spin_is_explicit():  # the adaptive policy's spin (adapt_spin), decided before or now
                us = _state.get("adaptive_spin_us")
                if us is None:
                    from .thread_policy import spin_choice
                    us = _state["adaptive_spin_us"] = QUIET_SPIN_US if spin_choice() else BUSY_SPIN_US
                lib.kiln_pool_set_spin_us(us)
        except Exception as err:  # noqa: BLE001 - no compiler / failed build: parallel loops run serially
            _log.warning("kiln thread pool unavailable (%s); parallel loops run on the pool an exported library "
                         "carries, else serially", err)
            lib = None
        _state["lib"] = lib
        return lib


def _typed(lib):
    lib.kiln_pool_set_spin_us.restype = ctypes.c_int64
    lib.kiln_pool_set_spin_us.argtypes = [ctypes.c_int64]
    lib.kiln_pool_stats.restype = ctypes.c_int32
    lib.kiln_pool_stats.argtypes = [ctypes.POINTER(ctypes.c_int64), ctypes.c_int32]
    return lib


def adopt_library_pool(cdll) -> int | None:
    """Make the pool linked into the loaded library ``cdll`` (an exported ``.so``) this process's pool when the
    process has none; returns the launch address of the process's pool afterwards (None: neither has one)."""
    address = launch_address()
    if address is not None:
        return address
    if not all(hasattr(cdll, name) for name in ("kiln_pool_launch", "kiln_pool_stats", "kiln_pool_set_spin_us")):
        return None
    with _lock:
        if _state.get("lib") is None:  # the first library with a pool serves the process
            _state["lib"] = _typed(cdll)
            _log.info("kiln thread pool: using the copy linked into a loaded library")
        return ctypes.cast(_state["lib"].kiln_pool_launch, ctypes.c_void_p).value


def _library_path() -> str | None:
    build = get_global_func("runtime.thread_pool.build", allow_missing=True)
    if build is not None:
        return build()
    with open(SOURCE_PATH, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    from .disk_cache import cache_root
    copy = os.path.join(cache_root(), "runtime", f"thread_pool-{digest}.so")
    if not os.path.isfile(copy):
        return None
    from .library import verify_file
    verify_file(copy)  # a truncated copy raises here instead of crashing in dlopen
    return copy


def launch_address() -> int | None:
    """Address of ``kiln_pool_launch`` (the value of a library's ``__kiln_parallel_launch``), or None."""
    lib = _load()
    if lib is None:
        return None
    return ctypes.cast(lib.kiln_pool_launch, ctypes.c_void_p).value


def pool_stats() -> dict:
    """Counters of the pool in this process (see STATS_FIELDS); empty when the pool is unavailable."""
    lib = _load()
    if lib is None:
        return {}
    out = (ctypes.c_int64 * len(STATS_FIELDS))()
    lib.kiln_pool_stats(out, len(STATS_FIELDS))
    return dict(zip(STATS_FIELDS, out))


def set_spin_us(us: int) -> int:
    """How long (microseconds) idle workers spin before they sleep on a futex; returns the previous value.
    The default is ``$KILN_POOL_SPIN_US``, else the adaptive thread policy's choice (:func:`adapt_spin`), else
    50. A value set here (or in the environment) is kept: the adaptive policy no longer changes it."""
    if isinstance(us, bool) or not isinstance(us, int) or us < 0:
        from ..error import KilnError
        raise KilnError(f"set_spin_us expects a non-negative integer, got {us!r}")
    _state["explicit_spin"] = True
    lib = _load()
    if lib is None:
        return 0
    return int(lib.kiln_pool_set_spin_us(us))


# Idle workers' spin under the adaptive thread policy (kiln.runtime.thread_policy): long while no other process
# keeps a core busy, short otherwise. A futex wake-up of a worker whose vCPU went idle costs tens of
# microseconds in a VM, at times far more: on a quiet 2-core Zen 5 VM, mobilenet_v2 at 2 threads ran at 4.3 ms
# median beside ONNX Runtime's 2.4 with a 50 us spin (the worker asleep at 20-40% of the jobs), 2.1 with 300 us
# and 2.2 with 1000 us (benchmarks.run's interleaved blocks, session 12). Under heavy outside load a long spin
# burns the scheduler share the process then lacks (session 8: 200 and 1000 us were worse than 50 us at load
# ~13, docs/architecture.md), so the short spin stays where others are busy.
QUIET_SPIN_US = 300
BUSY_SPIN_US = 50


def _spin_is_explicit() -> bool:
    return bool(_state.get("explicit_spin")) or bool(os.environ.get("KILN_POOL_SPIN_US", "").strip())


def adapt_spin(quiet: bool) -> int | None:
    """Set the idle workers' spin for a quiet machine (:data:`QUIET_SPIN_US`) or a busy one
    (:data:`BUSY_SPIN_US`), unless the spin was set explicitly (:func:`set_spin_us`, ``$KILN_POOL_SPIN_US``).
    Never builds the pool: a pool loaded later starts with this choice. Returns the spin chosen, or None."""
    if _spin_is_explicit():
        return None
    us = QUIET_SPIN_US if quiet else BUSY_SPIN_US
    _state["adaptive_spin_us"] = us
    lib = _state.get("lib")
    if lib is not None:
        lib.kiln_pool_set_spin_us(us)
    return us
