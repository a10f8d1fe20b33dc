"""TVMScript-style text for TIR: what ``print(func)`` and ``kiln.lower(..., simple_mode=True)`` show.

The output follows TVM 0.13's TVMScript printer: ``@T.prim_func`` functions, ``T.Buffer``
parameters, ``T.allocate`` / ``T.Buffer(..., data=...)`` declarations, ``for i in
T.parallel(n):`` loops and Python operator syntax with minimal parentheses. Distinct
variables that share a name get deterministic suffixes (``i``, ``i_1``, ``i_2``) in order of
first appearance.

Depth costs bounded interpreter stack: past ``_SPINE_DEPTH`` nested expressions, an operator subtree
(arithmetic, comparison, logic, cast, select, call) is printed children-first from an explicit work list,
left to right as the recursive printer would (so variable names are given in the same order), and a
chain of LetStmts prints in a loop: a 10,000-term expression or a 10,000-deep let chain prints.
"""
from __future__ import annotations

import json
import re
from types import GeneratorType

from ..runtime.dtype import parse_dtype
from . import expr as E, stmt as S
from .buffer import Buffer
from .stmt_functor import _SPINE, _SPINE_DEPTH, _spine_operands
from .stmt_functor import StmtExprVisitor, post_order_visit, uses_var

# printing sets up no context for any operand: Lets nest in the work list too
_PRINT_SPINE = _SPINE + (E.Let,)
_DONE = object()

# precedence: larger binds tighter
_P_OR, _P_AND, _P_NOT, _P_CMP, _P_BOR, _P_BXOR, _P_BAND, _P_SHIFT, _P_ADD, _P_MUL, _P_UNARY, _P_ATOM = range(1, 13)

_BIN = {
    E.Add: ("+", _P_ADD), E.Sub: ("-", _P_ADD), E.Mul: ("*", _P_MUL), E.FloorDiv: ("//", _P_MUL),
    E.FloorMod: ("%", _P_MUL), E.And: ("and", _P_AND), E.Or: ("or", _P_OR),
}
_CMP = {E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">="}
_BITWISE = {
    "tir.bitwise_and": ("&", _P_BAND), "tir.bitwise_or": ("|", _P_BOR), "tir.bitwise_xor": ("^", _P_BXOR),
    "tir.shift_left": ("<<", _P_SHIFT), "tir.shift_right": (">>", _P_SHIFT),
}
_KIND = {S.ForKind.SERIAL: "serial", S.ForKind.PARALLEL: "parallel", S.ForKind.VECTORIZED: "vectorized",
         S.ForKind.UNROLLED: "unroll", S.ForKind.THREAD_BINDING: "thread_binding"}
_IDENT = re.compile(r"[^0-9a-zA-Z_]")


def _sanitize(name: str) -> str:
    name = _IDENT.sub("_", name or "v")
    if not name or name[0].isdigit():
        name = "v_" + name
    return name


def _dtype_ann(dtype: str) -> str:
    return f"T.{dtype}" if dtype != "handle" else "T.handle"


class _Namer:
    def __init__(self):
        self.names: dict = {}
        self.used: dict = {}
        self.keep: list = []

    def get(self, obj, hint: str) -> str:
        hit = self.names.get(id(obj))
        if hit is not None:
            return hit
        base = _sanitize(hint)
        name = base
        n = self.used.get(base, 0)
        while name in self.used or name in _RESERVED:
            n += 1
            name = f"{base}_{n}"
        self.used[base] = n
        self.used[name] = self.used.get(name, 0)
        self.names[id(obj)] = name
        self.keep.append(obj)
        return name

    def known(self, obj) -> bool:
        return id(obj) in self.names


_RESERVED = {"T", "I", "and", "or", "not", "in", "for", "if", "else", "def", "return", "lambda", "range",
             "None", "True", "False", "with", "while", "assert", "is", "pass", "class", "from", "import"}


