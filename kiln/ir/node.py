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

import threading

import numpy as np

_REPR = threading.local()
_REPR_MAX_DEPTH = 32


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
        # the field-by-field fallback is recursive: past a few levels it abbreviates (a deep node
        # without a printer must not make repr() raise RecursionError)
        depth = getattr(_REPR, "depth", 0)
        if depth >= _REPR_MAX_DEPTH:
            return f"{type(self).__name__}(...)"
        _REPR.depth = depth + 1
        try:
            parts = ", ".join(f"{f}={getattr(self, f, None)!r}" for f in self._fields)
        finally:
            _REPR.depth = depth
        return f"{type(self).__name__}({parts})"

    __str__ = __repr__


class _EqState:
    __slots__ = ("lmap", "rmap", "map_free", "memo")

    def __init__(self, map_free: bool):
        self.lmap: dict = {}
        self.rmap: dict = {}
        self.map_free = map_free
        self.memo: set = set()


_MAP = object()  # work-list marker: bind a matched variable pair once its fields compared equal


def _eq_leaf(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return (
            isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
        )
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (a != a and b != b)
    if isinstance(b, (Node, list, tuple, dict)):
        return False
    try:
        return bool(a == b) and type(a) is type(b) or (
            isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool)
            and not isinstance(b, bool) and a == b
        )
    except Exception:
        return a is b


def _eq_value(lhs, rhs, st: _EqState, defining: bool) -> bool:
    """Compare with an explicit work list (depth-first, fields in order), so graph depth costs no
    interpreter stack. A pair is memoized when first entered: any mismatch ends the whole comparison."""
    work = [(lhs, rhs, defining)]
    pop, push = work.pop, work.append
    while work:
        a, b, d = pop()
        if a is _MAP:
            st.lmap[id(b)] = d
            st.rmap[id(d)] = b
            continue
        if isinstance(a, Node):
            if not isinstance(b, Node) or type(a) is not type(b):
                return False
            if a._is_var:
                mapped = st.lmap.get(id(a))
                if mapped is not None:
                    if mapped is not b:
                        return False
                    continue
                if id(b) in st.rmap:
                    return False
                if a is b and not d:
                    if st.map_free:  # the free var now stands for itself; it may not map elsewhere later
                        st.lmap[id(a)] = b
                        st.rmap[id(b)] = a
                    continue
                if not (d or st.map_free):
                    return False
                push((_MAP, a, b))
                for f in reversed(a._var_fields):
                    push((getattr(a, f), getattr(b, f), False))
                continue
            key = (id(a), id(b))
            if key in st.memo or (a is b and not st.lmap):
                continue
            st.memo.add(key)
            defs = a._def_fields
            for f in reversed(a._fields):
                push((getattr(a, f), getattr(b, f), f in defs))
        elif isinstance(a, (list, tuple)):
            if not isinstance(b, (list, tuple)) or len(a) != len(b):
                return False
            for i in range(len(a) - 1, -1, -1):
                push((a[i], b[i], d))
        elif isinstance(a, dict):
            if not isinstance(b, dict) or len(a) != len(b):
                return False
            pairs = list(zip(a.items(), b.items()))
            for (ka, va), (kb, vb) in reversed(pairs):
                push((va, vb, False))
                push((ka, kb, d))
        elif not _eq_leaf(a, b):
            return False
    return True


def structural_equal(lhs, rhs, map_free_vars: bool = False) -> bool:
    """Whether two IR values have the same structure (TVM's ``tvm.ir.structural_equal``)."""
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


# work-list actions of _hash_value
_ENTER, _EXIT_NODE, _EXIT_VAR, _EXIT_SEQ, _EXIT_DICT = range(5)


def _hash_leaf(a) -> int:
    if isinstance(a, np.ndarray):
        return hash((str(a.dtype), a.shape, a.tobytes()))
    try:
        return hash(a)
    except TypeError:
        return hash(repr(a))


def _hash_value(root, st: _HashState, defining: bool) -> int:
    """Post-order hash with an explicit work list and a value stack (no interpreter recursion).
    Variables are numbered in the order a depth-first, fields-in-order walk defines them."""
    vals: list = []
    work = [(_ENTER, root, defining)]
    pop, push = work.pop, work.append
    while work:
        action, a, d = pop()
        if action == _ENTER:
            if isinstance(a, Node):
                if a._is_var:
                    idx = st.vars.get(id(a))
                    if idx is None:
                        if d or st.map_free:
                            idx = len(st.vars)
                            st.vars[id(a)] = idx
                        else:
                            vals.append(hash(("freevar", id(a))))
                            continue
                    push((_EXIT_VAR, idx, len(a._var_fields)))
                    for f in reversed(a._var_fields):
                        push((_ENTER, getattr(a, f), False))
                    continue
                cached = st.memo.get(id(a))
                if cached is not None:
                    vals.append(cached)
                    continue
                push((_EXIT_NODE, a, len(a._fields)))
                defs = a._def_fields
                for f in reversed(a._fields):
                    push((_ENTER, getattr(a, f), f in defs))
            elif isinstance(a, (list, tuple)):
                push((_EXIT_SEQ, None, len(a)))
                for i in range(len(a) - 1, -1, -1):
                    push((_ENTER, a[i], d))
            elif isinstance(a, dict):
                push((_EXIT_DICT, None, 2 * len(a)))
                for k, v in reversed(list(a.items())):
                    push((_ENTER, v, False))
                    push((_ENTER, k, d))
            else:
                vals.append(_hash_leaf(a))
            continue
        n = d
        kids = tuple(vals[len(vals) - n:]) if n else ()
        if n:
            del vals[len(vals) - n:]
        if action == _EXIT_NODE:
            h = hash((type(a).__name__,) + kids)
            st.memo[id(a)] = h
        elif action == _EXIT_VAR:
            h = hash(("var", a, kids))
        elif action == _EXIT_SEQ:
            h = hash(("seq",) + kids)
        else:
            h = hash(("dict",) + tuple(zip(kids[0::2], kids[1::2])))
        vals.append(h)
    return vals[-1]


def structural_hash(node, map_free_vars: bool = False) -> int:
    """A hash consistent with :func:`structural_equal`."""
    return _hash_value(node, _HashState(map_free_vars), False)
