"""Count imports of kiln's own modules that are not at the top of their file (issue 14's "fail loudly" figure).

    python tools/count_local_imports.py [package_dir]      # default: kiln/

Prints two numbers and the worst files: function-local imports of kiln modules (``from ..x import y`` or
``import kiln.x`` inside a def), and ``try: import ...kiln... except ImportError`` guards anywhere.
"""
from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path


def _is_own(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "kiln"
    if isinstance(node, ast.Import):
        return any(alias.name.split(".")[0] == "kiln" for alias in node.names)
    return False


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = []
    t = handler.type
    for e in (t.elts if isinstance(t, ast.Tuple) else [t]):
        if isinstance(e, ast.Name):
            names.append(e.id)
    return any(n in ("ImportError", "ModuleNotFoundError") for n in names)


def count_file(path: Path) -> tuple[int, int]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    local = 0
    stack = [(tree, False)]
    while stack:
        node, in_def = stack.pop()
        if in_def and _is_own(node):
            local += 1
        inner = in_def or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))
    guards = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers if h.type is not None):
            if any(_is_own(n) for stmt in node.body for n in ast.walk(stmt)):
                guards += 1
    return local, guards


def main(root: str = "kiln") -> None:
    local_by_file, guards_by_file = Counter(), Counter()
    for path in sorted(Path(root).rglob("*.py")):
        local, guards = count_file(path)
        local_by_file[str(path)] += local
        guards_by_file[str(path)] += guards
    print(f"function-local imports of kiln modules: {sum(local_by_file.values())}")
    print(f"'except ImportError' guards around kiln modules: {sum(guards_by_file.values())}")
    for path, n in guards_by_file.most_common():
        if n:
            print(f"  guards {n:3d} {path}")
    print("files with the most local imports:")
    for path, n in local_by_file.most_common(10):
        print(f"  {n:4d} {path}")


if __name__ == "__main__":
    main(*sys.argv[1:])
