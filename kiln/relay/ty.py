"""Relay's type names (TVM's ``relay.ty``): re-exported from :mod:`kiln.ir.type`."""
from ..ir.type import (Type, TensorType, TupleType, FuncType, TypeVar, IncompleteType, TypeKind, TypeCall,  # noqa: F401
                       GlobalTypeVar, TypeConstraint, RelayRefType, PrimType, PointerType)

RefType = RelayRefType
Scalar = TensorType


def ShapeVar(name: str):  # noqa: N802 (TVM's name)
    """A type variable of kind ShapeVar (TVM's ``relay.ty.ShapeVar``)."""
    return TypeVar(name, kind=TypeKind.ShapeVar)


def scalar_type(dtype: str) -> TensorType:
    """The type of a scalar of ``dtype``: ``TensorType((), dtype)``."""
    return TensorType((), dtype)


TypeParam = TypeVar
