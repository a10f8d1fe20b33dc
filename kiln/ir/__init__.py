"""kiln.ir: IR node base, structural equality, types, IRModule, attrs, the op registry."""
from .node import Node, structural_equal, structural_hash, assert_structural_equal
from ..runtime.dtype import DataType
from .span import Span, SourceName
from .type import (Type, TypeKind, TensorType, TupleType, TypeVar, GlobalTypeVar, IncompleteType, FuncType,
                   TypeCall, TypeConstraint, RelayRefType, PrimType, PointerType)
from .attrs import Attrs, DictAttrs, Field, AttrsError, make_node, declare_attrs, attrs_type
from .expr import BaseExpr, RelayExpr, GlobalVar
from .function import BaseFunc, CallingConv
from .module import IRModule
from .op import (Op, OpPattern, OpArgument, OpRegistryError, register_op, register_op_attr, get_op_attr_map,
                 register_type_relation, register_intrin_lowering)
from . import attrs, type, module, op, span
from .type import TensorType as TensorType  # noqa: F811  (keep name after 'type' submodule import)
from .serialization import save_json, load_json  # noqa: E402
