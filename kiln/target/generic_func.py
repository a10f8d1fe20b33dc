"""Functions dispatched on the current target's keys (TVM's ``tvm.target.generic_func``).

    @generic_func
    def schedule_injective(outs):          # the default, for targets nothing is registered for
        ...

    @schedule_injective.register(["cpu"])  # in topi/x86: taken when Target.current() has the key "cpu"
    def schedule_injective_cpu(outs):
        ...

A call looks at ``Target.current()``: the first of its ``keys`` (in order) with a registration wins; with no
current target, or no matching key, the default runs. ``override_native_generic_func(name)`` does the same
and also files the function under ``name`` (``get_native_generic_func(name)`` finds it), as TVM's op
strategies are. This is how a target adds kernels: it registers, nothing is patched or looked up by name.
"""
from __future__ import annotations

import functools
from typing import Callable, Iterable

from ..error import ArgumentError
from .target import Target

__all__ = ["GenericFunc", "generic_func", "override_native_generic_func", "get_native_generic_func"]


class GenericFunc:
    """A default function plus per-target-key overrides, called like the default."""

    def __init__(self, fdefault: Callable, name: str | None = None):
        self.fdefault = fdefault
        self.name = name or getattr(fdefault, "__name__", "generic_func")
        self.dispatch_dict: dict = {}
        functools.update_wrapper(self, fdefault)

    def register(self, key: str | Iterable[str], func: Callable | None = None, override: bool = False):
        """Register ``func`` for the target key(s) ``key``; used as a decorator when ``func`` is None.
        A key registered twice is an error unless ``override``."""
        keys = [key] if isinstance(key, str) else list(key)

        def _do_reg(fn: Callable) -> Callable:
            for k in keys:
                if k in self.dispatch_dict and not override:
                    raise ArgumentError(f"generic function {self.name}: key {k!r} is already registered "
                                        f"(by {getattr(self.dispatch_dict[k], '__qualname__', '?')}); pass "
                                        "override=True to replace it")
                self.dispatch_dict[k] = fn
            return fn
        return _do_reg(func) if func is not None else _do_reg

    def dispatch_key(self, target: Target | None = None) -> str | None:
        """The key of ``target`` (default: the current target) whose registration a call would run, or None
        when the default runs."""
        target = Target.current(allow_none=True) if target is None else target
        if target is None:
            return None
        for k in target.keys:
            if k in self.dispatch_dict:
                return k
        return None

    def dispatch(self, target: Target | None = None) -> Callable:
        """The function a call under ``target`` (default: the current target) runs."""
        key = self.dispatch_key(target)
        return self.fdefault if key is None else self.dispatch_dict[key]

    def __call__(self, *args, **kwargs):
        return self.dispatch()(*args, **kwargs)

    def __repr__(self) -> str:
        return f"GenericFunc({self.name}, keys={sorted(self.dispatch_dict)})"


def generic_func(fdefault: Callable) -> GenericFunc:
    """Make ``fdefault`` a generic function: ``.register(keys)`` adds per-target implementations."""
    return GenericFunc(fdefault)


_NATIVE: dict = {}


def get_native_generic_func(name: str) -> GenericFunc:
    """The generic function filed under ``name`` by :func:`override_native_generic_func`."""
    func = _NATIVE.get(name)
    if func is None:
        raise ArgumentError(f"no generic function named {name!r} (known: {', '.join(sorted(_NATIVE)) or 'none'})")
    return func


def override_native_generic_func(func_name: str) -> Callable[[Callable], GenericFunc]:
    """Decorator: make the function the default of the generic function ``func_name`` (created when new; a
    second definition replaces the default and keeps the registrations)."""
    def fdecorate(fdefault: Callable) -> GenericFunc:
        func = _NATIVE.get(func_name)
        if func is None:
            func = _NATIVE[func_name] = GenericFunc(fdefault, func_name)
        else:
            func.fdefault = fdefault
        return func
    return fdecorate
