"""``conv2d_backward_weight_python`` (TVM's ``tvm.topi.testing`` name): numpy weight gradient of a conv2d."""
from __future__ import annotations

import numpy as np


def _four(padding) -> tuple:
    p = tuple(int(v) for v in (padding if isinstance(padding, (list, tuple)) else (padding,)))
    if len(p) == 1:
        return p * 4
    if len(p) == 2:
        return (p[0], p[1], p[0], p[1])
    return p


def conv2d_backward_weight_nchw_python(dy_np, x_np, kernel_size, stride, padding, groups=1, channels=None,
                                       dilation=(1, 1)):
    """dW [O, C // groups, KH, KW] of conv2d(x [N, C, H, W]) given dy [N, O, OH, OW]."""
    dy = np.asarray(dy_np, dtype=np.float64)
    x = np.asarray(x_np, dtype=np.float64)
    n, o, oh, ow = dy.shape
    c = x.shape[1]
    if channels is not None and int(channels) != o:
        raise ValueError(f"conv2d_backward_weight_python: channels={channels} but dy has {o} channels")
    kh, kw = (int(k) for k in kernel_size)
    sh, sw = (int(s) for s in (stride if isinstance(stride, (list, tuple)) else (stride, stride)))
    dh, dw = (int(d) for d in (dilation if isinstance(dilation, (list, tuple)) else (dilation, dilation)))
    pt, pl, pb, pr = _four(padding)
    padded = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    cpg, opg = c // groups, o // groups
    out = np.zeros((o, cpg, kh, kw))
    for g in range(groups):
        gs = dy[:, g * opg:(g + 1) * opg]
        ds = padded[:, g * cpg:(g + 1) * cpg]
        for r in range(kh):
            for s in range(kw):
                win = ds[:, :, r * dh:r * dh + (oh - 1) * sh + 1:sh, s * dw:s * dw + (ow - 1) * sw + 1:sw]
                out[g * opg:(g + 1) * opg, :, r, s] = np.einsum("noyx,niyx->oi", gs, win)
    return out.astype(np.result_type(dy_np, x_np))


def conv2d_backward_weight_python(dy_np, x_np, kernel_size, stride, padding, layout="NCHW", groups=1, channels=None):
    """NCHW: dW in OIHW; NHWC: dW in OHWI (TVM's convention)."""
    if layout == "NCHW":
        return conv2d_backward_weight_nchw_python(dy_np, x_np, kernel_size, stride, padding, groups, channels)
    if layout != "NHWC":
        raise ValueError(f"conv2d_backward_weight_python: layout must be NCHW or NHWC, got {layout!r}")
    oihw = conv2d_backward_weight_nchw_python(np.transpose(dy_np, [0, 3, 1, 2]), np.transpose(x_np, [0, 3, 1, 2]),
                                              kernel_size, stride, padding, groups, channels)
    return np.transpose(oihw, [0, 2, 3, 1])
