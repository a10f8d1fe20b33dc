"""Container types TVM code names (``tvm.runtime.container`` / ``tvm.ir.container`` / old ``tvm.container``).

kiln's IR and runtime use plain Python containers, so ``Array`` and ``Map`` are the abstract types that lists
/ tuples and dicts satisfy: ``isinstance(x, tvm.ir.container.Array)`` holds for the list kiln returns, and
``Array([...])`` builds a list. ``String`` and ``ShapeTuple`` are ``str``/``tuple`` subclasses.
"""
from __future__ import annotations


class _AbstractContainer(type):
    """isinstance() against the Python types kiln uses in place of TVM's container objects."""

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, cls._python_types)

    def __subclasscheck__(cls, sub) -> bool:
        return issubclass(sub, cls._python_types)


class Array(metaclass=_AbstractContainer):
    """An immutable sequence of objects: a list or a tuple in kiln."""

    _python_types = (list, tuple)

    def __new__(cls, items=()):
        return list(items)


class Map(metaclass=_AbstractContainer):
    """A mapping of objects: a dict in kiln."""

    _python_types = (dict,)

    def __new__(cls, items=()):
        return dict(items)


class String(str):
    """A string object (TVM's ``runtime.String``): a ``str``."""


class ShapeTuple(tuple):
    """A tuple of integers describing a shape (TVM's ``runtime.ShapeTuple``)."""

    def __new__(cls, shape=()):
        return super().__new__(cls, (int(d) for d in shape))


def tuple_object(fields=()):
    """A runtime tuple of the given fields."""
    return tuple(fields)


__all__ = ["Array", "Map", "String", "ShapeTuple", "tuple_object"]
