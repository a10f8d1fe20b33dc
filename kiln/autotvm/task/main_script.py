"""Restore templates defined in the user's ``__main__`` script inside a measurement worker, without
cloudpickle and without re-running the script.

TVM's tutorials define ``@autotvm.template`` functions at the top level of the script they run. A spawned
worker cannot import ``__main__`` by reference, and running the script again would start the tuning again
(tutorials have no ``if __name__ == "__main__":`` guard). So the worker executes only the script's
definitions: imports, function and class definitions (with their decorators, which register the templates)
and assignments of literal constants. Nothing else in the script runs.
"""
from __future__ import annotations

import ast
import sys
import types

_LOADED: dict = {}


def main_script_path(func) -> str | None:
    """The file of the ``__main__`` script that defines ``func``, if it was defined there."""
    target = getattr(func, "fcustomized", None) or getattr(func, "fcompute", None) or func
    if getattr(target, "__module__", None) != "__main__":
        return None
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    return path if isinstance(path, str) and path.endswith(".py") else None


def _is_definition(node) -> bool:
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return True
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
        try:
            ast.literal_eval(node.value)
            return True
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return False
    return False


def load_main_definitions(path: str) -> types.ModuleType:
    """Execute the definitions of the script at ``path`` (once per process) in a module of its own."""
    mod = _LOADED.get(path)
    if mod is not None:
        return mod
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    tree.body = [n for n in tree.body if _is_definition(n)]
    mod = types.ModuleType("__kiln_user_main__")
    mod.__file__ = path
    _LOADED[path] = mod
    exec(compile(tree, path, "exec"), mod.__dict__)  # noqa: S102 - the user's own definitions, nothing else
    return mod
