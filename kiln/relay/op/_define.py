"""One-call op definition used by the op library, and lazy wiring to ``kiln.topi``.

``define_op`` registers an op with its metadata, type relation, pattern and numpy reference in one place;
``topi_fn("nn.conv2d_nchw", op)`` resolves a TOPI compute only when a kernel is built, so a TOPI function
that does not exist yet raises ``OpNotImplemented`` naming the op at compile time, never at import.
"""
from __future__ import annotations

import importlib
from typing import Callable, Sequence

import numpy as np

from ...error import OpNotImplemented, InternalError
from ...ir.op import OpPattern, register_op, register_op_attr
from ...ir.type import TensorType, TupleType


def _cast_to_type(value, out_type):
    """Give a reference result the exact dtype of the inferred type (tuples field by field)."""
    if isinstance(out_type, TupleType):
        if not isinstance(value, (tuple, list)) or len(value) != len(out_type.fields):
            raise InternalError(f"reference returned {type(value).__name__}, expected a tuple of "
                                f"{len(out_type.fields)} values")
        return tuple(_cast_to_type(v, t) for v, t in zip(value, out_type.fields))
    if isinstance(out_type, TensorType):
        arr = np.asarray(value)
        dtype = "bool" if out_type.dtype == "bool" else out_type.dtype
        if arr.dtype != np.dtype(dtype):
            arr = arr.astype(dtype)
        return arr
    return value


def wrap_reference(fn: Callable) -> Callable:
    def reference(attrs, inputs, out_type):
        with np.errstate(all="ignore"):
            return _cast_to_type(fn(attrs, inputs, out_type), out_type)
    reference.__name__ = getattr(fn, "__name__", "reference")
    reference.__wrapped__ = fn
    return reference


DEFINED_OPS: list = []  # the ops this library defines (tests check each is complete)


def define_op(name: str, *, num_inputs: int, rel: Callable | str, pattern: OpPattern, reference: Callable,
              args: Sequence[str] = ("data",), attrs=None, compute: Callable | None = None, level: int = 1,
              describe: str = "", rel_name: str | None = None):
    """Register op ``name`` (idempotent: a second import of the module does nothing)."""
    op = register_op(name, describe)
    if op.has_attr("FTypeRelation"):
        return op
    DEFINED_OPS.append(name)
    op.set_num_inputs(num_inputs).set_support_level(level)
    for a in args:
        op.add_argument(a, "Tensor", "")
    if attrs is not None:
        op.set_attrs_type(attrs)
    if isinstance(rel, str):
        op.add_type_rel(rel)
    else:
        op.add_type_rel(rel_name or name, rel)
    register_op_attr(name, "TOpPattern", OpPattern(int(pattern)))
    register_op_attr(name, "FReference", wrap_reference(reference))
    if compute is not None:
        register_op_attr(name, "FTVMCompute", compute)
    return op


def topi_fn(path: str, op_name: str) -> Callable:
    """``kiln.topi.<path>`` (e.g. ``"nn.conv2d_nchw"``), resolved now; OpNotImplemented if TOPI lacks it."""
    mod_path, _, attr = ("." + path).rpartition(".")
    try:
        mod = importlib.import_module("kiln.topi" + mod_path)
    except ImportError as err:
        raise OpNotImplemented(f"operator {op_name} cannot be compiled: kiln.topi{mod_path} is not available "
                               f"({err})") from None
    fn = getattr(mod, attr, None)
    if fn is None:
        raise OpNotImplemented(f"operator {op_name} cannot be compiled: kiln.topi.{path} is not implemented yet")
    return fn


def topi_compute(path: str, op_name: str, make_args: Callable | None = None) -> Callable:
    """An FTVMCompute calling ``kiln.topi.<path>(*make_args(attrs, inputs, out_type))``."""
    def compute(attrs, inputs, out_type):
        fn = topi_fn(path, op_name)
        call_args = make_args(attrs, inputs, out_type) if make_args is not None else list(inputs)
        out = fn(*call_args)
        return list(out) if isinstance(out, (list, tuple)) else [out]
    compute.__name__ = f"compute_{op_name.replace('.', '_')}"
    return compute
