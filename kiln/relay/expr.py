"""Relay expressions: Var, Constant, Tuple, TupleGetItem, Call, Let, If, Function (TVM's relay.expr).

Nodes are immutable. Structural equality treats bound variables (function params, let vars) up to
renaming, so ``fn (%x) { %x }`` equals ``fn (%y) { %y }``. Python operators on expressions build
calls to the registered ops ``add``, ``subtract``, ... (looked up when used).
"""
from __future__ import annotations

import numbers
from typing import Sequence

import numpy as np

from ..error import KilnError, RelayError
from ..ir.attrs import DictAttrs
from ..ir.expr import GlobalVar, RelayExpr
from ..ir.function import BaseFunc
from ..ir.type import TensorType, Type, TupleType
from ..runtime import ndarray as _nd
from ..runtime.dtype import dtype_str
from ..ir.op import Op, _OPS

Expr = RelayExpr


def _op(name: str):
    op = _OPS.get(name)
    if op is None:
        raise RelayError(
            f"operator {name!r} is not registered: the Python operator on a Relay expression builds a call "
            f"to {name!r}, which kiln.relay.op registers (import kiln.relay first)"
        )
    return op


def _known_dtype(expr) -> str | None:
    ty = getattr(expr, "_checked_type_", None)
    if ty is None and isinstance(expr, Var):
        ty = expr.type_annotation
    if ty is None and isinstance(expr, Constant):
        return str(expr._value.dtype)
    if isinstance(ty, TensorType):
        return ty.dtype
    return None


def _operand(self, other):
    if isinstance(other, RelayExpr):
        return other
    if isinstance(other, (numbers.Number, np.generic)):
        dtype = _known_dtype(self)
        if dtype is None:
            raise TypeError(f'convert "{other}" with `relay.const` first: the dtype of the other operand is unknown')
        return const(other, dtype)
    raise TypeError(f"unsupported operand type for a Relay expression: {type(other).__name__}")


def _binary(name, lhs, rhs):
    return Call(_op(name), [lhs, rhs])


class ExprWithOp(RelayExpr):
    """Relay expressions with Python operators (``a + b`` -> ``add(a, b)``) and calls."""

    def astype(self, dtype):
        op = _op("cast")
        return Call(op, [self], op.make_attrs(dtype=dtype_str(dtype)))

    def __neg__(self):
        return Call(_op("negative"), [self])

    def __add__(self, other):
        return _binary("add", self, _operand(self, other))

    def __radd__(self, other):
        return _binary("add", _operand(self, other), self)

    def __sub__(self, other):
        return _binary("subtract", self, _operand(self, other))

    def __rsub__(self, other):
        return _binary("subtract", _operand(self, other), self)

    def __mul__(self, other):
        return _binary("multiply", self, _operand(self, other))

    def __rmul__(self, other):
        return _binary("multiply", _operand(self, other), self)

    def __truediv__(self, other):
        return _binary("divide", self, _operand(self, other))

    def __rtruediv__(self, other):
        return _binary("divide", _operand(self, other), self)

    def __lt__(self, other):
        return _binary("less", self, _operand(self, other))

    def __gt__(self, other):
        return _binary("greater", self, _operand(self, other))

    def __le__(self, other):
        return _binary("less_equal", self, _operand(self, other))

    def __ge__(self, other):
        return _binary("greater_equal", self, _operand(self, other))

    def equal(self, other):
        """Elementwise ``==`` (a method: ``==`` itself is identity, so exprs can key dicts)."""
        return _binary("equal", self, _operand(self, other))

    def not_equal(self, other):
        return _binary("not_equal", self, _operand(self, other))

    __eq__ = RelayExpr.__eq__
    __hash__ = RelayExpr.__hash__

    def __call__(self, *args):
        return Call(self, list(args))

    def astext(self, show_meta_data: bool = True, annotate=None) -> str:
        from .printer import expr_to_text
        return expr_to_text(self, show_meta_data=show_meta_data, annotate=annotate)


class Var(ExprWithOp):
    """A local variable (function parameter or let-bound). Compared up to renaming."""

    _is_var = True
    _fields = ("type_annotation",)
    _var_fields = ("type_annotation",)

    def __init__(self, name_hint: str, type_annotation: Type | None = None, span=None):
        self.name_hint = str(name_hint)
        self.type_annotation = type_annotation
        self.span = span

    @property
    def vid(self):
        return _Id(self.name_hint)

    def __repr__(self) -> str:
        ty = self.type_annotation
        return f"Var({self.name_hint}" + (f", ty={ty.astext()})" if ty is not None else ")")

    __str__ = __repr__