class TIRPrinter:
    """Prints expressions, statements and functions with one consistent naming of variables."""

    def __init__(self):
        self.namer = _Namer()
        self.data_owner: dict = {}   # id(data var) -> buffer whose name prints as X.data
        self.lines: list = []
        self.indent = 0
        self.implicit_after_alloc: dict = {}
        self._depth = 0
        self._spine_memo = None  # id(expr) -> (text, precedence) while an operator subtree prints

    # -- names ----------------------------------------------------------------------------------
    def var_name(self, v) -> str:
        owner = self.data_owner.get(id(v))
        if owner is not None and not self.namer.known(v):
            return self.buffer_name(owner) + ".data"
        return self.namer.get(v, v.name)

    def buffer_name(self, b) -> str:
        return self.namer.get(b, b.name)

    # -- expressions ----------------------------------------------------------------------------
    def expr(self, e) -> str:
        return self._e(e)[0]

    def _wrap(self, e, min_prec: int) -> str:
        text, prec = self._e(e)
        return text if prec >= min_prec else f"({text})"

    def _e(self, e):
        memo = self._spine_memo
        if memo is not None:
            hit = memo.get(id(e))
            if hit is not None:
                return hit
        elif self._depth > _SPINE_DEPTH and isinstance(e, _PRINT_SPINE):
            return self._e_spine(e)
        self._depth += 1
        try:
            return self._e_node(e)
        finally:
            self._depth -= 1

    def _e_spine(self, root):
        """Print the operator nodes below ``root`` children-first from a work list, then ``root``."""
        memo: dict = {}
        self._spine_memo = memo
        try:
            seen = {id(root)}
            stack = [(root, iter(_spine_operands(root, _PRINT_SPINE)))]
            while stack:
                node, it = stack[-1]
                for c in it:
                    if id(c) not in seen:
                        seen.add(id(c))
                        stack.append((c, iter(_spine_operands(c, _PRINT_SPINE))))
                        break
                else:
                    stack.pop()
                    memo[id(node)] = self._e_node(node)
            return memo[id(root)]
        finally:
            self._spine_memo = None

    def _e_node(self, e):
        if isinstance(e, Buffer):
            return self.buffer_name(e), _P_ATOM
        if isinstance(e, E.IterVar):
            return self.var_name(e.var), _P_ATOM
        if isinstance(e, (int, float, bool, str)):
            return (json.dumps(e) if isinstance(e, str) else repr(e)), _P_ATOM
        if not isinstance(e, E.PrimExpr):
            return str(e), _P_ATOM
        t = type(e)
        if t in _BIN:
            sym, prec = _BIN[t]
            return f"{self._wrap(e.a, prec)} {sym} {self._wrap(e.b, prec + 1)}", prec
        if t in _CMP:
            return f"{self._wrap(e.a, _P_CMP + 1)} {_CMP[t]} {self._wrap(e.b, _P_CMP + 1)}", _P_CMP
        meth = getattr(self, "e_" + t.__name__, None)
        if meth is None:
            for klass in t.__mro__[1:]:
                meth = getattr(self, "e_" + klass.__name__, None)
                if meth is not None:
                    break
        if meth is None:
            return f"<{t.__name__}>", _P_ATOM
        return meth(e)

    def e_Var(self, v):
        return self.var_name(v), _P_ATOM

    def e_IntImm(self, e):
        if e.dtype == "bool":
            return ("T.bool(True)" if e.value else "T.bool(False)"), _P_ATOM
        if e.dtype == "int32":
            return (str(e.value), _P_ATOM) if e.value >= 0 else (str(e.value), _P_UNARY)
        return f"T.{e.dtype}({e.value})", _P_ATOM

    def e_FloatImm(self, e):
        v = e.value
        if v != v or v in (float("inf"), float("-inf")):
            text = json.dumps(repr(v))
        else:
            text = repr(v)
        return f"T.{e.dtype}({text})", _P_ATOM

    def e_StringImm(self, e):
        return json.dumps(e.value), _P_ATOM

    def e_Cast(self, e):
        return f'T.Cast("{e.dtype}", {self.expr(e.value)})', _P_ATOM

    def e_Div(self, e):
        if parse_dtype(e.dtype).element_of().is_float:
            return f"{self._wrap(e.a, _P_MUL)} / {self._wrap(e.b, _P_MUL + 1)}", _P_MUL
        return f"T.Div({self.expr(e.a)}, {self.expr(e.b)})", _P_ATOM

    def e_Mod(self, e):
        return f"T.truncmod({self.expr(e.a)}, {self.expr(e.b)})", _P_ATOM

    def e_Min(self, e):
        return f"T.min({self.expr(e.a)}, {self.expr(e.b)})", _P_ATOM

    def e_Max(self, e):
        return f"T.max({self.expr(e.a)}, {self.expr(e.b)})", _P_ATOM

    def e_Not(self, e):
        return f"not {self._wrap(e.a, _P_NOT)}", _P_NOT

    def e_Select(self, e):
        return (f"T.Select({self.expr(e.condition)}, {self.expr(e.true_value)}, "
                f"{self.expr(e.false_value)})"), _P_ATOM

    def e_Ramp(self, e):
        return f"T.Ramp({self.expr(e.base)}, {self.expr(e.stride)}, {e.lanes})", _P_ATOM

    def e_Broadcast(self, e):
        return f"T.Broadcast({self.expr(e.value)}, {e.lanes})", _P_ATOM

    def e_Shuffle(self, e):
        vecs = ", ".join(self.expr(v) for v in e.vectors)
        return f"T.Shuffle([{vecs}], [{', '.join(str(i) for i in e.indices)}])", _P_ATOM

    def e_Let(self, e):
        return f"T.Let({self.var_name(e.var)}, {self.expr(e.value)}, {self.expr(e.body)})", _P_ATOM

    def _index(self, idx) -> str:
        if isinstance(idx, E.Ramp) and isinstance(idx.stride, E.IntImm) and idx.stride.value == 1:
            base = self.expr(idx.base)
            end = self.expr(idx.base + idx.lanes) if not isinstance(idx.base, E.IntImm) \
                else str(idx.base.value + idx.lanes)
            return f"{base}:{end}"
        return self.expr(idx)

    def e_BufferLoad(self, e):
        idx = ", ".join(self._index(i) for i in e.indices)
        return f"{self.buffer_name(e.buffer)}[{idx}]", _P_ATOM

    def e_ProducerLoad(self, e):
        idx = ", ".join(self.expr(i) for i in e.indices)
        return f"{self.namer.get(e.producer, getattr(e.producer, 'name', 'tensor'))}[{idx}]", _P_ATOM

    def e_Call(self, e):
        op = e.op if isinstance(e.op, str) else getattr(e.op, "name", str(e.op))
        if op in _BITWISE and len(e.args) == 2:
            sym, prec = _BITWISE[op]
            return f"{self._wrap(e.args[0], prec)} {sym} {self._wrap(e.args[1], prec + 1)}", prec
        if op == "tir.bitwise_not":
            return f"~{self._wrap(e.args[0], _P_UNARY)}", _P_UNARY
        args = [self.expr(a) for a in e.args]
        if op in ("tir.call_extern", "tir.call_pure_extern", "tir.reinterpret", "tir.call_llvm_intrin"):
            return f'T.{op[4:]}("{e.dtype}", {", ".join(args)})', _P_ATOM
        if op == "tir.tvm_call_packed":
            return f"T.call_packed({', '.join(args)})", _P_ATOM
        if op == "tir.type_annotation":
            return f'T.type_annotation("{e.dtype}")', _P_ATOM
        name = op[4:] if op.startswith("tir.") else op
        return f"T.{name}({', '.join(args)})", _P_ATOM

    def e_Reduce(self, e):
        axes = ", ".join(self.var_name(a.var) for a in e.axis)
        src = ", ".join(self.expr(s) for s in e.source)
        cond = "" if isinstance(e.condition, E.IntImm) and e.condition.value else f", where={self.expr(e.condition)}"
        return f"T.reduce([{src}], axis=[{axes}]{cond}, value_index={e.value_index})", _P_ATOM

    def e_Any(self, e):
        return "T.Any()", _P_ATOM

    # -- statements -----------------------------------------------------------------------------
    def line(self, text: str):
        self.lines.append("    " * self.indent + text)

    # Statement printers are generators: ``yield child`` prints the child statement there, ``yield from
    # self.body(child)`` prints it as an indented block. ``stmt`` runs them from an explicit stack, so
    # nesting depth costs no interpreter stack.
    def body(self, s):
        """Print a nested block (at one more level of indentation)."""
        self.indent += 1
        n = len(self.lines)
        yield s
        if len(self.lines) == n:
            self.line("T.evaluate(0)")
        self.indent -= 1

    def _stmt_step(self, s):
        if s is None:
            return None
        meth = getattr(self, "s_" + type(s).__name__, None)
        if meth is None:
            self.line(f"# <{type(s).__name__}>")
            return None
        return meth(s)

    def stmt(self, s):
        stack = [self._stmt_step(s)]
        if not isinstance(stack[0], GeneratorType):
            return
        while stack:
            child = next(stack[-1], _DONE)
            if child is _DONE:
                stack.pop()
                continue
            gen = self._stmt_step(child)
            if isinstance(gen, GeneratorType):
                stack.append(gen)

    def s_SeqStmt(self, s):
        for x in s.seq:
            yield x

    def s_Evaluate(self, s):
        if isinstance(s.value, E.Call):
            self.line(self.expr(s.value))
        else:
            self.line(f"T.evaluate({self.expr(s.value)})")

    def s_LetStmt(self, s):
        while isinstance(s, S.LetStmt):  # a chain of lets in a loop
            value = self.expr(s.value)
            self.line(f"{self.var_name(s.var)}: {_dtype_ann(s.var.dtype)} = {value}")
            s = s.body
        yield s

    def s_AttrStmt(self, s):
        if s.attr_key in ("thread_extent", "virtual_thread") and isinstance(s.node, E.IterVar):
            iv = s.node
            tag = iv.thread_tag or iv.var.name
            self.line(f'{self.var_name(iv.var)} = T.launch_thread("{tag}", {self.expr(s.value)})')
            yield s.body
            return
        node = s.node
        if isinstance(node, str):
            node_text = json.dumps(node)
        elif isinstance(node, (E.PrimExpr, Buffer, E.IterVar)):
            node_text = self._e(node)[0]
        elif node is None:
            node_text = "None"
        else:
            node_text = json.dumps(getattr(node, "name", type(node).__name__))
        self.line(f'with T.attr({node_text}, "{s.attr_key}", {self.expr(s.value)}):')
        yield from self.body(s.body)

    def s_AssertStmt(self, s):
        self.line(f"assert {self.expr(s.condition)}, {self.expr(s.message)}")
        yield s.body

    def s_BufferStore(self, s):
        idx = ", ".join(self._index(i) for i in s.indices)
        self.line(f"{self.buffer_name(s.buffer)}[{idx}] = {self.expr(s.value)}")

    def s_ProducerStore(self, s):
        idx = ", ".join(self.expr(i) for i in s.indices)
        name = self.namer.get(s.producer, getattr(s.producer, "name", "tensor"))
        self.line(f"{name}[{idx}] = {self.expr(s.value)}")

    def _region(self, bounds) -> str:
        parts = []
        for r in bounds:
            lo = self.expr(r.min)
            hi = self.expr(r.min + r.extent) if not (isinstance(r.min, E.IntImm) and r.min.value == 0) \
                else self.expr(r.extent)
            parts.append(f"{lo}:{hi}")
        return ", ".join(parts)

    def s_BufferRealize(self, s):
        b = s.buffer
        self.line(f"{self.buffer_name(b)} = {self.buffer_decl(b, with_data=False)}")
        cond = "" if isinstance(s.condition, E.IntImm) and s.condition.value else f", {self.expr(s.condition)}"
        scope = b.scope() if b.scope() != "global" else ""
        self.line(f'with T.realize({self.buffer_name(b)}[{self._region(s.bounds)}], "{scope}"{cond}):')
        yield from self.body(s.body)

    def s_ProducerRealize(self, s):
        name = self.namer.get(s.producer, getattr(s.producer, "name", "tensor"))
        self.line(f'with T.realize({name}[{self._region(s.bounds)}], "{s.storage_scope}"):')
        yield from self.body(s.body)

    def s_Allocate(self, s):
        name = self.var_name(s.buffer_var)
        exts = ", ".join(self.expr(x) for x in s.extents)
        scope = s.annotations.get("storage_scope", "global") if s.annotations else "global"
        cond = "" if isinstance(s.condition, E.IntImm) and s.condition.value else f", {self.expr(s.condition)}"
        self.line(f'{name} = T.allocate([{exts}], "{s.dtype}", "{scope}"{cond})')
        for b in self.implicit_after_alloc.pop(id(s.buffer_var), []):
            self.line(f"{self.buffer_name(b)} = {self.buffer_decl(b)}")
        yield s.body

    def s_DeclBuffer(self, s):
        self.line(f"{self.buffer_name(s.buffer)} = {self.buffer_decl(s.buffer)}")
        yield s.body

    def buffer_decl(self, b, with_data: bool = True) -> str:
        shape = self._shape(b.shape)
        parts = [shape]
        if b.dtype != "float32":
            parts.append(f'"{b.dtype}"')
        if with_data:
            parts.append(f"data={self.var_name(b.data)}")
        if b.strides:
            parts.append(f"strides={self._shape(b.strides)}")
        if not (isinstance(b.elem_offset, E.IntImm) and b.elem_offset.value == 0):
            parts.append(f"elem_offset={self.expr(b.elem_offset)}")
        if b.scope() != "global":
            parts.append(f'scope="{b.scope()}"')
        return f"T.Buffer({', '.join(parts)})"

    def _shape(self, dims) -> str:
        items = [self.expr(d) for d in dims]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"

    def s_For(self, s):
        loops = [s]
        loop_vars = {s.loop_var}  # one check a loop (was one a pair of loops: quadratic in the nest)
        while (s.kind == S.ForKind.SERIAL and _is_zero(s.min) and not s.annotations and s.thread_binding is None):
            inner = loops[-1].body
            if not (isinstance(inner, S.For) and inner.kind == S.ForKind.SERIAL and _is_zero(inner.min)
                    and not inner.annotations and inner.thread_binding is None):
                break
            if uses_var(inner.extent, lambda v: v in loop_vars):
                break
            loops.append(inner)
            loop_vars.add(inner.loop_var)
        if len(loops) > 1:
            names = ", ".join(self.var_name(l.loop_var) for l in loops)
            exts = ", ".join(self.expr(l.extent) for l in loops)
            self.line(f"for {names} in T.grid({exts}):")
            yield from self.body(loops[-1].body)
            return
        name = self.var_name(s.loop_var)
        if _is_zero(s.min):
            rng = self.expr(s.extent)
        else:
            rng = f"{self.expr(s.min)}, {self.expr(_end(s.min, s.extent))}"
        extra = ""
        if s.annotations:
            items = ", ".join(f'"{k}": {self._attr_value(v)}' for k, v in sorted(s.annotations.items()))
            extra = f", annotations={{{items}}}"
        if s.kind == S.ForKind.SERIAL and not extra:
            self.line(f"for {name} in range({rng}):")
        elif s.kind == S.ForKind.THREAD_BINDING:
            tag = getattr(s.thread_binding, "thread_tag", "") if s.thread_binding is not None else ""
            self.line(f'for {name} in T.thread_binding({rng}, thread="{tag}"{extra}):')
        else:
            self.line(f"for {name} in T.{_KIND[s.kind]}({rng}{extra}):")
        yield from self.body(s.body)

    def s_While(self, s):
        self.line(f"while {self.expr(s.condition)}:")
        yield from self.body(s.body)

    def s_IfThenElse(self, s):
        self.line(f"if {self.expr(s.condition)}:")
        yield from self.body(s.then_case)
        if s.else_case is not None:
            self.line("else:")
            yield from self.body(s.else_case)

    def s_Prefetch(self, s):
        self.line(f"T.prefetch({self.buffer_name(s.buffer)}, [{self._region(s.bounds)}])")

    # -- functions ------------------------------------------------------------------------------
    def _attr_value(self, v) -> str:
        if isinstance(v, bool):
            return f"T.bool({v})"
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(self._attr_value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{self._attr_value(k)}: {self._attr_value(x)}" for k, x in v.items()) + "}"
        if isinstance(v, E.PrimExpr):
            return self.expr(v)
        return json.dumps(str(v))

    def func(self, f, name: str | None = None) -> str:
        name = name or f.attrs.get("global_symbol") or "main"
        if not isinstance(name, str):
            name = getattr(name, "value", str(name))
        params = []
        header = []
        shape_var_decls = []
        match_lines = []
        buffer_map = f.buffer_map
        for p in f.params:
            b = buffer_map.get(p)
            if b is None:
                params.append(f"{self.var_name(p)}: {_dtype_ann(p.dtype)}")
                continue
            self.data_owner[id(b.data)] = b
            if _all_const(b):
                params.append(f'{self.buffer_name(b)}: T.Buffer({self._shape(b.shape)}, "{b.dtype}")')
            else:
                pname = self.namer.get(p, "var_" + b.name if p.name == b.name else p.name)
                params.append(f"{pname}: T.handle")
                for d in list(b.shape) + list(b.strides) + [b.elem_offset]:
                    for v in _free_vars(d):
                        if not self.namer.known(v) and v not in f.params:
                            shape_var_decls.append(f"{self.var_name(v)} = {_dtype_ann(v.dtype)}()")
                parts = [pname, self._shape(b.shape)]
                if b.dtype != "float32":
                    parts.append(f'"{b.dtype}"')
                if b.strides:
                    parts.append(f"strides={self._shape(b.strides)}")
                if not (isinstance(b.elem_offset, E.IntImm) and b.elem_offset.value == 0):
                    parts.append(f"elem_offset={self.expr(b.elem_offset)}")
                match_lines.append(f"{self.buffer_name(b)} = T.match_buffer({', '.join(parts)})")
        attrs = {k: v for k, v in f.attrs.items()}
        if attrs:
            items = ", ".join(f'"{k}": {self._attr_value(v)}' for k, v in sorted(attrs.items()))
            header.append(f"T.func_attr({{{items}}})")
        # buffers used but never declared (e.g. flattened views of parameters)
        implicit = _implicit_buffers(f)
        alloc_vars = _alloc_vars(f.body)
        top_implicit = []
        for b in implicit:
            if id(b.data) in alloc_vars:
                self.implicit_after_alloc.setdefault(id(b.data), []).append(b)
            else:
                top_implicit.append(b)
        self.indent = 1
        for h in header + shape_var_decls + match_lines:
            self.line(h)
        for b in top_implicit:
            self.line(f"{self.buffer_name(b)} = {self.buffer_decl(b)}")
        n = len(self.lines)
        self.stmt(f.body)
        if len(self.lines) == n:
            self.line("T.evaluate(0)")
        body = "\n".join(self.lines)
        return f"@T.prim_func\ndef {name}({', '.join(params)}):\n{body}"


