"""The operator registry: one ``Op`` per name, holding the op's metadata and attributes.

An op's home module (``kiln/relay/op/...``) registers it and attaches what the compiler needs::

    op = kiln.ir.register_op("nn.relu", "Rectified linear unit.")   # idempotent: returns the Op
    op.set_num_inputs(1)
    op.add_argument("data", "Tensor", "The input tensor.")
    op.set_support_level(1)
    op.set_attrs_type(ReluAttrs)             # an Attrs subclass (or a type key string); omit if none
    op.add_type_rel("Identity", identity_rel)  # (arg_types, attrs) -> output Type
    kiln.ir.register_op_attr("nn.relu", "TOpPattern", OpPattern.ELEMWISE)
    @kiln.ir.register_op_attr("nn.relu", "FTVMCompute")
    def relu_compute(attrs, inputs, out_type): ...

Attribute keys used across kiln (values are plain Python objects):

- ``FTypeRelation``: ``fn(arg_types: list[Type], attrs) -> Type``; raise
  ``kiln.error.TypeInferenceError`` (message without the call: inference adds it) on a clash.
  An arg type may be an ``IncompleteType`` when not yet known; return ``None`` to say "not yet".
- ``TOpPattern``: an ``OpPattern`` int (fusion).
- ``FTVMCompute``: ``fn(attrs, inputs: list[te.Tensor], out_type) -> list[te.Tensor]``.
- ``FTVMStrategy``: a generic function ``fn(attrs, inputs, out_type, target) -> OpStrategy``.
- ``FReference``: ``fn(attrs, inputs: list[np.ndarray], out_type) -> np.ndarray | tuple`` (numpy
  reference used by FoldConstant and the debug interpreter).
- ``TOpIsStateful`` (bool), ``TNonComputational`` (bool), ``FInferCorrectLayout``.

Attributes follow TVM's priority rule: setting an attribute again with a higher ``level`` overrides,
a lower level is ignored, the same level is an error (two registrations clash).
"""
from __future__ import annotations

import difflib
import enum
from typing import Any, Callable

from ..error import KilnError
from .expr import RelayExpr
from .attrs import Attrs, attrs_type

_OPS: dict[str, "Op"] = {}


class OpPattern(enum.IntEnum):
    """Fusion pattern of an op (TVM's ``relay.op.OpPattern``)."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    COMM_REDUCE = 3
    OUT_ELEMWISE_FUSABLE = 4
    TUPLE = 7
    OPAQUE = 8


class OpArgument:
    """Documentation of one op argument."""

    __slots__ = ("name", "type_info", "description")

    def __init__(self, name: str, type_info: str = "Tensor", description: str = ""):
        self.name = name
        self.type_info = type_info
        self.description = description

    def __repr__(self) -> str:
        return f"OpArgument({self.name!r}, {self.type_info!r})"


class OpRegistryError(KilnError):
    """An unknown op, or clashing registrations of an op attribute."""


class Op(RelayExpr):
    """A primitive operator. There is exactly one ``Op`` object per name (``Op.get``)."""

    _fields = ("name",)

    def __init__(self, name: str, description: str = ""):
        # use register_op / Op.get; constructing directly is for the registry only
        self.name = name
        self.description = description
        self.num_inputs = -1
        self.arguments: list[OpArgument] = []
        self.support_level = 10
        self.attrs_type_key = ""
        self.attrs_type = None
        self.type_rel_name = ""
        self._attrs: dict[str, tuple[Any, int]] = {}

    # -- registry access ----------------------------------------------------------------------
    @staticmethod
    def get(op_name: str) -> "Op":
        """The registered op of this name; unknown names raise an error listing close names."""
        op = _OPS.get(op_name)
        if op is None:
            raise OpRegistryError(_unknown_op_message(op_name))
        return op

    @staticmethod
    def list_op_names() -> list:
        return sorted(_OPS)

    # -- metadata -------------------------------------------------------------------------------
    def set_num_inputs(self, n: int) -> "Op":
        self.num_inputs = int(n)
        return self

    def get_num_inputs(self) -> int:
        return self.num_inputs

    def add_argument(self, name: str, type_info: str = "Tensor", description: str = "") -> "Op":
        self.arguments.append(OpArgument(name, type_info, description))
        return self

    def set_support_level(self, level: int) -> "Op":
        self.support_level = int(level)
        return self

    def set_attrs_type(self, attrs_cls) -> "Op":
        """Declare the op's attrs class (an ``Attrs`` subclass, or its registered type key)."""
        if isinstance(attrs_cls, str):
            attrs_cls = attrs_type(attrs_cls)
        if not (isinstance(attrs_cls, type) and issubclass(attrs_cls, Attrs)):
            raise OpRegistryError(f"{self.name}: attrs type must be an Attrs subclass, got {attrs_cls!r}")
        self.attrs_type = attrs_cls
        self.attrs_type_key = attrs_cls.type_key
        return self

    def set_attrs_type_key(self, key: str) -> "Op":
        return self.set_attrs_type(key)

    def make_attrs(self, **values):
        """Build this op's attrs from keyword values (defaults fill the rest)."""
        if self.attrs_type is None:
            if values:
                raise OpRegistryError(f"op {self.name} takes no attributes, got {sorted(values)}")
            return None
        return self.attrs_type(**values)

    def add_type_rel(self, rel_name: str, type_rel_func: Callable | None = None) -> "Op":
        """Attach the shape/dtype rule: ``fn(arg_types, attrs) -> Type`` (key ``FTypeRelation``)."""
        if type_rel_func is None:
            type_rel_func = _TYPE_RELS.get(rel_name)
            if type_rel_func is None:
                raise OpRegistryError(f"{self.name}: no type relation named {rel_name!r} is registered "
                                      f"(known: {sorted(_TYPE_RELS)})")
        self.type_rel_name = rel_name
        self.set_attr("FTypeRelation", type_rel_func, 10, _replace=True)
        return self

    # -- attributes -----------------------------------------------------------------------------
    def set_attr(self, attr_name: str, value, plevel: int = 10, _replace: bool = False) -> "Op":
        old = self._attrs.get(attr_name)
        if old is not None and not _replace:
            if old[1] == plevel:
                raise OpRegistryError(
                    f"attribute {attr_name} of op {self.name} is already registered at level {plevel}; "
                    "register with a higher level to override"
                )
            if old[1] > plevel:
                return self
        self._attrs[attr_name] = (value, plevel)
        return self

    def get_attr(self, attr_name: str):
        """The attribute's value, or None when the op does not have it."""
        entry = self._attrs.get(attr_name)
        return None if entry is None else entry[0]

    def has_attr(self, attr_name: str) -> bool:
        return attr_name in self._attrs

    def reset_attr(self, attr_name: str) -> None:
        self._attrs.pop(attr_name, None)

    def list_attrs(self) -> list:
        return sorted(self._attrs)

    def astext(self, *args, **kwargs) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Op({self.name})"

    __str__ = __repr__

    def __reduce__(self):
        return (Op.get, (self.name,))

    def __deepcopy__(self, memo):
        return self

    def __copy__(self):
        return self