class _Id:
    __slots__ = ("name_hint",)

    def __init__(self, name_hint):
        self.name_hint = name_hint


class Constant(ExprWithOp):
    """A constant tensor. ``data`` is an NDArray (``c.data.numpy()``)."""

    _fields = ("_value",)

    def __init__(self, data, span=None):
        if hasattr(data, "numpy") and not isinstance(data, np.ndarray):
            data = data.numpy()
        value = np.array(data, order="C", copy=True)
        value.flags.writeable = False
        self._value = value
        self.span = span

    @property
    def data(self):
        """The value as an NDArray (a copy)."""
        return _nd.array(np.array(self._value))

    def numpy(self) -> np.ndarray:
        """The value as a (read-only) numpy array."""
        return self._value

    @property
    def dtype(self) -> str:
        return dtype_str(self._value.dtype)


class Tuple(ExprWithOp):
    """A tuple of expressions."""

    _fields = ("fields",)

    def __init__(self, fields: Sequence[RelayExpr], span=None):
        self.fields = tuple(_check_expr(f, "Tuple field") for f in fields)
        self.span = span

    def __getitem__(self, index: int):
        if not -len(self.fields) <= index < len(self.fields):
            raise IndexError(f"Tuple index {index} out of range for {len(self.fields)} fields")
        return self.fields[index]

    def __len__(self) -> int:
        return len(self.fields)

    def astype(self, _):
        raise TypeError("astype cannot be used on a tuple")


class TupleGetItem(ExprWithOp):
    """Field ``index`` of a tuple-valued expression."""

    _fields = ("tuple_value", "index")

    def __init__(self, tuple_value: RelayExpr, index: int, span=None):
        self.tuple_value = _check_expr(tuple_value, "TupleGetItem tuple")
        self.index = int(index)
        self.span = span


class Call(ExprWithOp):
    """A call of an Op, a Function, a GlobalVar or any function-valued expression."""

    _fields = ("op", "args", "attrs", "type_args")

    def __init__(self, op, args: Sequence[RelayExpr], attrs=None, type_args=None, span=None):
        self.op = _check_expr(op, "Call op")
        self.args = tuple(_check_expr(a, f"argument {i} of a call") for i, a in enumerate(args))
        self.attrs = attrs
        self.type_args = tuple(type_args or ())
        self.span = span


class Let(ExprWithOp):
    """``let var = value; body``."""

    _fields = ("var", "value", "body")
    _def_fields = ("var",)

    def __init__(self, variable: Var, value: RelayExpr, body: RelayExpr, span=None):
        if not isinstance(variable, Var):
            raise RelayError(f"Let binds a relay.Var, got {type(variable).__name__}")
        self.var = variable
        self.value = _check_expr(value, "Let value")
        self.body = _check_expr(body, "Let body")
        self.span = span


class If(ExprWithOp):
    """``if (cond) { true_branch } else { false_branch }``; cond is a boolean scalar."""

    _fields = ("cond", "true_branch", "false_branch")

    def __init__(self, cond: RelayExpr, true_branch: RelayExpr, false_branch: RelayExpr, span=None):
        self.cond = _check_expr(cond, "If condition")
        self.true_branch = _check_expr(true_branch, "If true branch")
        self.false_branch = _check_expr(false_branch, "If false branch")
        self.span = span


