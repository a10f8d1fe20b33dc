"""kiln.runtime: NDArray, Device, Module, the global function registry, loading compiled libraries.

Imports nothing of the compiler at import time: an exported model loads where no compiler exists.
"""
from .thread_policy import configure_openmp_env as _configure_openmp_env

_configure_openmp_env()  # before any kernel library loads libgomp (see thread_policy)

from . import ndarray  # noqa: E402,F401
from .benchmark import BenchmarkResult  # noqa: F401
from .device import Device, cpu, cuda, device  # noqa: F401
from .dtype import DataType  # noqa: F401
from .module import Module, enabled, load_module  # noqa: F401
from .ndarray import NDArray  # noqa: F401
from .registry import PackedFunc, get_global_func, list_global_func_names, register_func, remove_global_func  # noqa: F401
from .convert import convert, convert_to_object  # noqa: F401
from .params import save_param_dict, load_param_dict  # noqa: F401
from .library import num_threads, set_num_threads  # noqa: F401
from .thread_policy import effective_threads, get_thread_policy, set_thread_policy, thread_status  # noqa: F401

nd = ndarray

__all__ = [
    "Module", "load_module", "NDArray", "ndarray", "nd", "Device", "device", "cpu", "cuda", "DataType",
    "register_func", "get_global_func", "list_global_func_names", "remove_global_func", "PackedFunc",
    "BenchmarkResult", "enabled", "convert", "save_param_dict", "load_param_dict",
    "num_threads", "set_num_threads", "effective_threads", "set_thread_policy", "get_thread_policy", "thread_status",
]

# Registers the loader of graph executor factories (runtime.module.loadbinary_GraphExecutorFactory), so
# load_module() of an exported model works in a fresh process. Runtime-only code.
from . import graph_executor  # noqa: E402,F401
# Registers the loader of VM executables (runtime.module.loadbinary_VMExecutable): runtime-only code.
from . import vm  # noqa: E402,F401
