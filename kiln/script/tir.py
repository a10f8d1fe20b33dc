"""``T`` of TVMScript (``from kiln.script import tir as T``).

What works: scalar types as callables (``T.int32(5)`` is a constant, ``T.float32(x)`` a cast, ``T.int32()`` a
fresh variable), ``T.handle()``, ``T.Buffer(shape, dtype)`` / ``T.Buffer[shape, dtype]`` (a declared buffer),
``T.Ptr(dtype)``. What does not: parsing a function body (``@T.prim_func``, ``@T.macro``), which raises a
NotImplementedError saying so, as do the statement builders (``T.block``, ``T.grid``, ...) when called.
"""
from __future__ import annotations

import builtins
from .. import tir
from ..ir import PointerType, PrimType

TVMSCRIPT_UNSUPPORTED = (
    "{what}: kiln cannot parse TVMScript yet. Build the function with kiln.te (te.placeholder / te.compute / "
    "te.create_schedule, then kiln.lower or kiln.build) or with the kiln.tir node constructors instead.")

_SCALAR_TYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
                 "float64", "bfloat16", "bool")


class _ScalarType:
    """``T.int32`` and friends: a dtype usable as an annotation and as a constructor."""

    def __init__(self, dtype: str):
        self.dtype = dtype
        self.__name__ = dtype

    def __call__(self, value=None, is_size_var: bool = False):
        if value is None:
            return tir.Var("v", self.dtype)
        if isinstance(value, (builtins.bool, builtins.int, builtins.float)):
            return tir.const(value, self.dtype)
        return tir.Cast(self.dtype, value)

    def __repr__(self) -> str:
        return f"T.{self.dtype}"


for _name in _SCALAR_TYPES:
    globals()[_name] = _ScalarType(_name)
boolean = globals()["bool"]
int32x4 = _ScalarType("int32x4")
float32x4 = _ScalarType("float32x4")


def handle(dtype: str | None = None, storage_scope: str = "global"):
    """A handle-typed variable (TVM's ``T.handle``)."""
    return tir.Var("handle", "handle")


def Ptr(dtype: str, storage_scope: str = "global"):  # noqa: N802 - TVM's name
    """A pointer type to ``dtype``."""
    return PointerType(PrimType(dtype), storage_scope)


class _BufferMeta(type):
    def __getitem__(cls, keys):
        keys = keys if isinstance(keys, tuple) else (keys,)
        return cls(*keys)


class Buffer(metaclass=_BufferMeta):
    """``T.Buffer((m, n), "float32")`` / ``T.Buffer[(m, n), "float32"]``: a declared TIR buffer."""

    def __new__(cls, shape, dtype: str = "float32", data=None, strides=None, elem_offset=None, scope: str = "global",
                align: int = 0, offset_factor: int = 0, buffer_type: str = "", axis_separators=None, name="buffer"):
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        return tir.decl_buffer(shape, dtype, name=name, data=data, strides=strides, elem_offset=elem_offset,
                               scope=scope, data_alignment=align or -1, offset_factor=offset_factor)


def _needs_parser(name: str):
    def unsupported(*args, **kwargs):
        # ``@T.prim_func`` and ``@T.prim_func(private=True)`` both end here.
        raise NotImplementedError(TVMSCRIPT_UNSUPPORTED.format(what=f"T.{name}"))
    unsupported.__name__ = name
    unsupported.__doc__ = f"TVMScript's T.{name}: needs the TVMScript parser, which kiln does not have yet."
    return unsupported


prim_func = _needs_parser("prim_func")
macro = _needs_parser("macro")
for _name in ("block", "grid", "serial", "parallel", "vectorized", "unroll", "thread_binding", "axis", "reads",
              "writes", "block_attr", "init", "where", "alloc_buffer", "match_buffer", "func_attr", "launch_thread",
              "env_thread", "allocate", "decl_buffer", "let", "attr", "evaluate", "assume", "meta_var", "iter_var",
              "buffer_store", "prefetch", "realize"):
    globals()[_name] = _needs_parser(_name)
del _name
