"""The aten op table: one place that says how each aten operator becomes Relay.

A converter is ``fn(ctx, args) -> value``: ``args`` are the call's arguments in the order of the op's
schema (:class:`~kiln.relay.frontend.pytorch_utils.AtenArgs`), each a Relay expression (tensors), a Python
value (ints, floats, bools, lists, None, strings), or a :class:`DTypeName`. The value returned is a Relay
expression, a Python value, or a list/tuple of them (ops with several outputs). ``ctx``
(:class:`AtenContext`) answers shape and dtype questions and makes constants.

Both importers (TorchScript in ``pytorch.py``, torch.export in ``exported_program.py``) normalize their
nodes into that form and look converters up here by the aten name (``"conv2d"``, ``"add"``...).
"""
from __future__ import annotations

import numbers
from typing import Callable

import numpy as np

from ....error import FrontendError, OpNotImplemented
from ...expr import Constant, Expr
from ..common import TypeCache, try_fold_call, c_array as _c_array
from ... import op as _op

ATEN_CONVERTERS: dict = {}


def register(*names: str) -> Callable:
    """Register a converter under one or more aten op names (without the ``aten::`` prefix)."""
    def deco(fn):
        for n in names:
            ATEN_CONVERTERS[n] = fn
        return fn
    return deco


def lookup(name: str, custom: dict | None = None):
    """The converter for aten op ``name``, or None.

    In-place spellings (``relu_``, ``__iadd__``) use the functional op's converter: the importers see SSA
    graphs, where an in-place op's result is read through its output value.
    """
    if custom and name in custom:
        return custom[name]
    fn = ATEN_CONVERTERS.get(name)
    if fn is None and name.endswith("_") and not name.endswith("__"):
        fn = ATEN_CONVERTERS.get(name[:-1])
    if fn is None and name.startswith("__i") and name.endswith("__"):  # __iadd__ -> __add__
        fn = ATEN_CONVERTERS.get("__" + name[3:])
    return fn


def is_supported(name: str, custom: dict | None = None) -> bool:
    return lookup(name, custom) is not None


class AtenContext:
    """What converters may ask about the graph being built."""

    def __init__(self, default_dtype: str = "float32", type_cache: TypeCache | None = None):
        self.default_dtype = default_dtype
        self.types = type_cache or TypeCache()
        self.op_name = ""
        self.overload = ""
        self.out_shapes = None  # the traced shapes of the node's outputs, where the importer knows them

    # -- types -----------------------------------------------------------------------------------
    def shape(self, e) -> tuple:
        if isinstance(e, Constant):
            return tuple(e.numpy().shape)
        return self.types.shape(e)

    def ndim(self, e) -> int:
        return len(self.shape(e))

    def dtype(self, e) -> str:
        if isinstance(e, Constant):
            d = e.numpy().dtype
            return "bool" if d == np.bool_ else str(d)
        return self.types.dtype(e)

    def type_of(self, e):
        return self.types.type_of(e)

    def typecheck(self, value) -> None:
        """Infer the types of new expressions (in ``value``, or a list/tuple of them) now, so an importer
        reports a type error at the node that made it."""
        if isinstance(value, Expr):
            self.type_of(value)
        elif isinstance(value, (list, tuple)):
            for v in value:
                self.typecheck(v)

    # -- values ----------------------------------------------------------------------------------
    def is_tensor(self, v) -> bool:
        return isinstance(v, Expr)

    def value(self, v):
        """The import-time value of ``v`` (Python value or a Constant) or None if it depends on inputs."""
        if isinstance(v, Constant):
            arr = v.numpy()
            return arr
        if isinstance(v, Expr):
            return None
        return v

    def scalar(self, v, what="value"):
        """A Python number from a number or a 0-d / 1-element constant."""
        if isinstance(v, (numbers.Number, np.generic)):
            return v.item() if isinstance(v, np.generic) else v
        val = self.value(v)
        if isinstance(val, np.ndarray) and val.size == 1:
            return val.reshape(()).item()
        raise FrontendError(f"{self.op_name}: {what} must be known at import time (a number), "
                            f"got an expression that depends on the inputs")

    def int_list(self, v, what="size") -> list:
        if v is None:
            return []
        if isinstance(v, (numbers.Integral, np.integer)) or isinstance(v, Constant):
            return [int(self.scalar(v, what))]
        return [int(self.scalar(x, what)) for x in v]

    def const(self, value, dtype: str):
        arr = np.asarray(value).astype("bool" if dtype == "bool" else dtype)
        return Constant(_c_array(arr))

    def scalar_dtype(self, v) -> str:
        """The dtype PyTorch gives a Python scalar: int64, the default float dtype, or bool."""
        if isinstance(v, bool):
            return "bool"
        if isinstance(v, numbers.Integral):
            return "int64"
        return self.default_dtype

    def as_expr(self, v, dtype: str | None = None):
        """A Relay expression for ``v`` (a number becomes a constant of ``dtype``)."""
        if isinstance(v, Expr):
            if dtype is not None and self.dtype(v) != dtype:
                return self.cast(v, dtype)
            return v
        if isinstance(v, (list, tuple)):
            return _op.stack([self.as_expr(x, dtype) for x in v], axis=0)
        if v is None:
            raise FrontendError(f"{self.op_name}: a tensor argument is None")
        return self.const(v, dtype or self.scalar_dtype(v))

    def cast(self, e, dtype: str):
        if self.dtype(e) == dtype:
            return e
        return self.fold(_op.cast(e, dtype))

    def fold(self, e):
        """Evaluate ``e`` now when all its inputs are small constants."""
        return try_fold_call(e, self.types)


def relay_op(path: str):
    """``kiln.relay.op.<path>`` (e.g. ``"nn.conv1d"``); OpNotImplemented naming it when kiln lacks the op."""
    obj = _op
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise OpNotImplemented(f"the Relay operator {path} is not available in kiln.relay.op, so this aten "
                                   "op cannot be converted yet")
    return obj