def _end(mn, ext):
    """``min + extent``, simplified so that ``range(a, a + (b - a))`` prints as ``range(a, b)``."""
    try:
        from ..arith import Analyzer
        return Analyzer().simplify(mn + ext)
    except Exception:  # printing must not fail because of the simplifier
        return mn + ext


def _is_zero(e) -> bool:
    return isinstance(e, E.IntImm) and e.value == 0


def _free_vars(e):
    out = []

    def visit(n):
        if isinstance(n, E.Var) and n not in out:
            out.append(n)
    post_order_visit(e, visit)
    return out


def _all_const(b) -> bool:
    dims = list(b.shape) + list(b.strides) + [b.elem_offset]
    return all(isinstance(d, E.IntImm) for d in dims)


def _implicit_buffers(f):
    defined = {id(b) for b in f.buffer_map.values()}
    used = []
    seen = set()

    class V(StmtExprVisitor):
        def visit_DeclBuffer(self, s):
            defined.add(id(s.buffer))
            self.generic_visit(s)

        def visit_BufferRealize(self, s):
            defined.add(id(s.buffer))
            self.generic_visit(s)

        def _use(self, b):
            if id(b) not in seen:
                seen.add(id(b))
                used.append(b)

        def visit_BufferLoad(self, e):
            self._use(e.buffer)
            self.generic_visit(e)

        def visit_BufferStore(self, s):
            self._use(s.buffer)
            self.generic_visit(s)

    V()(f.body)
    return [b for b in used if id(b) not in defined]


def _alloc_vars(body):
    out = set()

    def visit(n):
        if isinstance(n, S.Allocate):
            out.add(id(n.buffer_var))
    post_order_visit(body, visit)
    return out


# --------------------------------------------------------------------------------------------
# public entry points
# --------------------------------------------------------------------------------------------
def expr_to_str(e) -> str:
    """Text of one expression, e.g. ``n + 1``."""
    return TIRPrinter().expr(e)


def stmt_to_str(s) -> str:
    """Text of a statement (no function header), one TIR statement per line."""
    p = TIRPrinter()
    p.stmt(s)
    return "\n".join(p.lines)


def func_to_str(f, name: str | None = None) -> str:
    """TVMScript text of a PrimFunc."""
    return TIRPrinter().func(f, name)
