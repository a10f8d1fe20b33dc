"""A disk cache of the C source that TIR lowering and the C codegen make from a Relay build's kernels.

The compiled objects are already cached by their source (``kiln.target.compiler``), but a warm build still
lowered and printed every kernel: for the VM's symbolic kernels (guards over unknown extents, vectorized and
partitioned loops) TIR ``Simplify``, ``PromoteRegisters`` and the printer were ~3 of the ~5 CPU seconds of
building a dynamic BERT-small. The cache maps the scheduled (pre-lowering) PrimFuncs to the generated source
and kernel metadata, so a rebuild of an unchanged model only prints its PrimFuncs and hashes them.

Key: the printed PrimFuncs in module order, the target, the PassContext (opt level, config, disabled passes),
a hash of kiln's own Python source (any change to kiln invalidates every entry), the target's C flags, the
host's CPU features and the codegen switches read from the environment (parallel backend, OpenMP schedule), so
a cache directory shared between machines or settings never hands one the other's code. Entries live under
``$KILN_LOWERED_CACHE_DIR``, else ``$KILN_CACHE_DIR/lowered`` (default ``~/.cache/kiln/lowered``);
``KILN_LOWERED_CACHE=0`` turns the cache off.
Only the CPU C targets (``llvm``, ``c``) are cached; anything else, or an entry that cannot be read, takes
the normal build.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile

from ...runtime import disk_cache
from ...transform import PassContext

_SOURCE_HASH: list = []
_KINDS = ("llvm", "c")


def kiln_source_hash() -> str:
    """A hash of kiln's own Python source (computed once per process): caches keyed by it are never reused
    across compiler changes (this cache, and kiln.contrib.onnx_backend's compiled artifacts)."""
    if not _SOURCE_HASH:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        h = hashlib.sha256()
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for fn in sorted(filenames):
                if fn.endswith(".py"):
                    full = os.path.join(dirpath, fn)
                    h.update(os.path.relpath(full, root).encode())
                    with open(full, "rb") as f:
                        h.update(f.read())
        _SOURCE_HASH.append(h.hexdigest())
    return _SOURCE_HASH[0]


def enabled() -> bool:
    return os.environ.get("KILN_LOWERED_CACHE", "1").strip() not in ("0", "false", "no", "off")


def _path(key: str) -> str:
    root = os.environ.get("KILN_LOWERED_CACHE_DIR")
    if not root:
        root = os.path.join(disk_cache.cache_root(), "lowered")
    return os.path.join(root, key[:2], key + ".json")


def cache_key(mod, target) -> str:
    """The entry's key (see the module doc)."""
    ctx = PassContext.current()
    h = hashlib.sha256()
    h.update(f"{target}|{getattr(ctx, 'opt_level', None)}|".encode())
    h.update(repr(sorted((str(k), repr(v)) for k, v in (getattr(ctx, "config", None) or {}).items())).encode())
    h.update(repr(sorted(str(p) for p in (getattr(ctx, "disabled_pass", None) or ()))).encode())
    h.update(kiln_source_hash().encode())
    # what the codegen reads besides the module: the flags the target compiles with (for a native target the
    # host's ISA decides the C helpers), the host's features, and the parallel-loop backend (an env switch)
    from ...runtime.cpu_features import host_features
    from ...target.codegen_c import OMP_SCHEDULE, parallel_backend
    from ...target.flags import target_cflags
    h.update(f"|{target_cflags(target)}|{sorted(host_features())}|{parallel_backend()}|{OMP_SCHEDULE}|".encode())
    for gv, func in mod.functions.items():
        h.update(f"\n@{getattr(gv, 'name_hint', gv)}\n".encode())
        h.update(str(func).encode())
    return h.hexdigest()


def _load(key: str):
    path = _path(key)
    try:
        with open(path, encoding="utf-8") as f:
            entry = json.load(f)
        disk_cache.touch(path)
        return entry["source"], entry["functions"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _store(key: str, source: str, functions: list) -> None:
    try:
        text = json.dumps({"source": source, "functions": functions})
    except (TypeError, ValueError):
        return  # metadata that JSON cannot hold: not cached
    path = _path(key)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)  # atomic: concurrent builds never read half an entry
    except OSError:
        return
    disk_cache.after_write()


def build_cached(mod, target):
    """``kiln.build(mod, target)`` for an IRModule of scheduled PrimFuncs, through the cache when it applies."""
    from ...driver.build_module import build as kiln_build, lower
    from ...tir.transform import LowerIntrin
    from ...target.build_c import generate_source
    from ...target.c_module import create_c_module
    from ...target.flags import target_cflags
    kind = target.kind.name
    if not enabled() or kind not in _KINDS:
        return kiln_build(mod, target=target)
    key = cache_key(mod, target)
    hit = _load(key)
    if hit is not None:
        source, functions = hit
    else:
        lowered = LowerIntrin(target)(lower(mod))  # the driver's lowering and codegen steps (driver.build)
        source, functions = generate_source(lowered, target)
        _store(key, source, functions)
    return create_c_module(source, functions, None, target_cflags(target), type_key=kind, target=target)
