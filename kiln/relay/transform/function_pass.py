"""FunctionPass: a pass applied to each Relay function of a module (TVM's relay.transform.FunctionPass)."""
from __future__ import annotations

from ...transform.pass_base import FunctionLevelPass, make_pass_decorator
from ..expr import Function


class FunctionPass(FunctionLevelPass):
    """Runs ``pass_func(func, mod, ctx) -> func`` on every Relay function, skipping functions marked
    ``SkipOptimization`` or handed to an external compiler (``Compiler`` attr)."""

    def accepts(self, func) -> bool:
        if not isinstance(func, Function):
            return False
        return not (func.get_attr("SkipOptimization") or func.get_attr("Compiler"))


function_pass = make_pass_decorator(FunctionPass, "transform_function", "function")
function_pass.__doc__ = """Make a FunctionPass from ``fn(func, mod, ctx) -> func`` or a class with
``transform_function``."""
