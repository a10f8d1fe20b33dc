"""Shape functions (TVM's ``register_shape_func``): an op's output shapes computed from its inputs' shapes.

A data-independent shape function gets ``inputs`` = one shape (a tuple of dims) per input tensor (a tuple
argument contributes one shape per field) and returns one shape per output. Dims are Python ints or symbolic
``tir`` expressions: the same function computes concrete shapes at run time and, traced over symbolic dims
at compile time, the output-shape expressions the VM evaluates (TVM compiles its shape functions with hybrid
script; kiln's are plain Python over ints-or-expressions). A data-dependent shape function gets the input
*values* (numpy arrays) instead.
"""
from __future__ import annotations

import numpy as np

from ...error import OpNotImplemented, TypeInferenceError
from ...ir.op import Op
from .op import register_shape_func
from ...tir import op as T
from .type_relations import reduce_axes
from ._layout import from_primal, to_primal
from .nn._conv_pool import pad4, pair
from .nn._spatial_attrs import pooled_size, window_span
from ...topi.transform import infer_reshape_shape
from ...topi.utils import prod as _prod
from .transform import infer_reshape, slice_plan


# -- helpers over ints or symbolic dims -------------------------------------------------------------------------
def _static(d) -> bool:
    return isinstance(d, (int, np.integer))


def dim_max(a, b):
    if _static(a) and _static(b):
        return max(int(a), int(b))
    return T.max(a, b)


def dim_min(a, b):
    if _static(a) and _static(b):
        return min(int(a), int(b))
    return T.min(a, b)


def broadcast_dims(a, b):
    """One broadcast dimension: 1 gives way; two unknown dims are taken as equal-or-1 (their max)."""
    if _static(a) and int(a) == 1:
        return b
    if _static(b) and int(b) == 1:
        return a
    if _static(a) and _static(b):
        if int(a) != int(b):
            raise TypeInferenceError(f"shape function: dimensions {a} and {b} do not broadcast")
        return int(a)
    if _static(a):
        return int(a)
    if _static(b):
        return int(b)
    return dim_max(a, b)


def _axes(axis, ndim):
    return [int(a) + ndim if int(a) < 0 else int(a) for a in axis]


# -- families ---------------------------------------------------------------------------------------------------
def identity_shape_func(attrs, inputs, out_ndims):
    return [tuple(inputs[0])]


def broadcast_shape_func(attrs, inputs, out_ndims):
    a, b = tuple(inputs[0]), tuple(inputs[1])
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + a
    b = (1,) * (n - len(b)) + b
    return [tuple(broadcast_dims(x, y) for x, y in zip(a, b))]


def reduce_shape_func(attrs, inputs, out_ndims):
    shape = tuple(inputs[0])
    axes = reduce_axes(len(shape), attrs.axis, attrs.exclude)
    if attrs.keepdims:
        return [tuple(1 if d in axes else n for d, n in enumerate(shape))]
    return [tuple(n for d, n in enumerate(shape) if d not in axes)]


def dense_shape_func(attrs, inputs, out_ndims):
    data, weight = tuple(inputs[0]), tuple(inputs[1])
    return [data[:-1] + (weight[0],)]


def matmul_shape_func(attrs, inputs, out_ndims):
    a, b = tuple(inputs[0]), tuple(inputs[1])
    m = a[-1] if attrs.transpose_a else a[-2] if len(a) > 1 else 1
    n = b[0] if attrs.transpose_b else b[-1]
    return [a[:-2] + (m, n)]


def batch_matmul_shape_func(attrs, inputs, out_ndims):
    x, y = tuple(inputs[0]), tuple(inputs[1])
    m = x[2] if getattr(attrs, "transpose_a", False) else x[1]
    n = y[1] if getattr(attrs, "transpose_b", True) else y[2]
    return [(broadcast_dims(x[0], y[0]), m, n)]


def conv2d_shape_func(attrs, inputs, out_ndims):
    d = to_primal(tuple(inputs[0]), attrs.data_layout)
    w = to_primal(tuple(inputs[1]), attrs.kernel_layout)
    sh, sw = pair(attrs.strides, "strides")
    dh, dw = pair(attrs.dilation, "dilation")
    pt, pl, pb, pr = pad4(attrs.padding)
    oh = (d["H"] + pt + pb - ((w["H"] - 1) * dh + 1)) // sh + 1
    ow = (d["W"] + pl + pr - ((w["W"] - 1) * dw + 1)) // sw + 1
    return [tuple(from_primal({"N": d["N"], "C": w["O"], "H": oh, "W": ow}, attrs.out_layout or attrs.data_layout))]


