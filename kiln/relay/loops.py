"""``relay.loops.while_loop`` (TVM's helper): a loop as a recursive local function."""
from __future__ import annotations

from .expr import Call, Function, If, Let, Tuple, Var


def while_loop(cond, loop_vars, loop_bodies):
    """A function ``loop(*loop_vars)`` that returns ``loop_vars`` as a tuple once ``cond(*vars)`` is false,
    and otherwise calls itself on ``loop_bodies(*vars)``. ``loop_vars`` are Vars with type annotations."""
    loop_vars = list(loop_vars)
    fresh = [Var(f"{v.name_hint}_loop", v.type_annotation) for v in loop_vars]
    loop = Var("while_loop")
    body = loop_bodies(*fresh)
    if isinstance(body, (list, tuple)):
        body = list(body)
    else:
        body = [body]
    func = Function(fresh, If(cond(*fresh), Call(loop, body), Tuple(fresh)))
    return Let(loop, func, loop)
