"""The metadata table of the Relay text format: nodes too big to print inline (tensor constants).

Text refers to them as ``meta[relay.Constant][i]``. The ``#[metadata]`` section is JSON::

    {"relay.Constant": [{"dtype": "float32", "shape": [3], "data": "<base64 of the C-order bytes>"}]}

(kiln's own encoding; TVM writes its object graph here, which kiln does not read.)
"""
from __future__ import annotations

import base64
import json

import numpy as np

from ..error import ParseError
from .expr import Constant


class MetaTable:
    """Kind -> list of nodes, deduplicated by identity."""

    def __init__(self, table: dict | None = None):
        self.table: dict[str, list] = {k: list(v) for k, v in (table or {}).items()}
        self._index: dict = {}
        for kind, nodes in self.table.items():
            for i, n in enumerate(nodes):
                self._index[(kind, id(n))] = i

    def add(self, kind: str, node) -> int:
        key = (kind, id(node))
        idx = self._index.get(key)
        if idx is None:
            nodes = self.table.setdefault(kind, [])
            idx = len(nodes)
            nodes.append(node)
            self._index[key] = idx
        return idx

    def get(self, kind: str, index: int):
        nodes = self.table.get(kind)
        if nodes is None:
            raise KeyError(kind)
        return nodes[index]

    def __len__(self) -> int:
        return sum(len(v) for v in self.table.values())

    def to_json(self) -> str:
        out = {}
        for kind, nodes in self.table.items():
            if kind != "relay.Constant":
                raise NotImplementedError(f"kiln's metadata table only stores relay.Constant, not {kind}")
            entries = []
            for c in nodes:
                v = np.ascontiguousarray(c.numpy())
                entries.append({"dtype": str(v.dtype), "shape": list(v.shape),
                                "data": base64.b64encode(v.tobytes()).decode("ascii")})
            out[kind] = entries
        lines = []
        for kind, entries in out.items():
            body = ",\n".join("  " + json.dumps(e) for e in entries)
            lines.append(f" {json.dumps(kind)}: [\n{body}\n ]")
        return "{\n" + ",\n".join(lines) + "\n}"

    @staticmethod
    def from_json(text: str) -> "MetaTable":
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as err:
            raise ParseError(f"metadata section is not valid JSON: {err}") from None
        table: dict = {}
        for kind, entries in raw.items():
            if kind != "relay.Constant":
                raise ParseError(f"metadata kind {kind!r} is not supported (only relay.Constant)")
            nodes = []
            for i, e in enumerate(entries):
                try:
                    arr = np.frombuffer(base64.b64decode(e["data"]), dtype=np.dtype(e["dtype"]))
                    arr = arr.reshape(tuple(e["shape"]))
                except (KeyError, ValueError, TypeError) as err:
                    raise ParseError(f"metadata entry {kind}[{i}] is malformed: {err}") from None
                nodes.append(Constant(arr.copy()))
            table[kind] = nodes
        return MetaTable(table)
