"""Memoize slow reference computations of tests across runs (TVM's ``tvm.contrib.pickle_memoize``).

    @memoize("topi.tests.test_conv2d.verify")
    def get_ref_data():
        ...
        return a_np, w_np, b_np

Results are cached per argument tuple in memory; with ``save_at_exit=True`` they are also pickled to
``$KILN_CACHE_DIR/pkl_memoize/<key>.<function>.pkl`` when the process exits and reloaded next time.
Arguments must be plain values (str, int, float, bool, None, tuples of those) so the key is stable.
"""
from __future__ import annotations

import atexit
import functools
import os
import pickle
import tempfile

from ..error import ArgumentError

_ALLOWED = (str, int, float, bool, type(None))


def _cache_dir() -> str:
    from ..runtime.disk_cache import cache_root
    return os.path.join(cache_root(), "pkl_memoize")


class Cache:
    """One memoized function's table, optionally saved to disk at exit."""

    cache_by_key: dict = {}

    def __init__(self, key: str, save_at_exit: bool):
        self.key = key
        self.path = os.path.join(_cache_dir(), key)
        self.save_at_exit = save_at_exit
        self.dirty = False
        self._cache: dict | None = None

    @property
    def cache(self) -> dict:
        if self._cache is None:
            self._cache = {}
            if self.save_at_exit and os.path.isfile(self.path):
                try:
                    with open(self.path, "rb") as f:
                        self._cache = pickle.load(f)
                except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
                    self._cache = {}  # a stale or broken cache file is just recomputed
        return self._cache

    def save(self) -> None:
        if not (self.save_at_exit and self.dirty and self._cache is not None):
            return
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(self.path), prefix=".tmp_")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(self._cache, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, self.path)  # atomic: a parallel run never reads half a file
        self.dirty = False


def _check_arg(value, where: str) -> None:
    if isinstance(value, tuple):
        for v in value:
            _check_arg(v, where)
    elif not isinstance(value, _ALLOWED):
        raise ArgumentError(f"{where}: memoize only accepts str/int/float/bool/None/tuple arguments, got "
                            f"{type(value).__name__}")


def memoize(key: str, save_at_exit: bool = False):
    """Decorator caching the function's result per positional-argument tuple (see module docstring)."""
    def register(func):
        cache = Cache(f"{key}.{func.__name__}.pkl", save_at_exit)
        Cache.cache_by_key[cache.key] = cache

        @functools.wraps(func)
        def memoized(*args, **kwargs):
            if kwargs:
                raise ArgumentError(f"{func.__name__}: memoized functions take positional arguments only")
            _check_arg(args, func.__name__)
            table = cache.cache
            if args not in table:
                table[args] = func(*args)
                cache.dirty = True
            return table[args]

        memoized.cache = cache
        return memoized
    return register


@atexit.register
def _save_all() -> None:
    for cache in Cache.cache_by_key.values():
        try:
            cache.save()
        except OSError:
            pass
