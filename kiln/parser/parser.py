"""Recursive-descent parser for the Relay text format (what ``astext`` prints).

Bindings ``%0 = e;`` name graph nodes (later uses share the node); ``let %x = e;`` builds a Let.
Call attributes are typed by the op's registered attrs class; ``meta[relay.Constant][i]`` reads the
metadata table (from the ``#[metadata]`` section or ``init_meta_table``).
"""
from __future__ import annotations

import json
import re

import numpy as np

from ..ir.attrs import AttrsError, DictAttrs
from ..ir.expr import GlobalVar
from ..ir.module import IRModule
from ..ir.op import Op, _OPS, _unknown_op_message
from ..ir.span import SourceName, Span
from ..ir.type import FuncType, TensorType, TupleType, TypeVar, IncompleteType
from ..runtime.dtype import parse_dtype
from ..error import KilnError, ParseError, DataTypeError
from .lexer import error_at, tokenize
from ..relay.metadata import MetaTable
from ..tir.expr import Any, SizeVar
from ..relay.expr import Function, Var, Let, Tuple, Call, TupleGetItem, Constant, If

_SUFFIX_DTYPE = {"f": "float32", "f16": "float16", "f32": "float32", "f64": "float64", "i8": "int8",
                 "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8", "u16": "uint16",
                 "u32": "uint32", "u64": "uint64", "u1": "bool"}


def _split_metadata(source: str):
    idx = source.find("#[metadata]")
    if idx < 0:
        return source, None
    return source[:idx] + " " * 0, source[idx + len("#[metadata]"):]


# identifiers that start a primary expression other than an operator call
_NOT_OPS = frozenset(("True", "False", "fn", "if", "meta", "let"))

_NUMBER = re.compile(r"^(-?(?:inf|nan|\d+\.\d*|\d+)(?:[eE][+-]?\d+)?)"
                     r"(f16|f32|f64|f|i8|i16|i32|i64|u8|u16|u32|u64|u1)?$")


class _Number:
    __slots__ = ("value", "dtype", "is_float")

    def __init__(self, value, dtype, is_float):
        self.value, self.dtype, self.is_float = value, dtype, is_float


