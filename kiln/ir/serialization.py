"""``save_json`` / ``load_json`` (TVM's ``tvm.ir.save_json``): IR objects (Relay, TIR, TE, types, attrs,
modules) to a JSON string and back.

The layout follows TVM's top level (``root``, ``nodes``, ``b64ndarrays``, ``attrs``) with kiln's own node
fields, so a kiln file round-trips in kiln; TVM's files (whose fields are TVM's C++ ones) do not load.
Shared objects stay shared (a variable used twice is one node), cycles (a TE tensor and its op) are fine.

Loading never runs code from the file: each node names a class of the ``kiln`` package, which is
instantiated without calling its constructor and given the recorded fields; anything else is rejected.
"""
from __future__ import annotations

import base64
import enum
import importlib
import io
import json
import math

import numpy as np

from ..error import KilnError
from .node import deep_recursion

_FORMAT = "kiln-json-1"


class SerializationError(KilnError):
    """An object cannot be written to JSON, or a JSON text is not a kiln IR file."""


def _state(obj) -> dict:
    state = dict(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if slot not in ("__dict__", "__weakref__") and hasattr(obj, slot):
                state[slot] = getattr(obj, slot)
    return state


def _type_key(cls) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


class _Writer:
    def __init__(self):
        self.nodes: list = []
        self.index: dict = {}
        self.keep: list = []
        self.arrays: list = []

    def ref(self, obj) -> int:
        k = id(obj)
        hit = self.index.get(k)
        if hit is not None:
            return hit
        i = len(self.nodes)
        self.index[k] = i
        self.keep.append(obj)
        self.nodes.append(None)
        fields = {name: self.enc(v, f"{type(obj).__name__}.{name}") for name, v in _state(obj).items()}
        self.nodes[i] = {"type_key": _type_key(type(obj)), "fields": fields}
        return i

    def enc(self, v, where: str):
        from .op import Op
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, enum.Enum):
            return {"$enum": _type_key(type(v)), "value": v.value}
        if isinstance(v, int):
            return v
        if isinstance(v, float):
            return v if math.isfinite(v) else {"$float": repr(v)}
        if isinstance(v, np.ndarray):
            buf = io.BytesIO()
            np.save(buf, v, allow_pickle=False)
            self.arrays.append(base64.b64encode(buf.getvalue()).decode("ascii"))
            return {"$ndarray": len(self.arrays) - 1}
        if isinstance(v, np.generic):
            return {"$npscalar": str(v.dtype), "value": self.enc(v.item(), where)}
        if isinstance(v, np.dtype):
            return {"$npdtype": str(v)}
        if isinstance(v, tuple):
            return {"$tuple": [self.enc(x, where) for x in v]}
        if isinstance(v, list):
            return [self.enc(x, where) for x in v]
        if isinstance(v, (set, frozenset)):
            return {"$frozenset" if isinstance(v, frozenset) else "$set": [self.enc(x, where) for x in v]}
        if isinstance(v, dict):
            return {"$dict": [[self.enc(a, where), self.enc(b, where)] for a, b in v.items()]}
        if isinstance(v, Op):  # registry singletons: by name
            return {"$op": v.name}
        if isinstance(v, type) or callable(v) and not hasattr(v, "__dict__") and not hasattr(type(v), "__slots__"):
            raise SerializationError(f"save_json: {where} holds {v!r}, which is code, not IR data")
        if type(v).__module__.split(".")[0] == "kiln":
            if callable(v) and type(v).__name__ in ("function", "method"):
                raise SerializationError(f"save_json: {where} holds a Python function; IR files hold data only")
            return {"$ref": self.ref(v)}
        raise SerializationError(f"save_json: {where} holds a {type(v).__module__}.{type(v).__name__}, which kiln "
                                 "cannot write as JSON (IR files hold kiln nodes, numbers, strings and arrays)")


