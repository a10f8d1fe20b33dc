"""``topi.nn.pool_grad``: the input gradient of max/avg pooling (TVM's ``pool_grad``), for 1-3 spatial axes.

Max pooling: a first stage finds, per output, the position of its window's first maximum (row-major order,
ties to the lowest position: the argmax reducer of ``topi.argmax``); the gradient of an input element is the
sum of the output gradients of the windows whose maximum it is. Average pooling: each input element gets
``grad / divisor`` of every window containing it, with the divisor of the forward ``pool_impl_nd``
(``count_include_pad``: the window clipped to the padded input; otherwise its real elements).

For an input position ``p`` (padded coordinates) the windows containing it are the outputs
``o = p // s - w`` for ``w < ((k - 1) * d) // s + 1`` that satisfy ``0 <= o < O`` and ``p - o * s`` a tap
``r * d`` with ``r < k``: one small reduction per input element, no scatter.
"""
from __future__ import annotations

import math

from ... import te
from ...error import KilnError
from ...tir import op as T
from ..reduction import _arg_reducer
from ..utils import get_const_tuple
from .pad import pad
from .pooling import _spatial_axes

__all__ = ["pool_grad"]


def _window_counts(start, j, kernel, dilation, size, pad_after, count_include_pad):
    """How many taps of the window starting at ``start`` (unpadded coordinates) the divisor counts."""
    if count_include_pad:
        end = T.min(start + (kernel[j] - 1) * dilation[j], size + pad_after - 1)
        return (end - start) // dilation[j] + 1
    lo = T.max((T.const(0, start.dtype) - start + dilation[j] - 1) // dilation[j], 0)
    hi = T.min((size - 1 - start) // dilation[j], kernel[j] - 1)
    return T.max(hi - lo + 1, 0)


def pool_grad(grads, data, kernel, stride, padding, pool_type, ceil_mode=False, count_include_pad=True,
              layout="NCHW", dilation=None):
    """d(loss)/d(data) of ``pool{1,2,3}d(data, kernel, stride, dilation, padding, pool_type, ...)`` given
    ``grads`` = d(loss)/d(output). ``padding``: the per-axis "before" values then the "after" values (or one
    value per axis)."""
    if pool_type not in ("max", "avg"):
        raise KilnError(f"pool_grad: pool_type must be 'max' or 'avg', got {pool_type!r}")
    nsp = len(kernel)
    axes = _spatial_axes(layout, nsp)
    shape = list(get_const_tuple(data.shape))
    kernel = [int(k) for k in kernel]
    stride = [int(s) for s in stride]
    dilation = [1] * nsp if dilation is None else [int(d) for d in dilation]
    padding = [int(p) for p in padding]
    if len(padding) == nsp:
        padding = padding + padding
    if len(padding) != 2 * nsp or len(stride) != nsp or len(dilation) != nsp:
        raise KilnError(f"pool_grad: kernel {kernel}, stride {stride}, dilation {dilation} and padding {padding} "
                        f"do not describe the same {nsp} spatial axes")
    pb, pa = padding[:nsp], padding[nsp:]
    out_shape, extra = list(shape), [0] * nsp
    for j, ax in enumerate(axes):
        dk = (kernel[j] - 1) * dilation[j] + 1
        span = shape[ax] + pb[j] + pa[j] - dk
        if span < 0:
            raise KilnError(f"pool_grad: window {dk} is larger than the padded input {shape[ax] + pb[j] + pa[j]}")
        out_shape[ax] = (math.ceil(span / stride[j]) if ceil_mode else span // stride[j]) + 1
        extra[j] = max(0, (out_shape[ax] - 1) * stride[j] + dk - (shape[ax] + pb[j] + pa[j]))
    if tuple(get_const_tuple(grads.shape)) != tuple(out_shape):
        raise KilnError(f"pool_grad: grads has shape {tuple(get_const_tuple(grads.shape))}, pooling "
                        f"{tuple(shape)} gives {tuple(out_shape)}")

    argmax = None
    if pool_type == "max":
        before, after = [0] * len(shape), [0] * len(shape)
        for j, ax in enumerate(axes):
            before[ax], after[ax] = pb[j], pa[j] + extra[j]
        padded = pad(data, before, after, pad_value=T.min_value(data.dtype), name="pad_temp")
        rv = [te.reduce_axis((0, k), name=f"rv{j}") for j, k in enumerate(kernel)]
        reducer = _arg_reducer(True, False)

        def first_max(*i):
            idx = list(i)
            flat = None
            for j, ax in enumerate(axes):
                idx[ax] = i[ax] * stride[j] + rv[j] * dilation[j]
                flat = rv[j].var if flat is None else flat * kernel[j] + rv[j].var
            return reducer((T.cast(flat, "int32"), padded(*idx)), axis=rv)
        argmax = te.compute(out_shape, first_max, name="pool_argmax", tag="pool_argmax")[0]

    nwin = [((kernel[j] - 1) * dilation[j]) // stride[j] + 1 for j in range(nsp)]
    wv = [te.reduce_axis((0, n), name=f"wv{j}") for j, n in enumerate(nwin)]

    def grad_in(*i):
        oidx = list(i)
        valid = None
        flat = None
        starts = []
        for j, ax in enumerate(axes):
            p = i[ax] + pb[j]
            o = p // stride[j] - wv[j].var
            off = p - o * stride[j]
            cond = T.all(o >= 0, o < out_shape[ax], off <= (kernel[j] - 1) * dilation[j])
            if dilation[j] > 1:
                cond = T.all(cond, off % dilation[j] == 0)
            valid = cond if valid is None else T.all(valid, cond)
            oc = T.min(T.max(o, 0), out_shape[ax] - 1)
            oidx[ax] = oc
            starts.append(oc * stride[j] - pb[j])
            tap = off // dilation[j]
            flat = tap if flat is None else flat * kernel[j] + tap
        g = grads(*oidx)
        if pool_type == "max":
            hit = T.all(valid, argmax(*oidx) == T.cast(flat, "int32"))
            return te.sum(T.Select(hit, g, T.const(0, grads.dtype)), axis=wv)
        count = None
        for j, ax in enumerate(axes):
            n = _window_counts(starts[j], j, kernel, dilation, shape[ax], pa[j], count_include_pad)
            count = n if count is None else count * n
        share = T.div(g, T.cast(T.max(count, 1), grads.dtype))
        return te.sum(T.Select(valid, share, T.const(0, grads.dtype)), axis=wv)

    return te.compute(shape, grad_in, name=f"{pool_type}_pool_grad", tag="pool_grad")
