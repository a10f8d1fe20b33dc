"""kiln's thread pool for parallel loops: builds ``thread_pool.c`` once (cached on disk like kernels) and
hands its launch function to every loaded kernel library (``__kiln_parallel_launch``).

The pool's design is in the comment at the top of ``thread_pool.c`` and in the module doc of
:mod:`kiln.runtime.thread_policy`. The library is compiled on first use, not at install time; where no C
compiler is found (a deploy machine that only loads exported modules) the pointer stays null and parallel
loops run serially (logged once).
"""
from __future__ import annotations

import ctypes
import logging
import os
import threading

_log = logging.getLogger("kiln.thread_pool")
_lock = threading.Lock()
_state: dict = {}
SOURCE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "thread_pool.c")
STATS_FIELDS = ("workers", "jobs", "serial_jobs", "chunks_by_caller", "chunks_by_workers", "wakeups", "spin_us")


def _load():
    """The pool library (ctypes.CDLL), building it on first use; None when it cannot be built."""
    with _lock:
        if "lib" in _state:
            return _state["lib"]
        lib = None
        try:
            from ..target import compiler
            with open(SOURCE_PATH, encoding="utf-8") as f:
                source = f.read()
            obj = compiler.compile_object(source, ["-pthread"])
            path = compiler.link_cached([obj], ["-pthread"])
            lib = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
            lib.kiln_pool_set_spin_us.restype = ctypes.c_int64
            lib.kiln_pool_set_spin_us.argtypes = [ctypes.c_int64]
            lib.kiln_pool_stats.restype = None
            lib.kiln_pool_stats.argtypes = [ctypes.POINTER(ctypes.c_int64)]
        except Exception as err:  # noqa: BLE001 - no compiler / failed build: parallel loops run serially
            _log.warning("kiln thread pool unavailable (%s); parallel loops run serially", err)
            lib = None
        _state["lib"] = lib
        return lib


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
    lib.kiln_pool_stats(out)
    return dict(zip(STATS_FIELDS, out))


def set_spin_us(us: int) -> int:
    """How long (microseconds) idle workers spin before they sleep on a futex; returns the previous value.
    The default is ``$KILN_POOL_SPIN_US`` or 50."""
    if isinstance(us, bool) or not isinstance(us, int) or us < 0:
        from ..error import KilnError
        raise KilnError(f"set_spin_us expects a non-negative integer, got {us!r}")
    lib = _load()
    if lib is None:
        return 0
    return int(lib.kiln_pool_set_spin_us(us))
