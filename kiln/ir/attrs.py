"""Attribute nodes: the typed, immutable attributes of an op call, and free-form DictAttrs.

An op declares its attributes class once, with field names and defaults::

    class Conv2DAttrs(kiln.ir.Attrs):
        type_key = "relay.attrs.Conv2DAttrs"
        fields = {"strides": (1, 1), "padding": (0, 0), "data_layout": "NCHW", "out_dtype": ""}

Subclassing registers the schema under ``type_key``; ``kiln.ir.make_node(type_key, **values)``
builds one (unknown field names are an error; missing ones take their defaults). Values are
normalized (lists become tuples) so attrs are immutable and compare structurally.
"""
from __future__ import annotations

import difflib
from typing import Any, Callable

from ..error import KilnError
from .node import Node, structural_equal

_ATTRS_TYPES: dict[str, type] = {}


class AttrsError(KilnError, ValueError):
    """Unknown attribute name, or a value that does not fit the field."""


class Field:
    """A field declaration with a default, an optional converter and a description."""

    __slots__ = ("default", "convert", "doc")

    def __init__(self, default=None, convert: Callable | None = None, doc: str = ""):
        self.default = default
        self.convert = convert
        self.doc = doc


def _freeze(value):
    """Make a value immutable and comparable: sequences become tuples, numpy scalars Python ones."""
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return {k: _freeze(v) for k, v in value.items()}
    try:
        import numpy as np
        if isinstance(value, np.generic):
            return value.item()
    except ImportError:  # pragma: no cover
        pass
    if type(value).__name__ in ("IntImm",) and hasattr(value, "value"):
        return int(value.value)
    if type(value).__name__ in ("FloatImm",) and hasattr(value, "value"):
        return float(value.value)
    if type(value).__name__ == "StringImm" and hasattr(value, "value"):
        return str(value.value)
    if type(value).__name__ == "DataType":
        return str(value)
    return value


class Attrs(Node):
    """Base class of attribute nodes. Fields are readable as ``attrs.f``, ``attrs["f"]``."""

    type_key: str = "Attrs"
    fields: dict = {}
    _fields: tuple = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "fields" in cls.__dict__ or "type_key" in cls.__dict__:
            merged: dict = {}
            for base in reversed(cls.__mro__[1:]):
                merged.update(getattr(base, "_schema", {}) or {})
            for name, spec in dict(cls.__dict__.get("fields", {})).items():
                merged[name] = spec if isinstance(spec, Field) else Field(spec)
            cls._schema = merged
            cls._fields = tuple(merged)
            if "type_key" in cls.__dict__:
                _ATTRS_TYPES[cls.type_key] = cls

    _schema: dict = {}

    def __init__(self, **values):
        schema = type(self)._schema
        unknown = [k for k in values if k not in schema]
        if unknown:
            raise AttrsError(
                f"{self.type_key}: unknown attribute(s) {unknown}; known fields are {sorted(schema)}"
            )
        for name, spec in schema.items():
            value = values[name] if name in values else spec.default
            if (spec.convert is None and isinstance(spec.default, float) and isinstance(value, int)
                    and not isinstance(value, bool)):
                value = float(value)
            if spec.convert is not None and value is not None:
                try:
                    value = spec.convert(value)
                except (TypeError, ValueError) as err:
                    raise AttrsError(f"{self.type_key}.{name}: cannot use {value!r}: {err}") from None
            self.__dict__[name] = _freeze(value)

    # -- mapping-like access ----------------------------------------------------------------
    def keys(self):
        return list(self._fields)

    def items(self):
        return [(k, getattr(self, k)) for k in self._fields]

    def __getitem__(self, key: str):
        if key not in self._fields:
            raise KeyError(f"{self.type_key} has no attribute {key!r}; fields: {list(self._fields)}")
        return getattr(self, key)

    def __contains__(self, key) -> bool:
        return key in self._fields

    def get_int(self, key: str) -> int:
        return int(self[key])

    def get_int_tuple(self, key: str) -> tuple:
        return tuple(int(x) for x in self[key])

    def get_str(self, key: str) -> str:
        return str(self[key])

    def list_field_info(self) -> list:
        return [(k, self._schema[k]) for k in self._fields]

    def non_default_items(self) -> list:
        """(name, value) pairs whose value differs from the declared default (what the printer shows)."""
        out = []
        for k in self._fields:
            v = getattr(self, k)
            default = _freeze(self._schema[k].default) if k in self._schema else None
            if not (v is default or structural_equal(v, default)):
                out.append((k, v))
        return out

    def with_values(self, **changes) -> "Attrs":
        """A copy with some fields changed."""
        values = dict(self.items())
        values.update(changes)
        return type(self)(**values)

    def __getattr__(self, name):
        # only called when normal lookup failed
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            f"{type(self).__name__} ({self.type_key}) has no attribute {name!r}; fields: {list(self._fields)}"
        )

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.items())
        return f"{self.type_key}({inner})"

    __str__ = __repr__


class DictAttrs(Node):
    """Free-form attributes (function and module attrs): any string keys."""

    type_key = "DictAttrs"
    _fields = ("_dict",)

    def __init__(self, values: dict | None = None, **kwargs):
        d = dict(values.items() if isinstance(values, (dict, DictAttrs)) else (values or {}))
        d.update(kwargs)
        self.__dict__["_dict"] = {str(k): _freeze(v) for k, v in sorted(d.items())}

    def keys(self):
        return list(self._dict)

    def items(self):
        return list(self._dict.items())

    def values(self):
        return list(self._dict.values())

    def get(self, key, default=None):
        return self._dict.get(key, default)

    def __getitem__(self, key):
        return self._dict[key]

    def __contains__(self, key) -> bool:
        return key in self._dict

    def __len__(self) -> int:
        return len(self._dict)

    def __iter__(self):
        return iter(self._dict)

    def __bool__(self) -> bool:
        return bool(self._dict)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self.__dict__["_dict"][name]
        except KeyError:
            raise AttributeError(f"DictAttrs has no key {name!r}; keys: {list(self._dict)}") from None

    def with_attr(self, key, value) -> "DictAttrs":
        d = dict(self._dict)
        d[key] = value
        return DictAttrs(d)

    def without_attr(self, key) -> "DictAttrs":
        d = dict(self._dict)
        d.pop(key, None)
        return DictAttrs(d)

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in self._dict.items()) + "}"

    __str__ = __repr__


def attrs_type(type_key: str) -> type:
    """The registered attrs class of a type key (e.g. ``"relay.attrs.Conv2DAttrs"``)."""
    cls = _ATTRS_TYPES.get(type_key)
    if cls is None:
        close = difflib.get_close_matches(type_key, list(_ATTRS_TYPES), n=5)
        raise AttrsError(f"unknown attrs type {type_key!r}" + (f"; did you mean {close}?" if close else ""))
    return cls


def declare_attrs(type_key: str, doc: str = "", **fields: Any) -> type:
    """Declare an attrs class without a class statement: ``declare_attrs("relay.attrs.XAttrs", axis=0)``."""
    name = type_key.rsplit(".", 1)[-1]
    return type(name, (Attrs,), {"type_key": type_key, "fields": fields, "__doc__": doc})


def make_node(type_key: str, **fields):
    """Build a registered node by type key (TVM's ``tvm.ir.make_node``)."""
    if type_key in ("DictAttrs", "ir.DictAttrs"):
        return DictAttrs(fields)
    return attrs_type(type_key)(**fields)


def list_attrs_types() -> list:
    return sorted(_ATTRS_TYPES)
