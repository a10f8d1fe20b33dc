"""Passes: ModulePass, function-level passes, Sequential, and the module_pass decorator."""
from __future__ import annotations

import functools
import inspect
from typing import Callable

from ..error import KilnError
from ..ir.module import IRModule
from .pass_context import PassContext

_PASS_REGISTRY: dict[str, Callable] = {}


class PassInfo:
    """Name, opt level and required passes of a pass."""

    def __init__(self, opt_level: int, name: str, required=None, traceable: bool = False):
        self.opt_level = int(opt_level)
        self.name = str(name)
        self.required = list(required or [])
        self.traceable = traceable

    def __repr__(self) -> str:
        return f"The meta data of the pass - pass name: {self.name}, opt_level: {self.opt_level}, " \
               f"required passes: {self.required}"


def register_pass(name: str, factory: Callable) -> None:
    """Make ``factory()`` findable by name (for PassInfo.required and get_pass)."""
    _PASS_REGISTRY[name] = factory


def get_pass(name: str) -> "Pass":
    factory = _PASS_REGISTRY.get(name)
    if factory is None:
        raise KilnError(f"no pass named {name!r} is registered (known: {sorted(_PASS_REGISTRY)})")
    return factory()


class Pass:
    """A transformation IRModule -> IRModule. Call it: ``mod = pass_(mod)``."""

    def __init__(self, info: PassInfo):
        self.info = info

    @property
    def name(self) -> str:
        return self.info.name

    def __call__(self, mod: IRModule) -> IRModule:
        if not isinstance(mod, IRModule):
            raise KilnError(f"pass {self.info.name} expects an IRModule, got {type(mod).__name__}; "
                            "wrap an expression with tvm.IRModule.from_expr(...)")
        ctx = PassContext.current()
        if not ctx.instrument_before_pass(mod, self.info):
            return mod
        new_mod = self._run(mod, ctx)
        if not isinstance(new_mod, IRModule):
            raise KilnError(f"pass {self.info.name} returned {type(new_mod).__name__}, not an IRModule")
        ctx.instrument_after_pass(new_mod, self.info)
        return new_mod

    def _run(self, mod: IRModule, ctx: PassContext) -> IRModule:
        raise NotImplementedError(type(self).__name__)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.info.name}, opt_level={self.info.opt_level})"


class ModulePass(Pass):
    """A pass given by ``pass_func(mod, ctx) -> mod``."""

    def __init__(self, pass_func: Callable, opt_level: int, name: str, required=None, traceable=False):
        super().__init__(PassInfo(opt_level, name, required, traceable))
        self.pass_func = pass_func

    def _run(self, mod, ctx):
        return self.pass_func(mod, ctx)


class FunctionLevelPass(Pass):
    """Applies ``pass_func(func, mod, ctx) -> func`` to each function of one kind in a module.

    Subclasses say which functions (``accepts``); relay's FunctionPass and TIR's PrimFuncPass build on it.
    """

    def __init__(self, pass_func: Callable, opt_level: int, name: str, required=None, traceable=False):
        super().__init__(PassInfo(opt_level, name, required, traceable))
        self.pass_func = pass_func

    def accepts(self, func) -> bool:
        raise NotImplementedError

    def _run(self, mod, ctx):
        new_mod = mod.copy()
        for gv, func in mod.functions.items():
            if self.accepts(func):
                new_func = self.pass_func(func, new_mod, ctx)
                if new_func is None:
                    new_mod.remove(gv)
                elif new_func is not func:
                    new_mod[gv] = new_func
        return new_mod


class Sequential(Pass):
    """Runs passes in order, each only if the current PassContext enables it (opt level, required,
    disabled); a pass's ``required`` passes (by name) run before it."""

    def __init__(self, passes=None, opt_level: int = 0, name: str = "sequential", required=None):
        super().__init__(PassInfo(opt_level, name, required))
        passes = list(passes or [])
        for p in passes:
            if not isinstance(p, Pass):
                raise KilnError(f"Sequential takes Pass objects, got {type(p).__name__}: {p!r}")
        self.passes = passes

    def _run(self, mod, ctx):
        for p in self.passes:
            if not ctx.pass_enabled(p.info):
                continue
            for req in p.info.required:
                mod = get_pass(req)(mod)
            mod = p(mod)
        return mod


def _wrap_class_pass(pass_cls, opt_level, name, required, traceable, pass_type, method: str):
    """``@module_pass`` on a class: instances are passes that call ``transform_module`` (or ``transform_function``)."""
    if not hasattr(pass_cls, method):
        raise KilnError(f"{pass_cls.__name__} needs a {method} method to be used as a pass")

    class PyPass(pass_type):
        def __init__(self, *args, **kwargs):
            self._inst = pass_cls(*args, **kwargs)
            super().__init__(getattr(self._inst, method), opt_level, name, required, traceable)

        def __getattr__(self, attr):
            inst = self.__dict__.get("_inst")
            if inst is None:
                raise AttributeError(attr)
            return getattr(inst, attr)

    functools.update_wrapper(PyPass.__init__, pass_cls.__init__)
    PyPass.__name__ = pass_cls.__name__
    PyPass.__qualname__ = pass_cls.__qualname__
    PyPass.__doc__ = pass_cls.__doc__
    return PyPass


def make_pass_decorator(pass_type, method: str, what: str):
    def decorator(pass_func=None, opt_level=None, name=None, required=None, traceable=False):
        if opt_level is None:
            raise KilnError(f"Please provide opt_level for the {what} pass.")
        required = list(required or [])

        def create(fn):
            fname = name if name else fn.__name__
            if inspect.isclass(fn):
                return _wrap_class_pass(fn, opt_level, fname, required, traceable, pass_type, method)
            if not callable(fn):
                raise KilnError(f"{what}_pass decorates a function or a class, got {fn!r}")
            return pass_type(fn, opt_level, fname, required, traceable)

        if pass_func is not None:
            return create(pass_func)
        return create

    return decorator


module_pass = make_pass_decorator(ModulePass, "transform_module", "module")
module_pass.__doc__ = """Make a ModulePass from ``fn(mod, ctx) -> mod`` or a class with ``transform_module``."""


def PrintIR(header: str = "", show_meta_data: bool = False) -> ModulePass:  # noqa: N802
    """A pass that prints the module and returns it unchanged."""
    def _print(mod, ctx):
        print(f"PrintIR({header}):\n{mod.astext(show_meta_data=show_meta_data)}")
        return mod

    return ModulePass(_print, 0, "PrintIR")


def ApplyPassToFunction(transform: Pass, func_name_regex: str, error_if_no_function_matches_regex=False):  # noqa: N802
    """Run ``transform`` only on the functions whose names match the regex."""
    import re
    pattern = re.compile(func_name_regex)

    def _apply(mod, ctx):
        names = [gv for gv in mod.get_global_vars() if pattern.fullmatch(gv.name_hint)]
        if not names and error_if_no_function_matches_regex:
            raise KilnError(f"no function matches {func_name_regex!r}")
        sub = IRModule({gv: mod[gv] for gv in names})
        out = mod.copy()
        out.update(transform(sub))
        return out

    return ModulePass(_apply, 0, f"ApplyPassToFunction({transform.info.name})")
