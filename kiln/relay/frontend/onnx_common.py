"""Shared pieces of the ONNX importer: dtype and attribute decoding, the converter registry, and the
per-node context that converters use to ask shapes, dtypes and known values.

A converter is a function ``fn(inputs, attr, ctx)`` registered with ``@onnx_op("Relu", since=1)``; an op
whose semantics changed between opsets has one function per version, and the importer picks the highest
``since`` not above the model's opset for the node's domain (as TVM picks ``_impl_v<N>``). ``inputs`` holds
one Relay expression per ONNX input (``None`` for an omitted optional input); the result is an expression,
or a list of them for a node with several outputs. Classes in TVM's ``_impl_v<N>`` convention still register
through :func:`register` (an adapter onto the same registry).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ...error import FrontendError, KilnError, OpNotImplemented
from ...ir.type import TensorType, TupleType
from ..expr import Constant, TupleGetItem, Var
from ..analysis import free_vars

__all__ = ["const", "ONNX_DTYPES", "onnx_dtype", "onnx_op", "lookup", "OpVersions", "REGISTRY", "CONVERTERS",
           "DEFAULT_DOMAINS", "canonical_domain", "OnnxOpConverter", "register", "NodeContext", "decode_attributes"]

#: ONNX TensorProto element types kiln can compute with, as kiln dtype strings.
ONNX_DTYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
               10: "float16", 11: "float64", 12: "uint32", 13: "uint64"}

_ONNX_DTYPE_NAMES = {0: "UNDEFINED", 8: "STRING", 14: "COMPLEX64", 15: "COMPLEX128", 16: "BFLOAT16",
                     17: "FLOAT8E4M3FN", 18: "FLOAT8E4M3FNUZ", 19: "FLOAT8E5M2", 20: "FLOAT8E5M2FNUZ", 21: "UINT4",
                     22: "INT4", 23: "FLOAT4E2M1"}


def onnx_dtype(elem_type: int, where: str) -> str:
    """The kiln dtype of an ONNX element type; a FrontendError naming ``where`` for types kiln lacks."""
    dt = ONNX_DTYPES.get(int(elem_type))
    if dt is None:
        name = _ONNX_DTYPE_NAMES.get(int(elem_type), str(elem_type))
        raise FrontendError(f"{where}: ONNX element type {name} is not supported by kiln "
                            f"(supported: {sorted(set(ONNX_DTYPES.values()))})")
    return dt


def const(value) -> Constant:
    """A Relay constant that keeps the numpy dtype (``relay.const`` narrows int64/float64 as TVM does)."""
    arr = np.asarray(value)
    if not arr.flags.c_contiguous:
        arr = arr.copy(order="C")
    return Constant(arr)


# -- converter registry ---------------------------------------------------------------------------------------
#: the spellings of ONNX's default domain
DEFAULT_DOMAINS = ("", "ai.onnx")


def canonical_domain(domain: str) -> str:
    """``""`` for the default domain (``""`` or ``"ai.onnx"``), else the domain unchanged."""
    return "" if domain in DEFAULT_DOMAINS else domain


class OpVersions:
    """The converters of one op type in one domain, keyed by the opset each starts at (``since``).

    ``get_converter(opset)`` picks the highest ``since`` not above ``opset``, as TVM's ``_impl_v<N>`` lookup
    does; a version registered with ``until`` stops there (the op is then unsupported above ``until`` unless a
    later version exists). The run-time-shape variants (``onnx_op(..., dynamic=True)``, used when the static
    converter refuses a node whose shape operands are only known at run time) are a second column of the same
    entry, looked up the same way with ``get_converter(opset, dynamic=True)``.
    """

    def __init__(self, domain: str, op_type: str):
        self.domain = domain
        self.op_type = op_type
        self.impls: dict = {}   # since -> converter fn(inputs, attr, ctx)
        self.until: dict = {}   # since -> last opset it handles, or None (open)
        self.dynamic: dict = {}  # since -> run-time-shape converter fn(inputs, attr, ctx)
        self.dynamic_until: dict = {}

    def add(self, since: int, until: int | None, fn: Callable, dynamic: bool = False) -> None:
        impls, untils = (self.dynamic, self.dynamic_until) if dynamic else (self.impls, self.until)
        if since in impls:
            kind = "dynamic ONNX converter" if dynamic else "ONNX converter"
            raise KilnError(f"{kind} for {self.label} (since opset {since}) registered twice")
        if until is not None and until < since:
            raise KilnError(f"ONNX converter for {self.label}: until={until} is below since={since}")
        impls[since] = fn
        untils[since] = until

    @property
    def label(self) -> str:
        return f"{self.domain}::{self.op_type}" if self.domain else self.op_type

    def versions(self) -> list:
        return sorted(self.impls)

    def get_converter(self, opset: int, dynamic: bool = False) -> Callable | None:
        """The converter for ``opset`` (its run-time-shape variant with ``dynamic``), or None when no
        registered version covers it."""
        impls, untils = (self.dynamic, self.dynamic_until) if dynamic else (self.impls, self.until)
        usable = [v for v in sorted(impls) if v <= opset]
        if not usable:
            return None
        until = untils[usable[-1]]
        if until is not None and opset > until:
            return None
        return impls[usable[-1]]

    def why_not(self, opset: int) -> str:
        """Why ``opset`` has no converter (for the unsupported-ops report)."""
        if not self.impls:
            return f"{self.label} (only a run-time-shape variant is registered)"
        first = self.versions()[0]
        if opset < first:
            return f"{self.label} (opset {opset}; kiln starts at opset {first})"
        last = max(v for v in self.versions() if v <= opset)
        return f"{self.label} (opset {opset}; kiln's converter stops at opset {self.until[last]})"


#: domain ("" for the default one) -> op type -> OpVersions
REGISTRY: dict = {"": {}}
#: the default domain's table (op type -> OpVersions), the one most code reads
CONVERTERS: dict = REGISTRY[""]


def onnx_op(*op_types: str, since: int = 1, until: int | None = None, domain: str = "",
            dynamic: bool = False) -> Callable:
    """Register ``fn(inputs, attr, ctx)`` as the converter of ``op_types`` from opset ``since`` on.

    ``inputs`` holds one Relay expression per ONNX input (None for an omitted optional input), ``attr`` the
    decoded attributes, ``ctx`` the :class:`NodeContext`; the result is an expression, or a list of them for
    a node with several outputs. An op whose semantics changed between opsets gets one function per version
    (``@onnx_op("Resize", since=10)`` and ``@onnx_op("Resize", since=11)``); the importer uses the highest
    ``since`` not above the model's opset for the node's domain. ``until`` closes a version's range;
    ``domain`` names a custom domain such as ``"com.microsoft"``. ``dynamic=True`` registers the op's
    run-time-shape variant (``onnx_dynamic.py``): the importer tries it when the static converter refuses a node
    because a shape operand is only known at run time.
    """
    if not op_types:
        raise KilnError("onnx_op needs at least one ONNX op type")
    dom = canonical_domain(domain)

    def deco(fn: Callable) -> Callable:
        table = REGISTRY.setdefault(dom, {})
        for name in op_types:
            entry = table.get(name)
            if entry is None:
                entry = table[name] = OpVersions(dom, name)
            entry.add(int(since), None if until is None else int(until), fn, dynamic=dynamic)
        return fn
    return deco


def lookup(op_type: str, domain: str = "") -> OpVersions | None:
    """The registered versions of ``op_type`` in ``domain``, or None when kiln has no converter for it."""
    return REGISTRY.get(canonical_domain(domain), {}).get(op_type)


# -- the old convention, adapted --------------------------------------------------------------------------------
class OnnxOpConverter:
    """Base of converters written in TVM's class convention: classmethods ``_impl_v<N>(inputs, attr, ctx)``.

    Kept so a class written that way still works; :func:`register` turns each ``_impl_v<N>`` into an
    ``onnx_op(..., since=N)`` registration. New converters are plain functions decorated with :func:`onnx_op`.
    """

    @classmethod
    def versions(cls) -> list:
        return sorted(int(n[len("_impl_v"):]) for n in dir(cls) if n.startswith("_impl_v"))

    @classmethod
    def get_converter(cls, opset: int) -> Callable | None:
        """The implementation for ``opset``, or None when the op is newer than the model's opset."""
        usable = [v for v in cls.versions() if v <= opset]
        if not usable:
            return None
        return getattr(cls, f"_impl_v{usable[-1]}")


