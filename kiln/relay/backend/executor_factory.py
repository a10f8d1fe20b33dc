"""What ``relay.build`` returns (TVM's ``GraphExecutorFactoryModule``): the runtime factory module plus the
compile-time information (the Relay module, target, lowered functions, memory plan).

``lib["default"](dev)`` creates a graph executor; ``export_library`` writes kernels, graph JSON and
params into one file that ``kiln.runtime.load_module`` turns back into the factory.
"""
from __future__ import annotations

import warnings as _warnings

from ...runtime.graph_executor import GraphExecutorFactory
from ...runtime import ndarray as _nd


class ExecutorFactoryModule:
    """Base of build results (TVM's ``executor_factory.ExecutorFactoryModule``)."""

    def get_executor_config(self):
        raise NotImplementedError

    def get_params(self) -> dict:
        raise NotImplementedError

    def get_lib(self):
        raise NotImplementedError


class GraphExecutorFactoryModule(ExecutorFactoryModule):
    """The result of ``relay.build`` for the graph executor."""

    def __init__(self, ir_mod, target, executor, graph_json_str: str, libmod, libmod_name: str, params: dict,
                 function_metadata=None, memory_plan=None, lowered=None, runtime=None):
        self.ir_mod = ir_mod
        self.target = target
        self.executor = executor
        self.runtime = runtime
        self.graph_json = graph_json_str
        self.lib = libmod
        self.libmod_name = libmod_name
        self.params = {k: (v if isinstance(v, _nd.NDArray) else _nd.array(v)) for k, v in (params or {}).items()}
        self.function_metadata = function_metadata or {}
        self.memory_plan = memory_plan
        self.lowered = lowered or []
        self.module = GraphExecutorFactory(graph_json_str, libmod, libmod_name, self.params)

    # -- TVM API ---------------------------------------------------------------------------------
    def export_library(self, file_name, fcompile=None, addons=None, **kwargs) -> None:
        """One file (``.so``, or ``.tar``) holding kernels, graph JSON and params."""
        self.module.export_library(file_name, fcompile, addons, **kwargs)

    def get_executor_config(self) -> str:
        return self.graph_json

    def get_graph_json(self) -> str:
        return self.graph_json

    def get_params(self) -> dict:
        return self.params

    def get_lib(self):
        return self.lib

    def get_devices(self) -> list:
        return []

    @property
    def type_key(self) -> str:
        return self.module.type_key

    def get_source(self, fmt: str = "") -> str:
        return self.lib.get_source(fmt)

    def __getitem__(self, item):
        if isinstance(item, int) and not isinstance(item, bool):
            # TVM v0.13 still lets old code index the build result as (graph_json, lib, params)
            return self._legacy_parts()[item]
        return self.module.__getitem__(item)

    def get_function(self, name: str, query_imports: bool = False):
        return self.module.get_function(name, query_imports)

    @property
    def imported_modules(self) -> list:
        return self.module.imported_modules

    def _legacy_parts(self) -> tuple:
        return (self.graph_json, self.lib, self.params)

    def __iter__(self):
        """``graph_json, lib, params = relay.build(...)``: TVM v0.13's legacy unpacking, deprecated there too."""
        _warnings.warn(
            "unpacking relay.build's result as (graph_json, lib, params) is legacy behaviour (TVM removes it after "
            "v0.13); use graph_executor.GraphModule(lib['default'](dev)), or lib.get_graph_json(), lib.get_lib() "
            "and lib.get_params()", DeprecationWarning, stacklevel=2)
        return iter(self._legacy_parts())

    def __len__(self) -> int:
        return 3

    def __repr__(self) -> str:
        return (f"GraphExecutorFactoryModule({self.libmod_name!r}, target={self.target}, "
                f"{len(self.lowered)} kernels, {len(self.params)} params)")
