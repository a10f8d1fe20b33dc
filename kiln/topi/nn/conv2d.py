"""2-D convolution computes (NCHW / NHWC, strides, padding, dilation, groups, depthwise, transposed)."""
from __future__ import annotations

from ... import te
from ...error import KilnError
from ...tir import op as T
from ..testing.common import as_tuple
from ..utils import get_const_tuple
from .dilate import dilate
from .pad import pad
from .utils import get_pad_tuple


def _params(stride, dilation, padding, k_h, k_w):
    s_h, s_w = as_tuple(get_const_tuple(stride) if not isinstance(stride, int) else stride, 2, "strides")
    d_h, d_w = as_tuple(get_const_tuple(dilation) if not isinstance(dilation, int) else dilation, 2, "dilation")
    dk_h, dk_w = (k_h - 1) * d_h + 1, (k_w - 1) * d_w + 1
    if not isinstance(padding, (str, int)):
        padding = get_const_tuple(padding)
    return s_h, s_w, d_h, d_w, get_pad_tuple(padding, (dk_h, dk_w)), dk_h, dk_w


def _out_size(size, pad_total, dk, s, what):
    out = (size + pad_total - dk) // s + 1
    if not isinstance(out, int):
        # a symbolic size (a VM kernel): simplified, so a same-padded stride-1 conv's output extent is the
        # input's own variable and a fused residual add over both sees one extent (no may-be-1 broadcast
        # guard on the conv's output, which made its register tile a growing buffer)
        from ...arith import Analyzer
        out = Analyzer().simplify(out)
    if isinstance(out, int) and out <= 0:  # a symbolic size (a VM kernel): the shape function's business
        raise KilnError(f"{what}: input size {size} with padding {pad_total} is smaller than the kernel extent {dk}")
    return out