def register(*op_types: str, domain: str = "") -> Callable:
    """Class decorator for the old convention: registers each ``_impl_v<N>`` of the class as
    ``onnx_op(*op_types, since=N, domain=domain)`` (see docs/onnx.md for converting such a class)."""
    def deco(cls):
        versions = OnnxOpConverter.versions.__func__(cls)
        if not versions:
            raise KilnError(f"ONNX converter class {cls.__name__} has no _impl_v<N> classmethod")
        for v in versions:
            onnx_op(*op_types, since=v, domain=domain)(getattr(cls, f"_impl_v{v}"))
        return cls
    return deco


# -- attributes -----------------------------------------------------------------------------------------------
def decode_attributes(node) -> dict:
    """A node's attributes as Python values (strings decoded, tensors as numpy arrays, graphs kept)."""
    from onnx import helper, numpy_helper, AttributeProto
    out = {}
    for a in node.attribute:
        if a.ref_attr_name:
            raise FrontendError(f"node {node.name or node.op_type!r}: attribute {a.name!r} refers to a function "
                                f"attribute ({a.ref_attr_name}); only attributes with values are supported")
        if a.type == AttributeProto.TENSOR:
            out[a.name] = numpy_helper.to_array(a.t)
            continue
        if a.type == AttributeProto.TENSORS:
            out[a.name] = [numpy_helper.to_array(t) for t in a.tensors]
            continue
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode("utf-8")
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [s.decode("utf-8") for s in v]
        out[a.name] = v
    return out


