"""Old name of :mod:`kiln.contrib.debugger.debug_executor` (TVM before 0.8)."""
from .debug_executor import DebugResult, GraphModuleDebug, create  # noqa: F401
