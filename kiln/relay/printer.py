"""Relay text format printer (TVM's ``astext``), version 0.0.5.

    #[version = "0.0.5"]
    def @main(%x: Tensor[(1, 3), float32]) -> Tensor[(1, 3), float32] {
      %0 = add(%x, %x) /* ty=Tensor[(1, 3), float32] */;
      multiply(%0, 2f) /* ty=Tensor[(1, 3), float32] */
    }

Every call, tuple and projection in a dataflow graph is bound to a numbered temporary
(``%0``) and later uses refer to the temporary, so shared subgraphs print once. Scalar constants
print inline (``1f``, ``2i64``); other constants go to the metadata table (``meta[relay.Constant][0]``),
printed after ``#[metadata]`` when ``show_meta_data`` is set (see ``metadata.py`` for its format).
Call attributes print as ``key=value`` for the fields that differ from the op's declared defaults.
"""
from __future__ import annotations

import json
import math
import re

import numpy as np

from ..ir.attrs import Attrs, DictAttrs
from ..ir.expr import GlobalVar
from ..ir.node import Node
from ..ir.op import Op
from ..ir.type_printer import type_to_str
from .expr import Call, Constant, Function, If, Let, Tuple, TupleGetItem, Var
from .expr_functor import post_order_dataflow
from .metadata import MetaTable
from .analysis.graph import edge_counts

VERSION = "0.0.5"
_NAME_OK = re.compile(r"[^A-Za-z0-9_]")

_SUFFIX = {"int64": "i64", "int32": "", "int16": "i16", "int8": "i8", "uint8": "u8", "uint16": "u16",
           "uint32": "u32", "uint64": "u64", "float32": "f", "float64": "f64", "float16": "f16"}

META_OMITTED = (
    "/* For debugging purposes the metadata section has been omitted.\n"
    " * If you would like to see the full metadata section you can set the \n"
    " * option to `True` when invoking `astext`. \n"
    " */"
)


def format_float(value: float, bits: int = 64) -> str:
    """Shortest text that reads back to the same float of that width."""
    text = str(np.float32(value)) if bits == 32 else (str(np.float16(value)) if bits == 16 else repr(float(value)))
    if text.endswith(".0"):
        text = text[:-2]
    return text


def scalar_literal(value: np.ndarray) -> str | None:
    """Inline text of a rank-0 constant, or None when it must go to the metadata table."""
    dtype = str(value.dtype)
    v = value.item()
    if dtype == "bool":
        return "True" if v else "False"
    if dtype not in _SUFFIX:
        return None
    if dtype.startswith("float"):
        if not math.isfinite(v):
            return None
        return format_float(v, int(dtype[5:])) + _SUFFIX[dtype]
    return str(int(v)) + _SUFFIX[dtype]


