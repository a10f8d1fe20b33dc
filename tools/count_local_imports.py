"""Count imports of kiln's own modules that are not at the top of their file, and say why each one stays.

    python tools/count_local_imports.py [package_dir] [-v]     # default: kiln/

kiln's rule (docs/architecture.md, "Imports fail loudly"): its own modules are imported at the top of the file
unless the layering or an import cycle forbids it. Each function-local import is classified:

* ``upward``: the importer's layer is below the imported one's (``LAYERS``; e.g. ``tir`` asking ``target`` for the
  current Target, AutoTVM's task extraction calling ``relay.build``). A top-level import would break the layering.
* ``cycle``: the imported module already imports the importer at load time (directly or through the modules and
  package ``__init__`` files it loads at its top level; the chain is printed), so a top-level import would be
  circular; or the name comes from the importer's own package, whose ``__init__`` binds it only after loading
  the importer.
* ``lazy``: marked ``# lazy: <reason>`` on the import line, for a deliberate exception the two rules above miss.
* ``unexplained``: none of the above; such an import should move to the top of its file (listed always).

Also counts ``try: import ...kiln... except ImportError`` guards (there should be none).
"""
from __future__ import annotations

import ast
import sys
from collections import Counter, defaultdict
from pathlib import Path

#: the layer of each top-level package of kiln, low to high (docs/architecture.md's table; DESIGN.md section 2).
#: A module may import its own layer and the ones below it at the top of its file.
LAYERS = {
    "error": 0, "runtime": 1, "container": 1, "rpc": 1.5, "ir": 2, "transform": 3, "tir": 4, "arith": 4, "te": 5,
    "target": 6, "contrib": 6.5, "driver": 7, "topi": 8, "autotvm": 8, "relay": 9, "parser": 9,
    "script": 12, "testing": 12, "exec": 12, "demo": 12, "cli": 12,
}
#: modules whose layer differs from their package's (user-facing front doors that import Relay)
MODULE_LAYERS = {"kiln.contrib.onnx_backend": 12, "kiln.driver.tvmc": 12}


def layer(module: str) -> float:
    for name, value in MODULE_LAYERS.items():
        if module == name or module.startswith(name + "."):
            return value
    parts = module.split(".")
    return 0 if len(parts) == 1 else LAYERS.get(parts[1], 12)


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


class ModuleIndex:
    """Module names of the tree and the kiln modules each one loads at its top level."""

    def __init__(self, root: Path):
        self.base = root.parent
        self.paths = {}
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(self.base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            self.paths[".".join(parts)] = path
        self.trees = {m: ast.parse(p.read_text(encoding="utf-8"), str(p)) for m, p in self.paths.items()}
        self.top = {m: self._top_imports(m) for m in self.paths}

    def is_package(self, module: str) -> bool:
        return self.paths[module].name == "__init__.py"

    def targets(self, module: str, node: ast.AST) -> list:
        """The kiln modules an import statement in ``module`` loads (with their packages' ``__init__``)."""
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            if node.level == 0:
                base = node.module or ""
            else:
                parts = module.split(".")
                if not self.is_package(module):
                    parts = parts[:-1]
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in self.paths]
        out = []
        for name in names:
            parts = name.split(".")
            for i in range(2, len(parts) + 1):  # importing a.b.c runs a.b's __init__ first
                prefix = ".".join(parts[:i])
                if prefix in self.paths and prefix not in out:
                    out.append(prefix)
        return out

    def _top_imports(self, module: str) -> set:
        out = set()
        stack = list(self.trees[module].body)
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)) and _is_own(node):
                out.update(self.targets(module, node))
            stack.extend(ast.iter_child_nodes(node))
        return out

    def path(self, start: str, goal: str, skip: set) -> list | None:
        """A chain of top-level imports from ``start`` to ``goal`` that avoids the modules in ``skip``."""
        parent, todo = {start: None}, [start]
        while todo:
            m = todo.pop(0)
            if m == goal:
                chain = []
                while m is not None:
                    chain.append(m)
                    m = parent[m]
                return chain[::-1]
            for t in sorted(self.top.get(m, ())):
                if t not in parent and t not in skip:
                    parent[t] = m
                    todo.append(t)
        return None


