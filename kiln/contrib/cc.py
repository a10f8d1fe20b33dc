"""contrib.cc: TVM's helpers for calling the system C compiler, on top of kiln's compiler driver."""
from __future__ import annotations

import shlex
from typing import Sequence

from ..target import compiler


def get_cc() -> str | None:
    """Path of the C compiler kiln would use, or None if there is none."""
    try:
        return compiler.find_compiler()[0]
    except compiler.NoCompilerError:
        return None


def _cc_argv(cc) -> list | None:
    if cc is None:
        return None
    return shlex.split(cc) if isinstance(cc, str) else list(cc)


def _objects(objects) -> list:
    return [objects] if isinstance(objects, str) else [str(o) for o in objects]


def create_shared(output: str, objects, options: Sequence[str] | None = None, cc=None, cwd=None,
                  ccache_env=None) -> str:
    """Link ``objects`` (object or C source files) into the shared library ``output``."""
    return compiler.link_shared(_objects(objects), str(output), list(options or []), cc=_cc_argv(cc))


create_shared.output_format = "so"


def create_executable(output: str, objects, options: Sequence[str] | None = None, cc=None, cwd=None,
                      ccache_env=None) -> str:
    """Compile/link ``objects`` into the executable ``output``."""
    return compiler.link_executable(_objects(objects), str(output), list(options or []), cc=_cc_argv(cc))


create_executable.output_format = ""
