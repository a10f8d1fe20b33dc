"""Old name of :mod:`kiln.contrib.graph_executor` (TVM before 0.8 called it ``graph_runtime``)."""
import warnings as _warnings

from ..runtime.graph_executor import GraphExecutor, GraphModule  # noqa: F401
from ..runtime.graph_executor import create as _create


def create(graph_json_str, libmod, device):
    """Deprecated spelling of ``graph_executor.create``."""
    _warnings.warn("tvm.contrib.graph_runtime is deprecated; use tvm.contrib.graph_executor", DeprecationWarning,
                   stacklevel=2)
    return _create(graph_json_str, libmod, device)


__all__ = ["GraphModule", "create"]
