"""kiln's on-disk cache folder: where it is, and keeping it under a size cap.

Every disk cache kiln keeps lives under one root, ``$KILN_CACHE_DIR`` (default ``~/.cache/kiln``): compiled
objects and libraries (``obj/``, ``lib/``: kiln.target.compiler), lowered C (``lowered/``), the ONNX backend's
libraries (``onnx_backend/``), the thread pool's copy (``runtime/``) and pickle_memoize tables. Most entries are
keyed by kiln's own source or the compiler's identity, so every kiln upgrade orphans the previous ones; without
a cap the folder only grows (several GB after a few upgrades).

The cap: ``$KILN_CACHE_MAX_MB`` (default 4096; ``0`` means no cap). After a cache write, at most once per process
and at most once an hour per cache root (a stamp file records the last pass), the least recently used files are
removed until the folder is under 80% of the cap. "Used" is the newest of the file's modification and access
times and, for compile-cache entries, of their ``.sha256`` record, which a cache hit touches
(:func:`touch`). Files used in the last hour are never removed, so a concurrent build never loses an entry it
has just looked up; the thread pool's ``runtime/`` copy is never removed.
"""
from __future__ import annotations

import hashlib
import os
import threading
import time

DEFAULT_MAX_MB = 4096
KEEP_FRACTION = 0.8
GRACE_S = 3600.0  # never remove what was used in the last hour
PRUNE_INTERVAL_S = 3600.0
_STAMP = ".last_prune"
_PROTECTED = ("runtime",)
_RECORD_SUFFIX = ".sha256"

_state = {"checked": False}
_lock = threading.Lock()


def cache_root(create: bool = False) -> str:
    """The root of kiln's disk caches: ``$KILN_CACHE_DIR``, else ``~/.cache/kiln``."""
    path = os.environ.get("KILN_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "kiln")
    if create:
        os.makedirs(path, exist_ok=True)
    return path


def file_sha256(path: str) -> str:
    """The hex SHA-256 of a file's bytes, read in 1 MiB chunks (cache entries' records, export manifests)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def max_bytes() -> int:
    """The size cap in bytes (0: none), from ``$KILN_CACHE_MAX_MB``; an unreadable value means the default."""
    text = os.environ.get("KILN_CACHE_MAX_MB", "").strip()
    try:
        mb = float(text) if text else DEFAULT_MAX_MB
    except ValueError:
        mb = DEFAULT_MAX_MB
    return max(0, int(mb * (1 << 20)))


def touch(path: str) -> None:
    """Mark ``path`` as used now (best effort: a read-only cache is still usable)."""
    try:
        os.utime(path, None)
    except OSError:
        pass


def _usage(st: os.stat_result) -> float:
    return max(st.st_mtime, st.st_atime)


def _files(root: str) -> list:
    """(usage time, size, paths) per cache entry; an entry's ``.sha256`` record goes with it."""
    records: dict = {}
    entries: dict = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if dirpath == root:
            dirnames[:] = [d for d in dirnames if d not in _PROTECTED]
        for fn in filenames:
            if dirpath == root and fn == _STAMP:
                continue
            full = os.path.join(dirpath, fn)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            if fn.endswith(_RECORD_SUFFIX):
                records[full[: -len(_RECORD_SUFFIX)]] = (full, st)
            else:
                entries[full] = st
    out = []
    for path, st in entries.items():
        used, size, paths = _usage(st), st.st_size, [path]
        rec = records.pop(path, None)
        if rec is not None:
            used, size = max(used, _usage(rec[1])), size + rec[1].st_size
            paths.append(rec[0])
        out.append((used, size, paths))
    for path, (full, st) in records.items():  # a record whose entry is gone
        out.append((_usage(st), st.st_size, [full]))
    return out


def prune(root: str | None = None, limit: int | None = None, now: float | None = None,
          grace_s: float = GRACE_S) -> dict:
    """Remove least recently used cache files until ``root`` holds at most ``KEEP_FRACTION * limit`` bytes
    (nothing when it is under ``limit``, or ``limit`` is 0). Returns ``{"bytes_before", "bytes_after",
    "removed"}``."""
    root = root or cache_root()
    limit = max_bytes() if limit is None else limit
    now = time.time() if now is None else now
    files = _files(root) if os.path.isdir(root) else []
    total = sum(size for _, size, _ in files)
    result = {"bytes_before": total, "bytes_after": total, "removed": 0}
    if not limit or total <= limit:
        return result
    target = int(limit * KEEP_FRACTION)
    for used, size, paths in sorted(files, key=lambda f: f[0]):
        if total <= target:
            break
        if now - used < grace_s:
            break  # sorted by use: everything after this was used recently too
        for p in paths:
            try:
                os.remove(p)
            except OSError:
                pass
        total -= size
        result["removed"] += 1
    result["bytes_after"] = total
    return result


def after_write() -> None:
    """Called after a cache write: runs :func:`prune` when the cap is set and the last pass over this root is
    older than ``PRUNE_INTERVAL_S`` (checked once per process)."""
    with _lock:
        if _state["checked"]:
            return
        _state["checked"] = True
    if not max_bytes():
        return
    root = cache_root()
    stamp = os.path.join(root, _STAMP)
    try:
        if time.time() - os.stat(stamp).st_mtime < PRUNE_INTERVAL_S:
            return
    except OSError:
        pass
    try:
        with open(stamp, "a", encoding="ascii"):
            pass
        touch(stamp)
        prune(root)
    except OSError:
        pass
