"""TVM's ``tvm.contrib.graph_executor``: ``GraphModule(lib["default"](dev))`` and ``create(graph, lib, dev)``.

The implementation is the runtime's (:mod:`kiln.runtime.graph_executor`), so deployed models need no
compiler."""
from ..runtime.graph_executor import GraphExecutor, GraphModule, create  # noqa: F401

__all__ = ["GraphModule", "create", "GraphExecutor"]
