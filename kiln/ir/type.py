"""Relay types: TensorType, TupleType, FuncType, TypeVar, IncompleteType (TVM's ``tvm.ir.type``)."""
from __future__ import annotations

import enum
from typing import Sequence

from ..error import KilnError
from ..runtime.dtype import dtype_str
from .type_printer import type_to_str
from .node import Node, structural_equal, structural_hash


class TypeKind(enum.IntEnum):
    """What a type variable ranges over (TVM's ``TypeKind``)."""

    Type = 0
    ShapeVar = 1
    BaseType = 2
    Constraint = 4
    AdtHandle = 5
    TypeData = 6


class Type(Node):
    """Base class of types."""

    def astext(self) -> str:
        return type_to_str(self)

    def __eq__(self, other) -> bool:  # types compare structurally, as TVM's Type.__eq__
        return isinstance(other, Type) and structural_equal(self, other)

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return structural_hash(self)

    def is_dynamic(self) -> bool:
        return False


def _dim(d):
    """Normalize one shape dimension: Python int, or a symbolic PrimExpr (tir Var / Any)."""
    if isinstance(d, bool):
        raise KilnError(f"shape dimension must be an int, got bool {d!r}")
    if isinstance(d, int):
        return d
    try:
        import numpy as np
        if isinstance(d, np.integer):
            return int(d)
    except ImportError:  # pragma: no cover
        pass
    if isinstance(d, Node):
        value = getattr(d, "value", None)
        if isinstance(value, int) and type(d).__name__ == "IntImm":
            return value
        return d
    raise KilnError(f"shape dimension must be an int or a symbolic dimension, got {d!r}")


class TensorType(Type):
    """A tensor of static ``shape`` (ints; ``relay.Any()`` marks an unknown dim) and ``dtype``."""

    _fields = ("shape", "dtype")

    def __init__(self, shape: Sequence = (), dtype="float32"):
        self.shape = tuple(_dim(d) for d in shape)
        self.dtype = dtype_str(dtype)

    @property
    def concrete_shape(self) -> tuple:
        """The shape as ints; raises if a dimension is symbolic."""
        for d in self.shape:
            if not isinstance(d, int):
                raise KilnError(f"tensor type {self.astext()} has a symbolic dimension {d}")
        return self.shape

    def is_dynamic(self) -> bool:
        return any(not isinstance(d, int) for d in self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)


class TupleType(Type):
    """The type of a tuple: one type per field. ``TupleType([])`` is the unit type."""

    _fields = ("fields",)

    def __init__(self, fields: Sequence[Type]):
        self.fields = tuple(fields)

    def is_dynamic(self) -> bool:
        return any(f.is_dynamic() for f in self.fields)


class TypeVar(Type):
    """A type variable (for polymorphic function types)."""

    _is_var = True
    _fields = ("kind",)
    _var_fields = ("kind",)

    def __init__(self, name_hint: str, kind: TypeKind = TypeKind.Type):
        self.name_hint = name_hint
        self.kind = TypeKind(kind)

    __eq__ = Node.same_as  # a variable is itself only

    def __hash__(self) -> int:
        return id(self)


class GlobalTypeVar(Type):
    """A name for a global type definition (an ADT)."""

    _fields = ("name_hint", "kind")

    def __init__(self, name_hint: str, kind: TypeKind = TypeKind.AdtHandle):
        self.name_hint = name_hint
        self.kind = TypeKind(kind)

    def __call__(self, *args) -> "TypeCall":
        """``List(a)``: the ADT applied to type arguments."""
        return TypeCall(self, list(args))


class IncompleteType(Type):
    """A placeholder type during inference, resolved by unification."""

    _is_var = True
    _fields = ("kind",)

    def __init__(self, kind: TypeKind = TypeKind.Type):
        self.kind = TypeKind(kind)

    __eq__ = Node.same_as

    def __hash__(self) -> int:
        return id(self)


class TypeConstraint(Type):
    """Base of type constraints (kept for API compatibility)."""


class FuncType(Type):
    """The type of a function: ``fn<type_params>(arg_types) -> ret_type``."""

    _fields = ("type_params", "arg_types", "ret_type", "type_constraints")
    _def_fields = ("type_params",)

    def __init__(self, arg_types: Sequence[Type], ret_type: Type, type_params: Sequence = (),
                 type_constraints: Sequence = ()):
        self.arg_types = tuple(arg_types)
        self.ret_type = ret_type
        self.type_params = tuple(type_params)
        self.type_constraints = tuple(type_constraints)

    def is_dynamic(self) -> bool:
        return any(t.is_dynamic() for t in self.arg_types) or self.ret_type.is_dynamic()


class TypeCall(Type):
    """Application of a type constructor (an ADT) to arguments."""

    _fields = ("func", "args")

    def __init__(self, func: Type, args: Sequence[Type]):
        self.func = func
        self.args = tuple(args)


class RelayRefType(Type):
    """The type of a mutable reference cell."""

    _fields = ("value",)

    def __init__(self, value: Type):
        self.value = value


class PrimType(Type):
    """A scalar primitive type (a TIR dtype) used in function signatures."""

    _fields = ("dtype",)

    def __init__(self, dtype):
        self.dtype = dtype_str(dtype)


class PointerType(Type):
    """A pointer to elements of a type (TIR handle parameters)."""

    _fields = ("element_type", "storage_scope")

    def __init__(self, element_type: Type, storage_scope: str = ""):
        self.element_type = element_type
        self.storage_scope = storage_scope


def scalar_type(dtype) -> TensorType:
    """The rank-0 tensor type of a dtype."""
    return TensorType((), dtype)
