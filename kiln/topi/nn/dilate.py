"""Dilation: spread elements ``stride`` apart, filling the gaps (TVM's ``topi.nn.dilate``)."""
from __future__ import annotations

from ... import te
from ...error import KilnError
from ...tir import op as T
from .. import tag
from ..utils import get_const_tuple


def dilate(data, strides, dilation_value=0.0, name="DilatedInput"):
    shape = get_const_tuple(data.shape)
    strides = [int(s) for s in get_const_tuple(strides)]
    if len(strides) != len(shape):
        raise KilnError(f"dilate: {len(strides)} strides for a rank-{len(shape)} tensor")
    if all(s == 1 for s in strides):
        return data
    out_shape = [(n - 1) * s + 1 for n, s in zip(shape, strides)]

    def f(*i):
        conds, idx = [], []
        for x, s in zip(i, strides):
            if s == 1:
                idx.append(x)
            else:
                conds.append(T.equal(x % s, 0))
                idx.append(x // s)
        return T.if_then_else(T.all(*conds), data(*idx), T.const(dilation_value, data.dtype))
    return te.compute(out_shape, f, name=name, tag=tag.INJECTIVE + ",dilate")
