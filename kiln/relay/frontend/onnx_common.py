"""Shared pieces of the ONNX importer: dtype and attribute decoding, the versioned converter base class
and its registry, and the per-node context that converters use to ask shapes, dtypes and known values.

A converter is a subclass of :class:`OnnxOpConverter` with classmethods ``_impl_v<N>(inputs, attr, ctx)``;
the importer picks the highest ``N`` not above the model's opset, as TVM does. ``inputs`` holds one Relay
expression per ONNX input (``None`` for an omitted optional input); the result is an expression, or a
list of them for a node with several outputs.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ...error import FrontendError, KilnError, OpNotImplemented
from ...ir.type import TensorType, TupleType
from ..expr import Constant, TupleGetItem, Var

__all__ = ["const", "ONNX_DTYPES", "onnx_dtype", "OnnxOpConverter", "register", "CONVERTERS", "NodeContext",
           "decode_attributes"]

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
#: ONNX op type -> converter class
CONVERTERS: dict = {}


class OnnxOpConverter:
    """Base of the per-op converters; ``_impl_v<N>`` handles opsets ``N`` up to the next defined version."""

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


def register(*op_types: str) -> Callable:
    """Class decorator: register a converter under one or more ONNX op types."""
    def deco(cls):
        for name in op_types:
            if name in CONVERTERS:
                raise KilnError(f"ONNX converter for {name} registered twice")
            CONVERTERS[name] = cls
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
        return len(self.shape(expr))

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
            from ..analysis import free_vars
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
