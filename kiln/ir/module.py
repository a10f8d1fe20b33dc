"""IRModule: the unit passes transform and the compiler builds — GlobalVar -> function (Relay or TIR)."""
from __future__ import annotations

import difflib
from typing import Iterable

from ..error import KilnError
from .attrs import DictAttrs
from .expr import GlobalVar, RelayExpr
from .node import Node
from .type import GlobalTypeVar


def _is_relay(node) -> bool:
    return type(node).__module__.startswith("kiln.relay")


class IRModule(Node):
    """A set of global functions (Relay ``Function`` or TIR ``PrimFunc``) keyed by GlobalVar.

    ``mod["main"]``, ``mod[gv]``, ``mod["f"] = func``, ``"main" in mod``, ``mod.functions``.
    Two modules are structurally equal when functions of the same names are.
    """

    _fields = ("_functions_by_name", "_type_defs_by_name", "attrs")

    def __init__(self, functions=None, type_definitions=None, attrs=None, global_infos=None):
        self._functions: dict = {}
        self._gvars: dict[str, GlobalVar] = {}
        self._type_definitions: dict = {}
        self._tvars: dict[str, GlobalTypeVar] = {}
        self.attrs = attrs if isinstance(attrs, DictAttrs) else DictAttrs(attrs or {})
        self.source_map = None
        for key, func in dict(functions or {}).items():
            self._add(key, func, update=False)
        for key, data in dict(type_definitions or {}).items():
            if isinstance(key, str):
                key = self._tvars.get(key) or GlobalTypeVar(key)
            self._tvars[key.name_hint] = key
            self._type_definitions[key] = data

    # -- structural comparison views -----------------------------------------------------
    @property
    def _functions_by_name(self) -> tuple:
        return tuple(sorted(((gv.name_hint, f) for gv, f in self._functions.items()), key=lambda p: p[0]))

    @property
    def _type_defs_by_name(self) -> tuple:
        return tuple(sorted(((tv.name_hint, d) for tv, d in self._type_definitions.items()), key=lambda p: p[0]))

    # -- lookup ------------------------------------------------------------------------------
    @property
    def functions(self) -> dict:
        """GlobalVar -> function, in insertion order (a copy: the module itself is not changed)."""
        return dict(self._functions)

    @property
    def type_definitions(self) -> dict:
        return dict(self._type_definitions)

    def _unknown(self, name: str) -> KilnError:
        names = sorted(self._gvars)
        close = difflib.get_close_matches(name, names, n=3)
        hint = f"; did you mean {close}?" if close else ""
        return KilnError(f"IRModule has no function named {name!r}{hint} (functions: {names})")

    def get_global_var(self, name: str) -> GlobalVar:
        """The GlobalVar of function ``name``; a clear error listing the names when absent."""
        gv = self._gvars.get(name)
        if gv is None:
            raise self._unknown(name)
        return gv

    def get_global_vars(self) -> list:
        return list(self._functions)

    def get_global_type_var(self, name: str) -> GlobalTypeVar:
        tv = self._tvars.get(name)
        if tv is None:
            raise KilnError(f"IRModule has no type definition named {name!r} (types: {sorted(self._tvars)})")
        return tv

    def get_global_type_vars(self) -> list:
        return list(self._type_definitions)

    def get_type(self, name: str) -> tuple:
        """``(GlobalTypeVar, *constructors)`` of the ADT ``name`` (TVM's ``IRModule.get_type``)."""
        tv = self.get_global_type_var(name)
        return (tv,) + tuple(self._type_definitions[tv].constructors)

    def get_constructor(self, tag: int):
        """The constructor with ``tag`` among the module's ADTs (tags are unique per type only: the first)."""
        for data in self._type_definitions.values():
            for c in getattr(data, "constructors", ()):
                if c.tag == tag:
                    return c
        raise KilnError(f"IRModule has no constructor with tag {tag}")

    def __getitem__(self, key):
        if isinstance(key, str):
            return self._functions[self.get_global_var(key)]
        if isinstance(key, GlobalVar):
            if key in self._functions:
                return self._functions[key]
            gv = self._gvars.get(key.name_hint)
            if gv is None:
                raise self._unknown(key.name_hint)
            return self._functions[gv]
        if isinstance(key, GlobalTypeVar):
            return self._type_definitions[self.get_global_type_var(key.name_hint)]
        raise KilnError(f"IRModule keys are function names or GlobalVars, got {type(key).__name__}")

    def __contains__(self, key) -> bool:
        if isinstance(key, str):
            return key in self._gvars
        if isinstance(key, GlobalVar):
            return key.name_hint in self._gvars
        return False

    def __len__(self) -> int:
        return len(self._functions)

    # -- update --------------------------------------------------------------------------------
    def _add(self, key, func, update: bool) -> None:
        if isinstance(key, GlobalTypeVar):
            self._tvars[key.name_hint] = key
            self._type_definitions[key] = func
            return
        if isinstance(key, str):
            gv = self._gvars.get(key) or GlobalVar(key)
        elif isinstance(key, GlobalVar):
            gv = key
            old = self._gvars.get(gv.name_hint)
            if old is not None and old is not gv:
                # a different GlobalVar object with the same name replaces the old one
                del self._functions[old]
        else:
            raise KilnError(f"IRModule keys are names or GlobalVars, got {type(key).__name__}")
        func = _as_function(func)
        self._gvars[gv.name_hint] = gv
        self._functions[gv] = func

    def __setitem__(self, key, func) -> None:
        self._add(key, func, update=True)

    def add(self, var, func, update: bool = True) -> "IRModule":
        self._add(var, func, update)
        return self

    def update_func(self, var: GlobalVar, func) -> None:
        """Replace the function of ``var`` in place."""
        self._add(var, func, update=True)

    def remove(self, var) -> None:
        gv = self.get_global_var(var if isinstance(var, str) else var.name_hint)
        del self._functions[gv]
        del self._gvars[gv.name_hint]

    def update(self, other) -> None:
        """Add every function (and type definition) of ``other`` (an IRModule or a dict)."""
        if isinstance(other, IRModule):
            for gv, f in other._functions.items():
                self._add(gv, f, update=True)
            for tv, d in other._type_definitions.items():
                self._add(tv, d, update=True)
        else:
            for k, f in dict(other).items():
                self._add(k, f, update=True)

    def copy(self) -> "IRModule":
        new = IRModule(attrs=self.attrs)
        new.update(self)
        new.source_map = self.source_map
        return new

    __copy__ = copy

    # -- attributes -----------------------------------------------------------------------------
    def with_attr(self, attr_key: str, attr_value) -> "IRModule":
        """A copy of the module with an attribute set."""
        new = self.copy()
        new.attrs = self.attrs.with_attr(attr_key, attr_value)
        return new

    def get_attr(self, attr_key: str, default=None):
        return self.attrs.get(attr_key, default)

    # -- construction ---------------------------------------------------------------------------
    @staticmethod
    def from_expr(expr, functions=None, type_defs=None) -> "IRModule":
        """A module whose ``main`` is ``expr`` (wrapped in a Function of its free vars if needed)."""
        funcs = dict(functions or {})
        mod = IRModule(funcs, type_defs)
        gv = mod._gvars.get("main") or GlobalVar("main")
        mod[gv] = expr
        return mod

    # -- text -----------------------------------------------------------------------------------
    def astext(self, show_meta_data: bool = True, annotate=None) -> str:
        """The module in Relay text format (TIR functions are printed by their own printer)."""
        if any(_is_relay(f) for f in self._functions.values()):
            from ..relay.printer import module_to_text
            return module_to_text(self, show_meta_data=show_meta_data, annotate=annotate)
        parts = []
        for gv, f in self._functions.items():
            text = f.astext() if hasattr(f, "astext") else repr(f)
            parts.append(f"# @{gv.name_hint}\n{text}")
        return "\n".join(parts)

    def script(self, show_meta: bool = False, **kwargs) -> str:
        return self.astext(show_meta_data=show_meta)

    def __repr__(self) -> str:
        return self.astext()

    __str__ = __repr__


def _as_function(func):
    """Functions go in as they are; a bare Relay expression becomes ``fn(free vars) { expr }``."""
    if isinstance(func, RelayExpr) and _is_relay(func) and type(func).__name__ != "Function":
        from ..relay.expr import Function
        from ..relay.analysis import free_vars
        return Function(free_vars(func), func)
    return func


def iter_relay_functions(mod: IRModule) -> Iterable:
    """(GlobalVar, Function) pairs of the module's Relay functions only."""
    for gv, f in mod.functions.items():
        if _is_relay(f):
            yield gv, f
