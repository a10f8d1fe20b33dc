"""Rewrite ONNX converters from TVM's class convention into ``@onnx_op`` functions, in place.

    python tools/onnx_class_to_function.py kiln/relay/frontend/onnx_foo.py [...]

Converts every class of the form::

    @register("Op1", "Op2")                 # optionally domain="..."
    class Op1(OnnxOpConverter):
        @classmethod
        def _impl_v<N>(cls, inputs, attr, ctx):
            <body>

into one function per ``_impl_v<N>``::

    @onnx_op("Op1", "Op2", since=N)
    def _op1(inputs, attr, ctx):            # _op1_v<N> when the class has several versions
        <body, dedented by one level>

The bodies stay as they are, lines and comments included (only dedented). A class that has anything else (a
helper method, a docstring, a body that uses ``cls``, another base) is left alone and listed: convert it by
hand (helpers become module-level functions) or keep it, since ``register`` still accepts classes. Add
``onnx_op`` to the file's ``from .onnx_common import ...`` line afterwards. See docs/onnx.md.
"""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path


def snake(name: str) -> str:
    """``MatMul`` -> ``mat_mul``, ``GatherND`` -> ``gather_nd``, ``LRN`` -> ``lrn``."""
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


def _register_call(cls: ast.ClassDef):
    if len(cls.decorator_list) != 1:
        return None
    d = cls.decorator_list[0]
    if isinstance(d, ast.Call) and isinstance(d.func, ast.Name) and d.func.id == "register":
        return d
    return None


def _uses_name(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def _convertible(cls: ast.ClassDef) -> str | None:
    """None when ``cls`` is a plain converter class, else why it is not."""
    if _register_call(cls) is None:
        return "not decorated with a single @register(...)"
    if [ast.unparse(b) for b in cls.bases] != ["OnnxOpConverter"]:
        return f"bases {[ast.unparse(b) for b in cls.bases]}"
    for m in cls.body:
        if not isinstance(m, ast.FunctionDef) or not re.fullmatch(r"_impl_v\d+", m.name):
            return f"member {getattr(m, 'name', type(m).__name__)!r} is not an _impl_v<N>"
        if [ast.unparse(d) for d in m.decorator_list] != ["classmethod"]:
            return f"{m.name} is not a plain @classmethod"
        if [a.arg for a in m.args.args] != ["cls", "inputs", "attr", "ctx"] or m.args.vararg or m.args.kwarg:
            return f"{m.name} does not take (cls, inputs, attr, ctx)"
        if any(_uses_name(stmt, "cls") for stmt in m.body):
            return f"{m.name} uses cls"
        if m.lineno == m.body[0].lineno:
            return f"{m.name} has its body on the def line"
    return None


def _dedent(lines: list, by: int) -> list:
    out = []
    for line in lines:
        if line.strip() and not line.startswith(" " * by):
            raise ValueError(f"cannot dedent {line!r}")
        out.append(line[by:] if line.strip() else line)
    return out


def convert_source(src: str) -> tuple:
    """(new source, [(class name, reason)] for the classes left alone)."""
    tree = ast.parse(src)
    lines = src.splitlines(keepends=True)
    edits = []  # (first line index, last line index exclusive, replacement lines)
    skipped = []
    taken = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    taken |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        why = _convertible(node)
        if why is not None:
            skipped.append((node.name, why))
            continue
        call = _register_call(node)
        args = [ast.get_source_segment(src, a) for a in call.args + call.keywords]
        methods = sorted(node.body, key=lambda m: int(m.name[len("_impl_v"):]))
        names = [f"_{snake(node.name)}" + (f"_v{m.name[len('_impl_v'):]}" if len(methods) > 1 else "")
                 for m in methods]
        clash = [n for n in names if n in taken]
        if clash:
            skipped.append((node.name, f"function name {clash[0]} is taken in the module"))
            continue
        taken.update(names)
        out = []
        for k, m in enumerate(methods):
            since = int(m.name[len("_impl_v"):])
            fname = names[k]
            if k:
                out += ["\n", "\n"]
            out.append(f"@onnx_op({', '.join(args[:len(call.args)] + [f'since={since}'] + args[len(call.args):])})\n")
            out.append(f"def {fname}(inputs, attr, ctx):\n")
            out += _dedent(lines[m.lineno:m.end_lineno], 4)
        start = call.lineno - 1
        edits.append((start, node.end_lineno, out))
    for start, end, out in reversed(edits):
        lines[start:end] = out
    return "".join(lines), skipped


def main(argv: list) -> int:
    if not argv:
        print(__doc__)
        return 2
    for path in argv:
        p = Path(path)
        new, skipped = convert_source(p.read_text())
        p.write_text(new)
        for name, why in skipped:
            print(f"{path}: left class {name} alone ({why})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