def save_json(node) -> str:
    """A JSON text for ``node`` (any kiln IR object) that ``load_json`` turns back into an equal object."""
    w = _Writer()
    with deep_recursion():
        root = w.enc(node, "the root")
    return json.dumps({"root": root, "nodes": w.nodes, "b64ndarrays": w.arrays,
                       "attrs": {"format": _FORMAT, "kiln_version": _version()}})


def _version() -> str:
    from .. import __version__
    return __version__


def _resolve(type_key: str):
    mod_name, _, qual = type_key.partition(":")
    if not mod_name or mod_name.split(".")[0] != "kiln" or not qual:
        raise SerializationError(f"load_json: node type {type_key!r} is not a kiln class")
    try:
        obj = importlib.import_module(mod_name)
        for part in qual.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        raise SerializationError(f"load_json: unknown node type {type_key!r}") from None
    if not isinstance(obj, type):
        raise SerializationError(f"load_json: {type_key!r} is not a class")
    return obj


class _Reader:
    def __init__(self, doc: dict):
        self.doc = doc
        self.objs: dict = {}
        self.arrays = doc.get("b64ndarrays", [])

    def node(self, i: int):
        obj = self.objs.get(i)
        if obj is not None:
            return obj
        spec = self.doc["nodes"][i]
        cls = _resolve(spec["type_key"])
        obj = object.__new__(cls)
        self.objs[i] = obj  # before the fields: cycles resolve to this object
        for name, v in spec["fields"].items():
            value = self.dec(v)
            try:
                object.__setattr__(obj, name, value)
            except AttributeError:
                obj.__dict__[name] = value
        return obj

    def dec(self, v):
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, list):
            return [self.dec(x) for x in v]
        if not isinstance(v, dict) or len(v) == 0:
            raise SerializationError(f"load_json: malformed value {v!r}")
        if "$ref" in v:
            return self.node(int(v["$ref"]))
        if "$tuple" in v:
            return tuple(self.dec(x) for x in v["$tuple"])
        if "$dict" in v:
            return {self.dec(a): self.dec(b) for a, b in v["$dict"]}
        if "$set" in v:
            return {self.dec(x) for x in v["$set"]}
        if "$frozenset" in v:
            return frozenset(self.dec(x) for x in v["$frozenset"])
        if "$float" in v:
            return float(v["$float"])
        if "$ndarray" in v:
            raw = base64.b64decode(self.arrays[int(v["$ndarray"])])
            arr = np.load(io.BytesIO(raw), allow_pickle=False)
            arr.flags.writeable = False
            return arr
        if "$npscalar" in v:
            return np.dtype(v["$npscalar"]).type(self.dec(v["value"]))
        if "$npdtype" in v:
            return np.dtype(v["$npdtype"])
        if "$enum" in v:
            cls = _resolve(v["$enum"])
            if not issubclass(cls, enum.Enum):
                raise SerializationError(f"load_json: {v['$enum']!r} is not an enum")
            return cls(v["value"])
        if "$op" in v:
            from .op import Op
            return Op.get(v["$op"])
        raise SerializationError(f"load_json: malformed value {v!r}")


def load_json(json_str: str):
    """The object a ``save_json`` text describes."""
    try:
        doc = json.loads(json_str)
    except (TypeError, ValueError) as err:
        raise SerializationError(f"load_json: not JSON ({err})") from None
    if not isinstance(doc, dict) or "nodes" not in doc or "root" not in doc:
        raise SerializationError("load_json: not a kiln IR file (no 'root'/'nodes')")
    if doc.get("attrs", {}).get("format") != _FORMAT:
        raise SerializationError(f"load_json: unsupported format {doc.get('attrs', {}).get('format')!r}; kiln "
                                 f"reads {_FORMAT!r} (files written by kiln's save_json; TVM's node layout differs)")
    with deep_recursion():
        return _Reader(doc).dec(doc["root"])


__all__ = ["save_json", "load_json", "SerializationError"]
