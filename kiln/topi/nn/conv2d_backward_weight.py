"""``conv2d_backward_weight_nchw``: the weight gradient of an NCHW/OIHW conv2d as one TE reduction.

dW[o, i, r, s] = sum over (n, y, x) of grad[n, o, y, x] * pad(data)[n, g(o) * C/groups + i, y*sh + r*dh, x*sw + s*dw],
where g(o) is the group of output channel o. Used by Relay's ``nn.conv2d_backward_weight``.
"""
from __future__ import annotations

from ... import te
from ...error import KilnError
from ...tir import op as T
from ..utils import get_const_tuple
from .pad import pad
from .utils import get_pad_tuple


def conv2d_backward_weight_nchw(grad, data, kernel_size, strides, padding, dilation, groups=1, out_dtype=None):
    """grad [N, O, OH, OW], data [N, C, H, W] -> [O, C // groups, KH, KW]."""
    out_dtype = out_dtype or data.dtype
    n, o, oh, ow = get_const_tuple(grad.shape)
    n2, c, h, w = get_const_tuple(data.shape)
    kh, kw = (int(k) for k in kernel_size)
    sh, sw = (int(s) for s in strides)
    dh, dw = (int(d) for d in dilation)
    pt, pl, pb, pr = get_pad_tuple(tuple(int(p) for p in padding), ((kh - 1) * dh + 1, (kw - 1) * dw + 1))
    if n != n2 or c % groups or o % groups:
        raise KilnError(f"conv2d_backward_weight: grad {(n, o, oh, ow)} and data {(n2, c, h, w)} with groups={groups} "
                        "do not fit (one batch; channels divisible by groups)")
    if (oh - 1) * sh + (kh - 1) * dh + 1 > h + pt + pb or (ow - 1) * sw + (kw - 1) * dw + 1 > w + pl + pr:
        raise KilnError(f"conv2d_backward_weight: grad {(oh, ow)} is larger than the convolution of data {(h, w)} "
                        f"by a {(kh, kw)} kernel gives")
    padded = pad(data, [0, 0, pt, pl], [0, 0, pb, pr], name="pad_temp")
    cpg, opg = c // groups, o // groups
    rn = te.reduce_axis((0, n), name="rn")
    ry = te.reduce_axis((0, oh), name="ry")
    rx = te.reduce_axis((0, ow), name="rx")

    def body(oo, ii, r, s):
        ch = ii if groups == 1 else (oo // opg) * cpg + ii
        return T.sum(T.cast(grad[rn, oo, ry, rx], out_dtype)
                     * T.cast(padded[rn, ch, ry * sh + r * dh, rx * sw + s * dw], out_dtype), axis=[rn, ry, rx])
    return te.compute((o, cpg, kh, kw), body, name="conv2d_backward_weight", tag="conv2d_backward_weight")