def winograd_conv2d_shape_func(attrs, inputs, out_ndims):
    """``contrib_conv2d_winograd_without_weight_transform``: a 3x3 stride-1 conv whose weight is the transformed
    (alpha, alpha, O, I) tensor (kernel_layout "OIHW"/"" names it, as in TVM; else HWOI<o>o)."""
    d = to_primal(tuple(inputs[0]), attrs.data_layout)
    w = to_primal(tuple(inputs[1]), "HWOI" if attrs.kernel_layout in ("", "OIHW") else attrs.kernel_layout)
    pt, pl, pb, pr = pad4(attrs.padding)
    return [tuple(from_primal({"N": d["N"], "C": w["O"], "H": d["H"] + pt + pb - 2, "W": d["W"] + pl + pr - 2},
                              attrs.out_layout or attrs.data_layout))]


def layout_transform_shape_func(attrs, inputs, out_ndims):
    """The same primal sizes in the destination layout (only static axes are split into blocks)."""
    return [tuple(from_primal(to_primal(tuple(inputs[0]), attrs.src_layout), attrs.dst_layout))]


def pool2d_shape_func(attrs, inputs, out_ndims):
    d = to_primal(tuple(inputs[0]), attrs.layout)
    kh, kw = pair(attrs.pool_size, "pool_size")
    sh, sw = pair(attrs.strides, "strides")
    dh, dw = pair(attrs.dilation, "dilation")
    pt, pl, pb, pr = pad4(attrs.padding)
    sizes = [pooled_size(window_span(n, k, dl, pad), s, attrs.ceil_mode)
             for n, k, s, dl, pad in ((d["H"], kh, sh, dh, pt + pb), (d["W"], kw, sw, dw, pl + pr))]
    return [tuple(from_primal({"N": d["N"], "C": d["C"], "H": sizes[0], "W": sizes[1]},
                              attrs.out_layout or attrs.layout))]


def global_pool2d_shape_func(attrs, inputs, out_ndims):
    d = to_primal(tuple(inputs[0]), attrs.layout)
    return [tuple(from_primal({"N": d["N"], "C": d["C"], "H": 1, "W": 1}, attrs.out_layout or attrs.layout))]


def adaptive_pool2d_shape_func(attrs, inputs, out_ndims):
    d = to_primal(tuple(inputs[0]), attrs.layout)
    size = tuple(attrs.output_size) if attrs.output_size else (1, 1)
    if len(size) == 1:
        size = size * 2
    return [tuple(from_primal({"N": d["N"], "C": d["C"], "H": size[0], "W": size[1]},
                              attrs.out_layout or attrs.layout))]


def batch_norm_shape_func(attrs, inputs, out_ndims):
    data = tuple(inputs[0])
    c = data[attrs.axis]
    return [data, (c,), (c,)]


def reshape_shape_func(attrs, inputs, out_ndims):
    shape = tuple(inputs[0])
    if all(_static(d) for d in shape):
        return [tuple(infer_reshape(tuple(int(d) for d in shape), attrs.newshape, attrs.allowzero))]
    return [tuple(infer_reshape_shape(list(shape), list(attrs.newshape), allowzero=attrs.allowzero))]


def reverse_reshape_shape_func(attrs, inputs, out_ndims):
    return [tuple(infer_reshape_shape(list(inputs[0]), list(attrs.newshape), reverse=True))]


def batch_flatten_shape_func(attrs, inputs, out_ndims):
    shape = tuple(inputs[0])
    return [(shape[0], _prod(shape[1:]))]


def transpose_shape_func(attrs, inputs, out_ndims):
    shape = tuple(inputs[0])
    n = len(shape)
    axes = _axes(attrs.axes, n) if attrs.axes else list(range(n - 1, -1, -1))
    return [tuple(shape[a] for a in axes)]


def concatenate_shape_func(attrs, inputs, out_ndims):
    shapes = [tuple(s) for s in inputs]
    axis = _axes([attrs.axis], len(shapes[0]))[0]
    total = 0
    for s in shapes:
        total = total + s[axis]
    out = list(shapes[0])
    for s in shapes:  # a static size in any input fixes the others
        out = [s[d] if (d != axis and _static(s[d])) else out[d] for d in range(len(out))]
    out[axis] = total
    return [tuple(out)]