def group_conv2d_nchw(Input, Filter, stride, padding, dilation, groups, out_dtype=None):
    """Grouped conv2d: Input [N, C, H, W], Filter [F, C // groups, KH, KW] -> [N, F, OH, OW]."""
    out_dtype = out_dtype or Input.dtype
    n, c, h, w = get_const_tuple(Input.shape)
    f, cg, k_h, k_w = get_const_tuple(Filter.shape)
    if c % groups or f % groups or c // groups != cg:
        raise KilnError(f"conv2d: data channels {c}, weight shape {(f, cg, k_h, k_w)} and groups={groups} "
                        f"do not fit (weight needs {c // max(groups, 1)} input channels per group)")
    s_h, s_w, d_h, d_w, (pt, pl, pb, pr), dk_h, dk_w = _params(stride, dilation, padding, k_h, k_w)
    o_h = _out_size(h, pt + pb, dk_h, s_h, "conv2d")
    o_w = _out_size(w, pl + pr, dk_w, s_w, "conv2d")
    data = pad(Input, [0, 0, pt, pl], [0, 0, pb, pr], name="pad_temp")
    rc = te.reduce_axis((0, cg), name="rc")
    ry = te.reduce_axis((0, k_h), name="ry")
    rx = te.reduce_axis((0, k_w), name="rx")
    f_per_group = f // groups

    def body(nn, ff, yy, xx):
        ch = rc if groups == 1 else (ff // f_per_group) * cg + rc
        return T.sum(T.cast(data[nn, ch, yy * s_h + ry * d_h, xx * s_w + rx * d_w], out_dtype)
                     * T.cast(Filter[ff, rc, ry, rx], out_dtype), axis=[rc, ry, rx])
    name = "conv2d_nchw" if groups == 1 else "group_conv2d_nchw"
    return te.compute((n, f, o_h, o_w), body, name=name, tag=name)


def conv2d_nchw(Input, Filter, stride, padding, dilation, out_dtype=None):
    return group_conv2d_nchw(Input, Filter, stride, padding, dilation, 1, out_dtype)


def group_conv2d_nhwc(Input, Filter, stride, padding, dilation, groups, out_dtype=None):
    """Grouped conv2d: Input [N, H, W, C], Filter [KH, KW, C // groups, F] -> [N, OH, OW, F]."""
    out_dtype = out_dtype or Input.dtype
    n, h, w, c = get_const_tuple(Input.shape)
    k_h, k_w, cg, f = get_const_tuple(Filter.shape)
    if c % groups or f % groups or c // groups != cg:
        raise KilnError(f"conv2d (NHWC): data channels {c}, weight shape {(k_h, k_w, cg, f)} and groups={groups} "
                        "do not fit")
    s_h, s_w, d_h, d_w, (pt, pl, pb, pr), dk_h, dk_w = _params(stride, dilation, padding, k_h, k_w)
    o_h = _out_size(h, pt + pb, dk_h, s_h, "conv2d")
    o_w = _out_size(w, pl + pr, dk_w, s_w, "conv2d")
    data = pad(Input, [0, pt, pl, 0], [0, pb, pr, 0], name="pad_temp")
    rc = te.reduce_axis((0, cg), name="rc")
    ry = te.reduce_axis((0, k_h), name="ry")
    rx = te.reduce_axis((0, k_w), name="rx")
    f_per_group = f // groups

    def body(nn, yy, xx, ff):
        ch = rc if groups == 1 else (ff // f_per_group) * cg + rc
        return T.sum(T.cast(data[nn, yy * s_h + ry * d_h, xx * s_w + rx * d_w, ch], out_dtype)
                     * T.cast(Filter[ry, rx, rc, ff], out_dtype), axis=[ry, rx, rc])
    name = "conv2d_nhwc" if groups == 1 else "group_conv2d_nhwc"
    return te.compute((n, o_h, o_w, f), body, name=name, tag=name)


def conv2d_nhwc(Input, Filter, stride, padding, dilation, out_dtype="float32"):
    return group_conv2d_nhwc(Input, Filter, stride, padding, dilation, 1, out_dtype)


def depthwise_conv2d_nchw(Input, Filter, stride, padding, dilation, out_dtype=None):
    """Depthwise conv2d: Filter [C, multiplier, KH, KW] -> [N, C * multiplier, OH, OW]."""
    out_dtype = out_dtype or Input.dtype
    n, c, h, w = get_const_tuple(Input.shape)
    fc, mult, k_h, k_w = get_const_tuple(Filter.shape)
    if fc != c:
        raise KilnError(f"depthwise_conv2d: data has {c} channels but the filter {fc}")
    s_h, s_w, d_h, d_w, (pt, pl, pb, pr), dk_h, dk_w = _params(stride, dilation, padding, k_h, k_w)
    o_h = _out_size(h, pt + pb, dk_h, s_h, "depthwise_conv2d")
    o_w = _out_size(w, pl + pr, dk_w, s_w, "depthwise_conv2d")
    data = pad(Input, [0, 0, pt, pl], [0, 0, pb, pr], name="PaddedInput")
    ry = te.reduce_axis((0, k_h), name="ry")
    rx = te.reduce_axis((0, k_w), name="rx")

    def body(b, ch, i, j):
        return T.sum(T.cast(data[b, ch // mult, i * s_h + ry * d_h, j * s_w + rx * d_w], out_dtype)
                     * T.cast(Filter[ch // mult, ch % mult, ry, rx], out_dtype), axis=[ry, rx])
    return te.compute((n, c * mult, o_h, o_w), body, name="DepthwiseConv2d", tag="depthwise_conv2d_nchw")


def depthwise_conv2d_nhwc(Input, Filter, stride, padding, dilation, out_dtype=None):
    """Depthwise conv2d: Input NHWC, Filter [KH, KW, C, multiplier]."""
    out_dtype = out_dtype or Input.dtype
    n, h, w, c = get_const_tuple(Input.shape)
    k_h, k_w, fc, mult = get_const_tuple(Filter.shape)
    if fc != c:
        raise KilnError(f"depthwise_conv2d: data has {c} channels but the filter {fc}")
    s_h, s_w, d_h, d_w, (pt, pl, pb, pr), dk_h, dk_w = _params(stride, dilation, padding, k_h, k_w)
    o_h = _out_size(h, pt + pb, dk_h, s_h, "depthwise_conv2d")
    o_w = _out_size(w, pl + pr, dk_w, s_w, "depthwise_conv2d")
    data = pad(Input, [0, pt, pl, 0], [0, pb, pr, 0], name="PaddedInput")
    ry = te.reduce_axis((0, k_h), name="ry")
    rx = te.reduce_axis((0, k_w), name="rx")

    def body(b, i, j, ch):
        return T.sum(T.cast(data[b, i * s_h + ry * d_h, j * s_w + rx * d_w, ch // mult], out_dtype)
                     * T.cast(Filter[ry, rx, ch // mult, ch % mult], out_dtype), axis=[ry, rx])
    return te.compute((n, o_h, o_w, c * mult), body, name="DepthwiseConv2d", tag="depthwise_conv2d_nhwc")


def conv2d(input, filter, strides, padding, dilation, layout="NCHW", out_dtype=None, groups=1):  # noqa: A002
    """conv2d in NCHW (weight OIHW) or NHWC (weight HWIO) layout."""
    if layout == "NCHW":
        return group_conv2d_nchw(input, filter, strides, padding, dilation, groups, out_dtype)
    if layout == "NHWC":
        return group_conv2d_nhwc(input, filter, strides, padding, dilation, groups, out_dtype)
    raise KilnError(f"conv2d: layout {layout!r} is not supported (NCHW or NHWC)")


def group_conv2d_transpose_nchw(data, kernel, stride, padding, out_dtype, output_padding, groups, dilation=1):
    """Transposed conv2d: data [N, C, H, W], kernel [C, F // groups, KH, KW] (IOHW) -> [N, F, OH, OW]."""
    out_dtype = out_dtype or data.dtype
    n, c, h, w = get_const_tuple(data.shape)
    kc, fg, k_h, k_w = get_const_tuple(kernel.shape)
    if kc != c or c % groups:
        raise KilnError(f"conv2d_transpose: data channels {c}, kernel {(kc, fg, k_h, k_w)}, groups={groups} do not fit")
    s_h, s_w = as_tuple(stride, 2, "strides")
    d_h, d_w = as_tuple(dilation, 2, "dilation")
    op_h, op_w = as_tuple(output_padding, 2, "output_padding")
    if op_h >= max(s_h, d_h) or op_w >= max(s_w, d_w):
        raise KilnError(f"conv2d_transpose: output_padding {(op_h, op_w)} must be smaller than the stride "
                        f"{(s_h, s_w)} or the dilation")
    pt, pl, pb, pr = get_pad_tuple(padding, (k_h, k_w))
    dk_h, dk_w = (k_h - 1) * d_h + 1, (k_w - 1) * d_w + 1
    dilated = dilate(data, [1, 1, s_h, s_w], name="data_dilate")
    bt, bl = dk_h - 1 - pt, dk_w - 1 - pl
    bb, br = dk_h - 1 - pb + op_h, dk_w - 1 - pr + op_w
    # padding beyond the kernel extent crops the output (negative implicit padding), as PyTorch and TVM allow
    sh_t, sh_l = max(0, -bt), max(0, -bl)
    padded = pad(dilated, [0, 0, max(0, bt), max(0, bl)], [0, 0, max(0, bb), max(0, br)], name="data_pad")
    o_h = (h - 1) * s_h - pt - pb + dk_h + op_h
    o_w = (w - 1) * s_w - pl - pr + dk_w + op_w
    cg = c // groups
    dc = te.reduce_axis((0, cg), name="dc")
    dh = te.reduce_axis((0, k_h), name="dh")
    dw = te.reduce_axis((0, k_w), name="dw")

    def body(b, f, y, x):
        g = f // fg
        ch = dc if groups == 1 else g * cg + dc
        return T.sum(T.cast(padded[b, ch, y + sh_t + dh * d_h, x + sh_l + dw * d_w], out_dtype)
                     * T.cast(kernel[ch, f % fg if groups > 1 else f, k_h - 1 - dh, k_w - 1 - dw], out_dtype),
                     axis=[dc, dh, dw])
    return te.compute((n, fg * groups, o_h, o_w), body, name="conv2d_transpose_nchw", tag="conv2d_transpose_nchw")


def conv2d_transpose_nchw(Input, Filter, strides, padding, out_dtype, output_padding, dilation=1):
    return group_conv2d_transpose_nchw(Input, Filter, strides, padding, out_dtype, output_padding, 1, dilation)
