"""The module blob: a serialized module tree stored in a library as ``__kiln_dev_mblob``.

Layout (all integers little-endian)::

    0   8 bytes  magic b"KILNMBLB"
    8   u32      format version (1)
    12  u32      reserved (0)
    16  u64      header length H
    24  u64      payload length P
    32  32 bytes sha256 of bytes 0..32 followed by the H + P bytes after this digest
    64  H bytes  JSON header: {"root": i, "modules": [{"type_key", "header", "payloads": {name: [off, len]},
                 "imports": [j, ...]}, ...]}
    64+H P bytes payloads, each 64-byte aligned, offsets relative to the payload start

Anything that does not match (short, wrong magic, bad checksum, offsets out of range, bad JSON)
raises :class:`kiln.error.ModuleLoadError`.
"""
from __future__ import annotations

import hashlib
import json
import struct

from ..error import ModuleLoadError

MAGIC = b"KILNMBLB"
VERSION = 1
_FIXED = struct.Struct("<8sIIQQ32s")  # 64 bytes
_ALIGN = 64


def pack(modules: list, root: int = 0) -> bytes:
    """Serialize ``modules``: a list of (type_key, header_dict, payloads_dict, import_indices)."""
    entries = []
    chunks = []
    offset = 0
    for type_key, header, payloads, imports in modules:
        table = {}
        for name, data in payloads.items():
            data = bytes(data)
            pad = (-offset) % _ALIGN
            if pad:
                chunks.append(b"\0" * pad)
                offset += pad
            table[name] = [offset, len(data)]
            chunks.append(data)
            offset += len(data)
        entries.append({"type_key": type_key, "header": header, "payloads": table, "imports": list(imports)})
    header_bytes = json.dumps({"root": root, "modules": entries}, separators=(",", ":")).encode("utf-8")
    payload = b"".join(chunks)
    prefix = _FIXED.pack(MAGIC, VERSION, 0, len(header_bytes), len(payload), b"")[:32]
    digest = hashlib.sha256(prefix + header_bytes + payload).digest()
    return prefix + digest + header_bytes + payload


def unpack(blob: bytes) -> tuple:
    """Inverse of :func:`pack`: (root index, [(type_key, header, payloads, imports), ...])."""
    if len(blob) < _FIXED.size:
        raise ModuleLoadError(f"module blob is truncated: {len(blob)} bytes, the fixed header alone is {_FIXED.size}")
    magic, version, _, hlen, plen, digest = _FIXED.unpack_from(blob, 0)
    if magic != MAGIC:
        raise ModuleLoadError(f"module blob has a bad magic number {magic!r} (expected {MAGIC!r})")
    if version != VERSION:
        raise ModuleLoadError(f"module blob format version {version} is not supported (this kiln reads {VERSION})")
    if _FIXED.size + hlen + plen != len(blob):
        raise ModuleLoadError(f"module blob is truncated or padded: header says {_FIXED.size + hlen + plen} "
                              f"bytes, found {len(blob)}")
    body = memoryview(blob)[_FIXED.size:]
    h = hashlib.sha256(blob[:32])
    h.update(body)
    if h.digest() != digest:
        raise ModuleLoadError("module blob is corrupt: checksum mismatch")
    try:
        meta = json.loads(bytes(body[:hlen]).decode("utf-8"))
        root = int(meta["root"])
        entries = meta["modules"]
        modules = []
        for entry in entries:
            payloads = {}
            for name, (off, size) in entry["payloads"].items():
                off, size = int(off), int(size)
                if off < 0 or size < 0 or off + size > plen:
                    raise ModuleLoadError(f"module blob payload {name!r} lies outside the blob")
                payloads[name] = bytes(body[hlen + off: hlen + off + size])
            imports = [int(i) for i in entry["imports"]]
            if any(i < 0 or i >= len(entries) for i in imports):
                raise ModuleLoadError("module blob import index out of range")
            modules.append((str(entry["type_key"]), entry["header"], payloads, imports))
    except ModuleLoadError:
        raise
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as err:
        raise ModuleLoadError(f"module blob header is malformed: {err}") from None
    if not 0 <= root < len(modules):
        raise ModuleLoadError("module blob root index out of range")
    return root, modules
