"""Tokens of the Relay text format."""
from __future__ import annotations

import re

from ..error import ParseError

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r\n]+)
  | (?P<block_comment>/\*)
  | (?P<line_comment>//[^\n]*)
  | (?P<version>\#\[version\s*=\s*"(?P<vnum>[^"]*)"\])
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<number>-?(?:inf|nan)(?:f|f16|f32|f64)?(?![A-Za-z0-9_])
       |-?(?:\d+\.\d*|\d+)(?:[eE][+-]?\d+)?(?:f16|f32|f64|f|i8|i16|i32|i64|u8|u16|u32|u64|u1)?)
  | (?P<local>%[A-Za-z0-9_]+)
  | (?P<global>@[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<arrow>->)
  | (?P<punct>[(){}\[\],;:=.?*])
""", re.VERBOSE)


_DIGITS = re.compile(r"\d+")


class Token:
    __slots__ = ("kind", "text", "pos", "line", "col")

    def __init__(self, kind: str, text: str, pos: int, line: int, col: int):
        self.kind, self.text, self.pos, self.line, self.col = kind, text, pos, line, col

    def __repr__(self) -> str:
        return f"Token({self.kind}, {self.text!r}, {self.line}:{self.col})"


def error_at(source: str, source_name: str, pos: int, message: str) -> ParseError:
    """A ParseError pointing at ``pos``: ``name:line:col: message``, the line, and a caret."""
    line = source.count("\n", 0, pos) + 1
    start = source.rfind("\n", 0, pos) + 1
    end = source.find("\n", pos)
    end = len(source) if end < 0 else end
    col = pos - start + 1
    text = source[start:end]
    err = ParseError(f"{source_name}:{line}:{col}: {message}\n  {text}\n  {' ' * (col - 1)}^")
    err.line, err.column, err.source_line = line, col, text
    return err


def tokenize(source: str, source_name: str) -> list:
    tokens = []
    pos, line, line_start = 0, 1, 0
    n = len(source)
    while pos < n:
        if tokens and tokens[-1].text == "." and tokens[-1].kind == "punct":
            d = _DIGITS.match(source, pos)
            if d is not None:  # a projection index: `%0.1.2` is (%0.1).2
                tokens.append(Token("number", d.group(0), pos, line, pos - line_start + 1))
                pos = d.end()
                continue
        m = _TOKEN.match(source, pos)
        if m is None:
            raise error_at(source, source_name, pos, f"unexpected character {source[pos]!r}")
        kind = m.lastgroup if m.lastgroup != "vnum" else "version"
        if m.group("version") is not None:
            kind = "version"
        text = m.group(0)
        if kind == "block_comment":
            end = _skip_block_comment(source, pos, source_name)
            text = source[pos:end]
            m_end = end
        else:
            m_end = m.end()
        if kind not in ("ws", "block_comment", "line_comment"):
            tokens.append(Token(kind, text, pos, line, pos - line_start + 1))
        nl = text.count("\n")
        if nl:
            line += nl
            line_start = pos + text.rfind("\n") + 1
        pos = m_end
    tokens.append(Token("eof", "", n, line, n - line_start + 1))
    return tokens


def _skip_block_comment(source: str, pos: int, source_name: str) -> int:
    depth, i = 0, pos
    while i < len(source):
        if source.startswith("/*", i):
            depth += 1
            i += 2
        elif source.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    raise error_at(source, source_name, pos, "unterminated comment /* ... */")
