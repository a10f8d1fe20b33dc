"""kiln: an end-to-end deep learning compiler in Python, with Apache TVM's classic API.

    import kiln as tvm
    from kiln import te, relay, autotvm
    from kiln.contrib import graph_executor

``import kiln`` needs only numpy. Submodules and TVM's top-level names are loaded on first use.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

from .error import KilnError, TVMError  # noqa: E402,F401
from . import error  # noqa: E402,F401

# Top-level names, TVM style: name -> "module[:attribute]" (loaded lazily).
_LAZY = {
    # runtime
    "nd": "kiln.runtime.ndarray",
    "ndarray": "kiln.runtime.ndarray",
    "device": "kiln.runtime.device:device",
    "Device": "kiln.runtime.device:Device",
    "cpu": "kiln.runtime.device:cpu",
    "cuda": "kiln.runtime.device:cuda",
    "gpu": "kiln.runtime.device:cuda",
    "context": "kiln.runtime.device:context",
    "register_func": "kiln.runtime.registry:register_func",
    "get_global_func": "kiln.runtime.registry:get_global_func",
    "list_global_func_names": "kiln.runtime.registry:list_global_func_names",
    "remove_global_func": "kiln.runtime.registry:remove_global_func",
    "DataType": "kiln.runtime.dtype:DataType",
    "container": "kiln.container",
    "save_json": "kiln.ir.serialization:save_json",
    "load_json": "kiln.ir.serialization:load_json",
    # IR
    "IRModule": "kiln.ir.module:IRModule",
    "structural_equal": "kiln.ir.node:structural_equal",
    "structural_hash": "kiln.ir.node:structural_hash",
    "assert_structural_equal": "kiln.ir.node:assert_structural_equal",
    # compiler driver
    "lower": "kiln.driver.build_module:lower",
    "build": "kiln.driver.build_module:build",
    # pre-0.8 spellings at the top level
    "var": "kiln.te:var",
    "size_var": "kiln.te:size_var",
    "const": "kiln.tir.op:const",
    "placeholder": "kiln.te:placeholder",
    "compute": "kiln.te:compute",
    "reduce_axis": "kiln.te:reduce_axis",
    "create_schedule": "kiln.te:create_schedule",
    "sum": "kiln.tir.op:sum",
    "min": "kiln.tir.op:min",
    "max": "kiln.tir.op:max",
    "exp": "kiln.tir.op:exp",
    "log": "kiln.tir.op:log",
    "sqrt": "kiln.tir.op:sqrt",
    "select": "kiln.tir.op:Select",
    "convert": "kiln.tir.op:convert",
    "all": "kiln.tir.op:all",
    "any": "kiln.tir.op:any",
    "if_then_else": "kiln.tir.op:if_then_else",
    "floordiv": "kiln.tir.op:floordiv",
    "floormod": "kiln.tir.op:floormod",
    "indexdiv": "kiln.tir.op:indexdiv",
    "indexmod": "kiln.tir.op:indexmod",
    "comm_reducer": "kiln.tir.op:comm_reducer",
    "call_extern": "kiln.tir.op:call_extern",
    "call_pure_extern": "kiln.tir.op:call_pure_extern",
    "call_packed": "kiln.tir.op:call_packed",
    "sigmoid": "kiln.tir.op:sigmoid",
    "tanh": "kiln.tir.op:tanh",
    "min_value": "kiln.tir.op:min_value",
    "max_value": "kiln.tir.op:max_value",
    "cast": "kiln.tir.op:cast",
    "truncdiv": "kiln.tir.op:truncdiv",
    "truncmod": "kiln.tir.op:truncmod",
    "abs": "kiln.tir.op:abs",
    "power": "kiln.tir.op:power",
    "floor": "kiln.tir.op:floor",
    "ceil": "kiln.tir.op:ceil",
    "round": "kiln.tir.op:round",
    "trunc": "kiln.tir.op:trunc",
    "erf": "kiln.tir.op:erf",
    "log2": "kiln.tir.op:log2",
    "rsqrt": "kiln.tir.op:rsqrt",
    "thread_axis": "kiln.te:thread_axis",
    "extern": "kiln.te:extern",
    "scan": "kiln.te:scan",
    "decl_buffer": "kiln.tir.buffer:decl_buffer",
}

_SUBMODULES = {
    "runtime", "ir", "tir", "te", "arith", "target", "driver", "contrib", "transform", "relay", "topi",
    "autotvm", "rpc", "testing", "parser", "cli", "exec", "meta_schedule",
}
_SUBMODULE_ALIASES = {"instrument": "kiln.ir.instrument"}


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f"kiln.{name}")
    if name in _SUBMODULE_ALIASES:
        return importlib.import_module(_SUBMODULE_ALIASES[name])
    spec = _LAZY.get(name)
    if spec is None:
        raise AttributeError(f"module 'kiln' has no attribute {name!r}")
    mod_name, _, attr = spec.partition(":")
    mod = importlib.import_module(mod_name)
    value = getattr(mod, attr) if attr else mod
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | _SUBMODULES | set(_SUBMODULE_ALIASES))