def stack_shape_func(attrs, inputs, out_ndims):
    shapes = [tuple(s) for s in inputs]
    out = list(shapes[0])
    for s in shapes:  # a static size in any input fixes the others
        out = [s[d] if _static(s[d]) else out[d] for d in range(len(out))]
    axis = int(attrs.axis)
    axis = axis + len(out) + 1 if axis < 0 else axis
    out.insert(axis, len(shapes))
    return [tuple(out)]


def take_shape_func(attrs, inputs, out_ndims):
    data, idx = tuple(inputs[0]), tuple(inputs[1])
    if attrs.axis is None:
        return [idx]
    axis = _axes([attrs.axis], len(data))[0]
    return [data[:axis] + idx + data[axis + 1:]]


def dense_pack_shape_func(attrs, inputs, out_ndims):
    """``nn.contrib_dense_pack``: data rows by ``units`` (or the packed weight's panels x block)."""
    data, weight = tuple(inputs[0]), tuple(inputs[1])
    units = getattr(attrs, "units", None)
    n = int(getattr(units, "value", units)) if units is not None else weight[0] * weight[2]
    return [data[:-1] + (n,)]


def gather_shape_func(attrs, inputs, out_ndims):
    """``gather`` (GatherElements): the output has the indices' shape."""
    return [tuple(inputs[1])]


def where_shape_func(attrs, inputs, out_ndims):
    """``where(cond, x, y)``: the three shapes broadcast together."""
    shape = broadcast_shape_func(attrs, inputs[:2], out_ndims)[0]
    return broadcast_shape_func(attrs, [shape, inputs[2]], out_ndims)


_END_SENTINEL = 2 ** 31 - 1


def strided_slice_shape_func(attrs, inputs, out_ndims):
    """Static begin/end/strides over possibly symbolic dims (numpy slice semantics, end clamped)."""
    shape = tuple(inputs[0])
    if all(_static(d) for d in shape):
        return [tuple(len(range(*p)) for p in slice_plan(tuple(int(d) for d in shape), attrs))]
    ndim = len(shape)
    axes = _axes(attrs.axes, ndim) if attrs.axes is not None else list(range(len(attrs.begin)))
    strides = list(attrs.strides) if attrs.strides else [1]
    out = list(shape)
    for k, ax in enumerate(axes):
        if k >= len(attrs.begin):
            break
        dim = shape[ax]
        stride = int(strides[k] if k < len(strides) else strides[-1])
        if stride <= 0:
            raise OpNotImplemented("strided_slice: negative strides over an unknown dimension are not supported "
                                   "by kiln's shape functions")
        b = int(attrs.begin[k])
        e = int(attrs.end[k]) if k < len(attrs.end) and attrs.end[k] is not None else None
        if attrs.slice_mode == "size":
            e = None if e is None or e < 0 else b + e
        begin = dim_max(dim_min(dim + b if b < 0 else b, dim), 0) if b else 0
        # an end at or past 2**31 - 1 (INT32/INT64_MAX: "to the end") is the dim itself (as topi.strided_slice)
        end = dim if e is None or e >= _END_SENTINEL else dim_max(dim_min(dim + e if e < 0 else e, dim), 0)
        out[ax] = dim_max(end - begin + stride - 1, 0) // stride
    return [tuple(out)]


def squeeze_shape_func(attrs, inputs, out_ndims):
    shape = tuple(inputs[0])
    if attrs.axis is None:
        return [tuple(d for d in shape if not (_static(d) and int(d) == 1))]
    axes = set(_axes(attrs.axis, len(shape)))
    return [tuple(d for i, d in enumerate(shape) if i not in axes)]


def expand_dims_shape_func(attrs, inputs, out_ndims):
    shape = tuple(inputs[0])
    axis = int(attrs.axis)
    axis = axis + len(shape) + 1 if axis < 0 else axis
    return [shape[:axis] + (1,) * int(attrs.num_newaxis) + shape[axis:]]


def split_shape_func(attrs, inputs, out_ndims):
    shape = tuple(inputs[0])
    axis = _axes([attrs.axis], len(shape))[0]
    dim = shape[axis]
    ios = attrs.indices_or_sections
    if isinstance(ios, int):
        step = dim // ios
        sizes = [step] * ios
    else:
        bounds = [0] + [int(i) for i in ios] + [dim]
        sizes = [dim_max(dim_min(e, dim) - dim_min(b, dim), 0) for b, e in zip(bounds[:-1], bounds[1:])]
    return [shape[:axis] + (s,) + shape[axis + 1:] for s in sizes]


