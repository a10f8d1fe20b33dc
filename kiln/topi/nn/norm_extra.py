"""More normalizations: l2_normalize, lrn and instance_norm over any channel axis (TVM's ``topi.nn``)."""
from __future__ import annotations

from ... import te
from ...error import KilnError
from ...tir import op as T
from .. import tag
from ..reduction import reduce_axes, sum as _sum
from ..utils import get_const_tuple, normalize_axis
from .norm import _mean_var
from .pad import pad

__all__ = ["l2_normalize", "lrn", "instance_norm_nd"]


def l2_normalize(data, eps, axis=None):
    """``data / sqrt(max(sum(data^2, axis), eps))`` (``axis`` None or empty: all axes)."""
    shape = get_const_tuple(data.shape)
    axes = reduce_axes(len(shape), list(axis) if axis is not None and len(get_const_tuple(axis)) else None)
    sq = te.compute(shape, lambda *i: data(*i) * data(*i), name="T_l2_sq", tag=tag.ELEMWISE)
    total = _sum(sq, axes, keepdims=True)

    def f(*i):
        t = total(*[0 if d in axes else i[d] for d in range(len(shape))])
        return data(*i) / T.sqrt(T.max(t, T.const(eps, data.dtype)))
    return te.compute(shape, f, name="T_l2_normalize", tag="l2_normalize")


def lrn(data, size, axis=1, alpha=0.0001, beta=0.75, bias=2.0):
    """Local response normalization across ``axis``: each element divided by
    ``(bias + alpha / size * sum of squares over a window of `size` around it) ** beta``; the window
    covers ``size // 2`` elements before and ``size - 1 - size // 2`` after."""
    shape = get_const_tuple(data.shape)
    axis = normalize_axis(axis, len(shape), "lrn axis")
    if size < 1:
        raise KilnError(f"lrn: size must be at least 1, got {size}")
    half = size // 2
    before = [half if d == axis else 0 for d in range(len(shape))]
    after = [size - 1 - half if d == axis else 0 for d in range(len(shape))]
    padded = pad(data, before, after, name="lrn_pad")
    r = te.reduce_axis((0, size), name="r")

    def window(*i):
        idx = list(i)
        idx[axis] = i[axis] + r
        v = padded(*idx)
        return T.sum(v * v, axis=r)
    sqr_sum = te.compute(shape, window, name="T_lrn_sqr_sum", tag="lrn_sqr_sum")
    scale = T.const(alpha / size, data.dtype)

    def f(*i):
        return data(*i) / T.power(T.const(bias, data.dtype) + scale * sqr_sum(*i), T.const(beta, data.dtype))
    return te.compute(shape, f, name="T_lrn", tag="lrn")


def instance_norm_nd(data, gamma, beta, channel_axis=1, epsilon=1e-5, center=True, scale=True):
    """Instance normalization with statistics per sample and channel (over every axis but 0 and
    ``channel_axis``); ``gamma``/``beta`` run along ``channel_axis`` and apply only with ``scale``/``center``."""
    shape = get_const_tuple(data.shape)
    channel_axis = normalize_axis(channel_axis, len(shape), "instance_norm axis")
    axes = [d for d in range(len(shape)) if d not in (0, channel_axis)]
    if not axes:
        raise KilnError(f"instance_norm: data {shape} has no axis to normalize over besides batch and channel")
    m, var, bidx = _mean_var(data, axes)

    def f(*i):
        out = (data(*i) - m(*bidx(m, i))) * T.rsqrt(var(*bidx(var, i)) + T.const(epsilon, data.dtype))
        if scale:
            out = out * gamma(i[channel_axis])
        if center:
            out = out + beta(i[channel_axis])
        return out
    return te.compute(shape, f, name="T_instance_norm", tag=tag.INJECTIVE)
