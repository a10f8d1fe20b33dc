"""Pooling computes: pool1d/2d/3d (max/avg), global pooling and adaptive pooling."""
from __future__ import annotations

import math

from ... import te
from ...error import KilnError
from ...tir import op as T
from .. import tag
from ..utils import get_const_tuple, prod
from .pad import pad


def _spatial_axes(layout: str, nsp: int):
    letters = {1: "W", 2: "HW", 3: "DHW"}[nsp]
    for c in letters:
        if c not in layout or c.lower() in layout:
            raise KilnError(f"pool: layout {layout!r} lacks a plain {c} axis")
    return [layout.index(c) for c in letters]


def pool_impl_nd(data, kernel, stride, dilation, padding, pool_type, ceil_mode, layout, count_include_pad):
    """Generic N-d pooling over the spatial axes of ``layout`` (TVM semantics, see poolnd_python)."""
    if pool_type not in ("max", "avg"):
        raise KilnError(f"pool: pool_type must be 'max' or 'avg', got {pool_type!r}")
    nsp = len(kernel)
    shape = list(get_const_tuple(data.shape))
    axes = _spatial_axes(layout, nsp)
    kernel, stride, dilation = [list(map(int, v)) for v in (kernel, stride, dilation)]
    padding = [int(p) for p in padding]
    if len(padding) == nsp:
        padding = padding + padding
    pb, pa = padding[:nsp], padding[nsp:]
    out_shape, extra = list(shape), [0] * nsp
    for j, ax in enumerate(axes):
        dk = (kernel[j] - 1) * dilation[j] + 1
        span = shape[ax] + pb[j] + pa[j] - dk
        if not isinstance(span, int):  # an unknown (relay.Any) extent: ceil mode may read up to stride - 1 past
            out_shape[ax] = ((span + stride[j] - 1) // stride[j] if ceil_mode else span // stride[j]) + 1
            extra[j] = stride[j] - 1 if ceil_mode else 0
            continue
        if span < 0:
            raise KilnError(f"pool: window {dk} is larger than the padded input {shape[ax] + pb[j] + pa[j]}")
        o = (math.ceil(span / stride[j]) if ceil_mode else span // stride[j]) + 1
        out_shape[ax] = o
        extra[j] = max(0, (o - 1) * stride[j] + dk - (shape[ax] + pb[j] + pa[j]))
    before = [0] * len(shape)
    after = [0] * len(shape)
    for j, ax in enumerate(axes):
        before[ax], after[ax] = pb[j], pa[j] + extra[j]
    fill = T.min_value(data.dtype) if pool_type == "max" else T.const(0, data.dtype)
    padded = pad(data, before, after, pad_value=fill, name="pad_temp")
    rv = [te.reduce_axis((0, k), name=f"rv{j}") for j, k in enumerate(kernel)]

    def window(i):
        idx = list(i)
        for j, ax in enumerate(axes):
            idx[ax] = i[ax] * stride[j] + rv[j] * dilation[j]
        return padded(*idx)
    if pool_type == "max":
        return te.compute(out_shape, lambda *i: T.max(window(i), axis=rv), name="pool_max", tag="pool_max")
    acc = te.compute(out_shape, lambda *i: T.sum(window(i), axis=rv), name="pool_sum", tag="pool_sum")

    def divide(*i):
        count = None
        for j, ax in enumerate(axes):
            start = i[ax] * stride[j] - pb[j]
            if count_include_pad:
                end = T.min(start + (kernel[j] - 1) * dilation[j], shape[ax] + pa[j] - 1)
                n = (end - start) // dilation[j] + 1
            else:
                lo = T.max((T.const(0, start.dtype) - start + dilation[j] - 1) // dilation[j], 0)
                hi = T.min((shape[ax] - 1 - start) // dilation[j], kernel[j] - 1)
                n = T.max(hi - lo + 1, 0)
            count = n if count is None else count * n
        return T.div(acc(*i), T.cast(T.max(count, 1), data.dtype))
    return te.compute(out_shape, divide, name="pool_avg", tag=tag.ELEMWISE)


def pool1d(data, kernel, stride, dilation, padding, pool_type, ceil_mode=False, layout="NCW", count_include_pad=True):
    return pool_impl_nd(data, kernel, stride, dilation, padding, pool_type, ceil_mode, layout, count_include_pad)


def pool2d(data, kernel, stride, dilation, padding, pool_type, ceil_mode=False, layout="NCHW",
           count_include_pad=True):
    """2-D pooling; ``padding`` is (top, left, bottom, right)."""
    return pool_impl_nd(data, kernel, stride, dilation, padding, pool_type, ceil_mode, layout, count_include_pad)


def pool3d(data, kernel, stride, dilation, padding, pool_type, ceil_mode=False, layout="NCDHW",
           count_include_pad=True):
    return pool_impl_nd(data, kernel, stride, dilation, padding, pool_type, ceil_mode, layout, count_include_pad)


def global_pool(data, pool_type, layout="NCHW"):
    """Pool each channel's whole H x W plane to 1 x 1."""
    shape = get_const_tuple(data.shape)
    axes = _spatial_axes(layout, 2)
    rv = [te.reduce_axis((0, shape[a]), name=f"rv{j}") for j, a in enumerate(axes)]
    out_shape = [1 if d in axes else n for d, n in enumerate(shape)]

    def window(i):
        idx = list(i)
        for j, ax in enumerate(axes):
            idx[ax] = rv[j]
        return data(*idx)
    if pool_type == "max":
        return te.compute(out_shape, lambda *i: T.max(window(i), axis=rv), name="global_pool_max", tag="global_pool_max")
    if pool_type != "avg":
        raise KilnError(f"global_pool: pool_type must be 'max' or 'avg', got {pool_type!r}")
    s = te.compute(out_shape, lambda *i: T.sum(window(i), axis=rv), name="global_pool_sum", tag="global_pool_sum")
    n = prod([shape[a] for a in axes])
    count = T.const(n, data.dtype) if isinstance(n, int) else T.cast(n, data.dtype)  # unknown H/W: a VM kernel
    return te.compute(out_shape, lambda *i: T.div(s(*i), count), name="global_pool_avg", tag=tag.ELEMWISE)


def adaptive_pool_impl(data, output_size, pool_type, layout):
    nsp = len(output_size)
    shape = get_const_tuple(data.shape)
    axes = _spatial_axes(layout, nsp)
    osz = [int(o) if o is not None else shape[a] for o, a in zip(output_size, axes)]
    isz = [shape[a] for a in axes]
    max_win = []
    for o, n in zip(osz, isz):
        if not isinstance(n, int):  # an unknown extent: the widest bin spans at most ceil(n / o) + 1 inputs
            max_win.append((n + o - 1) // o + 1)
            continue
        max_win.append(max(((k + 1) * n + o - 1) // o - (k * n) // o for k in range(o)))
    rv = [te.reduce_axis((0, w), name=f"rv{j}") for j, w in enumerate(max_win)]
    out_shape = list(shape)
    for j, a in enumerate(axes):
        out_shape[a] = osz[j]

    def bounds(i, j):
        start = (i * isz[j]) // osz[j]
        end = ((i + 1) * isz[j] + osz[j] - 1) // osz[j]
        return start, end

    def window(i):
        idx, conds = list(i), []
        for j, ax in enumerate(axes):
            start, end = bounds(i[ax], j)
            idx[ax] = T.min(start + rv[j], isz[j] - 1)
            conds.append(start + rv[j] < end)
        return data(*idx), T.all(*conds)
    if pool_type == "max":
        def fmax(*i):
            v, c = window(i)
            return T.max(v, axis=rv, where=c)
        return te.compute(out_shape, fmax, name="adaptive_pool_max", tag="adaptive_pool_max")
    if pool_type != "avg":
        raise KilnError(f"adaptive_pool: pool_type must be 'max' or 'avg', got {pool_type!r}")

    def fsum(*i):
        v, c = window(i)
        return T.sum(v, axis=rv, where=c)
    s = te.compute(out_shape, fsum, name="adaptive_pool_sum", tag="adaptive_pool_sum")

    def favg(*i):
        count = None
        for j, ax in enumerate(axes):
            start, end = bounds(i[ax], j)
            count = (end - start) if count is None else count * (end - start)
        return T.div(s(*i), T.cast(count, data.dtype))
    return te.compute(out_shape, favg, name="adaptive_pool_avg", tag=tag.ELEMWISE)


def adaptive_pool(data, output_size, pool_type, layout="NCHW"):
    return adaptive_pool_impl(data, output_size, pool_type, layout)


def adaptive_pool1d(data, output_size, pool_type, layout="NCW"):
    return adaptive_pool_impl(data, output_size, pool_type, layout)


def adaptive_pool3d(data, output_size, pool_type, layout="NCDHW"):
    return adaptive_pool_impl(data, output_size, pool_type, layout)