def one_hot_shape_func(attrs, inputs, out_ndims):
    """``one_hot``: the indices' shape with ``depth`` inserted at ``axis``."""
    shape = tuple(inputs[0])
    axis = attrs.axis if attrs.axis >= 0 else len(shape) + 1 + attrs.axis
    return [shape[:axis] + (int(attrs.depth),) + shape[axis:]]


def tile_shape_func(attrs, inputs, out_ndims):
    """``tile`` with static ``reps`` (numpy's rule: the shorter of shape/reps is padded with 1s)."""
    shape, reps = tuple(inputs[0]), tuple(int(r) for r in attrs.reps)
    n = max(len(shape), len(reps))
    shape, reps = (1,) * (n - len(shape)) + shape, (1,) * (n - len(reps)) + reps
    return [tuple(d * r if r != 1 else d for d, r in zip(shape, reps))]


def repeat_shape_func(attrs, inputs, out_ndims):
    shape = list(inputs[0])
    axis = _axes([attrs.axis], len(shape))[0]
    shape[axis] = shape[axis] * int(attrs.repeats)
    return [tuple(shape)]


def pad_shape_func(attrs, inputs, out_ndims):
    """``nn.pad`` / ``nn.mirror_pad`` with static widths."""
    shape = tuple(inputs[0])
    return [tuple(d + int(lo) + int(hi) if (int(lo), int(hi)) != (0, 0) else d
                  for d, (lo, hi) in zip(shape, attrs.pad_width))]


def topk_shape_func(attrs, inputs, out_ndims):
    """``topk`` with a static ``k`` (k < 1: the whole axis); one or two outputs as ``ret_type`` says."""
    shape = list(inputs[0])
    axis = _axes([attrs.axis], len(shape))[0]
    if int(attrs.k) >= 1:
        shape[axis] = int(attrs.k) if not _static(shape[axis]) else min(int(attrs.k), int(shape[axis]))
    out = tuple(shape)
    return [out, out] if attrs.ret_type == "both" else [out]


def _spatial_axes(layout: str):
    return layout.index("H"), layout.index("W")


def upsampling_shape_func(attrs, inputs, out_ndims):
    """``nn.upsampling``: H and W times the (float) scales, floored as the type relation does."""
    shape = list(inputs[0])
    for a, scale in zip(_spatial_axes(attrs.layout), (attrs.scale_h, attrs.scale_w)):
        d = shape[a]
        if float(scale).is_integer():
            shape[a] = d * int(scale) if int(scale) != 1 else d
        elif _static(d):
            shape[a] = int(np.floor(int(d) * float(scale)))
        else:
            raise OpNotImplemented(f"nn.upsampling: a non-integer scale ({scale}) over an unknown dimension")
    return [tuple(shape)]


def resize2d_shape_func(attrs, inputs, out_ndims):
    """``image.resize2d`` with a static ``size``: H and W are the size, the other dims pass through."""
    shape = list(inputs[0])
    for a, n in zip(_spatial_axes(attrs.layout), attrs.size):
        shape[a] = int(n)
    return [tuple(shape)]


def depth_to_space_shape_func(attrs, inputs, out_ndims):
    shape, b = list(inputs[0]), int(attrs.block_size)
    c, (h, w) = attrs.layout.index("C"), _spatial_axes(attrs.layout)
    shape[c], shape[h], shape[w] = shape[c] // (b * b), shape[h] * b, shape[w] * b
    return [tuple(shape)]


def space_to_depth_shape_func(attrs, inputs, out_ndims):
    shape, b = list(inputs[0]), int(attrs.block_size)
    c, (h, w) = attrs.layout.index("C"), _spatial_axes(attrs.layout)
    shape[c], shape[h], shape[w] = shape[c] * (b * b), shape[h] // b, shape[w] // b
    return [tuple(shape)]


def arange_shape_func(attrs, inputs, out_ndims):
    """Data-dependent: the length of ``arange(start, stop, step)`` from the three scalar values."""
    start, stop, step = (float(np.asarray(v).reshape(-1)[0]) for v in inputs)
    if step == 0:
        raise TypeInferenceError("arange: step must not be 0")
    return [(max(int(np.ceil((stop - start) / step)), 0),)]


def reshape_like_shape_func(attrs, inputs, out_ndims):
    """``reshape_like(data, shape_like, lhs_begin, lhs_end, rhs_begin, rhs_end)``."""
    from .transform import reshape_like_shape
    return [tuple(reshape_like_shape(inputs[0], inputs[1], attrs))]


