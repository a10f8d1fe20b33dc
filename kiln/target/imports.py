"""Code a schedule imports into its module: ``pragma import_c`` and ``pragma import_llvm``.

TVM's tensorize tutorial hands a micro-kernel to the generated module as source attached to a loop:
``s[C].pragma(x, "import_c", c_source)`` (TVM's attribute ``pragma_import_c``) or
``s[C].pragma(x, "import_llvm", llvm_ir)``; the intrinsic's body then calls it with ``tir.call_extern``.

* ``import_c``: kiln's CPU backends print C, so the source goes into the module's translation unit, before the
  kernels (the C printer adds it as a helper; each top-level item once). It is C (gnu11): C++'s ``extern "C"``
  before a declaration is dropped (C has C linkage), its block form is refused with a message saying to drop it.
* ``import_llvm``: kiln has no LLVM library. The IR (text, or the path of a ``.ll``/``.bc`` file) is compiled to
  an object by ``clang`` when it is on PATH, else by ``llc``, and linked into the module's shared library; the
  object travels with the module's other objects into ``export_library``. With neither tool a clear error
  names them and the alternative (``import_c`` with the C source).

Objects are cached like the compiler driver's (content-addressed in ``$KILN_CACHE_DIR``).
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile

from ..error import CompileError, KilnError
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.stmt_functor import post_order_visit
from . import compiler

# clang / llc names tried in order: the unversioned name first, then versioned ones (Debian's llc-14, clang-15)
_VERSIONS = tuple(range(21, 8, -1))
CLANG_NAMES = ("clang",) + tuple(f"clang-{v}" for v in _VERSIONS)
LLC_NAMES = ("llc",) + tuple(f"llc-{v}" for v in _VERSIONS)


class MissingToolError(KilnError):
    """A tool kiln needs for this request (clang, llc) is not installed."""


def find_tool(names) -> str | None:
    """The first of ``names`` found on PATH, or None."""
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    return None


def find_clang() -> str | None:
    return find_tool(CLANG_NAMES)


def find_llc() -> str | None:
    return find_tool(LLC_NAMES)


# -- import_c ---------------------------------------------------------------------------------------
_CXX_EXTERN = re.compile(r'extern\s*"C"')


IMPORT_C_PREFIX = "__kiln_import_c_"


_CXX_EXTERN_DECL = re.compile(r'extern\s*"C"\s*(?=[A-Za-z_])')


def _as_c(code) -> str:
    """The source as C: C++'s ``extern "C"`` before a declaration (TVM's tutorial writes its kernels so, for
    clang's C++) is dropped, C functions having C linkage already; the block form ``extern "C" { ... }`` is
    refused unless guarded by ``__cplusplus``."""
    if not isinstance(code, str):
        raise KilnError(f"pragma import_c: the value must be C source text, got {type(code).__name__}")
    if "__cplusplus" in code:
        return code
    code = _CXX_EXTERN_DECL.sub("", code)
    if _CXX_EXTERN.search(code):
        raise KilnError('pragma import_c: the source uses C++\'s `extern "C" { ... }`; kiln compiles the module as '
                        'C (gnu11), where functions have C linkage already: remove it (or guard it with '
                        '`#ifdef __cplusplus`)')
    return code


def c_top_level_items(code: str) -> list:
    """``code`` cut into its top-level items: a function definition ends at the ``}`` closing its body, anything
    else at the next top-level ``;``. Comments, strings and character literals are skipped over. A source with
    preprocessor directives stays one item (their order matters)."""
    if re.search(r"^\s*#", code, re.M):
        return [code.strip()]
    items, depth, start, i, n = [], 0, 0, 0, len(code)
    func_body, last = False, ""
    while i < n:
        ch = code[i]
        if code.startswith("/*", i):
            end = code.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        if code.startswith("//", i):
            end = code.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if ch in "\"'":
            j = i + 1
            while j < n and code[j] != ch:
                j += 2 if code[j] == "\\" else 1
            i = j + 1
            continue
        if ch == "{":
            if depth == 0:
                func_body = last == ")"
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0 and func_body:
                items.append(code[start:i + 1].strip())
                start = i + 1
        elif ch == ";" and depth == 0:
            items.append(code[start:i + 1].strip())
            start = i + 1
        if not ch.isspace():
            last = ch
        i += 1
    rest = code[start:].strip()
    if rest:
        items.append(rest)
    return [item for item in items if item]


def imported_c_items(code: str) -> list:
    """(helper key, text) per top-level item of a ``pragma import_c`` source. The key is the item's text with
    whitespace collapsed, so an item imported again (TVM's tutorial imports gemv_update twice: alone, then with
    gemv_reset) appears once in the translation unit, as TVM's LLVM import tolerates."""
    out = []
    for item in c_top_level_items(_as_c(code)):
        norm = " ".join(item.split())
        out.append((IMPORT_C_PREFIX + hashlib.sha256(norm.encode("utf-8")).hexdigest()[:16], item + "\n"))
    return out