# -- per-node context -------------------------------------------------------------------------------------------
class NodeContext:
    """What a converter may ask while converting one node: types, known values, constants, errors."""

    def __init__(self, graph, node, opset: int):
        self.graph = graph  # the GraphProto converter (onnx.GraphConverter)
        self.node = node
        self.opset = opset

    # naming and errors
    @property
    def where(self) -> str:
        n = self.node
        label = n.name or (n.output[0] if len(n.output) else "?")
        return f"node {label!r} ({n.op_type})"

    def error(self, msg: str) -> FrontendError:
        return FrontendError(f"{self.where}: {msg}")

    def unsupported(self, msg: str) -> OpNotImplemented:
        return OpNotImplemented(f"{self.where}: {msg} is not supported by kiln")

    # types
    def type_of(self, expr):
        return self.graph.types.type_of(expr)

    def shape(self, expr, dynamic_ok: bool = False) -> tuple:
        """The static shape; with ``dynamic_ok`` an unknown dim is returned as ``relay.Any()`` (a converter
        that can handle it says so), else it is an error naming the dynamic shape."""
        t = self.type_of(expr)
        if not isinstance(t, TensorType):
            raise self.error("expected a tensor input, got a tuple")
        dims = []
        for d in t.shape:
            v = getattr(d, "value", d)
            try:
                dims.append(int(v))
            except (TypeError, ValueError):
                if dynamic_ok:
                    dims.append(d)
                    continue
                shown = tuple("?" if not isinstance(getattr(x, "value", x), int) else x for x in t.shape)
                err = self.error(f"input has a dynamic shape {shown}; this converter needs static shapes "
                                 "(pass shape= to from_onnx to pin the dynamic axes)")
                err.dynamic_shape = True  # onnx_dynamic.py may convert the node with run-time shapes instead
                raise err from None
        return tuple(dims)

    def dtype(self, expr) -> str:
        t = self.type_of(expr)
        if not isinstance(t, TensorType):
            raise self.error("expected a tensor input, got a tuple")
        return str(t.dtype)

    def ndim(self, expr) -> int:
        return len(self.shape(expr, dynamic_ok=True))  # the rank is known even where dims are not

    def num_fields(self, expr) -> int:
        t = self.type_of(expr)
        return len(t.fields) if isinstance(t, TupleType) else 1

    # known values
    def value(self, expr):
        """The value of ``expr`` as a numpy array when it is known at import time, else None."""
        if expr is None:
            return None
        if isinstance(expr, Constant):
            return expr.numpy()
        if isinstance(expr, Var) and expr.name_hint in self.graph.param_values:
            return self.graph.param_values[expr.name_hint]
        if isinstance(expr, TupleGetItem) or isinstance(expr, Var):
            return None
        return self.graph.try_evaluate(expr)

    def require_value(self, expr, what: str) -> np.ndarray:
        v = self.value(expr)
        if v is None:
            names = sorted({fv.name_hint for fv in free_vars(expr)} - set(self.graph.param_values))
            err = self.unsupported(f"a {what} computed at run time from graph inputs {names} (kiln needs it known "
                                   f"at import time: a constant or an initializer)")
            err.runtime_inputs = names  # lets a caller specialize the model on those inputs' values
            raise err
        return v

    def int_list(self, expr, what: str) -> list:
        return [int(x) for x in np.asarray(self.require_value(expr, what)).reshape(-1)]

    # constants
    @staticmethod
    def const(value, dtype: str) -> Constant:
        return const(np.asarray(value, dtype=dtype))