_BY_RELATION = {"Identity": identity_shape_func, "IdentityCompRel": identity_shape_func,
                "Broadcast": broadcast_shape_func, "BroadcastComp": broadcast_shape_func,
                "Reduce": reduce_shape_func, "ArgReduce": reduce_shape_func}

_BY_OP = {
    "nn.dense": dense_shape_func, "nn.matmul": matmul_shape_func, "nn.batch_matmul": batch_matmul_shape_func,
    "nn.conv2d": conv2d_shape_func, "nn.contrib_conv2d_NCHWc": conv2d_shape_func,
    "nn.contrib_depthwise_conv2d_NCHWc": conv2d_shape_func,
    "nn.contrib_conv2d_winograd_without_weight_transform": winograd_conv2d_shape_func,
    "layout_transform": layout_transform_shape_func,
    "nn.max_pool2d": pool2d_shape_func, "nn.avg_pool2d": pool2d_shape_func,
    "nn.global_max_pool2d": global_pool2d_shape_func, "nn.global_avg_pool2d": global_pool2d_shape_func,
    "nn.adaptive_max_pool2d": adaptive_pool2d_shape_func, "nn.adaptive_avg_pool2d": adaptive_pool2d_shape_func,
    "nn.batch_norm": batch_norm_shape_func, "reshape": reshape_shape_func,
    "reshape_like": reshape_like_shape_func,
    "contrib_reverse_reshape": reverse_reshape_shape_func,
    "nn.batch_flatten": batch_flatten_shape_func, "transpose": transpose_shape_func,
    "concatenate": concatenate_shape_func, "stack": stack_shape_func, "take": take_shape_func, "strided_slice": strided_slice_shape_func,
    "squeeze": squeeze_shape_func, "expand_dims": expand_dims_shape_func, "split": split_shape_func,
    "gather": gather_shape_func, "where": where_shape_func, "nn.contrib_dense_pack": dense_pack_shape_func,
    "one_hot": one_hot_shape_func, "tile": tile_shape_func, "repeat": repeat_shape_func,
    "nn.pad": pad_shape_func, "nn.mirror_pad": pad_shape_func, "topk": topk_shape_func,
    "variance": reduce_shape_func, "nn.upsampling": upsampling_shape_func, "image.resize2d": resize2d_shape_func,
    "nn.depth_to_space": depth_to_space_shape_func, "nn.space_to_depth": space_to_depth_shape_func,
    # requantize's fixed-point multiply (kiln's qnn lowering): the data's shape, its parameters broadcast into it
    "fixed_point_multiply_broadcast": identity_shape_func,
}
_IDENTITY_OPS = ("nn.softmax", "nn.log_softmax", "nn.layer_norm", "nn.bias_add", "nn.relu", "nn.leaky_relu",
                 "nn.prelu", "clip", "cast", "nn.fast_softmax", "fast_exp", "fast_tanh", "fast_erf", "copy",
                 "zeros_like", "ones_like", "nn.instance_norm", "nn.group_norm", "nn.l2_normalize", "cumsum",
                 "reverse", "sort", "argsort", "cast_like", "full_like", "nn.dropout", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "erf", "negative", "abs", "floor",
                 "ceil", "round", "sign", "nn.lrn", "layout_transform_identity")

from ._shape_func_more import MORE_BY_OP  # noqa: E402  (it reads this module's helpers)
_BY_OP.update(MORE_BY_OP)


def _register_all() -> None:
    for name in Op.list_op_names():
        op = Op.get(name)
        fn = _BY_OP.get(name) or _BY_RELATION.get(getattr(op, "type_rel_name", None))
        if fn is None and name in _IDENTITY_OPS:
            fn = identity_shape_func
        if fn is not None and op.get_attr("FShapeFunc") is None:
            register_shape_func(name, False, fn)
    if "arange" in Op.list_op_names() and Op.get("arange").get_attr("FShapeFunc") is None:
        register_shape_func("arange", True, arange_shape_func)


def get_shape_func(op_name: str):
    """(function, data_dependent) of ``op_name``, or a clear error when it has none."""
    op = Op.get(op_name)
    fn = op.get_attr("FShapeFunc")
    if fn is None:  # an op registered after this module was imported (e.g. ``variance``)
        _register_all()
        fn = op.get_attr("FShapeFunc")
    if fn is None:
        raise OpNotImplemented(f"operator {op_name} has no shape function (register_shape_func), so it cannot run "
                               "on tensors with relay.Any() dimensions yet")
    return fn, bool(op.get_attr("TShapeDataDependent"))


_register_all()
