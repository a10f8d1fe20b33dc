"""kiln.relay: the graph-level IR (TVM's ``tvm.relay``)."""
from __future__ import annotations

import importlib

from ..ir.type import (Type, TensorType, TupleType, FuncType, TypeVar, IncompleteType, TypeKind, TypeCall,
                       GlobalTypeVar, RelayRefType)
from ..ir.expr import GlobalVar
from ..ir.module import IRModule
from ..ir.node import structural_equal, structural_hash, assert_structural_equal
from .expr import (Expr, ExprWithOp, Var, Constant, Tuple, TupleGetItem, Call, Let, If, Function, TupleWrapper,
                   var, const, bind)
from .expr_functor import ExprFunctor, ExprVisitor, ExprMutator, post_order_visit
from .ref import RefCreate, RefRead, RefWrite, RefType
from ..ir.span import Span, SourceName
from . import expr, expr_functor, analysis, transform, build_module, printer
from .printer import RelayTextPrinter
from .build_module import bind_params_by_name
from ..tir.expr import Any as _Any

# TVM spells the type aliases this way too
Scalar = TensorType


def Any():  # noqa: N802 (TVM's name)
    """An unknown dimension for ``relay.var(..., shape=(relay.Any(), 3))``."""
    return _Any()


def fromtext(source: str, source_name: str = "from_string"):
    """Parse Relay text into an IRModule (TVM's ``relay.fromtext``)."""
    from ..parser import fromtext as _fromtext
    return _fromtext(source, source_name)


def _import_ops():
    """Pull in the op library (kiln/relay/op), which registers the operators, and its public names."""
    try:
        op_pkg = importlib.import_module(".op", __name__)
    except ModuleNotFoundError as err:
        if err.name != __name__ + ".op":
            raise
        return None
    names = getattr(op_pkg, "__all__", [n for n in dir(op_pkg) if not n.startswith("_")])
    g = globals()
    for n in names:
        if n not in g:
            g[n] = getattr(op_pkg, n)
    return op_pkg


op = _import_ops()

# Submodules and names that other parts of kiln provide, loaded on first use.
_LAZY_SUBMODULES = {"annotation", "ty", "scope_builder", "frontend", "testing", "backend", "vm", "loops", "adt", "prelude", "qnn", "vision", "nn", "image", "quantize", "data_dep_optimization"}
_LAZY_NAMES = {
    "build": "kiln.relay.build_module:build",
    "create_executor": "kiln.relay.build_module:create_executor",
    "optimize": "kiln.relay.build_module:optimize",
    "save_param_dict": "kiln.relay.param_dict:save_param_dict",
    "load_param_dict": "kiln.relay.param_dict:load_param_dict",
    "ScopeBuilder": "kiln.relay.scope_builder:ScopeBuilder",
    # relay.build's old spellings and options (kiln/relay/build_module.py, executor.py, runtime.py)
    "build_config": "kiln.relay.build_module:build_config",
    "Module": "kiln.ir.module:IRModule",
    "Executor": "kiln.relay.executor:Executor",
    "Runtime": "kiln.relay.runtime:Runtime",
    # the Relay text parser under TVM v0.13's relay names (kiln/parser)
    "parse": "kiln.parser:parse",
    "parse_expr": "kiln.parser:parse_expr",
    # algebraic data types under TVM v0.13's relay names (relay.Match, relay.Clause, ...)
    **{n: f"kiln.relay.adt:{n}" for n in ("Pattern", "PatternWildcard", "PatternVar", "PatternConstructor",
                                          "PatternTuple", "Constructor", "TypeData", "Clause", "Match")},
    "scalar_type": "kiln.relay.ty:scalar_type",
}


def __getattr__(name):
    if name in _LAZY_SUBMODULES:
        if op is not None and hasattr(op, name):
            return getattr(op, name)
        return importlib.import_module(f"{__name__}.{name}")
    spec = _LAZY_NAMES.get(name)
    if spec is not None:
        mod_name, _, attr = spec.partition(":")
        mod = importlib.import_module(mod_name)
        if not hasattr(mod, attr):
            raise NotImplementedError(f"kiln.relay.{name} is not built yet ({spec})")
        return getattr(mod, attr)
    raise AttributeError(f"module 'kiln.relay' has no attribute {name!r}")
