"""contrib.clang: TVM's helpers for calling the system clang (``find_clang``, ``create_llvm``).

kiln has no LLVM of its own; these run the ``clang`` found on PATH (``clang``, then versioned names such as
``clang-15``). ``create_llvm`` turns C/C++ source into LLVM IR text, which ``s[stage].pragma(axis,
"import_llvm", ir)`` links into a built module (kiln.target.imports). Without clang both raise
:class:`~kiln.target.imports.MissingToolError` naming what is missing; the alternative that needs no clang is
importing the C source itself with ``pragma(axis, "import_c", c_source)``.
"""
from __future__ import annotations

import subprocess
from typing import Sequence

from ..error import CompileError
from ..target.imports import CLANG_NAMES, MissingToolError, find_tool
from . import utils

__all__ = ["find_clang", "create_llvm"]


def find_clang(required: bool = True) -> list:
    """Paths of the clang executables on PATH (best first); raises when ``required`` and there is none."""
    found = []
    for name in CLANG_NAMES:
        path = find_tool([name])
        if path and path not in found:
            found.append(path)
    if not found and required:
        raise MissingToolError(
            f"cannot find clang on PATH (tried {', '.join(CLANG_NAMES[:3])}, ...); install clang to make LLVM IR "
            "from C/C++ source, or skip the IR: attach the C source with s[stage].pragma(axis, \"import_c\", "
            "c_source) (kiln compiles it into the module with the system C compiler)")
    return found


def create_llvm(inputs, output: str | None = None, options: Sequence[str] | None = None, cc: str | None = None) -> str:
    """Compile ``inputs`` (source texts or paths of source files; texts are compiled as C++, as in TVM) to LLVM IR
    text with clang; the IR is written to ``output`` (a temporary file if None) and returned."""
    cc = cc or find_clang()[0]
    temp = utils.tempdir()
    output = output or temp.relpath("output.ll")
    inputs = [inputs] if isinstance(inputs, str) else list(inputs)
    files = []
    for i, code in enumerate(inputs):
        if utils.is_source_path(code):
            files.append(str(code))
        else:
            path = temp.relpath(f"input{i}.cc")
            with open(path, "w", encoding="utf-8") as f:
                f.write(code)
            files.append(path)
    cmd = [cc, "-S", "-emit-llvm"] + list(options or []) + ["-o", output] + files
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as err:
        raise MissingToolError(f"create_llvm: could not run {cc}: {err}") from None
    if proc.returncode != 0:
        text = (proc.stderr or "") + (proc.stdout or "")
        raise CompileError(f"create_llvm: clang failed (exit {proc.returncode}):\n{' '.join(cmd)}\n{text.strip()}",
                           None, text)
    with open(output, encoding="utf-8") as f:
        return f.read()