class Function(BaseFunc, ExprWithOp):
    """``fn (params) -> ret_type { body }`` with optional type params and attrs (e.g. Primitive=1)."""

    _fields = ("type_params", "params", "ret_type", "body", "attrs")
    _def_fields = ("type_params", "params")

    def __init__(self, params: Sequence[Var], body: RelayExpr, ret_type: Type | None = None,
                 type_params: Sequence = None, attrs=None, span=None):
        params = list(params)
        for i, p in enumerate(params):
            if not isinstance(p, Var):
                raise RelayError(f"parameter {i} of a Function must be a relay.Var, got {type(p).__name__}")
        self.params = tuple(params)
        self.body = _check_expr(body, "Function body")
        self.ret_type = ret_type
        self.type_params = tuple(type_params or ())
        self.attrs = attrs if isinstance(attrs, DictAttrs) or attrs is None else DictAttrs(attrs)
        if self.attrs is not None and len(self.attrs) == 0:
            self.attrs = None
        self.span = span

    def with_attr(self, attr_key_or_dict, attr_value=None) -> "Function":
        d = dict(self.attrs.items()) if self.attrs is not None else {}
        if isinstance(attr_key_or_dict, dict):
            d.update(attr_key_or_dict)
        else:
            d[attr_key_or_dict] = attr_value
        return self.with_fields(attrs=DictAttrs(d) if d else None)

    def without_attr(self, attr_key: str) -> "Function":
        d = dict(self.attrs.items()) if self.attrs is not None else {}
        d.pop(attr_key, None)
        return self.with_fields(attrs=DictAttrs(d) if d else None)

    def get_attr(self, key: str, default=None):
        return self.attrs.get(key, default) if self.attrs is not None else default

    def __call__(self, *args):
        return Call(self, list(args))


class TupleWrapper:
    """The result of an op returning a tuple: indexable, and ``astuple()`` gives the expression."""

    def __init__(self, tuple_value: RelayExpr, size: int):
        self.tuple_value = tuple_value
        self.size = int(size)

    def astuple(self) -> RelayExpr:
        return self.tuple_value

    def astext(self) -> str:
        return self.tuple_value.astext()

    def __getitem__(self, index: int):
        if index >= len(self) or index < -len(self):
            raise IndexError("Tuple index out of range")
        if index < 0:
            index += self.size
        return TupleGetItem(self.tuple_value, index)

    def __len__(self) -> int:
        return self.size

    def __iter__(self):
        return (self[i] for i in range(self.size))

    def __repr__(self) -> str:
        return f"TupleWrapper({self.tuple_value!r}, {self.size})"

    def astype(self, _):
        raise TypeError("astype cannot be used on a tuple")


def _check_expr(value, what: str):
    if isinstance(value, RelayExpr):
        return value
    if isinstance(value, TupleWrapper):
        return value.tuple_value
    raise RelayError(f"{what} must be a Relay expression, got {type(value).__name__}: {value!r}")


# -- constructors (TVM's relay.var / relay.const) ------------------------------------------------
def var(name_hint: str, type_annotation=None, shape=None, dtype="float32", span=None) -> Var:
    """A new variable: ``relay.var("x", shape=(1, 3), dtype="float32")`` or with a type annotation."""
    if type_annotation is not None and shape is not None:
        raise RelayError("relay.var: give either shape or type_annotation, not both")
    if shape is not None:
        type_annotation = TensorType(shape, dtype)
    elif isinstance(type_annotation, str):
        type_annotation = TensorType((), type_annotation)
    elif type_annotation is not None and not isinstance(type_annotation, Type):
        raise RelayError(f"relay.var: type_annotation must be a Type or a dtype string, got {type_annotation!r}")
    return Var(name_hint, type_annotation, span)


def const(value, dtype=None, span=None) -> Constant:
    """A constant from a Python number/list, numpy array or NDArray. Python ints are int32, floats float32."""
    if isinstance(value, Constant):
        value = value.numpy()
    if hasattr(value, "numpy") and not isinstance(value, (np.ndarray, np.generic)):
        value = value.numpy()
    if isinstance(value, (bool, numbers.Number, list, tuple)):
        value = np.array(value, dtype=dtype_str(dtype) if dtype else None)
    if not isinstance(value, (np.ndarray, np.generic)):
        raise RelayError(f"relay.const: cannot make a constant from {type(value).__name__}")
    value = np.asarray(value)
    if not dtype:
        dtype = {np.dtype("int64"): "int32", np.dtype("float64"): "float32"}.get(value.dtype)
    if dtype:
        value = value.astype(dtype_str(dtype))
    return Constant(value, span)


def bind(expr: RelayExpr, binds: dict) -> RelayExpr:
    """Substitute variables (``Var -> Expr``) in ``expr``; a Function drops bound params."""
    from .expr_functor import bind_vars
    return bind_vars(expr, binds)


__all__ = ["Expr", "ExprWithOp", "Var", "Constant", "Tuple", "TupleGetItem", "Call", "Let", "If", "Function",
           "GlobalVar", "TupleWrapper", "var", "const", "bind"]