class Parser:
    def __init__(self, source: str, source_name: str = "from_string", meta_table=None):
        self.full_source = source
        self.source_name = source_name
        body, meta_text = _split_metadata(source)
        self.source = body
        self.tokens = tokenize(body, source_name)
        self.i = 0
        if meta_text is not None and meta_text.strip():
            table = MetaTable.from_json(meta_text)
            if meta_table is not None:
                for kind, nodes in _meta_dict(meta_table).items():
                    table.table.setdefault(kind, list(nodes))
            self.meta = table
        else:
            self.meta = MetaTable(_meta_dict(meta_table)) if meta_table is not None else None
        self.sname = SourceName(source_name)
        self.scopes: list[dict] = []
        self.type_scopes: list[dict] = []
        self.globals: dict[str, GlobalVar] = {}

    # -- token helpers ------------------------------------------------------------------------------
    @property
    def tok(self):
        return self.tokens[self.i]

    def peek(self, k: int = 1):
        return self.tokens[min(self.i + k, len(self.tokens) - 1)]

    def error(self, message: str, tok=None) -> ParseError:
        tok = tok or self.tok
        return error_at(self.source, self.source_name, tok.pos, message)

    def at(self, text: str) -> bool:
        t = self.tok
        return t.text == text and t.kind in ("punct", "arrow", "ident")

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.i += 1
            return True
        return False

    def expect(self, text: str, what: str = ""):
        if not self.at(text):
            got = self.tok.text or "end of input"
            raise self.error(f"expected '{text}'{' ' + what if what else ''} but found '{got}'")
        tok = self.tok
        self.i += 1
        return tok

    def span(self, tok) -> Span:
        return Span(self.sname, tok.line, tok.col)

    # -- module ---------------------------------------------------------------------------------------
    def parse_module(self, init_module=None) -> IRModule:
        mod = IRModule() if init_module is None else init_module.copy()
        for gv in mod.get_global_vars():
            self.globals[gv.name_hint] = gv
        if self.tok.kind == "version":
            self.i += 1
        # declare every def first so functions can call each other in any order
        for k, t in enumerate(self.tokens):
            if t.kind == "ident" and t.text == "def" and self.tokens[k + 1].kind == "global":
                name = self.tokens[k + 1].text[1:]
                self.globals.setdefault(name, GlobalVar(name))
        defined = set()
        if self.tok.kind != "eof" and not (self.tok.kind == "ident" and self.tok.text in ("def", "type", "extern")):
            expr = self.parse_body_until_eof()
            mod = IRModule.from_expr(expr, functions=mod.functions)
            return mod
        while self.tok.kind != "eof":
            t = self.tok
            if t.kind == "ident" and t.text == "def":
                self.i += 1
                gtok = self.tok
                if gtok.kind != "global":
                    raise self.error("expected a global function name like @main after 'def'")
                self.i += 1
                name = gtok.text[1:]
                if name in defined:
                    raise self.error(f"function @{name} is defined twice", gtok)
                defined.add(name)
                func = self.parse_function_rest(gtok)
                mod[self.globals[name]] = func
            elif t.kind == "ident" and t.text in ("type", "extern"):
                raise self.error("algebraic data types (type definitions) are not supported by kiln's parser")
            else:
                raise self.error(f"expected 'def' at the top level but found '{t.text}'")
        return mod

    def parse_body_until_eof(self):
        self.scopes.append({})
        try:
            expr = self.parse_body(end=None)
        finally:
            self.scopes.pop()
        if self.tok.kind != "eof":
            raise self.error(f"unexpected '{self.tok.text}' after the expression")
        return expr

    # -- functions ------------------------------------------------------------------------------------
    def parse_function_rest(self, head_tok):
        type_params = []
        self.type_scopes.append({})
        self.scopes.append({})
        try:
            if self.accept("["):
                while True:
                    t = self.tok
                    if t.kind != "ident":
                        raise self.error("expected a type parameter name")
                    self.i += 1
                    tv = TypeVar(t.text)
                    self.type_scopes[-1][t.text] = tv
                    type_params.append(tv)
                    if not self.accept(","):
                        break
                self.expect("]")
            self.expect("(", "to open the parameter list")
            params, attrs = [], {}
            while not self.at(")"):
                t = self.tok
                if t.kind == "local":
                    if attrs:
                        raise self.error("parameters must come before function attributes")
                    self.i += 1
                    ann = self.parse_type() if self.accept(":") else None
                    params.append(self.new_var(t, ann))
                elif t.kind == "ident" and self.peek().text == "=":
                    self.i += 2
                    attrs[t.text] = self.parse_attr_value()
                else:
                    raise self.error(f"expected a parameter like %x or an attribute like key=value, found '{t.text}'")
                if not self.accept(","):
                    break
            self.expect(")", "to close the parameter list")
            ret_type = self.parse_type() if self.accept("->") else None
            self.expect("{", "to open the function body")
            body = self.parse_body(end="}")
            self.expect("}", "to close the function body")
        finally:
            self.scopes.pop()
            self.type_scopes.pop()
        return Function(params, body, ret_type, type_params, DictAttrs(attrs) if attrs else None,
                        span=self.span(head_tok))

    def new_var(self, tok, ann):
        name = tok.text[1:]
        if name.isdigit():
            raise self.error(f"%{name} is a graph binding name; variables need a name that is not a number", tok)
        v = Var(name, ann, span=self.span(tok))
        self.scopes[-1][name] = v
        return v

    # -- bodies -----------------------------------------------------------------------------------
    def parse_body(self, end):
        """``(binding ;)* expr`` up to ``end`` ('}' or None for end of input). Bindings are read in a
        loop (a body of 100,000 bindings costs no interpreter stack); lets nest from the inside out."""
        lets = []  # (var, value, let token), outermost first
        try:
            while True:
                t = self.tok
                if t.kind == "ident" and t.text == "let":
                    self.i += 1
                    vtok = self.tok
                    if vtok.kind != "local":
                        raise self.error("expected a variable like %x after 'let'")
                    self.i += 1
                    ann = self.parse_type() if self.accept(":") else None
                    self.expect("=", "in the let binding")
                    value = self.parse_expr()
                    self.expect(";", "after the let binding")
                    self.scopes.append({})
                    lets.append((self.new_var(vtok, ann), value, t))
                    continue
                if t.kind == "local" and t.text[1:].isdigit() and self.peek().text == "=":
                    self.i += 2
                    value = self.parse_expr()
                    self.expect(";", f"after the binding of {t.text}")
                    self.scopes[-1][t.text[1:]] = value
                    continue
                if (end is not None and self.at(end)) or t.kind == "eof":
                    raise self.error("expected an expression (the body's result)")
                body = self.parse_expr()
                break
        finally:
            del self.scopes[len(self.scopes) - len(lets):]
        for var, value, t in reversed(lets):
            body = Let(var, value, body, span=self.span(t))
        return body

    # -- expressions ------------------------------------------------------------------------------
    # Calls, tuples and parentheses nest through an explicit stack of open frames, not recursion, so
    # ``f(f(f(...)))`` nested 100,000 deep parses. Frames: ["call", callee, token, args, attrs] and
    # ["tuple", token, fields]. Blocks, functions and ifs recurse (one level per nested scope).
    def parse_expr(self):
        stack: list = []
        while True:
            expr = self._open_primary(stack)
            if expr is None:
                continue  # a frame was opened; parse its first element
            while True:
                expr, opened = self._postfix(expr, stack)
                if opened:
                    break
                if not stack:
                    return expr
                frame = stack[-1]
                if frame[0] == "call":
                    frame[3].append(expr)
                    more = self.accept(",") and self._call_args_more(frame)
                    if not more and not frame[5]:
                        self.expect(")", "to close the argument list")
                    if more:
                        break
                    stack.pop()
                    expr = self._finish_call(frame)
                else:  # tuple or parenthesized expression
                    fields = frame[2]
                    fields.append(expr)
                    if len(fields) == 1 and self.accept(")"):
                        stack.pop()
                        continue  # (e) is e
                    if self.accept(",") and not self.at(")"):
                        break
                    self.expect(")", "to close the tuple")
                    stack.pop()
                    expr = Tuple(fields, span=self.span(frame[1]))

    def _open_primary(self, stack):
        """A complete primary expression, or None after opening a frame (a call's or a tuple's)."""
        t = self.tok
        if self.at("("):
            self.i += 1
            if self.accept(")"):
                return Tuple([], span=self.span(t))
            stack.append(["tuple", t, []])
            return None
        if t.kind == "ident" and t.text not in _NOT_OPS:
            self.i += 1
            if t.text not in _OPS:
                raise self.error(_unknown_op_message(t.text), t)
            op = Op.get(t.text)
            if not self.at("("):
                return op
            frame = ["call", op, t, [], {}, False]
            self.i += 1
            if self._call_args_more(frame):
                stack.append(frame)
                return None
            if not frame[5]:
                self.expect(")", "to close the argument list")
            return self._finish_call(frame)
        return self.parse_primary()

    def _postfix(self, expr, stack):
        """Apply ``(args)`` calls and ``.i`` projections; (expr, True) when a call's frame was opened."""
        while True:
            t = self.tok
            if self.at("("):
                frame = ["call", expr, t, [], {}, False]
                self.i += 1
                if self._call_args_more(frame):
                    stack.append(frame)
                    return expr, True
                if not frame[5]:
                    self.expect(")", "to close the argument list")
                expr = self._finish_call(frame)
            elif self.at("."):
                self.i += 1
                it = self.tok
                if it.kind != "number" or not it.text.isdigit():
                    raise self.error("expected a tuple index after '.'")
                self.i += 1
                expr = TupleGetItem(expr, int(it.text), span=self.span(it))
            else:
                return expr, False

    def _call_args_more(self, frame) -> bool:
        """Read attributes up to the next positional argument; True when one follows, False when the
        list ended (frame[5] is set once the closing ')' was consumed here)."""
        attrs = frame[4]
        while not self.at(")"):
            t = self.tok
            if t.kind == "ident" and self.peek().text == "=" and self.peek().kind == "punct":
                self.i += 2
                if t.text in attrs:
                    raise self.error(f"attribute {t.text} given twice", t)
                attrs[t.text] = (self.parse_attr_value(), t)
                if not self.accept(","):
                    break
                continue
            if attrs:
                raise self.error("positional arguments must come before attributes", t)
            return True
        self.expect(")", "to close the argument list")
        frame[5] = True
        return False

    def _finish_call(self, frame):
        _, callee, t, args, attrs, _closed = frame
        if isinstance(callee, Op):
            return Call(callee, args, self.make_attrs(callee, attrs, t), span=self.span(t))
        if attrs:
            raise self.error("only operators take attributes (key=value) in a call", t)
        return Call(callee, args, span=self.span(t))

    def parse_call_args(self):
        """``(args, key=value attrs)`` of one call (its arguments parsed with :meth:`parse_expr`)."""
        self.expect("(")
        frame = ["call", None, self.tok, [], {}, False]
        while self._call_args_more(frame):
            frame[3].append(self.parse_expr())
            if not self.accept(","):
                break
        if not frame[5]:
            self.expect(")", "to close the argument list")
        return frame[3], frame[4]

    def parse_primary(self):
        t = self.tok
        if t.kind == "local":
            self.i += 1
            name = t.text[1:]
            for scope in reversed(self.scopes):
                if name in scope:
                    return scope[name]
            if name.isdigit():
                raise self.error(f"{t.text} is used before it is bound (no '{t.text} = ...;' above)", t)
            raise self.error(f"unbound variable {t.text}", t)
        if t.kind == "global":
            self.i += 1
            gv = self.globals.get(t.text[1:])
            if gv is None:
                raise self.error(f"unknown global function {t.text}", t)
            return gv
        if t.kind == "number":
            self.i += 1
            num = self.number(t)
            return Constant(np.array(num.value, dtype=num.dtype), span=self.span(t))
        if t.kind == "string":
            raise self.error("a string is not an expression (strings are only attribute values)")
        if self.at("{"):
            return self.parse_block()
        if self.at("("):
            self.i += 1
            if self.accept(")"):
                return Tuple([], span=self.span(t))
            first = self.parse_expr()
            if self.accept(")"):
                return first
            fields = [first]
            while self.accept(","):
                if self.at(")"):
                    break
                fields.append(self.parse_expr())
            self.expect(")", "to close the tuple")
            return Tuple(fields, span=self.span(t))
        if t.kind == "ident":
            if t.text in ("True", "False"):
                self.i += 1
                return Constant(np.array(t.text == "True"), span=self.span(t))
            if t.text == "fn":
                self.i += 1
                return self.parse_function_rest(t)
            if t.text == "if":
                self.i += 1
                self.expect("(", "after 'if'")
                cond = self.parse_expr()
                self.expect(")", "after the if condition")
                tb = self.parse_block()
                if not (self.tok.kind == "ident" and self.tok.text == "else"):
                    raise self.error("expected 'else' after the true branch of an if")
                self.i += 1
                fb = self.parse_block()
                return If(cond, tb, fb, span=self.span(t))
            if t.text == "meta":
                return self.parse_meta()
            if t.text in ("let",):
                raise self.error("'let' may only start a binding in a body")
            # an operator call
            self.i += 1
            if t.text not in _OPS:
                raise self.error(_unknown_op_message(t.text), t)
            op = Op.get(t.text)
            if not self.at("("):
                return op
            args, attrs = self.parse_call_args()
            return Call(op, args, self.make_attrs(op, attrs, t), span=self.span(t))
        raise self.error(f"expected an expression but found '{t.text or 'end of input'}'")

    def parse_block(self):
        self.expect("{")
        self.scopes.append({})
        try:
            body = self.parse_body(end="}")
        finally:
            self.scopes.pop()
        self.expect("}")
        return body

    def parse_meta(self):
        start = self.tok
        self.i += 1
        self.expect("[", "after 'meta'")
        kt = self.tok
        if kt.kind != "ident":
            raise self.error("expected a metadata kind like relay.Constant")
        self.i += 1
        self.expect("]")
        self.expect("[")
        it = self.tok
        if it.kind != "number" or not it.text.isdigit():
            raise self.error("expected a metadata index")
        self.i += 1
        self.expect("]")
        if self.meta is None:
            raise self.error("meta[...] is used but no metadata table was given (no #[metadata] section and "
                             "no init_meta_table)", start)
        try:
            node = self.meta.get(kt.text, int(it.text))
        except (KeyError, IndexError):
            n = len(self.meta.table.get(kt.text, []))
            raise self.error(f"metadata table has no entry {kt.text}[{it.text}] ({n} entries of that kind)",
                             start) from None
        return node

    # -- attributes and literals -------------------------------------------------------------------
    def make_attrs(self, op, attrs: dict, tok):
        values = {k: v for k, (v, _) in attrs.items()}
        if op.attrs_type is None:
            if values:
                raise self.error(f"operator {op.name} takes no attributes, got {sorted(values)}",
                                 next(iter(attrs.values()))[1])
            return None
        try:
            return op.make_attrs(**values)
        except (AttrsError, KilnError, TypeError, ValueError) as err:
            bad = [t for k, (v, t) in attrs.items() if k not in op.attrs_type._schema]
            raise self.error(f"bad attributes for {op.name}: {err}", bad[0] if bad else tok) from None

    def parse_attr_value(self):
        t = self.tok
        if t.kind == "number":
            self.i += 1
            num = self.number(t)
            return float(num.value) if num.is_float else (bool(num.value) if num.dtype == "bool" else int(num.value))
        if t.kind == "string":
            self.i += 1
            return json.loads(t.text)
        if self.at("[") or self.at("("):
            close = "]" if self.tok.text == "[" else ")"
            self.i += 1
            items = []
            while not self.at(close):
                items.append(self.parse_attr_value())
                if not self.accept(","):
                    break
            self.expect(close)
            return tuple(items)
        if t.kind == "ident":
            if t.text in ("True", "False"):
                self.i += 1
                return t.text == "True"
            if t.text in ("None", "null", "nullptr"):
                self.i += 1
                return None
            if t.text == "meta":
                return self.parse_meta()
            # a bare dtype or identifier reads as a string
            self.i += 1
            return t.text
        raise self.error(f"expected an attribute value but found '{t.text}'")

    def number(self, t) -> _Number:
        m = _NUMBER.match(t.text)
        if m is None:
            raise self.error(f"bad number literal {t.text!r}", t)
        body, suffix = m.group(1), m.group(2)
        if suffix:
            dtype = _SUFFIX_DTYPE[suffix]
        elif any(c in body for c in ".eEn"):
            dtype = "float32"
        else:
            dtype = "int32"
        is_float = dtype.startswith("float")
        try:
            if is_float:
                value = float(body)
            else:
                if any(c in body for c in ".eEn"):
                    raise ValueError(f"an {dtype} literal cannot have a fraction, exponent, inf or nan")
                value = int(body)
                if dtype == "bool":
                    if value not in (0, 1):
                        raise ValueError("a bool literal is 0 or 1")
                else:
                    info = np.iinfo(np.dtype(dtype))
                    if not info.min <= value <= info.max:
                        raise ValueError(f"{value} does not fit in {dtype}")
        except ValueError as err:
            raise self.error(f"bad number literal {t.text!r}: {err}", t) from None
        return _Number(value, dtype, is_float)

    # -- types --------------------------------------------------------------------------------------
    def parse_type(self):
        t = self.tok
        if t.kind == "ident" and t.text == "Tensor":
            self.i += 1
            self.expect("[")
            shape = self.parse_shape()
            self.expect(",", "between the shape and the dtype")
            dt = self.tok
            if dt.kind != "ident":
                raise self.error("expected a dtype like float32")
            self.i += 1
            self.expect("]", "to close Tensor[...]")
            return TensorType(shape, self.dtype(dt))
        if t.kind == "ident" and t.text == "fn":
            self.i += 1
            self.expect("(")
            args = []
            while not self.at(")"):
                args.append(self.parse_type())
                if not self.accept(","):
                    break
            self.expect(")")
            self.expect("->", "in a function type")
            return FuncType(args, self.parse_type())
        if self.at("("):
            self.i += 1
            fields = []
            while not self.at(")"):
                fields.append(self.parse_type())
                if not self.accept(","):
                    break
            self.expect(")", "to close the tuple type")
            return TupleType(fields)
        if self.at("_"):
            self.i += 1
            return IncompleteType()
        if t.kind == "ident":
            for scope in reversed(self.type_scopes):
                if t.text in scope:
                    self.i += 1
                    return scope[t.text]
            self.i += 1
            return TensorType((), self.dtype(t))
        raise self.error(f"expected a type but found '{t.text}'")

    def dtype(self, tok) -> str:
        try:
            return str(parse_dtype(tok.text))
        except DataTypeError as err:
            raise self.error(f"unknown type or dtype {tok.text!r}: {err}", tok) from None

    def parse_shape(self):
        self.expect("(", "to open the shape")
        dims = []
        while not self.at(")"):
            t = self.tok
            if t.kind == "number" and t.text.isdigit():
                dims.append(int(t.text))
                self.i += 1
            elif self.at("?"):
                dims.append(Any())
                self.i += 1
            elif t.kind == "ident":
                key = "$dim:" + t.text
                scope = self.type_scopes[-1] if self.type_scopes else {}
                dv = scope.get(key)
                if dv is None:
                    dv = SizeVar(t.text, "int64")
                    if self.type_scopes:
                        scope[key] = dv
                dims.append(dv)
                self.i += 1
            else:
                raise self.error(f"expected a dimension (an integer, ? or a name) but found '{t.text}'")
            if not self.accept(","):
                break
        self.expect(")", "to close the shape")
        return dims


def _meta_dict(meta_table) -> dict:
    if meta_table is None:
        return {}
    table = getattr(meta_table, "table", meta_table)
    out = {}
    for k, v in dict(table).items():
        out[k] = [x if isinstance(x, Constant) else Constant(np.asarray(x.numpy() if hasattr(x, "numpy") else x))
                  for x in v]
    return out
