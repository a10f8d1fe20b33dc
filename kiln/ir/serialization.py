"""``save_json`` / ``load_json`` (TVM's ``tvm.ir.save_json``): IR objects (Relay, TIR, TE, types, attrs,
modules) to a JSON string and back.

The layout follows TVM's top level (``root``, ``nodes``, ``b64ndarrays``, ``attrs``) with kiln's own node
fields, so a kiln file round-trips in kiln; TVM's files (whose fields are TVM's C++ ones) do not load.
Shared objects stay shared (a variable used twice is one node), cycles (a TE tensor and its op) are fine.

Both directions walk the node graph from an explicit stack (depth-first, fields in order, so node numbers
are those of a recursive walk): a 100,000-node Relay chain costs no interpreter stack.

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
from .op import Op
from .. import __version__

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


def _is_node(v) -> bool:
    """A kiln object written as a node of its own (``{"$ref": i}``), as :meth:`_Writer.enc` decides."""
    if isinstance(v, (Op, enum.Enum, type)) or type(v).__module__.split(".")[0] != "kiln":
        return False
    return not (callable(v) and not hasattr(v, "__dict__") and not hasattr(type(v), "__slots__"))


def _node_children(state: dict) -> list:
    """The kiln nodes in a node's field values, in the order ``enc`` meets them."""
    out: list = []
    todo = [iter(state.values())]
    while todo:
        for v in todo[-1]:
            if isinstance(v, (tuple, list, set, frozenset)):
                todo.append(iter(v))
                break
            if isinstance(v, dict):
                todo.append(iter([x for kv in v.items() for x in kv]))
                break
            if not isinstance(v, (str, bool, int, float, np.ndarray, np.generic, np.dtype)) and v is not None \
                    and _is_node(v):
                out.append(v)
        else:
            todo.pop()
    return out


class _Writer:
    def __init__(self):
        self.nodes: list = []
        self.index: dict = {}
        self.keep: list = []
        self.arrays: list = []

    def ref(self, obj) -> int:
        """The node number of ``obj``; a new object is numbered on first sight (pre-order) and its fields
        are written once every node they reach is numbered (post-order), from an explicit stack."""
        hit = self.index.get(id(obj))
        if hit is not None:
            return hit
        stack = [(obj, self._enter(obj))]
        while stack:
            node, (i, state, kids) = stack[-1]
            for c in kids:
                if id(c) not in self.index:
                    stack.append((c, self._enter(c)))
                    break
            else:
                stack.pop()
                fields = {name: self.enc(v, f"{type(node).__name__}.{name}") for name, v in state.items()}
                self.nodes[i] = {"type_key": _type_key(type(node)), "fields": fields}
        return self.index[id(obj)]

    def _enter(self, obj):
        i = len(self.nodes)
        self.index[id(obj)] = i
        self.keep.append(obj)
        self.nodes.append(None)
        state = _state(obj)
        return i, state, iter(_node_children(state))

    def enc(self, v, where: str):
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
    root = w.enc(node, "the root")
    return json.dumps({"root": root, "nodes": w.nodes, "b64ndarrays": w.arrays,
                       "attrs": {"format": _FORMAT, "kiln_version": _version()}})


def _version() -> str:
    return __version__


def _resolve(type_key: str):
    cls = _RESOLVED.get(type_key)
    if cls is None:
        cls = _RESOLVED[type_key] = _resolve_uncached(type_key)
    return cls


_RESOLVED: dict = {}


def _resolve_uncached(type_key: str):
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
        """The object of node ``i``. Nodes it reaches are built first (children before parents, as a
        recursive reader would: a dict key or set member is complete before it is hashed), from an
        explicit stack; a node is registered before its fields, so cycles resolve to it."""
        obj = self.objs.get(i)
        if obj is not None:
            return obj
        stack = [(i, self._enter(i))]
        while stack:
            j, (spec, kids) = stack[-1]
            for c in kids:
                if c not in self.objs:
                    stack.append((c, self._enter(c)))
                    break
            else:
                stack.pop()
                obj = self.objs[j]
                for name, v in spec["fields"].items():
                    value = self.dec(v)
                    try:
                        object.__setattr__(obj, name, value)
                    except AttributeError:
                        obj.__dict__[name] = value
        return self.objs[i]

    def _enter(self, i: int):
        nodes = self.doc["nodes"]
        if not isinstance(i, int) or not 0 <= i < len(nodes):
            raise SerializationError(f"load_json: reference to node {i!r}, the file has {len(nodes)} nodes")
        spec = nodes[i]
        if not isinstance(spec, dict) or not isinstance(spec.get("fields"), dict) or "type_key" not in spec:
            raise SerializationError(f"load_json: node {i} is malformed (expected type_key and fields)")
        self.objs[i] = object.__new__(_resolve(spec["type_key"]))
        return spec, iter(_ref_ids(spec["fields"]))

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
            return Op.get(v["$op"])
        raise SerializationError(f"load_json: malformed value {v!r}")


def _ref_ids(fields: dict) -> list:
    """The node numbers referenced in a node's encoded fields, in the order ``dec`` meets them."""
    out: list = []
    todo = [iter(fields.values())]
    while todo:
        for v in todo[-1]:
            if isinstance(v, list):
                todo.append(iter(v))
                break
            if isinstance(v, dict):
                if "$ref" in v:
                    ref = v["$ref"]
                    out.append(int(ref) if isinstance(ref, (int, str)) and str(ref).lstrip("-").isdigit() else ref)
                else:
                    todo.append(iter(v.values()))
                    break
        else:
            todo.pop()
    return out


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
    return _Reader(doc).dec(doc["root"])


__all__ = ["save_json", "load_json", "SerializationError"]