def _ancestors(module: str) -> set:
    return {module.rsplit(".", i)[0] for i in range(1, module.count(".") + 1)}


def classify(index: ModuleIndex, module: str, node: ast.AST, line: str) -> tuple[str, str]:
    """(category, reason) of a function-local import in ``module``."""
    if "# lazy:" in line:
        return "lazy", line.split("# lazy:", 1)[1].strip()
    targets = index.targets(module, node) or [module]
    highest = max(targets, key=layer)
    if layer(highest) > layer(module):
        return "upward", f"{module} -> {highest}"
    # the packages above the importer are already loading when it runs: a cycle must come back through another
    # module (packages it shares with the target do not count), or be a name the importer's package's __init__
    # binds only after it has loaded the importer
    ancestors = _ancestors(module)
    for t in targets:
        if t in ancestors:
            continue
        chain = index.path(t, module, ancestors & (_ancestors(t) | {t}))  # packages both sit in are loading
        if chain is not None:
            return "cycle", " -> ".join(chain)
    if isinstance(node, ast.ImportFrom):
        for t in targets:
            if t in ancestors and any(f"{t}.{a.name}" not in index.paths for a in node.names):
                chain = index.path(t, module, set())
                if chain is not None:
                    return "cycle", f"{t} binds the name after loading this module ({' -> '.join(chain)})"
    return "unexplained", ""


def local_imports(index: ModuleIndex, module: str) -> list:
    """(node, source line) of each function-local import of a kiln module in ``module``."""
    lines = index.paths[module].read_text(encoding="utf-8").splitlines()
    found = []
    stack = [(index.trees[module], False)]
    while stack:
        node, in_def = stack.pop()
        if in_def and _is_own(node):
            found.append((node, " ".join(lines[node.lineno - 1: node.end_lineno])))
        inner = in_def or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))
    return sorted(found, key=lambda f: f[0].lineno)


def count_guards(tree: ast.AST) -> int:
    guards = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers if h.type is not None):
            if any(_is_own(n) for stmt in node.body for n in ast.walk(stmt)):
                guards += 1
    return guards


def main(*argv: str) -> None:
    verbose = "-v" in argv
    args = [a for a in argv if a != "-v"]
    index = ModuleIndex(Path(args[0] if args else "kiln"))
    by_category, by_file = Counter(), defaultdict(Counter)
    rows = []
    guards = Counter()
    for module, path in index.paths.items():
        guards[str(path)] = count_guards(index.trees[module])
        for node, line in local_imports(index, module):
            category, reason = classify(index, module, node, line)
            by_category[category] += 1
            by_file[str(path)][category] += 1
            rows.append((category, f"{path}:{node.lineno}", reason))
    total = sum(by_category.values())
    print(f"function-local imports of kiln modules: {total}")
    for category in ("upward", "cycle", "lazy", "unexplained"):
        print(f"  {category:12s} {by_category[category]:4d}")
    print(f"'except ImportError' guards around kiln modules: {sum(guards.values())}")
    for path, n in guards.most_common():
        if n:
            print(f"  guards {n:3d} {path}")
    print("files with the most local imports (upward/cycle/lazy/unexplained):")
    for path, counts in sorted(by_file.items(), key=lambda kv: -sum(kv[1].values()))[:15]:
        print(f"  {sum(counts.values()):4d} {path}  ({counts['upward']}/{counts['cycle']}/{counts['lazy']}/"
              f"{counts['unexplained']})")
    for category, where, reason in sorted(rows):
        if verbose or category == "unexplained":
            print(f"  {category:12s} {where}  {reason}")


if __name__ == "__main__":
    main(*sys.argv[1:])