def _unknown_op_message(op_name: str) -> str:
    close = difflib.get_close_matches(op_name, list(_OPS), n=5, cutoff=0.6)
    msg = f"operator {op_name!r} is not registered"
    if close:
        msg += f"; did you mean {', '.join(close)}?"
    elif _OPS:
        msg += f" ({len(_OPS)} ops are registered; see kiln.ir.Op.list_op_names())"
    return msg


def register_op(op_name: str, describe: str = "") -> Op:
    """Create the op ``op_name`` (or return it if already registered)."""
    op = _OPS.get(op_name)
    if op is None:
        if not isinstance(op_name, str) or not op_name:
            raise OpRegistryError(f"op name must be a non-empty string, got {op_name!r}")
        op = Op(op_name, describe)
        _OPS[op_name] = op
    elif describe and not op.description:
        op.description = describe
    return op


def register_op_attr(op_name: str, attr_key: str, value=None, level: int = 10):
    """Set ``attr_key`` of op ``op_name`` (TVM's ``tvm.ir.register_op_attr``); a decorator without value.

    The op is created if it does not exist yet (as TVM does).
    """
    def _register(v):
        register_op(op_name).set_attr(attr_key, v, level)
        return v

    if value is None:
        return _register
    return _register(value)


def register_intrin_lowering(op_name: str, target: str = "default", *, f: Callable | None = None,
                             level: int = 10):
    """Register ``f(call) -> PrimExpr`` lowering TIR intrinsic ``op_name`` for ``target`` (a target kind
    name, or ``"default"`` for every target) -- TVM's ``tvm.ir.register_intrin_lowering``.

    ``tir.transform.LowerIntrin`` (run by ``kiln.build`` before code generation) applies it; the rule
    sees the ``tir.Call`` and returns its replacement (returning the call itself keeps it).
    A decorator when ``f`` is omitted.
    """
    if not isinstance(target, str) or not target:
        raise OpRegistryError(f"register_intrin_lowering({op_name!r}): target must be a target kind name such "
                              f"as 'llvm', 'c' or 'default', got {target!r}")

    def _register(fn):
        if not callable(fn):
            raise OpRegistryError(f"register_intrin_lowering({op_name!r}): the rule must be callable, got {fn!r}")
        register_op(op_name).set_attr(f"{target}.FLowerIntrinsic", fn, level)
        return fn

    return _register if f is None else _register(f)


def get_op_attr_map(attr_key: str) -> dict:
    """op name -> value for every op that has ``attr_key``."""
    return {name: op.get_attr(attr_key) for name, op in _OPS.items() if op.has_attr(attr_key)}


# Named type relations that ops may share (e.g. "Broadcast", "Identity"), registered by the op library.
_TYPE_RELS: dict[str, Callable] = {}


def register_type_relation(name: str, func: Callable | None = None):
    """Name a type relation so ops can attach it with ``op.add_type_rel(name)``."""
    def _register(f):
        _TYPE_RELS[name] = f
        return f
    return _register if func is None else _register(func)


def _remove_op_for_tests(op_name: str) -> None:
    """Drop an op from the registry (tests register throwaway ops)."""
    _OPS.pop(op_name, None)
