"""Shape functions of the 1-D/3-D and transposed convolutions and pools, the like-ops, indexing, scans, the
N-d resizes and the vision ops (TVM's ``register_shape_func`` for them); ints or symbolic dims, as in
``shape_func``. ``shape_func`` merges ``MORE_BY_OP`` into its registry."""
from __future__ import annotations

from ...error import OpNotImplemented
from ._layout import from_primal, to_primal
from .nn._conv_pool import _transpose_kernel_dims, pad4, pair
from .nn._nn_3d import pad6, triple
from .nn._spatial_attrs import pad_tuple, pooled_size, window_span
from .shape_func import _axes, _prod, _static


def _one(v) -> int:
    v = tuple(v) if isinstance(v, (list, tuple)) else (v,)
    return int(v[0])


def _conv_out(n, k, s, d, pad):
    return (n + pad - ((k - 1) * d + 1)) // s + 1


def _pool_out(n, k, s, d, pad, ceil_mode):
    return pooled_size(window_span(n, k, d, pad), s, ceil_mode)


def _tconv_out(n, k, s, d, pad, out_pad):
    return (n - 1) * s + (k - 1) * d + 1 - pad + out_pad


# -- convolutions ------------------------------------------------------------------------------------------------
def conv1d_shape_func(attrs, inputs, out_ndims):
    (n, _, w), (o, _, k) = tuple(inputs[0]), tuple(inputs[1])
    pl, pr = pad_tuple(attrs.padding, 1)
    return [(n, o, _conv_out(w, k, _one(attrs.strides), _one(attrs.dilation), pl + pr))]


def conv3d_shape_func(attrs, inputs, out_ndims):
    data, weight = tuple(inputs[0]), tuple(inputs[1])
    st, dl, p = triple(attrs.strides, "strides"), triple(attrs.dilation, "dilation"), pad6(attrs.padding)
    out = tuple(_conv_out(data[2 + j], weight[2 + j], st[j], dl[j], p[j] + p[j + 3]) for j in range(3))
    return [(data[0], weight[0]) + out]


def conv2d_transpose_shape_func(attrs, inputs, out_ndims):
    d = to_primal(tuple(inputs[0]), attrs.data_layout)
    _, opg, kh, kw = _transpose_kernel_dims(tuple(inputs[1]), attrs.kernel_layout)
    sh, sw = pair(attrs.strides, "strides")
    dh, dw = pair(attrs.dilation, "dilation")
    oph, opw = pair(attrs.output_padding, "output_padding")
    pt, pl, pb, pr = pad4(attrs.padding)
    oh = _tconv_out(d["H"], kh, sh, dh, pt + pb, oph)
    ow = _tconv_out(d["W"], kw, sw, dw, pl + pr, opw)
    out_c = opg * int(attrs.groups)
    return [tuple(from_primal({"N": d["N"], "C": out_c, "H": oh, "W": ow}, attrs.out_layout or attrs.data_layout))]


def conv1d_transpose_shape_func(attrs, inputs, out_ndims):
    (n, _, w), (_, opg, k) = tuple(inputs[0]), tuple(inputs[1])
    pl, pr = pad_tuple(attrs.padding, 1)
    out = _tconv_out(w, k, _one(attrs.strides), _one(attrs.dilation), pl + pr, _one(attrs.output_padding))
    return [(n, opg * int(attrs.groups), out)]


def conv3d_transpose_shape_func(attrs, inputs, out_ndims):
    data, weight = tuple(inputs[0]), tuple(inputs[1])
    st, dl = triple(attrs.strides, "strides"), triple(attrs.dilation, "dilation")
    op, p = triple(attrs.output_padding, "output_padding"), pad6(attrs.padding)
    out = tuple(_tconv_out(data[2 + j], weight[2 + j], st[j], dl[j], p[j] + p[j + 3], op[j]) for j in range(3))
    return [(data[0], weight[1] * int(attrs.groups)) + out]


# -- pools -------------------------------------------------------------------------------------------------------
def pool1d_shape_func(attrs, inputs, out_ndims):
    n, c, w = tuple(inputs[0])
    pl, pr = pad_tuple(attrs.padding, 1)
    return [(n, c, _pool_out(w, _one(attrs.pool_size), _one(attrs.strides), _one(attrs.dilation), pl + pr,
                             attrs.ceil_mode))]


