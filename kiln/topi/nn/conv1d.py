"""1-D convolution in NCW layout with OIW kernels (TVM's ``topi.nn.conv1d`` / ``conv1d_ncw`` / ``group_conv1d_ncw``)."""
from __future__ import annotations

from ... import te
from ...error import KilnError
from ...tir import op as T
from ..utils import get_const_tuple
from .pad import pad
from .utils import get_pad_tuple1d

__all__ = ["conv1d", "conv1d_ncw", "group_conv1d_ncw"]


def _single(v, what):
    if isinstance(v, int):
        return v
    v = get_const_tuple(v)
    if len(v) != 1:
        raise KilnError(f"conv1d: {what} must be one integer, got {v}")
    return int(v[0])


def group_conv1d_ncw(data, kernel, strides=1, padding="VALID", dilation=1, groups=1, out_dtype=None):
    """Grouped conv1d: data [N, C, W], kernel [F, C // groups, K] -> [N, F, OW]."""
    out_dtype = out_dtype or data.dtype
    n, c, w = get_const_tuple(data.shape)
    f, cg, k = get_const_tuple(kernel.shape)
    if groups < 1 or c % groups or f % groups or c // groups != cg:
        raise KilnError(f"conv1d: data channels {c}, kernel shape {(f, cg, k)} and groups={groups} do not fit "
                        f"(the kernel needs {c // max(groups, 1)} input channels per group)")
    s, d = _single(strides, "strides"), _single(dilation, "dilation")
    dk = (k - 1) * d + 1
    if not isinstance(padding, (str, int)):
        padding = get_const_tuple(padding)
    pl, pr = get_pad_tuple1d(padding, (dk,))
    ow = (w + pl + pr - dk) // s + 1
    if ow <= 0:
        raise KilnError(f"conv1d: input width {w} with padding {(pl, pr)} is smaller than the kernel extent {dk}")
    padded = pad(data, [0, 0, pl], [0, 0, pr], name="pad_temp") if pl or pr else data
    rc = te.reduce_axis((0, cg), name="rc")
    rw = te.reduce_axis((0, k), name="rw")
    f_per_group = f // groups

    def body(b, ff, x):
        ch = rc if groups == 1 else (ff // f_per_group) * cg + rc
        return T.sum(T.cast(padded[b, ch, x * s + rw * d], out_dtype) * T.cast(kernel[ff, rc, rw], out_dtype),
                     axis=[rc, rw])
    name = "conv1d_ncw" if groups == 1 else "group_conv1d_ncw"
    return te.compute((n, f, ow), body, name=name, tag=name)


def conv1d_ncw(data, kernel, strides=1, padding="VALID", dilation=1, out_dtype=None):
    return group_conv1d_ncw(data, kernel, strides, padding, dilation, 1, out_dtype)


def conv1d(data, kernel, strides=1, padding="VALID", dilation=1, data_layout="NCW", kernel_layout="",
           out_dtype=None):
    """conv1d dispatching on ``data_layout`` (kiln computes NCW with OIW kernels)."""
    if data_layout != "NCW" or kernel_layout not in ("", "OIW"):
        raise KilnError(f"conv1d: kiln computes NCW data with OIW kernels, got {data_layout}/{kernel_layout or 'OIW'}")
    return conv1d_ncw(data, kernel, strides, padding, dilation, out_dtype)
