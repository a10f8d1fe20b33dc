"""The base of every IR node (Relay and TIR alike), with structural equality and hashing.

A node class lists its compared fields in ``_fields``. Fields that *define* variables
(function parameters, loop variables, let-bound variables) are also listed in
``_def_fields``: structural equality maps a variable defined on the left to the one
defined at the same place on the right, so ``fn(x) x`` equals ``fn(y) y``. Variables
classes set ``_is_var = True``; two different free variables are unequal unless
``map_free_vars=True``.

Nodes are immutable by convention: passes build new nodes instead of assigning fields.
``Object.__hash__``/``__eq__`` are by identity (as TVM's ObjectRef), so nodes can key dicts.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager

import numpy as np


class Node:
    """Base class of IR nodes."""

    _fields: tuple = ()
    _def_fields: tuple = ()
    _is_var: bool = False
    # Fields of a variable compared when two variables are matched (e.g. dtype).
    _var_fields: tuple = ()

    def same_as(self, other) -> bool:
        """Reference equality, as TVM's ``ObjectRef.same_as``."""
        return self is other

    def with_fields(self, **changes):
        """A shallow copy with some fields replaced; the original is untouched."""
        obj = object.__new__(type(self))
        obj.__dict__.update(self.__dict__)
        for k, v in changes.items():
            if k not in obj.__dict__:
                raise AttributeError(f"{type(self).__name__} has no field {k!r}")
            obj.__dict__[k] = v
        return obj

    def __repr__(self) -> str:
        text = getattr(self, "astext", None)
        if text is not None:
            try:
                return text()
            except Exception:  # printing must never hide the object entirely
                pass
        parts = ", ".join(f"{f}={getattr(self, f, None)!r}" for f in self._fields)
        return f"{type(self).__name__}({parts})"

    __str__ = __repr__


@contextmanager
def deep_recursion(limit: int = 200000):
    """Raise Python's recursion limit for walking very deep graphs."""
    old = sys.getrecursionlimit()
    if old < limit:
        sys.setrecursionlimit(limit)
    try:
        yield
    finally:
        if old < limit:
            sys.setrecursionlimit(old)


class _EqState:
    __slots__ = ("lmap", "rmap", "map_free", "memo")

    def __init__(self, map_free: bool):
        self.lmap: dict = {}
        self.rmap: dict = {}
        self.map_free = map_free
        self.memo: set = set()


def _eq_value(a, b, st: _EqState, defining: bool) -> bool:
    if isinstance(a, Node):
        if not isinstance(b, Node) or type(a) is not type(b):
            return False
        if a._is_var:
            mapped = st.lmap.get(id(a))
            if mapped is not None:
                return mapped is b
            if id(b) in st.rmap:
                return False
            if a is b and not defining:
                if st.map_free:  # the free var now stands for itself; it may not map elsewhere later
                    st.lmap[id(a)] = b
                    st.rmap[id(b)] = a
                return True
            if not (defining or st.map_free):
                return False
            for f in a._var_fields:
                if not _eq_value(getattr(a, f), getattr(b, f), st, False):
                    return False
            st.lmap[id(a)] = b
            st.rmap[id(b)] = a
            return True
        key = (id(a), id(b))
        if key in st.memo:
            return True
        if a is b and not st.lmap:
            return True
        defs = a._def_fields
        for f in a._fields:
            if not _eq_value(getattr(a, f), getattr(b, f), st, f in defs):
                return False
        st.memo.add(key)
        return True
    if isinstance(a, (list, tuple)):
        if not isinstance(b, (list, tuple)) or len(a) != len(b):
            return False
        return all(_eq_value(x, y, st, defining) for x, y in zip(a, b))
    if isinstance(a, dict):
        if not isinstance(b, dict) or len(a) != len(b):
            return False
        for (ka, va), (kb, vb) in zip(a.items(), b.items()):
            if not (_eq_value(ka, kb, st, defining) and _eq_value(va, vb, st, False)):
                return False
        return True
    if isinstance(a, np.ndarray):
        return (
            isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
        )
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (a != a and b != b)
    if isinstance(b, Node):
        return False
    try:
        return bool(a == b) and type(a) is type(b) or (
            isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool)
            and not isinstance(b, bool) and a == b
        )
    except Exception:
        return a is b


def structural_equal(lhs, rhs, map_free_vars: bool = False) -> bool:
    """Whether two IR values have the same structure (TVM's ``tvm.ir.structural_equal``)."""
    with deep_recursion():
        return _eq_value(lhs, rhs, _EqState(map_free_vars), False)


def assert_structural_equal(lhs, rhs, map_free_vars: bool = False) -> None:
    """Raise ValueError showing both sides when they are not structurally equal."""
    if not structural_equal(lhs, rhs, map_free_vars):
        raise ValueError(
            "StructuralEqual check failed.\n--- lhs ---\n" + str(lhs) + "\n--- rhs ---\n" + str(rhs)
        )


class _HashState:
    __slots__ = ("vars", "map_free", "memo")

    def __init__(self, map_free: bool):
        self.vars: dict = {}
        self.map_free = map_free
        self.memo: dict = {}


def _hash_value(a, st: _HashState, defining: bool) -> int:
    if isinstance(a, Node):
        if a._is_var:
            idx = st.vars.get(id(a))
            if idx is None:
                if defining or st.map_free:
                    idx = len(st.vars)
                    st.vars[id(a)] = idx
                else:
                    return hash(("freevar", id(a)))
            return hash(("var", idx, tuple(_hash_value(getattr(a, f), st, False) for f in a._var_fields)))
        cached = st.memo.get(id(a))
        if cached is not None:
            return cached
        defs = a._def_fields
        h = hash((type(a).__name__,) + tuple(_hash_value(getattr(a, f), st, f in defs) for f in a._fields))
        st.memo[id(a)] = h
        return h
    if isinstance(a, (list, tuple)):
        return hash(("seq",) + tuple(_hash_value(x, st, defining) for x in a))
    if isinstance(a, dict):
        return hash(("dict",) + tuple((_hash_value(k, st, defining), _hash_value(v, st, False)) for k, v in a.items()))
    if isinstance(a, np.ndarray):
        return hash((str(a.dtype), a.shape, a.tobytes()))
    try:
        return hash(a)
    except TypeError:
        return hash(repr(a))


def structural_hash(node, map_free_vars: bool = False) -> int:
    """A hash consistent with :func:`structural_equal`."""
    with deep_recursion():
        return _hash_value(node, _HashState(map_free_vars), False)
