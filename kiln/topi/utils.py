"""Helpers for shapes and schedules shared by the TOPI computes."""
from __future__ import annotations

import contextlib
import contextvars
from numbers import Integral

from ..error import KilnError
from ..tir import expr as E
from ..tir import op as T
from . import tag as _tag


# Whether the weights of the network being compiled stream from memory each inference: True when they exceed the
# last-level cache (each layer's weights are then evicted by the others before the next call), False when they
# stay in it, None when no network is being compiled (a kernel built or tuned alone). relay.build and the VM
# compiler set it (relay.backend.te_compiler.weight_residency); schedules that request weights ahead of their use
# (topi/x86/utils.prefetch_weights) read it.
_WEIGHTS_FROM_MEMORY: contextvars.ContextVar = contextvars.ContextVar("kiln_weights_from_memory", default=None)


@contextlib.contextmanager
def weights_from_memory(flag):
    """Within the block, :func:`weights_stream_from_memory` answers ``flag`` (True, False or None)."""
    token = _WEIGHTS_FROM_MEMORY.set(flag)
    try:
        yield
    finally:
        _WEIGHTS_FROM_MEMORY.reset(token)


def weights_stream_from_memory():
    """True / False when the network being compiled has its weights out of / in the last-level cache, None when
    unknown (see ``weights_from_memory``)."""
    return _WEIGHTS_FROM_MEMORY.get()


def get_const_int(expr) -> int:
    """The Python int of a constant integer expression; raises if it is symbolic."""
    if isinstance(expr, Integral):
        return int(expr)
    expr = T.convert(expr)
    if isinstance(expr, E.IntImm):
        return int(expr.value)
    raise KilnError(f"expected a constant integer, got the expression {expr}")


def get_const_tuple(shape) -> tuple:
    """Shape (a list of PrimExprs / ints) -> tuple of Python ints (symbolic entries stay expressions)."""
    out = []
    for s in shape:
        s = T.convert(s) if not isinstance(s, Integral) else s
        out.append(int(s.value) if isinstance(s, E.IntImm) else (int(s) if isinstance(s, Integral) else s))
    return tuple(out)


def get_float_tuple(values) -> tuple:
    return tuple(float(v.value if isinstance(v, E.FloatImm) else v) for v in values)


def is_const(x) -> bool:
    return isinstance(x, (Integral, E.IntImm))


def prod(values):
    out = 1
    for v in values:
        out = out * v
    return out


def ravel_index(indices, shape):
    """Row-major flat index of ``indices`` in ``shape``."""
    idx = None
    for i, (x, n) in enumerate(zip(indices, shape)):
        idx = x if i == 0 else idx * n + x
    return idx if idx is not None else T.const(0, "int32")


def unravel_index(idx, shape):
    """Row-major indices of a flat index."""
    out = []
    for n in reversed(list(shape)):
        out.append(idx % n)
        idx = idx // n
    return list(reversed(out))


def normalize_axis(axis: int, ndim: int, what: str = "axis") -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise KilnError(f"{what} {axis} is out of range for a tensor of rank {ndim}")
    return axis + ndim if axis < 0 else axis


def traverse_inline(s, final_op, callback=None):
    """Walk the ops feeding ``final_op``: inline every injective one, call ``callback(op)`` on the others."""
    visited = set()

    def visit(op):
        if op in visited:
            return
        visited.add(op)
        if _tag.is_injective(getattr(op, "tag", "")):
            if op not in s.outputs and hasattr(op, "axis"):
                s[op].compute_inline()
        for t in op.input_tensors:
            if hasattr(t.op, "axis"):
                visit(t.op)
        if callback is not None:
            callback(op)

    visit(final_op)
