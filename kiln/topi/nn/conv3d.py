"""3-D convolution in NCDHW layout: direct (OIDHW kernels, groups, dilation) and transposed (IODHW kernels)
(TVM's ``topi.nn.conv3d_ncdhw`` / ``conv3d_transpose_ncdhw``)."""
from __future__ import annotations

from ... import te
from ...error import KilnError
from ...tir import op as T
from ..utils import get_const_tuple
from .dilate import dilate
from .pad import pad

__all__ = ["conv3d_ncdhw", "group_conv3d_ncdhw", "conv3d_transpose_ncdhw", "group_conv3d_transpose_ncdhw",
           "get_pad_tuple3d"]


def _triple(v, what):
    v = (v,) if isinstance(v, int) else tuple(int(x) for x in get_const_tuple(v))
    if len(v) == 1:
        v = v * 3
    if len(v) != 3:
        raise KilnError(f"conv3d: {what} must have 1 or 3 values, got {v}")
    return v


def get_pad_tuple3d(padding, kernel):
    """(front, top, left, back, bottom, right) from an int, 3 values, 6 values, "SAME" or "VALID"."""
    if isinstance(padding, str):
        if padding.upper() == "VALID":
            return (0,) * 6
        if padding.upper() == "SAME":
            tot = [k - 1 for k in kernel]
            return tuple(t // 2 for t in tot) + tuple(t - t // 2 for t in tot)
        raise KilnError(f"conv3d: unknown padding {padding!r}")
    p = (padding,) if isinstance(padding, int) else tuple(int(x) for x in get_const_tuple(padding))
    if len(p) == 1:
        return p * 6
    if len(p) == 3:
        return p + p
    if len(p) == 6:
        return p
    raise KilnError(f"conv3d: padding must have 1, 3 or 6 values, got {p}")


def group_conv3d_ncdhw(data, kernel, strides, padding, dilation, groups=1, out_dtype=None):
    """data [N, C, D, H, W], kernel [F, C // groups, KD, KH, KW] -> [N, F, OD, OH, OW]."""
    out_dtype = out_dtype or data.dtype
    n, c = get_const_tuple(data.shape)[:2]
    sizes = get_const_tuple(data.shape)[2:]
    f, cg = get_const_tuple(kernel.shape)[:2]
    ks = get_const_tuple(kernel.shape)[2:]
    if groups < 1 or c % groups or f % groups or c // groups != cg:
        raise KilnError(f"conv3d: data channels {c}, kernel shape {get_const_tuple(kernel.shape)} and groups={groups} "
                        f"do not fit (the kernel needs {c // max(groups, 1)} input channels per group)")
    st, dl = _triple(strides, "strides"), _triple(dilation, "dilation")
    dks = [(k - 1) * d + 1 for k, d in zip(ks, dl)]
    pads = get_pad_tuple3d(padding, dks)
    before, after = pads[:3], pads[3:]
    out = [(s + b + a - dk) // t + 1 for s, b, a, dk, t in zip(sizes, before, after, dks, st)]
    if all(isinstance(o, int) for o in out) and min(out) <= 0:
        raise KilnError(f"conv3d: input {sizes} with padding {pads} is smaller than the kernel extent {dks}")
    padded = pad(data, [0, 0] + list(before), [0, 0] + list(after), name="pad_temp") if any(pads) else data
    rc = te.reduce_axis((0, cg), name="rc")
    rz = te.reduce_axis((0, ks[0]), name="rz")
    ry = te.reduce_axis((0, ks[1]), name="ry")
    rx = te.reduce_axis((0, ks[2]), name="rx")
    f_per_group = f // groups

    def body(b, ff, z, y, x):
        ch = rc if groups == 1 else (ff // f_per_group) * cg + rc
        return T.sum(T.cast(padded[b, ch, z * st[0] + rz * dl[0], y * st[1] + ry * dl[1], x * st[2] + rx * dl[2]],
                            out_dtype) * T.cast(kernel[ff, rc, rz, ry, rx], out_dtype), axis=[rc, rz, ry, rx])
    name = "conv3d_ncdhw" if groups == 1 else "group_conv3d_ncdhw"
    return te.compute((n, f, *out), body, name=name, tag=name)


def conv3d_ncdhw(data, kernel, strides, padding, dilation, groups=1, out_dtype=None):
    return group_conv3d_ncdhw(data, kernel, strides, padding, dilation, groups, out_dtype)


def group_conv3d_transpose_ncdhw(data, kernel, strides, padding, out_dtype, output_padding, groups=1, dilation=1):
    """data [N, C, D, H, W], kernel [C, F // groups, KD, KH, KW] (IODHW) -> [N, F, OD, OH, OW]."""
    out_dtype = out_dtype or data.dtype
    n, c = get_const_tuple(data.shape)[:2]
    sizes = get_const_tuple(data.shape)[2:]
    kc, fg = get_const_tuple(kernel.shape)[:2]
    ks = get_const_tuple(kernel.shape)[2:]
    if kc != c or c % groups:
        raise KilnError(f"conv3d_transpose: data channels {c}, kernel {get_const_tuple(kernel.shape)}, "
                        f"groups={groups} do not fit")
    st, dl, op = _triple(strides, "strides"), _triple(dilation, "dilation"), _triple(output_padding, "output_padding")
    if any(o >= max(s, d) for o, s, d in zip(op, st, dl)):
        raise KilnError(f"conv3d_transpose: output_padding {op} must be smaller than the stride {st} or the dilation")
    dks = [(k - 1) * d + 1 for k, d in zip(ks, dl)]
    pads = get_pad_tuple3d(padding, ks)
    before = [dk - 1 - p for dk, p in zip(dks, pads[:3])]
    after = [dk - 1 - p + o for dk, p, o in zip(dks, pads[3:], op)]
    # padding beyond the kernel extent crops the output (negative implicit padding), as PyTorch and TVM allow
    shift = [max(0, -b) for b in before]
    dilated = dilate(data, [1, 1] + list(st), name="data_dilate")
    padded = pad(dilated, [0, 0] + [max(0, b) for b in before], [0, 0] + [max(0, a) for a in after], name="data_pad")
    out = [(s - 1) * t - p0 - p1 + dk + o for s, t, p0, p1, dk, o in zip(sizes, st, pads[:3], pads[3:], dks, op)]
    cg = c // groups
    dc = te.reduce_axis((0, cg), name="dc")
    rz = te.reduce_axis((0, ks[0]), name="dz")
    ry = te.reduce_axis((0, ks[1]), name="dh")
    rx = te.reduce_axis((0, ks[2]), name="dw")

    def body(b, f, z, y, x):
        ch = dc if groups == 1 else (f // fg) * cg + dc
        return T.sum(T.cast(padded[b, ch, z + shift[0] + rz * dl[0], y + shift[1] + ry * dl[1],
                                   x + shift[2] + rx * dl[2]], out_dtype)
                     * T.cast(kernel[ch, f % fg if groups > 1 else f, ks[0] - 1 - rz, ks[1] - 1 - ry, ks[2] - 1 - rx],
                              out_dtype), axis=[dc, rz, ry, rx])
    return te.compute((n, fg * groups, *out), body, name="conv3d_transpose_ncdhw", tag="conv3d_transpose_ncdhw")


def conv3d_transpose_ncdhw(data, kernel, strides, padding, out_dtype, output_padding, groups=1, dilation=1):
    return group_conv3d_transpose_ncdhw(data, kernel, strides, padding, out_dtype, output_padding, groups, dilation)
