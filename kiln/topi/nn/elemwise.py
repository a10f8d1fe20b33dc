"""Activation functions: relu, leaky_relu, prelu."""
from __future__ import annotations

from ... import te
from ...error import KilnError
from ...tir import op as T
from .. import tag
from ..utils import get_const_tuple, normalize_axis


def relu(x):
    return te.compute(x.shape, lambda *i: T.max(x(*i), T.const(0, x.dtype)), name="T_relu", tag=tag.ELEMWISE)


def leaky_relu(x, alpha):
    def f(*i):
        v = x(*i)
        return T.Select(v > 0, v, v * T.const(alpha, x.dtype))
    return te.compute(x.shape, f, name="T_leaky_relu", tag=tag.ELEMWISE)


def prelu(x, slope, axis=1):
    """``x > 0 ? x : slope[c] * x`` with ``slope`` indexed along ``axis``."""
    shape = get_const_tuple(x.shape)
    axis = normalize_axis(axis, len(shape), "prelu axis")
    if len(slope.shape) != 1 or get_const_tuple(slope.shape)[0] != shape[axis]:
        raise KilnError(f"prelu: slope shape {get_const_tuple(slope.shape)} must be ({shape[axis]},) for axis {axis}")

    def f(*i):
        v = x(*i)
        return T.Select(v > 0, v, v * slope(i[axis]))
    return te.compute(x.shape, f, name="T_prelu", tag=tag.BROADCAST)
