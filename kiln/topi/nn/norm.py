"""Normalizations: layer_norm, group_norm, instance_norm, batch_norm (inference and training statistics)."""
from __future__ import annotations

from ... import te
from ...error import KilnError
from ...tir import op as T
from .. import tag
from ..reduction import mean, reduce_axes, sum as _sum
from ..utils import get_const_tuple, normalize_axis
from ..transform import reshape


def _mean_var(data, axes):
    """Mean and (biased) variance over ``axes``, both keeping dims."""
    shape = get_const_tuple(data.shape)
    count = 1
    for a in axes:
        count *= shape[a]
    m = mean(data, axes, keepdims=True)

    def bidx(t, i):
        return [0 if get_const_tuple(t.shape)[d] == 1 else i[d] for d in range(len(i))]
    sq = te.compute(shape, lambda *i: (data(*i) - m(*bidx(m, i))) * (data(*i) - m(*bidx(m, i))), name="T_sqdiff",
                    tag=tag.BROADCAST)
    v = _sum(sq, axes, keepdims=True)
    var = te.compute(v.shape, lambda *i: v(*i) / T.const(count, v.dtype), name="T_var", tag=tag.ELEMWISE)
    return m, var, bidx


def layer_norm(data, gamma, beta, axis, epsilon=1e-5):
    """``(x - mean) / sqrt(var + eps) * gamma + beta`` with statistics over ``axis`` (int or list)."""
    shape = get_const_tuple(data.shape)
    axes = reduce_axes(len(shape), axis)
    m, var, bidx = _mean_var(data, axes)
    gshape = get_const_tuple(gamma.shape)
    if list(gshape) != [shape[a] for a in axes]:
        raise KilnError(f"layer_norm: gamma shape {gshape} must match the normalized axes {[shape[a] for a in axes]}")

    def f(*i):
        norm = (data(*i) - m(*bidx(m, i))) * T.rsqrt(var(*bidx(var, i)) + T.const(epsilon, data.dtype))
        out = norm * gamma(*[i[a] for a in axes])
        if beta is not None:
            out = out + beta(*[i[a] for a in axes])
        return out
    return te.compute(shape, f, name="T_layer_norm", tag=tag.INJECTIVE)


def group_norm(data, gamma, beta, num_groups, channel_axis, axes, epsilon=1e-5):
    """Statistics over each group of ``C // num_groups`` channels and the ``axes``."""
    shape = list(get_const_tuple(data.shape))
    channel_axis = normalize_axis(channel_axis, len(shape), "group_norm channel_axis")
    c = shape[channel_axis]
    if c % num_groups:
        raise KilnError(f"group_norm: {c} channels do not split into {num_groups} groups")
    gshape = shape[:channel_axis] + [num_groups, c // num_groups] + shape[channel_axis + 1:]
    grouped = reshape(data, gshape)
    red = [channel_axis + 1] + [normalize_axis(a, len(shape)) + (1 if normalize_axis(a, len(shape)) > channel_axis else 0)
                                for a in axes]
    m, var, bidx = _mean_var(grouped, sorted(red))
    cg = c // num_groups

    def f(*i):
        gi = list(i[:channel_axis]) + [i[channel_axis] // cg, i[channel_axis] % cg] + list(i[channel_axis + 1:])
        norm = (data(*i) - m(*bidx(m, gi))) * T.rsqrt(var(*bidx(var, gi)) + T.const(epsilon, data.dtype))
        out = norm * gamma(i[channel_axis])
        if beta is not None:
            out = out + beta(i[channel_axis])
        return out
    return te.compute(shape, f, name="T_group_norm", tag=tag.INJECTIVE)


def instance_norm(data, gamma, beta, axis, epsilon=1e-5):
    """Per-sample, per-channel statistics over ``axis``; gamma/beta along axis 1."""
    shape = get_const_tuple(data.shape)
    axes = reduce_axes(len(shape), axis)
    m, var, bidx = _mean_var(data, axes)

    def f(*i):
        norm = (data(*i) - m(*bidx(m, i))) * T.rsqrt(var(*bidx(var, i)) + T.const(epsilon, data.dtype))
        out = norm * gamma(i[1])
        return out + beta(i[1]) if beta is not None else out
    return te.compute(shape, f, name="T_instance_norm", tag=tag.INJECTIVE)


def batch_norm(data, gamma, beta, moving_mean, moving_var, axis=None, epsilon=1e-5, center=True, scale=True,
               training=False, momentum=None):
    """Batch normalization; returns ``[out, mean, var]`` (the moving statistics, or, in training, the
    updated ones)."""
    shape = get_const_tuple(data.shape)
    axis = normalize_axis(1 if axis is None else axis, len(shape), "batch_norm axis")
    if training:
        others = [d for d in range(len(shape)) if d != axis]
        m, var, bidx = _mean_var(data, others)

        def stat(t, i):
            return t(*bidx(t, i))
    else:
        m, var = moving_mean, moving_var

        def stat(t, i):
            return t(i[axis])

    def f(*i):
        out = (data(*i) - stat(m, i)) / T.sqrt(stat(var, i) + T.const(epsilon, data.dtype))
        if scale:
            out = out * gamma(i[axis])
        if center:
            out = out + beta(i[axis])
        return out
    out = te.compute(shape, f, name="T_batch_norm", tag=tag.INJECTIVE)
    if not training:
        return [out, moving_mean, moving_var]
    mom = 0.1 if momentum is None else momentum
    flat_m = te.compute([shape[axis]], lambda c: T.const(1 - mom, data.dtype) * moving_mean(c)
                        + T.const(mom, data.dtype) * m(*[c if d == axis else 0 for d in range(len(shape))]),
                        name="T_bn_mean", tag=tag.INJECTIVE)
    flat_v = te.compute([shape[axis]], lambda c: T.const(1 - mom, data.dtype) * moving_var(c)
                        + T.const(mom, data.dtype) * var(*[c if d == axis else 0 for d in range(len(shape))]),
                        name="T_bn_var", tag=tag.INJECTIVE)
    return [out, flat_m, flat_v]
