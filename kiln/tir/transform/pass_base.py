"""PrimFuncPass: a pass applying ``f(func, mod, ctx) -> func`` to every PrimFunc of a module.

kiln's TIR passes are called like TVM's (``tir.transform.Simplify()(mod)``) and, for
convenience in tests, also accept a bare PrimFunc and return the transformed PrimFunc.
"""
from __future__ import annotations

from ...transform.pass_base import FunctionLevelPass
from ...transform.pass_context import PassContext
from ..function import PrimFunc
from ...arith.const_int_bound import POS_INF
from ..expr import Var


class PrimFuncPass(FunctionLevelPass):
    """A function-level pass over the PrimFuncs of an IRModule."""

    def accepts(self, func) -> bool:
        return isinstance(func, PrimFunc)

    def __call__(self, mod):
        if isinstance(mod, PrimFunc):
            ctx = PassContext.current()
            out = self.pass_func(mod, None, ctx)
            return mod if out is None else out
        return super().__call__(mod)


def prim_func_pass(pass_func=None, opt_level: int = 0, name: str | None = None, required=None):
    """Decorator making a ``f(func, mod, ctx) -> func`` function (or class) a PrimFuncPass."""

    def create(fn):
        pname = name or getattr(fn, "__name__", "prim_func_pass")
        if isinstance(fn, type):
            def factory(*args, **kwargs):
                inst = fn(*args, **kwargs)
                return PrimFuncPass(inst.transform_function, opt_level, pname, required)
            return factory
        return PrimFuncPass(fn, opt_level, pname, required)

    if pass_func is not None:
        return create(pass_func)
    return create


def _config(key: str) -> dict:
    cfg = PassContext.current().get_config(key, None)
    return dict(cfg) if cfg else {}


def shape_var_bounds(func) -> dict:
    """Var -> (0, +inf): variables used as buffer dimensions of the arguments are never negative."""
    out = {}
    for b in func.buffer_map.values():
        for d in b.shape:
            if isinstance(d, Var):
                out[d] = (0, POS_INF)
    return out
