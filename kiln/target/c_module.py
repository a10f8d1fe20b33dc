"""Compiled C as a runtime module, and the compiler-side steps of exporting one.

``create_c_module`` compiles C source (through the driver's disk cache) and loads it as a ``runtime.CModule``; it
lives here, next to the code generator, because the runtime never compiles. Exporting (``Module.export_library``,
``save("m.o")``) and loading a ``.tar`` of objects do need the C compiler: the runtime reaches it through the
global function registry, under the names this module registers (``runtime.module.<step>``), as TVM's runtime
reaches its compiler-side helpers through ``get_global_func``.
"""
from __future__ import annotations

import shlex
from typing import Sequence

from ..error import ModuleLoadError
from ..runtime.cpu_features import missing_features
from ..runtime.library import Library, UnrunnableLibrary
from ..runtime.module import CModule, Module
from ..runtime.registry import register_func
from . import compiler
from .x86 import required_features, unused_features

__all__ = ["create_c_module"]


def create_c_module(source: str, functions: list, entry_name: str | None = None, cflags: Sequence[str] = (),
                    type_key: str = "llvm", target=None, extra_objects: Sequence[str] = ()) -> Module:
    """Compile C ``source`` (starting with the ABI prelude) whose kernels ``functions`` describes and load it;
    the compile goes through the driver's disk cache. With ``target`` (the CPU target of ``cflags``) the module
    records the target and the ISA features its code may use (and, for information, those of the CPU the code
    is compiled without); when this CPU lacks some, the code is compiled (its source, objects and exports are
    there) but not loaded, and calling a kernel raises ModuleLoadError."""
    objects = [compiler.compile_object(source, list(cflags))] + list(extra_objects)  # extra: pragma import_llvm
    so_path = compiler.link_cached(objects)
    info = {}
    if target is not None:
        info = {"target": str(target), "required_features": required_features(target)}
        unused = unused_features(target)
        if unused:  # the CPU has them, the code cannot contain them (informational, never checked)
            info["unused_features"] = unused
    missing = missing_features(info.get("required_features", ()))
    if missing:
        lib = UnrunnableLibrary(so_path, f"it was compiled for {info['target']!r} and this CPU lacks "
                                         f"{', '.join(missing)} (code for another CPU is compiled, not run)")
    else:
        lib = Library(so_path, verify=False)
    return CModule(lib, functions, entry_name, type_key=type_key, source=source, objects=objects, target_info=info)


# -- the compiler-side steps the runtime asks for by name -----------------------------------------------------
@register_func("runtime.module.create_shared", override=True)
def create_shared(output: str, objects, options: Sequence[str] | None = None, cc=None, **_kwargs) -> str:
    """Link ``objects`` into the shared library ``output`` (export_library's default for ``.so``). Kernels
    with parallel loops (pool backend) get kiln's thread pool linked in as a fallback: a process that has no
    pool of its own (no compiler, no cached copy) runs their loops on it; one that has a pool keeps using that
    (kiln.runtime.library.Library._wire_thread_pool)."""
    objects = [objects] if isinstance(objects, str) else [str(o) for o in objects]
    cc = shlex.split(cc) if isinstance(cc, str) else (list(cc) if cc is not None else None)
    pool = compiler.thread_pool_link_objects(objects)
    return compiler.link_shared(objects + pool, str(output), list(options or []) + (["-pthread"] if pool else []),
                                cc=cc)


register_func("runtime.module.blob_object", compiler.blob_object, override=True)
register_func("runtime.module.link_relocatable", compiler.link_relocatable, override=True)
register_func("runtime.module.has_compiler", compiler.has_compiler, override=True)
register_func("runtime.module.is_damaged_cache_entry", compiler.is_damaged_cache_entry, override=True)


@register_func("runtime.module.link_for_load", override=True)
def link_for_load(objects: Sequence[str]) -> str:
    """A cached shared library of ``objects`` (loading a ``.tar`` export)."""
    try:
        return compiler.link_cached(list(objects))
    except compiler.NoCompilerError as err:
        raise ModuleLoadError(f"needs a C compiler to link its objects: {err}") from None