def attr_value_to_str(value) -> str:
    """Text of one attribute value: ints, ``0.5f`` floats, quoted strings, ``[..]`` lists, None."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nanf"
        if math.isinf(value):
            return "inff" if value > 0 else "-inff"
        return format_float(value) + "f"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(attr_value_to_str(v) for v in value) + "]"
    if isinstance(value, np.ndarray):
        return attr_value_to_str(value.tolist())
    if isinstance(value, Node):
        text = getattr(value, "astext", None)
        if text is not None:
            return text()
    return json.dumps(str(value))


def _print_operands(e):
    """Operands bound before ``e`` is printed (an if's condition too); None for atoms and blocks."""
    if isinstance(e, Call):
        return (e.op, *e.args) if not isinstance(e.op, Op) else e.args
    if isinstance(e, Tuple):
        return e.fields
    if isinstance(e, TupleGetItem):
        return (e.tuple_value,)
    return None


class _Scope:
    __slots__ = ("lines", "memo_keys", "within")

    def __init__(self, within=None):
        self.lines: list[str] = []
        self.memo_keys: list = []
        self.within = within  # edge counts inside this scope; None: everything may be bound here


class RelayTextPrinter:
    """Prints Relay expressions, functions and modules. One printer shares one metadata table."""

    def __init__(self, show_meta_data: bool = True, annotate=None, meta: MetaTable | None = None):
        self.show_meta_data = show_meta_data
        self.annotate = annotate
        self.meta = meta if meta is not None else MetaTable()
        self.var_names: dict = {}
        self.used_names: set = set()
        self.next_suffix: dict = {}
        self.type_var_names: dict = {}
        self.memo: dict = {}
        self.scopes: list[_Scope] = []
        self.temp = 0
        self.total: dict = {}

    # -- names -----------------------------------------------------------------------------------
    def _unique(self, hint: str) -> str:
        name = _NAME_OK.sub("_", hint or "")
        if not name or name[0].isdigit():
            name = "v" + name
        if name not in self.used_names:
            self.used_names.add(name)
            return name
        # the first free suffix; every suffix below the last one given for this name was taken then
        # and still is, so the search resumes there (linear, not quadratic, in names sharing a hint:
        # FuseOps names every primitive function's parameters p0, p1, ...)
        i = self.next_suffix.get(name, 1)
        while f"{name}_{i}" in self.used_names:
            i += 1
        self.next_suffix[name] = i + 1
        unique = f"{name}_{i}"
        self.used_names.add(unique)
        return unique

    def var_name(self, v: Var) -> str:
        name = self.var_names.get(v)
        if name is None:
            name = "%" + self._unique(v.name_hint)
            self.var_names[v] = name
        return name

    def print_type(self, ty) -> str:
        return type_to_str(ty, self.type_var_names)

    def _type_comment(self, e) -> str:
        ty = getattr(e, "_checked_type_", None)
        parts = []
        if ty is not None:
            parts.append(f"/* ty={self.print_type(ty)} */")
        if self.annotate is not None:
            extra = self.annotate(e)
            if extra:
                parts.append(f"/* {extra} */")
        return (" " + " ".join(parts)) if parts else ""

    # -- scopes ----------------------------------------------------------------------------------
    def _push(self, root=None) -> _Scope:
        if root is None or not self.scopes:
            s = _Scope()
            if root is not None:
                self.total = edge_counts(root)
        else:
            s = _Scope(edge_counts(root))
        self.scopes.append(s)
        return s

    def _pop(self) -> _Scope:
        s = self.scopes.pop()
        for k in s.memo_keys:
            self.memo.pop(k, None)
        return s

    def _emit(self, line: str) -> None:
        self.scopes[-1].lines.append(line)

    # -- expressions -----------------------------------------------------------------------------
    def atom(self, e) -> str:
        """Text that names ``e``: an atom, or a temporary bound in the current scope."""
        found = self.memo.get(e)
        if found is not None:
            return found
        if isinstance(e, (Var, GlobalVar, Op, Constant)) or type(e).__name__ == "Constructor":
            return self.inline(e)
        # bind the operands children-first from a work list, so depth costs no interpreter stack
        for node in post_order_dataflow(e, self.memo, _print_operands):
            self.atom(node)
        scope = self._target_scope(e)
        depth = self.scopes.index(scope)
        inner, self.scopes = self.scopes[depth + 1:], self.scopes[:depth + 1]
        try:
            text = self.inline(e)
        finally:
            self.scopes += inner
        name = f"%{self.temp}"
        self.temp += 1
        scope.lines.append(f"{name} = {text}{self._type_comment(e)};")
        self.memo[e] = name
        scope.memo_keys.append(e)
        return name

    def _target_scope(self, e) -> _Scope:
        """The innermost open scope holding every use of ``e``: a shared node prints once, outside."""
        total = self.total.get(e, 1) if self.total else 1
        for scope in reversed(self.scopes):
            if scope.within is None or scope.within.get(e, 0) >= total:
                return scope
        return self.scopes[0]

    def inline(self, e) -> str:
        """Text of ``e`` itself; its operands are printed (and bound) first."""
        if isinstance(e, Var):
            return self.var_name(e)
        if isinstance(e, GlobalVar):
            return "@" + _NAME_OK.sub("_", e.name_hint)
        if isinstance(e, Op):
            return e.name
        if isinstance(e, Constant):
            return self.print_constant(e)
        if isinstance(e, Call):
            return self.print_call(e)
        if isinstance(e, Tuple):
            items = [self.atom(f) for f in e.fields]
            if len(items) == 1:
                return f"({items[0]},)"
            return "(" + ", ".join(items) + ")"
        if isinstance(e, TupleGetItem):
            return f"{self.atom(e.tuple_value)}.{e.index}"
        if isinstance(e, Function):
            return self.print_function(e, "fn ")
        if isinstance(e, If):
            cond = self.atom(e.cond)
            t = self.print_block(e.true_branch)
            f = self.print_block(e.false_branch)
            return f"if ({cond}) {t} else {f}"
        if isinstance(e, Let):
            return self.print_block(e)
        if hasattr(e, "_print_text"):  # nodes defined outside the core (reference cells)
            return e._print_text(self.atom)
        if type(e).__name__ == "Constructor":
            return _NAME_OK.sub("_", e.name_hint)
        if type(e).__name__ == "Match":
            return self.print_match(e)
        raise TypeError(f"cannot print {type(e).__name__}")

    # -- ADTs (kiln.relay.adt) --------------------------------------------------------------------
    def print_match(self, m) -> str:
        data = self.atom(m.data)
        lines = [f"{self.print_pattern(c.lhs)} => {self.print_block(c.rhs)}," for c in m.clauses]
        inner = "\n".join("  " + ln for text in lines for ln in text.split("\n"))
        return f"match{'' if m.complete else '?'} ({data}) {{\n{inner}\n}}"

    def print_pattern(self, p) -> str:
        kind = type(p).__name__
        if kind == "PatternVar":
            return self.var_name(p.var)
        if kind == "PatternTuple":
            return "(" + ", ".join(self.print_pattern(q) for q in p.patterns) + ")"
        if kind == "PatternConstructor":
            name = _NAME_OK.sub("_", p.constructor.name_hint)
            if not p.patterns:
                return name
            return name + "(" + ", ".join(self.print_pattern(q) for q in p.patterns) + ")"
        return "_"

    def print_type_data(self, data) -> str:
        for tv in data.type_vars:
            self.type_var_names.setdefault(tv, self._unique_type_var(tv.name_hint))
        head = "type " + data.header.name_hint
        if data.type_vars:
            head += "[" + ", ".join(self.type_var_names[tv] for tv in data.type_vars) + "]"
        ctors = []
        for c in data.constructors:
            args = ", ".join(self.print_type(t) for t in c.inputs)
            ctors.append(f"  {c.name_hint}({args})," if c.inputs else f"  {c.name_hint},")
        return head + " {\n" + "\n".join(ctors) + "\n}"

    def print_constant(self, c: Constant) -> str:
        value = c.numpy()
        if value.ndim == 0:
            lit = scalar_literal(value)
            if lit is not None:
                return lit
        return f"meta[relay.Constant][{self.meta.add('relay.Constant', c)}]"

    def print_call(self, call: Call) -> str:
        op = call.op
        op_text = op.name if isinstance(op, Op) else self.atom(op)
        args = [self._arg(a) for a in call.args]
        args += self.print_attrs(call.attrs)
        return f"{op_text}({', '.join(args)})"

    def _arg(self, a) -> str:
        text = self.atom(a)
        if isinstance(a, Constant) and getattr(a, "_checked_type_", None) is not None:
            text += self._type_comment(a)
        return text

    def print_attrs(self, attrs) -> list:
        if attrs is None:
            return []
        if isinstance(attrs, Attrs):
            items = attrs.non_default_items()
        elif isinstance(attrs, (DictAttrs, dict)):
            items = list(attrs.items())
        else:
            items = [(k, getattr(attrs, k)) for k in getattr(attrs, "keys", lambda: [])()]
        return [f"{k}={attr_value_to_str(v)}" for k, v in items]

    def print_block(self, body) -> str:
        """``{ bindings; result }`` for a scope (function body, if branch, let chain)."""
        self._push(body)
        result = self.print_scope_body(body)
        scope = self._pop()
        lines = scope.lines + [result]
        inner = "\n".join("  " + ln for text in lines for ln in text.split("\n"))
        return "{\n" + inner + "\n}"

    def print_scope_body(self, body) -> str:
        while isinstance(body, Let) and body not in self.memo:
            v = body.var
            head = f"let {self.var_name(v)}"
            if v.type_annotation is not None:
                head += f": {self.print_type(v.type_annotation)}"
            value = self.inline(body.value)
            self._emit(f"{head} = {value}{self._type_comment(body.value)};")
            if not isinstance(body.value, (Var, GlobalVar, Op, Constant)):
                self.memo[body.value] = self.var_name(v)
                self.scopes[-1].memo_keys.append(body.value)
            body = body.body
        found = self.memo.get(body)
        if found is not None:
            return found
        return self.inline(body) + self._type_comment(body)

    def print_function(self, fn: Function, head: str) -> str:
        if fn.type_params:
            for tp in fn.type_params:
                self.type_var_names.setdefault(tp, self._unique_type_var(tp.name_hint))
            head += "[" + ", ".join(self.type_var_names[tp] for tp in fn.type_params) + "]"
        params = []
        for p in fn.params:
            text = self.var_name(p)
            if p.type_annotation is not None:
                text += f": {self.print_type(p.type_annotation)}"
            params.append(text)
        if fn.attrs is not None:
            params += [f"{k}={attr_value_to_str(v)}" for k, v in fn.attrs.items()]
        text = f"{head}({', '.join(params)})"
        if fn.ret_type is not None:
            text += f" -> {self.print_type(fn.ret_type)}"
        return text + " " + self.print_block(fn.body)

    def _unique_type_var(self, hint: str) -> str:
        name = _NAME_OK.sub("_", hint or "t") or "t"
        used = set(self.type_var_names.values())
        base, i = name, 0
        while name in used:
            i += 1
            name = f"{base}{i}"
        return name

    # -- top level -------------------------------------------------------------------------------
    def print_def(self, gv: GlobalVar, fn: Function) -> str:
        self.temp = 0
        self.var_names = {}
        self.used_names = set()
        self.next_suffix = {}
        return self.print_function(fn, "def @" + _NAME_OK.sub("_", gv.name_hint))

    def finish(self, body: str) -> str:
        text = f'#[version = "{VERSION}"]\n{body}'
        if len(self.meta):
            if self.show_meta_data:
                text += "\n#[metadata]\n" + self.meta.to_json()
            else:
                text += "\n" + META_OMITTED
        return text


def module_to_text(mod, show_meta_data: bool = True, annotate=None) -> str:
    """The whole module: one ``def`` per Relay function; TIR functions as their own text in comments."""
    p = RelayTextPrinter(show_meta_data, annotate)
    parts = []
    for data in getattr(mod, "type_definitions", {}).values():
        if hasattr(data, "constructors"):
            parts.append(p.print_type_data(data))
    for gv, fn in mod.functions.items():
        if isinstance(fn, Function):
            parts.append(p.print_def(gv, fn))
        else:
            tir_text = fn.astext() if hasattr(fn, "astext") else repr(fn)
            parts.append(f"/* @{gv.name_hint} is a TIR PrimFunc:\n{tir_text}\n*/")
    return p.finish("\n".join(parts))


def expr_to_text(expr, show_meta_data: bool = True, annotate=None) -> str:
    """An expression on its own: bindings, then the result."""
    p = RelayTextPrinter(show_meta_data, annotate)
    p._push(expr)
    result = p.print_scope_body(expr)
    scope = p._pop()
    body = "\n".join(scope.lines + [result])
    return p.finish(body)
