"""Convolution references (NCHW / NHWC / depthwise / transposed / dilation), in numpy."""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ...error import KilnError
from .common import acc_dtype, as_tuple, get_pad_tuple


def _conv2d_nchw(a_np, w_np, stride, padding, dilation, groups):
    batch, in_c, in_h, in_w = a_np.shape
    num_filter, c_per_group, k_h, k_w = w_np.shape
    if in_c % groups or num_filter % groups or in_c // groups != c_per_group:
        raise KilnError(f"conv2d: input channels {in_c}, weight {w_np.shape} and groups={groups} do not fit")
    s_h, s_w = as_tuple(stride, 2, "stride")
    d_h, d_w = as_tuple(dilation, 2, "dilation")
    dk_h, dk_w = (k_h - 1) * d_h + 1, (k_w - 1) * d_w + 1
    pt, pl, pb, pr = get_pad_tuple(padding, (dk_h, dk_w))
    acc = acc_dtype(a_np.dtype)
    apad = np.pad(a_np.astype(acc), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    out_h = (in_h + pt + pb - dk_h) // s_h + 1
    out_w = (in_w + pl + pr - dk_w) // s_w + 1
    win = sliding_window_view(apad, (dk_h, dk_w), axis=(2, 3))
    win = win[:, :, : (out_h - 1) * s_h + 1 : s_h, : (out_w - 1) * s_w + 1 : s_w, ::d_h, ::d_w]
    win = win.reshape(batch, groups, c_per_group, out_h, out_w, k_h, k_w)
    wg = w_np.astype(acc).reshape(groups, num_filter // groups, c_per_group, k_h, k_w)
    out = np.einsum("ngchwij,gfcij->ngfhw", win, wg, optimize=True)
    return out.reshape(batch, num_filter, out_h, out_w).astype(a_np.dtype)


def conv2d_nchw_python(a_np, w_np, stride, padding, groups=1, dilation=1):
    """conv2d, data NCHW, weight OIHW (I = in_channel // groups); ``dilation`` is a kiln extension."""
    return _conv2d_nchw(a_np, w_np, stride, padding, dilation, groups)


def conv2d_nhwc_python(a_np, w_np, stride, padding, groups=1, dilation=1):
    """conv2d, data NHWC, weight HWIO."""
    a_nchw = a_np.transpose(0, 3, 1, 2)
    w_oihw = w_np.transpose(3, 2, 0, 1)
    return _conv2d_nchw(a_nchw, w_oihw, stride, padding, dilation, groups).transpose(0, 2, 3, 1)


def conv2d_hwcn_python(a_np, w_np, stride, padding):
    """conv2d, data HWCN, weight HWIO."""
    a_nchw = a_np.transpose(3, 2, 0, 1)
    w_oihw = w_np.transpose(3, 2, 0, 1)
    return _conv2d_nchw(a_nchw, w_oihw, stride, padding, 1, 1).transpose(2, 3, 1, 0)


def conv1d_ncw_python(a_np, w_np, stride, padding, dilation=1):
    """conv1d, data NCW, weight OIW; padding an int, 2 ints (left, right), 'VALID' or 'SAME'."""
    if isinstance(padding, (tuple, list)) and len(padding) == 2:
        pad4 = (0, padding[0], 0, padding[1])
    elif isinstance(padding, (int, np.integer)):
        pad4 = (0, int(padding), 0, int(padding))
    else:
        k = (w_np.shape[2] - 1) * as_tuple(dilation, 1)[0] + 1
        _, pl, _, pr = get_pad_tuple(padding, (1, k))
        pad4 = (0, pl, 0, pr)
    out = _conv2d_nchw(a_np[:, :, None, :], w_np[:, :, None, :], (1, as_tuple(stride, 1)[0]), pad4,
                       (1, as_tuple(dilation, 1)[0]), 1)
    return out[:, :, 0, :]


def depthwise_conv2d_python_nchw(input_np, filter_np, stride, padding, dilation=1):
    """Depthwise conv2d: data NCHW, filter [in_channel, channel_multiplier, kh, kw]."""
    in_c, mult, k_h, k_w = filter_np.shape
    if input_np.shape[1] != in_c:
        raise KilnError(f"depthwise_conv2d: data has {input_np.shape[1]} channels, filter {in_c}")
    w = filter_np.reshape(in_c * mult, 1, k_h, k_w)
    return _conv2d_nchw(input_np, w, stride, padding, dilation, in_c)


def depthwise_conv2d_python_nhwc(input_np, filter_np, stride, padding, dilation=1):
    """Depthwise conv2d: data NHWC, filter [kh, kw, in_channel, channel_multiplier]."""
    out = depthwise_conv2d_python_nchw(input_np.transpose(0, 3, 1, 2), filter_np.transpose(2, 3, 0, 1),
                                       stride, padding, dilation)
    return out.transpose(0, 2, 3, 1)


def conv2d_transpose_nchw_python(a_np, w_np, stride, padding, output_padding=(0, 0), groups=1, dilation=1):
    """Transposed conv2d: data NCHW, weight IOHW ([in_channel, out_channel // groups, kh, kw])."""
    batch, in_c, in_h, in_w = a_np.shape
    w_in, f_per_group, k_h, k_w = w_np.shape
    if w_in != in_c or in_c % groups:
        raise KilnError(f"conv2d_transpose: data {a_np.shape}, weight {w_np.shape}, groups={groups} do not fit")
    s_h, s_w = as_tuple(stride, 2, "stride")
    d_h, d_w = as_tuple(dilation, 2, "dilation")
    op_h, op_w = as_tuple(output_padding, 2, "output_padding")
    pt, pl, pb, pr = get_pad_tuple(padding, (k_h, k_w))
    acc = acc_dtype(a_np.dtype)
    full_h = (in_h - 1) * s_h + (k_h - 1) * d_h + 1 + op_h
    full_w = (in_w - 1) * s_w + (k_w - 1) * d_w + 1 + op_w
    out_h = full_h - pt - pb
    out_w = full_w - pl - pr
    cg = in_c // groups
    full = np.zeros((batch, groups, f_per_group, full_h, full_w), dtype=acc)
    a_g = a_np.astype(acc).reshape(batch, groups, cg, in_h, in_w)
    w_g = w_np.astype(acc).reshape(groups, cg, f_per_group, k_h, k_w)
    for kh in range(k_h):
        for kw in range(k_w):
            contrib = np.einsum("ngchw,gcf->ngfhw", a_g, w_g[:, :, :, kh, kw])
            full[:, :, :, kh * d_h : kh * d_h + (in_h - 1) * s_h + 1 : s_h,
                 kw * d_w : kw * d_w + (in_w - 1) * s_w + 1 : s_w] += contrib
    out = full.reshape(batch, groups * f_per_group, full_h, full_w)[:, :, pt : pt + out_h, pl : pl + out_w]
    return out.astype(a_np.dtype)


def conv2d_transpose_nhwc_python(a_nhwc, weight, weight_format, stride, padding, output_padding=(0, 0)):
    """Transposed conv2d on NHWC data; ``weight_format`` is "HWIO", "HWOI", "IOHW" or "OIHW"."""
    perms = {"HWIO": (2, 3, 0, 1), "HWOI": (3, 2, 0, 1), "IOHW": (0, 1, 2, 3), "OIHW": (1, 0, 2, 3)}
    if weight_format not in perms:
        raise KilnError(f"conv2d_transpose_nhwc_python: unknown weight_format {weight_format!r}")
    out = conv2d_transpose_nchw_python(a_nhwc.transpose(0, 3, 1, 2), weight.transpose(perms[weight_format]),
                                       stride, padding, output_padding)
    return out.transpose(0, 2, 3, 1)


def dilate_python(input_np, strides, dilation_value=0.0, out_dtype=None):
    """Insert ``stride - 1`` copies of ``dilation_value`` between neighbours along each axis."""
    if len(strides) != input_np.ndim:
        raise KilnError(f"dilate: {len(strides)} strides for a {input_np.ndim}-D input")
    out_dtype = input_np.dtype if out_dtype is None else out_dtype
    shape = tuple((n - 1) * s + 1 for n, s in zip(input_np.shape, strides))
    out = np.full(shape, dilation_value, dtype=out_dtype)
    out[tuple(slice(None, None, s) for s in strides)] = input_np
    return out


def _pad3d(padding):
    p = (padding,) if isinstance(padding, int) else tuple(int(x) for x in padding)
    if len(p) == 1:
        return p * 6
    if len(p) == 3:
        return p + p
    if len(p) == 6:
        return p
    raise KilnError(f"conv3d: padding must have 1, 3 or 6 values, got {p}")


def conv3d_ncdhw_python(a_np, w_np, stride, padding, groups=1, dilation=1):
    """conv3d, data NCDHW, weight OIDHW (I = in_channel // groups); padding 1, 3 or 6 values
    (front, top, left, back, bottom, right)."""
    batch, in_c = a_np.shape[:2]
    num_filter, cg = w_np.shape[:2]
    ks = w_np.shape[2:]
    if in_c % groups or num_filter % groups or in_c // groups != cg:
        raise KilnError(f"conv3d: input channels {in_c}, weight {w_np.shape} and groups={groups} do not fit")
    st = as_tuple(stride, 3, "stride")
    dl = as_tuple(dilation, 3, "dilation")
    dks = [(k - 1) * d + 1 for k, d in zip(ks, dl)]
    p = _pad3d(padding)
    acc = acc_dtype(a_np.dtype)
    apad = np.pad(a_np.astype(acc), ((0, 0), (0, 0)) + tuple(zip(p[:3], p[3:])))
    out = [(s - dk) // t + 1 for s, dk, t in zip(apad.shape[2:], dks, st)]
    win = sliding_window_view(apad, dks, axis=(2, 3, 4))
    win = win[:, :, : (out[0] - 1) * st[0] + 1: st[0], : (out[1] - 1) * st[1] + 1: st[1],
              : (out[2] - 1) * st[2] + 1: st[2], ::dl[0], ::dl[1], ::dl[2]]
    win = win.reshape(batch, groups, cg, *out, *ks)
    wg = w_np.astype(acc).reshape(groups, num_filter // groups, cg, *ks)
    res = np.einsum("ngcdhwijk,gfcijk->ngfdhw", win, wg, optimize=True)
    return res.reshape(batch, num_filter, *out).astype(a_np.dtype)


def conv3d_transpose_ncdhw_python(a_np, w_np, stride, padding, output_padding=(0, 0, 0), groups=1, dilation=1):
    """Transposed conv3d: data NCDHW, weight IODHW ([in_channel, out_channel // groups, kd, kh, kw])."""
    batch, in_c = a_np.shape[:2]
    sizes = a_np.shape[2:]
    w_in, fg = w_np.shape[:2]
    ks = w_np.shape[2:]
    if w_in != in_c or in_c % groups:
        raise KilnError(f"conv3d_transpose: data {a_np.shape}, weight {w_np.shape}, groups={groups} do not fit")
    st = as_tuple(stride, 3, "stride")
    dl = as_tuple(dilation, 3, "dilation")
    op = as_tuple(output_padding, 3, "output_padding")
    p = _pad3d(padding)
    acc = acc_dtype(a_np.dtype)
    full_sz = [(s - 1) * t + (k - 1) * d + 1 + o for s, t, k, d, o in zip(sizes, st, ks, dl, op)]
    cg = in_c // groups
    full = np.zeros((batch, groups, fg, *full_sz), dtype=acc)
    a_g = a_np.astype(acc).reshape(batch, groups, cg, *sizes)
    w_g = w_np.astype(acc).reshape(groups, cg, fg, *ks)
    for kd in range(ks[0]):
        for kh in range(ks[1]):
            for kw in range(ks[2]):
                contrib = np.einsum("ngcdhw,gcf->ngfdhw", a_g, w_g[:, :, :, kd, kh, kw])
                full[:, :, :, kd * dl[0]: kd * dl[0] + (sizes[0] - 1) * st[0] + 1: st[0],
                     kh * dl[1]: kh * dl[1] + (sizes[1] - 1) * st[1] + 1: st[1],
                     kw * dl[2]: kw * dl[2] + (sizes[2] - 1) * st[2] + 1: st[2]] += contrib
    out = full.reshape(batch, groups * fg, *full_sz)
    out = out[:, :, p[0]: full_sz[0] - p[3], p[1]: full_sz[1] - p[4], p[2]: full_sz[2] - p[5]]
    return out.astype(a_np.dtype)
