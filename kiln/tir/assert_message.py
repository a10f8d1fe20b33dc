"""Assertion messages that name run-time values: ``assert_message("dimension 0 is {} and {}", n, m)``.

TVM's ``AssertStmt`` message is a string. A kernel over unknown extents checks conditions that only hold at run
time (operands that must broadcast, a reduction size two operands share); a message that says *which* sizes
broke it must carry the values. kiln's AssertStmt therefore also accepts, as its message, a call of the
intrinsic ``tir.kiln.assert_message``: a format string with ``{}`` placeholders and one integer expression per
placeholder. The C backend formats it when the assertion fails (``snprintf``); the TIR interpreter formats it
in Python; printers show the format with the expressions in place.
"""
from __future__ import annotations

from ..error import KilnError
from . import expr as E
from .op import convert

ASSERT_MESSAGE = "tir.kiln.assert_message"


def assert_message(text: str, *values) -> E.Call:
    """An AssertStmt message: ``text`` with one ``{}`` per integer expression in ``values`` (evaluated when
    the assertion fails). A text without placeholders may be given as a plain string instead."""
    if text.count("{}") != len(values):
        raise KilnError(f"assert_message: {text.count('{}')} placeholders in {text!r} but {len(values)} values")
    args = [E.StringImm(text)]
    for v in values:
        v = convert(v) if not isinstance(v, E.PrimExpr) else v
        if not str(v.dtype).startswith(("int", "uint", "bool")):
            raise KilnError(f"assert_message: values must be integers, got {v.dtype} ({v})")
        args.append(v)
    return E.Call("handle", ASSERT_MESSAGE, args)


def is_assert_message(msg) -> bool:
    return isinstance(msg, E.Call) and str(msg.op) == ASSERT_MESSAGE


def message_parts(msg) -> tuple:
    """``(text with {} placeholders, [value expressions])`` of an AssertStmt message (a string has none)."""
    if is_assert_message(msg):
        return msg.args[0].value, list(msg.args[1:])
    if isinstance(msg, E.StringImm):
        return msg.value.replace("{", "{{").replace("}", "}}"), []
    return str(msg).replace("{", "{{").replace("}", "}}"), []


def format_message(msg, values) -> str:
    """The message with its placeholders filled by ``values`` (Python ints)."""
    text, _ = message_parts(msg)
    return text.format(*[int(v) for v in values])


def message_key(msg) -> str:
    """A text that tells two messages apart (for de-duplicating requirements)."""
    text, values = message_parts(msg)
    return text + "|" + "|".join(str(v) for v in values)
