"""``relay.create_executor(kind, mod, device, target, params)``: one place that maps a kind to an executor.

"debug" is the numpy reference interpreter. "graph" and "vm" are filled in by the build (``relay.build``)
through ``register_executor``; until then they raise a NotImplementedError that says so.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ...error import ArgumentError, KilnError
from ...ir.module import IRModule
from ...ir.expr import GlobalVar
from ..analysis import free_vars
from ..expr import Function, bind
from ...runtime.device import cpu

_EXECUTORS: dict = {}


class Executor:
    """Base of executors: ``evaluate(expr=None)`` returns a Python callable running ``expr`` (or main)."""

    def __init__(self, mod: IRModule | None, device=None, target="llvm"):
        self.mod = mod if mod is not None else IRModule()
        self.device = device
        self.target = target

    def _make_executor(self, expr=None) -> Callable:
        raise NotImplementedError

    def evaluate(self, expr=None, binds=None):
        """A callable for ``expr`` (a Function or GlobalVar; main when None); other expressions are run now."""
        if binds:
            expr = bind(expr, dict(binds))
        if expr is None or isinstance(expr, GlobalVar):
            return self._make_executor(expr)
        if isinstance(expr, Function):
            fv = free_vars(expr)
            if fv:
                names = ", ".join("%" + v.name_hint for v in fv)
                raise ArgumentError(f"evaluate: the function has free variables {names}; bind them first")
            return self._make_executor(expr)
        fv = free_vars(expr)
        if fv:
            names = ", ".join("%" + v.name_hint for v in fv)
            raise ArgumentError(f"evaluate: the expression has free variables {names}; wrap it in a relay.Function "
                                "and pass inputs, or bind them")
        return self._make_executor(Function([], expr))()


def _convert_args(func, args, kwargs) -> list:
    """Positional then keyword arguments, in the order of ``func``'s parameters (TVM's _convert_args)."""
    params = list(func.params)
    if len(args) > len(params):
        raise ArgumentError(f"the function takes {len(params)} arguments ({', '.join(p.name_hint for p in params)}) "
                            f"but {len(args)} were given")
    values = list(args) + [None] * (len(params) - len(args))
    names = [p.name_hint for p in params]
    for key, value in kwargs.items():
        if key not in names:
            raise ArgumentError(f"unknown input {key!r}; the function's parameters are {names}")
        i = names.index(key)
        if i < len(args):
            raise ArgumentError(f"input {key!r} is given both by position and by name")
        values[i] = value
    missing = [n for n, v in zip(names, values) if v is None]
    if missing:
        raise ArgumentError(f"missing inputs {missing}; the function's parameters are {names}")
    return values


def register_executor(kind: str, factory: Callable, override: bool = False) -> None:
    """``factory(mod, device, target, params) -> Executor`` for ``create_executor(kind, ...)``."""
    if kind in _EXECUTORS and not override and not getattr(_EXECUTORS[kind], "_placeholder", False):
        raise KilnError(f"an executor of kind {kind!r} is already registered (pass override=True)")
    _EXECUTORS[kind] = factory


def list_executor_kinds() -> list:
    return sorted(_EXECUTORS)


def _not_built(kind):
    def factory(mod, device, target, params):
        raise NotImplementedError(
            f"relay.create_executor({kind!r}) needs relay.build, which is not built yet in kiln (another issue "
            "adds it); use kind='debug' (the reference interpreter) meanwhile")
    factory._placeholder = True
    return factory


def _debug(mod, device, target, params):
    from .interpreter import Interpreter
    return Interpreter(mod, device, target, params)


register_executor("debug", _debug)
register_executor("graph", _not_built("graph"))
register_executor("vm", _not_built("vm"))
register_executor("aot", _not_built("aot"))


def create_executor(kind: str = "debug", mod: IRModule | None = None, device=None, target="llvm", params=None):
    """An executor of ``kind`` ("debug", "graph", "vm") for ``mod`` on ``device`` (TVM's relay.create_executor)."""
    if kind not in _EXECUTORS:
        raise KilnError(f"unknown executor kind {kind!r}; known kinds: {list_executor_kinds()}")
    if mod is None:
        mod = IRModule()
    if device is None:
        device = cpu(0)
    if params:
        params = {k: (v.numpy() if hasattr(v, "numpy") and not isinstance(v, np.ndarray) else np.asarray(v))
                  for k, v in params.items()}
    return _EXECUTORS[kind](mod, device, target, params)
