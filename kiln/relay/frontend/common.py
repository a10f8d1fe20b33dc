"""Helpers shared by the frontends (TVM's ``relay.frontend.common``): type/shape queries on
expressions being built, constant evaluation, and variable creation.

Frontends build a graph node by node and keep asking "what is the shape of this?". ``TypeCache`` answers
incrementally: it keeps one type inferencer alive, so each query only types the new nodes (TVM re-infers
the whole subgraph each time, which is quadratic on big models).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ...error import FrontendError, KilnError
from ...ir.type import TensorType, TupleType
from .. import expr as _expr
from ..expr import Call, Constant, Var
from ..transform.type_infer import TypeInferencer, infer_expr
from ..transform import FoldConstantExpr
from ..analysis import free_vars

__all__ = ["TypeCache", "infer_type", "infer_shape", "infer_dtype", "infer_value", "try_infer_value",
           "fold_constant", "new_var", "try_fold_call", "ExprTable", "c_array", "as_int_list"]


class TypeCache:
    """Types of expressions built so far; inferring a new node reuses the types of its inputs."""

    def __init__(self):
        self._inf = TypeInferencer()

    def type_of(self, expr):
        inf = self._inf
        t = inf.infer(expr)
        inf.solve_pending()
        return inf.solver.full(t)

    def shape(self, expr) -> tuple:
        t = self.type_of(expr)
        if not isinstance(t, TensorType):
            raise FrontendError(f"expected a tensor, got a value of type {t.astext() if hasattr(t, 'astext') else t}")
        return tuple(_dim(d) for d in t.shape)

    def dtype(self, expr) -> str:
        t = self.type_of(expr)
        if not isinstance(t, TensorType):
            raise FrontendError(f"expected a tensor, got a value of type {t}")
        return str(t.dtype)


def _dim(d):
    """A static dimension as an int; a symbolic one is kept as is."""
    v = getattr(d, "value", None)
    if isinstance(v, (int, np.integer)):
        return int(v)
    try:
        return int(d)
    except (TypeError, ValueError):
        return d


def infer_type(expr):
    """``expr`` with its type inferred (``.checked_type`` set); free vars must be annotated."""
    return infer_expr(expr)


def infer_shape(expr) -> tuple:
    """The static shape of a tensor-valued expression."""
    t = infer_type(expr).checked_type
    if isinstance(t, TupleType):
        raise FrontendError("infer_shape: the expression is a tuple, not a tensor")
    return tuple(_dim(d) for d in t.shape)


def infer_dtype(expr) -> str:
    return str(infer_type(expr).checked_type.dtype)


def fold_constant(expr):
    """Constant-fold ``expr`` (TVM's ``common.fold_constant``)."""
    return FoldConstantExpr(expr)


def infer_value(expr, params: dict | None = None) -> np.ndarray:
    """Evaluate an expression with no inputs (after binding ``params``) to a numpy array."""
    if params:
        binds = {}
        for v in free_vars(expr):
            if v.name_hint in params:
                val = params[v.name_hint]
                binds[v] = Constant(val.numpy() if hasattr(val, "numpy") else np.asarray(val))
        expr = _expr.bind(expr, binds)
    folded = fold_constant(expr)
    if isinstance(folded, Constant):
        return folded.numpy()
    raise FrontendError("infer_value: the expression depends on inputs, so its value is not known at import time")


def try_infer_value(expr, params: dict | None = None):
    """``(value, True)`` when ``expr`` evaluates at import time, else ``(expr, False)``."""
    try:
        return infer_value(expr, params), True
    except KilnError:
        return expr, False


def try_fold_call(call, type_cache: TypeCache | None = None, max_elements: int = 1 << 16):
    """Fold a single op call whose arguments are all small constants, using the op's numpy reference.

    Keeps shape arithmetic in traced graphs (``size`` -> ``NumToTensor`` -> ``mul`` -> ``Int``) a constant,
    without running a whole FoldConstant pass per node. Anything not foldable is returned unchanged.
    """
    if not isinstance(call, Call) or not hasattr(call.op, "get_attr"):
        return call
    if not call.args or not all(isinstance(a, Constant) for a in call.args):
        return call
    if sum(int(a.numpy().size) for a in call.args) > max_elements:
        return call
    name = call.op.name
    if name.startswith("random.") or name in ("nn.dropout",):
        return call
    ref = call.op.get_attr("FReference")
    if ref is None:
        return call
    ty = type_cache.type_of(call) if type_cache is not None else infer_type(call).checked_type
    if not isinstance(ty, TensorType):
        return call
    out = np.asarray(ref(call.attrs, [a.numpy() for a in call.args], ty))
    dtype = "bool" if ty.dtype == "bool" else str(ty.dtype)
    out = c_array(out.astype(dtype, copy=False).reshape([_dim(d) for d in ty.shape]))
    return Constant(out)


def c_array(value) -> np.ndarray:
    """A C-contiguous copy of ``value`` that keeps 0-d arrays 0-d (np.ascontiguousarray makes them 1-d)."""
    return np.array(value, order="C", copy=True)


def new_var(name_hint: str, type_annotation=None, shape=None, dtype: str = "float32") -> Var:
    """A Relay variable (TVM's ``common.new_var``)."""
    return _expr.var(name_hint, type_annotation=type_annotation, shape=shape, dtype=dtype)


class ExprTable:
    """Name -> expression map with unique variable names, for frontends that refer to values by name."""

    def __init__(self):
        self.exprs: dict = {}
        self.params: dict = {}
        self.const_ctr = 1
        self.in_padding = False

    def new_const(self, value, shape=None, dtype="float32", source_name=None):
        name = source_name or f"_param_{self.const_ctr}"
        self.const_ctr += 1
        arr = np.asarray(value, dtype=dtype)
        self.params[name] = arr
        self.exprs[name] = new_var(name, shape=arr.shape if shape is None else shape, dtype=dtype)
        return self.exprs[name]

    def get_expr(self, name):
        return self.exprs[name]

    def set_expr(self, name, expr, force_override=False):
        if force_override or name not in self.exprs:
            self.exprs[name] = expr

    def has_expr(self, name) -> bool:
        return name in self.exprs


def as_int_list(values: Sequence, what: str) -> list:
    """A list of Python ints (from ints, numpy ints or 0-d Constants); FrontendError otherwise."""
    out = []
    for v in values:
        if isinstance(v, Constant):
            v = v.numpy()
        try:
            out.append(int(v))
        except (TypeError, ValueError):
            raise FrontendError(f"{what}: expected integers known at import time, got {type(v).__name__}") from None
    return out
