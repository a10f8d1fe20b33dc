"""kiln.parser: read the Relay text format (TVM's ``tvm.parser``)."""
from __future__ import annotations

from .parser import Parser


def parse(source: str, source_name: str = "from_string", init_module=None, init_meta_table=None):
    """Parse a module (``def @main(...) {...}``; a bare expression becomes ``main``) into an IRModule."""
    if not isinstance(source, str):
        raise TypeError(f"parse expects the program text as a str, got {type(source).__name__}")
    return Parser(source, source_name, init_meta_table).parse_module(init_module)


def parse_expr(source: str, source_name: str = "from_string", init_meta_table=None):
    """Parse one expression (bindings allowed: ``%0 = ...; %0``)."""
    p = Parser(source, source_name, init_meta_table)
    if p.tok.kind == "version":
        p.i += 1
    return p.parse_body_until_eof()


def fromtext(source: str, source_name: str = "from_string"):
    """Alias of :func:`parse` (TVM's ``tvm.parser.fromtext``)."""
    return parse(source, source_name)


def parse_type(source: str, source_name: str = "from_string"):
    """Parse a type such as ``Tensor[(1, 3), float32]``."""
    p = Parser(source, source_name)
    ty = p.parse_type()
    if p.tok.kind != "eof":
        raise p.error(f"unexpected '{p.tok.text}' after the type")
    return ty


__all__ = ["parse", "parse_expr", "fromtext", "parse_type"]