def pool3d_shape_func(attrs, inputs, out_ndims):
    data = tuple(inputs[0])
    ks, st = triple(attrs.pool_size, "pool_size"), triple(attrs.strides, "strides")
    dl, p = triple(attrs.dilation, "dilation"), pad6(attrs.padding)
    return [data[:2] + tuple(_pool_out(data[2 + j], ks[j], st[j], dl[j], p[j] + p[j + 3], attrs.ceil_mode)
                             for j in range(3))]


def _adaptive_nd(nd):
    def fn(attrs, inputs, out_ndims):
        data = tuple(inputs[0])
        size = tuple(int(s) for s in attrs.output_size) if attrs.output_size else ()
        if not size:
            return [data]
        size = size * nd if len(size) == 1 else size
        return [data[:2] + size]
    return fn


# -- like ops, indexing, scans -----------------------------------------------------------------------------------
def like_shape_func(attrs, inputs, out_ndims):
    """``broadcast_to_like`` / ``collapse_sum_like``: the second input's shape."""
    return [tuple(inputs[1])]


def collapse_sum_to_shape_func(attrs, inputs, out_ndims):
    return [tuple(int(d) for d in attrs.shape)]


def slice_like_shape_func(attrs, inputs, out_ndims):
    data, like = list(inputs[0]), tuple(inputs[1])
    axes = _axes(attrs.axes, len(data)) if attrs.axes else range(min(len(data), len(like)))
    for a in axes:
        data[a] = like[a]
    return [tuple(data)]


def gather_nd_shape_func(attrs, inputs, out_ndims):
    data, idx = tuple(inputs[0]), tuple(inputs[1])
    m = idx[0] if _static(idx[0]) else attrs.index_rank
    if m is None:
        raise OpNotImplemented("gather_nd: the first dimension of indices (how many data axes it indexes) must be "
                               "static or given as index_rank to run on relay.Any() shapes")
    return [idx[1:] + data[int(m):]]


def data_shape_func(attrs, inputs, out_ndims):
    """Ops whose output has the first input's shape (scatter_elements, sequence_mask, strided_set)."""
    return [tuple(inputs[0])]


def scan_shape_func(attrs, inputs, out_ndims):
    """``cumsum`` / ``cumprod``: the input's shape, or its flattened length when ``axis`` is None."""
    shape = tuple(inputs[0])
    return [(_prod(shape),)] if attrs.axis is None else [shape]


# -- image / vision ----------------------------------------------------------------------------------------------
def _resize_nd(letters):
    def fn(attrs, inputs, out_ndims):
        shape = list(inputs[0])
        for c, n in zip(letters, attrs.size):
            shape[attrs.layout.index(c)] = int(n)
        return [tuple(shape)]
    return fn


def roi_align_shape_func(attrs, inputs, out_ndims):
    data, rois = tuple(inputs[0]), tuple(inputs[1])
    p = tuple(int(v) for v in attrs.pooled_size)
    ph, pw = p * 2 if len(p) == 1 else p
    return [(rois[0], data[1], ph, pw)]


def nms_shape_func(attrs, inputs, out_ndims):
    """TVM's choice: the static upper bound, (batch, num_anchors) indices padded with -1 and (batch, 1) counts."""
    b, n = tuple(inputs[0])[:2]
    return [(b, n), (b, 1)]


MORE_BY_OP = {
    "nn.conv1d": conv1d_shape_func, "nn.conv3d": conv3d_shape_func,
    "nn.conv2d_transpose": conv2d_transpose_shape_func, "nn.conv1d_transpose": conv1d_transpose_shape_func,
    "nn.conv3d_transpose": conv3d_transpose_shape_func,
    "nn.max_pool1d": pool1d_shape_func, "nn.avg_pool1d": pool1d_shape_func,
    "nn.max_pool3d": pool3d_shape_func, "nn.avg_pool3d": pool3d_shape_func,
    "nn.adaptive_max_pool1d": _adaptive_nd(1), "nn.adaptive_avg_pool1d": _adaptive_nd(1),
    "nn.adaptive_max_pool3d": _adaptive_nd(3), "nn.adaptive_avg_pool3d": _adaptive_nd(3),
    "broadcast_to_like": like_shape_func, "collapse_sum_like": like_shape_func,
    "collapse_sum_to": collapse_sum_to_shape_func, "slice_like": slice_like_shape_func,
    "gather_nd": gather_nd_shape_func, "scatter_elements": data_shape_func, "sequence_mask": data_shape_func,
    "strided_set": data_shape_func, "cumsum": scan_shape_func, "cumprod": scan_shape_func,
    "image.resize1d": _resize_nd("W"), "image.resize3d": _resize_nd("DHW"),
    "vision.roi_align": roi_align_shape_func, "vision.non_max_suppression": nms_shape_func,
}
