"""The CPU code-generation backends ``target.build.c`` and ``target.build.llvm``.

Both turn an IRModule of lowered PrimFuncs into C (kiln's "llvm" target generates C today; the
system C compiler turns it into machine code) and load the result as a ``runtime.Module``. They
are registered in the global function registry, so the driver finds a backend by the target kind's
name and a user can add one without editing kiln.
"""
from __future__ import annotations

from ..error import KilnError
from ..runtime.registry import register_func
from ..tir.function import PrimFunc
from .c_module import create_c_module
from .codegen_c import codegen_c
from .flags import target_cflags
from .imports import llvm_import_objects
from .target import Target


def prim_funcs(mod) -> list:
    """(symbol, PrimFunc) pairs of an IRModule (or dict / list of such pairs), in module order."""
    if isinstance(mod, PrimFunc):
        return [(mod.attrs.get("global_symbol", "default_function"), mod)]
    items = mod.functions.items() if hasattr(mod, "functions") else dict(mod).items()
    out = []
    for key, func in items:
        if not isinstance(func, PrimFunc):
            raise KilnError(
                f"the C backend builds TIR PrimFuncs only; function {getattr(key, 'name_hint', key)!r} is a "
                f"{type(func).__name__} (use relay.build for Relay functions)"
            )
        name = func.attrs.get("global_symbol") or getattr(key, "name_hint", str(key))
        out.append((str(name), func))
    return out


def generate_source(mod, target=None) -> tuple[str, list]:
    """C source and function metadata of every PrimFunc in ``mod`` (an IRModule; :func:`codegen_c` takes the
    (symbol, PrimFunc) pairs)."""
    return codegen_c(prim_funcs(mod), target)


def build_c_module(mod, target=None, type_key: str = "c"):
    """Generate C for ``mod``, compile it with flags from ``target`` and load it."""
    target = Target(target) if not isinstance(target, Target) and target is not None else target
    target = target or Target("llvm")
    funcs = prim_funcs(mod)
    source, functions = codegen_c(funcs, target)
    extra = llvm_import_objects(funcs)  # pragma import_llvm: compiled IR linked beside the kernels
    entry = None
    get_attr = getattr(mod, "get_attr", None)
    if get_attr is not None:
        entry = get_attr("entry_name")
    if entry is not None and entry not in {f["name"] for f in functions}:
        entry = None
    return create_c_module(source, functions, entry, target_cflags(target), type_key=type_key, target=target,
                           extra_objects=extra)


@register_func("target.build.c", override=True)
def _build_c(mod, target):
    return build_c_module(mod, target, type_key="c")


@register_func("target.build.llvm", override=True)
def _build_llvm(mod, target):
    return build_c_module(mod, target, type_key="llvm")
