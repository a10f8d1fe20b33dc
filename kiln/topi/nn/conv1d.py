"""1-D convolution in NCW layout with OIW kernels (TVM's ``topi.nn.conv1d`` / ``conv1d_ncw`` / ``group_conv1d_ncw``)."""
from __future__ import annotations

from ... import te
from ...error import KilnError
from ...tir import op as T
from ..utils import get_const_tuple
from .pad import pad
from .utils import get_pad_tuple1d
from .conv3d import group_conv3d_transpose_ncdhw

__all__ = ["conv1d", "conv1d_ncw", "group_conv1d_ncw", "conv1d_transpose_ncw", "group_conv1d_transpose_ncw"]


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
    if isinstance(ow, int) and ow <= 0:  # a symbolic width is checked by the shape function's caller
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


def group_conv1d_transpose_ncw(data, kernel, stride, padding, out_dtype, output_padding, groups=1, dilation=1):
    """Transposed conv1d: data [N, C, W], kernel [C, F // groups, K] (IOW) -> [N, F, OW]; ``padding`` is one
    value or (left, right). Computed as the 3-D transposed convolution of unit depth and height."""
    n, c, w = get_const_tuple(data.shape)
    kc, fg, k = get_const_tuple(kernel.shape)
    pads = get_const_tuple(padding) if not isinstance(padding, int) else (padding,)
    if len(pads) == 1:
        pads = pads * 2
    if len(pads) != 2:
        raise KilnError(f"conv1d_transpose: padding must have 1 or 2 values, got {pads}")
    data3 = te.compute((n, c, 1, 1, w), lambda b, ch, z, y, x: data[b, ch, x], name="data_3d")
    kernel3 = te.compute((kc, fg, 1, 1, k), lambda i, o, z, y, x: kernel[i, o, x], name="kernel_3d")
    out3 = group_conv3d_transpose_ncdhw(data3, kernel3, (1, 1, _single(stride, "stride")),
                                        (0, 0, pads[0], 0, 0, pads[1]), out_dtype,
                                        (0, 0, _single(output_padding, "output_padding")), groups,
                                        (1, 1, _single(dilation, "dilation")))
    on, of, _, _, ow = get_const_tuple(out3.shape)
    return te.compute((on, of, ow), lambda b, f, x: out3[b, f, 0, 0, x], name="conv1d_transpose_ncw",
                      tag="conv1d_transpose_ncw")


def conv1d_transpose_ncw(data, kernel, stride, padding, out_dtype, output_padding=0):
    """TVM's ``topi.nn.conv1d_transpose_ncw`` (groups 1, no dilation)."""
    return group_conv1d_transpose_ncw(data, kernel, stride, padding, out_dtype, output_padding)