# -- import_llvm ------------------------------------------------------------------------------------
def collect_llvm_imports(funcs) -> list:
    """The ``pragma_import_llvm`` values of ``funcs`` ((symbol, PrimFunc) pairs), distinct, in order."""
    found: list = []

    def visit(node):
        if isinstance(node, S.AttrStmt) and node.attr_key == "pragma_import_llvm":
            value = node.value.value if isinstance(node.value, E.StringImm) else node.value
            if not isinstance(value, str):
                raise KilnError(f"pragma import_llvm: the value must be LLVM IR text or a .ll/.bc path, got {value!r}")
            if value not in found:
                found.append(value)

    for _, func in funcs:
        post_order_visit(func.body, visit)
    return found


def _read_ir(value: str) -> tuple[bytes, str]:
    """(IR bytes, suffix): a path of a .ll/.bc file is read (TVM accepts either), other text is the IR itself."""
    if value.endswith((".ll", ".bc")) and "\n" not in value:
        if not os.path.isfile(value):
            raise KilnError(f"pragma import_llvm: {value!r} looks like the path of an LLVM IR file but there is no "
                            "such file; give the IR text or an existing .ll/.bc path")
        with open(value, "rb") as f:
            return f.read(), os.path.splitext(value)[1]
    return value.encode("utf-8"), ".ll"


def llvm_object(value: str) -> str:
    """Compile LLVM IR (text or a .ll/.bc path) to a cached position-independent object; returns its path."""
    data, suffix = _read_ir(value)
    clang, llc = find_clang(), find_llc()
    if clang:
        tool = [clang]
        # the file's suffix (.ll/.bc) tells clang it is IR
        argv_of = lambda src, out: tool + ["-c", "-O2", "-fPIC", src, "-o", out]  # noqa: E731
    elif llc:
        tool = [llc]
        argv_of = lambda src, out: tool + ["-filetype=obj", "-O2", "-relocation-model=pic", src, "-o", out]  # noqa: E731
    else:
        raise MissingToolError(
            "pragma import_llvm: kiln has no LLVM of its own and needs `clang` or `llc` on PATH to compile the "
            "imported LLVM IR (neither was found); install one (e.g. the clang or llvm package), or import the "
            "kernel's C source with s[stage].pragma(axis, \"import_c\", c_source) instead")
    key = compiler._digest("llvm-import-weak", compiler.compiler_identity(tool), suffix, data)
    out = compiler._cache_path("obj", key, ".o")
    if compiler._cache_hit(out):
        return out
    with tempfile.TemporaryDirectory(prefix="kiln-llvm-") as work:
        src = os.path.join(work, "import" + suffix)
        with open(src, "wb") as f:
            f.write(data)
        tmp = compiler._temp_sibling(out)
        try:
            compiler.stats.compiles += 1
            proc = subprocess.run(argv_of(src, tmp), capture_output=True, text=True)
            if proc.returncode != 0:
                text = (proc.stderr or "") + (proc.stdout or "")
                raise CompileError(f"pragma import_llvm: {os.path.basename(tool[0])} could not compile the imported "
                                   f"LLVM IR (exit {proc.returncode}):\n{text.strip()}", None, text)
            _weaken(tmp)
            os.replace(tmp, out)
        finally:
            compiler._discard_temp(tmp)
    compiler._record_entry(out)
    return out


def _weaken(obj: str) -> None:
    """Make the object's global definitions weak, so that two imports defining one function link (TVM's tutorial
    imports gemv_update twice; TVM's LLVM import marks imported functions available_externally)."""
    objcopy = find_tool(("objcopy",))
    if objcopy is None:
        return
    proc = subprocess.run([objcopy, "--weaken", obj], capture_output=True, text=True)
    if proc.returncode != 0:
        raise CompileError(f"pragma import_llvm: objcopy --weaken failed:\n{proc.stderr.strip()}", None, proc.stderr)


def llvm_import_objects(funcs) -> list:
    """Objects of every ``pragma import_llvm`` in ``funcs`` ((symbol, PrimFunc) pairs)."""
    return [llvm_object(v) for v in collect_llvm_imports(funcs)]


__all__ = ["find_clang", "find_llc", "imported_c_items", "c_top_level_items", "collect_llvm_imports",
           "llvm_object", "llvm_import_objects", "MissingToolError"]
