"""Softmax and log-softmax along an axis (max, exp-sum, normalize stages)."""
from __future__ import annotations

from ... import te
from ...tir import op as T
from ..utils import get_const_tuple, normalize_axis
from ..math import fast_exp_expr


def _stages(x, axis, exp=T.exp):
    shape = get_const_tuple(x.shape)
    axis = normalize_axis(axis, len(shape), "softmax axis")
    red_shape = [n for d, n in enumerate(shape) if d != axis]
    k1 = te.reduce_axis((0, shape[axis]), name="k1")
    k2 = te.reduce_axis((0, shape[axis]), name="k2")

    def full(i, k):
        return tuple(i[:axis]) + (k,) + tuple(i[axis:])

    def without(i):
        return tuple(i[:axis]) + tuple(i[axis + 1:])
    mx = te.compute(red_shape, lambda *i: T.max(x[full(i, k1)], axis=k1), name="T_softmax_maxelem")
    ex = te.compute(shape, lambda *i: exp(x(*i) - mx(*without(i))), name="T_softmax_exp")
    sm = te.compute(red_shape, lambda *i: T.sum(ex[full(i, k2)], axis=k2), name="T_softmax_expsum")
    return shape, without, mx, ex, sm


def softmax(x, axis=-1):
    shape, without, _, ex, sm = _stages(x, axis)
    return te.compute(shape, lambda *i: ex(*i) / sm(*without(i)), name="T_softmax_norm",
                      tag="softmax_output", attrs={"axis": axis})


def fast_softmax(x, axis=-1):
    """Softmax whose exponential is :func:`kiln.topi.fast_exp_expr` for float32 (TVM's ``topi.nn.fast_softmax``):
    vectorizable, within 2 ulp of expf; other dtypes compute as :func:`softmax`."""
    if x.dtype != "float32":
        return softmax(x, axis)
    shape, without, _, ex, sm = _stages(x, axis, exp=fast_exp_expr)
    return te.compute(shape, lambda *i: ex(*i) / sm(*without(i)), name="T_softmax_norm",
                      tag="softmax_output", attrs={"axis": axis})


def log_softmax(x, axis=-1):
    shape, without, mx, _, sm = _stages(x, axis)
    return te.compute(shape, lambda *i: x(*i) - mx(*without(i)) - T.log(sm(*without(i))), name="T_log_softmax",
                      tag="log_softmax_output", attrs={"axis": axis})
