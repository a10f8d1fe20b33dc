"""ONNX converters for tensor-manipulation ops: shapes and constants (Shape, Size, Constant, ConstantOfShape,
Range, EyeLike), reshaping (Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Expand, Tile, DepthToSpace,
SpaceToDepth), joining and splitting (Concat, Split), indexing (Slice, Gather, GatherElements, GatherND,
OneHot, Trilu, NonZero of constants), Pad, CumSum, CumProd, TopK, and the reductions (Reduce*, ArgMax, ArgMin).

Shapes are static: anything that determines an output shape (a Reshape target, Slice bounds, split sizes,
pads) must be known at import time; the importer folds shape arithmetic on constants to make it so.
"""
from __future__ import annotations

import numpy as np

from .. import op as _op
from ..op import nn as _nn
from .onnx_common import const, ONNX_DTYPES, onnx_dtype, onnx_op
from .onnx_ops_elemwise import scalar
from ...error import KilnError


def _axis(ctx, axis: int, ndim: int, what: str = "axis") -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise ctx.error(f"{what} {axis} is out of range for a {ndim}-D tensor")
    return axis % ndim if ndim else 0


def _int64(values):
    return const(np.asarray(values, dtype="int64"))


# -- shapes and constants ---------------------------------------------------------------------------------------
@onnx_op("Shape", since=1)
def _shape(inputs, attr, ctx):
    shape = list(ctx.shape(inputs[0]))
    n = len(shape)
    start = int(attr.get("start", 0))
    end = attr.get("end")
    start = min(max(start + n if start < 0 else start, 0), n)
    end = n if end is None else int(end)
    end = min(max(end + n if end < 0 else end, 0), n)
    return _int64(shape[start:end])


@onnx_op("Size", since=1)
def _size(inputs, attr, ctx):
    return _int64(int(np.prod(ctx.shape(inputs[0]))))


@onnx_op("Constant", since=1)
def _constant(inputs, attr, ctx):
    if "value" in attr:
        v = np.asarray(attr["value"])
        if str(v.dtype) not in ONNX_DTYPES.values():
            raise ctx.unsupported(f"a Constant of dtype {v.dtype}")
        return const(v)
    for key, dt in (("value_float", "float32"), ("value_floats", "float32"), ("value_int", "int64"),
                    ("value_ints", "int64")):
        if key in attr:
            return const(np.asarray(attr[key], dtype=dt))
    if "sparse_value" in attr:
        raise ctx.unsupported("a sparse_value Constant")
    if "value_string" in attr or "value_strings" in attr:
        raise ctx.unsupported("a string Constant")
    raise ctx.error("no value attribute")


@onnx_op("ConstantOfShape", since=9)
def _constant_of_shape(inputs, attr, ctx):
    shape = ctx.int_list(inputs[0], "shape")
    value = np.asarray(attr.get("value", np.zeros(1, "float32")))
    if value.size != 1:
        raise ctx.error(f"value must hold one element, got {value.size}")
    dt = str(value.dtype)
    return _op.full(scalar(value.reshape(()), dt), shape, dt)


@onnx_op("Range", since=11)
def _range(inputs, attr, ctx):
    start, limit, delta = (np.asarray(ctx.require_value(i, n)).reshape(()) for i, n in
                           zip(inputs, ("start", "limit", "delta")))
    dt = ctx.dtype(inputs[0])
    n = max(int(np.ceil((float(limit) - float(start)) / float(delta))), 0)
    vals = start.astype("float64") + np.arange(n, dtype="float64") * delta.astype("float64")
    if not dt.startswith("float"):
        vals = start.astype(dt) + np.arange(n, dtype=dt) * delta.astype(dt)
    return const(np.asarray(vals, dtype=dt))


@onnx_op("EyeLike", since=9)
def _eye_like(inputs, attr, ctx):
    shape = ctx.shape(inputs[0])
    if len(shape) != 2:
        raise ctx.error(f"input must be 2-D, got shape {shape}")
    dt = onnx_dtype(attr["dtype"], ctx.where) if "dtype" in attr else ctx.dtype(inputs[0])
    return const(np.eye(shape[0], shape[1], k=int(attr.get("k", 0)), dtype=dt))


# -- reshaping ------------------------------------------------------------------------------------------------------
def reshape_target(ctx, in_shape, target, allowzero=False) -> list:
    """ONNX Reshape's output shape: 0 copies the input dim (unless allowzero), -1 is inferred."""
    out = []
    for k, d in enumerate(target):
        if d == 0 and not allowzero:
            if k >= len(in_shape):
                raise ctx.error(f"shape {target}: a 0 at position {k} has no input dim to copy ({in_shape})")
            out.append(in_shape[k])
        else:
            out.append(int(d))
    total = int(np.prod(in_shape))
    if out.count(-1) > 1:
        raise ctx.error(f"shape {target} has more than one -1")
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1]))
        if known == 0 or total % known:
            raise ctx.error(f"cannot reshape {tuple(in_shape)} into {target}")
        out[out.index(-1)] = total // known
    if int(np.prod(out)) != total:
        raise ctx.error(f"cannot reshape {tuple(in_shape)} ({total} elements) into {tuple(out)}")
    return out


@onnx_op("Reshape", since=1)
def _reshape_v1(inputs, attr, ctx):
    return _op.reshape(inputs[0], reshape_target(ctx, ctx.shape(inputs[0]), list(attr["shape"])))


@onnx_op("Reshape", since=5)
def _reshape_v5(inputs, attr, ctx):
    target = ctx.int_list(inputs[1], "target shape")
    return _op.reshape(inputs[0], reshape_target(ctx, ctx.shape(inputs[0]), target,
                                                 bool(int(attr.get("allowzero", 0)))))


@onnx_op("Flatten", since=1)
def _flatten(inputs, attr, ctx):
    shape = ctx.shape(inputs[0], dynamic_ok=True)
    axis = int(attr.get("axis", 1))
    axis = axis + len(shape) if axis < 0 else axis
    if not 0 <= axis <= len(shape):
        raise ctx.error(f"axis {attr.get('axis')} is out of range for a {len(shape)}-D tensor")
    head, tail = shape[:axis], shape[axis:]
    static = lambda dims: all(isinstance(d, int) for d in dims)  # noqa: E731
    if not static(head) and not static(tail):
        raise ctx.unsupported("Flatten with dynamic dimensions on both sides of the axis")
    # an unknown side becomes -1 (reshape infers it at run time)
    return _op.reshape(inputs[0], [int(np.prod(head)) if static(head) else -1,
                                   int(np.prod(tail)) if static(tail) else -1])


@onnx_op("Transpose", since=1)
def _transpose(inputs, attr, ctx):
    perm = attr.get("perm")
    return _op.transpose(inputs[0], list(perm) if perm is not None else None)


def _is_static(d) -> bool:
    return isinstance(d, (int, np.integer))


def _squeeze(ctx, x, axes):
    shape = ctx.shape(x, dynamic_ok=True)
    if axes is not None and not all(_is_static(d) for d in shape):
        # unknown dims elsewhere: squeeze the named axes when each is a static 1 (an unknown one can only be
        # checked at run time: ctx.shape raises, and the run-time-shape converter takes the node)
        axes = sorted({_axis(ctx, a, len(shape)) for a in axes})
        if not all(_is_static(shape[a]) for a in axes):
            ctx.shape(x)
        for a in axes:
            if shape[a] != 1:
                raise ctx.error(f"cannot squeeze axis {a} of size {shape[a]}")
        return _op.squeeze(x, axes)
    shape = ctx.shape(x)
    if axes is None:
        axes = [k for k, d in enumerate(shape) if d == 1]
    axes = {_axis(ctx, a, len(shape)) for a in axes}
    for a in axes:
        if shape[a] != 1:
            raise ctx.error(f"cannot squeeze axis {a} of size {shape[a]} (shape {shape})")
    return _op.reshape(x, [d for k, d in enumerate(shape) if k not in axes])


def _unsqueeze(ctx, x, axes):
    shape = list(ctx.shape(x, dynamic_ok=True))
    rank = len(shape) + len(axes)
    norm = sorted(_axis(ctx, a, rank) for a in axes)
    if len(set(norm)) != len(norm):
        raise ctx.error(f"axes {axes} repeat an axis")
    if not all(_is_static(d) for d in shape):  # unknown dims: new axes one by one, in increasing order
        for a in norm:
            x = _op.expand_dims(x, a)
        return x
    for a in norm:
        shape.insert(a, 1)
    return _op.reshape(x, shape)


@onnx_op("Squeeze", since=1)
def _squeeze_v1(inputs, attr, ctx):
    return _squeeze(ctx, inputs[0], attr.get("axes"))


@onnx_op("Squeeze", since=13)
def _squeeze_v13(inputs, attr, ctx):
    axes = ctx.int_list(inputs[1], "axes") if len(inputs) > 1 and inputs[1] is not None else None
    return _squeeze(ctx, inputs[0], axes)


@onnx_op("Unsqueeze", since=1)
def _unsqueeze_v1(inputs, attr, ctx):
    return _unsqueeze(ctx, inputs[0], list(attr["axes"]))


@onnx_op("Unsqueeze", since=13)
def _unsqueeze_v13(inputs, attr, ctx):
    return _unsqueeze(ctx, inputs[0], ctx.int_list(inputs[1], "axes"))


@onnx_op("Expand", since=8)
def _expand(inputs, attr, ctx):
    x = inputs[0]
    target = ctx.int_list(inputs[1], "shape")
    shape = ctx.shape(x)
    try:
        out = np.broadcast_shapes(tuple(shape), tuple(target))
    except ValueError:
        raise ctx.error(f"cannot expand shape {shape} to {tuple(target)}") from None
    if tuple(out) == tuple(shape):
        return x
    return _op.broadcast_to(x, list(out))


@onnx_op("Tile", since=6)
def _tile(inputs, attr, ctx):
    return _op.tile(inputs[0], ctx.int_list(inputs[1], "repeats"))


@onnx_op("DepthToSpace", since=1)
def _depth_to_space(inputs, attr, ctx):
    x = inputs[0]
    n, c, h, w = ctx.shape(x)
    b = int(attr["blocksize"])
    if c % (b * b):
        raise ctx.error(f"{c} channels do not divide by blocksize^2 = {b * b}")
    if attr.get("mode", "DCR") == "DCR":
        y = _op.transpose(_op.reshape(x, [n, b, b, c // (b * b), h, w]), [0, 3, 4, 1, 5, 2])
    else:
        y = _op.transpose(_op.reshape(x, [n, c // (b * b), b, b, h, w]), [0, 1, 4, 2, 5, 3])
    return _op.reshape(y, [n, c // (b * b), h * b, w * b])


@onnx_op("SpaceToDepth", since=1)
def _space_to_depth(inputs, attr, ctx):
    x = inputs[0]
    n, c, h, w = ctx.shape(x)
    b = int(attr["blocksize"])
    if h % b or w % b:
        raise ctx.error(f"spatial size {h}x{w} does not divide by blocksize {b}")
    perm = [0, 3, 5, 1, 2, 4] if attr.get("mode", "DCR") == "DCR" else [0, 1, 3, 5, 2, 4]
    y = _op.transpose(_op.reshape(x, [n, c, h // b, b, w // b, b]), perm)
    return _op.reshape(y, [n, c * b * b, h // b, w // b])


# -- joining and splitting ------------------------------------------------------------------------------------------
@onnx_op("Concat", since=1)
def _concat(inputs, attr, ctx):
    args = [i for i in inputs if i is not None]
    if len(args) == 1:
        return args[0]
    return _op.concatenate(args, axis=int(attr.get("axis", 1)))


def _split(ctx, x, axis, sizes, num_outputs):
    shape = ctx.shape(x)
    axis = _axis(ctx, axis, len(shape))
    dim = shape[axis]
    if sizes is None:
        n = num_outputs
        step = -(-dim // n)
        sizes = [step] * (n - 1) + [dim - step * (n - 1)]
    if sum(sizes) != dim or any(s < 0 for s in sizes):
        raise ctx.error(f"split sizes {sizes} do not add up to the axis size {dim}")
    if len(sizes) == 1:
        return [x]
    points = list(np.cumsum(sizes)[:-1])
    parts = _op.split(x, [int(p) for p in points], axis=axis)
    return [parts[k] for k in range(len(sizes))]


@onnx_op("Split", since=2)
def _split_v2(inputs, attr, ctx):
    split = attr.get("split")
    return _split(ctx, inputs[0], int(attr.get("axis", 0)), list(split) if split else None,
                  len(ctx.node.output))


@onnx_op("Split", since=13)
def _split_v13(inputs, attr, ctx):
    sizes = ctx.int_list(inputs[1], "split") if len(inputs) > 1 and inputs[1] is not None else None
    return _split(ctx, inputs[0], int(attr.get("axis", 0)), sizes, len(ctx.node.output))


@onnx_op("Split", since=18)
def _split_v18(inputs, attr, ctx):
    sizes = ctx.int_list(inputs[1], "split") if len(inputs) > 1 and inputs[1] is not None else None
    n = int(attr.get("num_outputs", len(ctx.node.output)))
    return _split(ctx, inputs[0], int(attr.get("axis", 0)), sizes, n)


# -- indexing -------------------------------------------------------------------------------------------------------
def slice_expr(ctx, x, starts, ends, axes, steps):
    shape = ctx.shape(x)
    nd = len(shape)
    axes = list(range(len(starts))) if axes is None else [_axis(ctx, a, nd) for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ctx.error(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} differ in length")
    for st in steps:
        if int(st) == 0:
            raise ctx.error("a step of 0")
    # strided_slice has numpy semantics: negative steps and out-of-range (INT_MIN/INT_MAX) ends clamp
    return _op.strided_slice(x, [int(s) for s in starts], [int(e) for e in ends],
                             strides=[int(st) for st in steps], axes=axes)


@onnx_op("Slice", since=1)
def _slice_v1(inputs, attr, ctx):
    return slice_expr(ctx, inputs[0], list(attr["starts"]), list(attr["ends"]), attr.get("axes"), None)


@onnx_op("Slice", since=10)
def _slice_v10(inputs, attr, ctx):
    def opt(k, what):
        return ctx.int_list(inputs[k], what) if len(inputs) > k and inputs[k] is not None else None
    return slice_expr(ctx, inputs[0], ctx.int_list(inputs[1], "starts"), ctx.int_list(inputs[2], "ends"),
                      opt(3, "axes"), opt(4, "steps"))


def _normalize_indices(ctx, idx, dim):
    """Indices with negative entries counted from the end, made non-negative (at import time if constant)."""
    v = ctx.value(idx)
    if v is not None:
        v = np.asarray(v).astype("int64")
        if ((v < -dim) | (v >= dim)).any():
            raise ctx.error(f"indices {v.reshape(-1)[:8].tolist()} are out of range for an axis of size {dim}")
        return const(np.where(v < 0, v + dim, v).astype(str(v.dtype)))
    dt = ctx.dtype(idx)
    return _op.where(_op.less(idx, scalar(0, dt)), _op.add(idx, scalar(dim, dt)), idx)


def _checked_indices(ctx, idx, dim):
    """Indices made non-negative, constants checked at import time; run-time indices outside -dim..dim-1
    fail the run with an error (ONNX Runtime raises) through ``take(arange(dim), idx, mode="raise")``."""
    if ctx.value(idx) is not None:
        return _normalize_indices(ctx, idx, dim)
    dt = ctx.dtype(idx)
    return _op.take(const(np.arange(dim, dtype=dt)), idx, axis=0, mode="raise")


@onnx_op("Gather", since=1)
def _gather(inputs, attr, ctx):
    x, idx = inputs
    shape = ctx.shape(x)
    axis = _axis(ctx, int(attr.get("axis", 0)), len(shape))
    if ctx.value(idx) is not None:  # constant indices: checked and normalized at import time
        return _op.take(x, _normalize_indices(ctx, idx, shape[axis]), axis=axis)
    # run-time indices: counted from the end when negative, and an index out of range fails the run
    # with an error (ONNX Runtime raises; clamping would return a wrong row silently)
    return _op.take(x, idx, axis=axis, mode="raise")


@onnx_op("GatherElements", since=11)
def _gather_elements(inputs, attr, ctx):
    x, idx = inputs
    shape = ctx.shape(x)
    axis = _axis(ctx, int(attr.get("axis", 0)), len(shape))
    return _op.gather(x, axis, _checked_indices(ctx, idx, shape[axis]))


@onnx_op("GatherND", since=11)
def _gather_nd(inputs, attr, ctx):
    x, idx = inputs
    dshape, ishape = ctx.shape(x), ctx.shape(idx)
    b = int(attr.get("batch_dims", 0))
    m = ishape[-1]
    if b + m > len(dshape):
        raise ctx.error(f"indices of depth {m} with batch_dims {b} exceed the data rank {len(dshape)}")
    idt = "int64"
    idx = _op.cast(idx, idt)
    dims = dshape[b:b + m]
    strides = [int(np.prod(dims[k + 1:])) for k in range(m)]
    # each index component against its own axis: negative counts from the end, out of range fails
    # the run (ONNX Runtime raises; a clamped or wrapped linear index would read another element)
    lin = None
    for k in range(m):
        comp = _op.take(idx, const(np.int64(k)), axis=-1)
        comp = _checked_indices(ctx, comp, int(dims[k]))
        term = comp if strides[k] == 1 else _op.multiply(comp, scalar(strides[k], idt))
        lin = term if lin is None else _op.add(lin, term)
    nbatch = int(np.prod(dshape[:b])) if b else 1
    if b:
        offs = np.arange(nbatch, dtype="int64").reshape(list(ishape[:b]) + [1] * (len(ishape) - 1 - b))
        lin = _op.add(lin, _int64(offs * int(np.prod(dims))))
    flat = _op.reshape(x, [nbatch * int(np.prod(dims))] + list(dshape[b + m:]))
    return _op.take(flat, lin, axis=0)


@onnx_op("OneHot", since=9)
def _one_hot(inputs, attr, ctx):
    idx, depth, values = inputs
    d = int(np.asarray(ctx.require_value(depth, "depth")).reshape(-1)[0])
    ishape = ctx.shape(idx)
    rank = len(ishape) + 1
    axis = _axis(ctx, int(attr.get("axis", -1)), rank)
    idx = _op.cast(idx, "int64")
    idx = _op.where(_op.less(idx, scalar(0, "int64")), _op.add(idx, scalar(d, "int64")), idx)
    idx = _op.reshape(idx, list(ishape[:axis]) + [1] + list(ishape[axis:]))
    pos = _int64(np.arange(d).reshape([d] + [1] * (rank - axis - 1)))
    off = _op.strided_slice(values, [0], [1])
    on = _op.strided_slice(values, [1], [2])
    return _op.where(_op.equal(idx, pos), _op.reshape(on, []), _op.reshape(off, []))


@onnx_op("Trilu", since=14)
def _trilu(inputs, attr, ctx):
    x = inputs[0]
    k = int(np.asarray(ctx.require_value(inputs[1], "k")).reshape(-1)[0]) if len(inputs) > 1 and \
        inputs[1] is not None else 0
    shape = ctx.shape(x)
    n, m = shape[-2], shape[-1]
    mask = np.triu(np.ones((n, m), bool), k) if int(attr.get("upper", 1)) else np.tril(np.ones((n, m), bool), k)
    return _op.where(const(mask), x, scalar(0, ctx.dtype(x)))


@onnx_op("NonZero", since=9)
def _non_zero(inputs, attr, ctx):
    v = ctx.value(inputs[0])
    if v is None:
        err = ctx.unsupported("NonZero of a run-time tensor (its output shape depends on the data)")
        err.data_dependent = True  # onnx_dynamic.py converts it for the VM (not a value to specialize on)
        raise err
    return _int64(np.array(np.nonzero(v), dtype="int64").reshape(np.ndim(v), -1))


@onnx_op("Unique", since=11)
def _unique(inputs, attr, ctx):
    """Unique of a constant (numpy.unique); of run-time data the output length depends on the data, so
    onnx_dynamic.py converts it for the VM."""
    v = ctx.value(inputs[0])
    if v is None:
        err = ctx.unsupported("Unique of a run-time tensor (its output shape depends on the data)")
        err.data_dependent = True
        raise err
    if attr.get("axis") is not None:
        raise ctx.unsupported("Unique with an axis")
    flat = np.asarray(v).reshape(-1)
    vals, first, inverse, counts = np.unique(flat, return_index=True, return_inverse=True, return_counts=True)
    if not int(attr.get("sorted", 1)):
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        vals, first, counts, inverse = vals[order], first[order], counts[order], rank[inverse]
    return [const(vals), _int64(first), _int64(inverse.reshape(-1)), _int64(counts)]


@onnx_op("Compress", since=9)
def _compress(inputs, attr, ctx):
    x, cond = inputs
    c = ctx.value(cond)
    if c is None:
        err = ctx.unsupported("Compress with a run-time condition (its output shape depends on the data)")
        err.data_dependent = True  # onnx_dynamic.py converts it for the VM (not a value to specialize on)
        raise err
    keep = np.nonzero(np.asarray(c).reshape(-1))[0]
    axis = attr.get("axis")
    if axis is None:
        x = _op.reshape(x, [-1])
        axis = 0
    shape = ctx.shape(x)
    axis = _axis(ctx, int(axis), len(shape))
    keep = keep[keep < shape[axis]]
    return _op.take(x, _int64(keep), axis=axis)


# -- Pad ------------------------------------------------------------------------------------------------------------
def pad_expr(ctx, x, pads, value, mode, axes=None):
    shape = ctx.shape(x)
    nd = len(shape)
    axes = list(range(nd)) if axes is None else [_axis(ctx, a, nd) for a in axes]
    if len(pads) != 2 * len(axes):
        raise ctx.error(f"pads {pads} must have {2 * len(axes)} values")
    before, after = [0] * nd, [0] * nd
    for k, a in enumerate(axes):
        before[a], after[a] = int(pads[k]), int(pads[k + len(axes)])
    pos = [[max(b, 0), max(e, 0)] for b, e in zip(before, after)]
    if mode == "wrap":
        y = x
        for a in range(nd):
            b, e = pos[a]
            if b or e:
                n = shape[a]
                if b > n or e > n:
                    raise ctx.unsupported(f"wrap padding larger than the axis ({b}, {e} > {n})")
                parts = []
                if b:
                    parts.append(_op.strided_slice(y, [n - b], [n], axes=[a]))
                parts.append(y)
                if e:
                    parts.append(_op.strided_slice(y, [0], [e], axes=[a]))
                y = _op.concatenate(parts, axis=a)
    elif any(b or e for b, e in pos):
        if mode not in ("constant", "reflect", "edge"):
            raise ctx.error(f"mode must be constant, reflect, edge or wrap, got {mode!r}")
        dt = ctx.dtype(x)
        known = ctx.value(value) if value is not None else np.zeros(())
        if known is not None:
            pv = scalar(np.asarray(known).reshape(-1)[0] if np.asarray(known).size else 0, dt)
        else:
            pv = _op.cast(_op.reshape(value, []), dt)
        y = _nn.pad(x, pos, pv, pad_mode=mode)
    else:
        y = x
    if any(b < 0 or e < 0 for b, e in zip(before, after)):  # negative pads crop
        padded = [s + p[0] + p[1] for s, p in zip(shape, pos)]
        begin = [-min(b, 0) for b in before]
        end = [n + min(e, 0) for n, e in zip(padded, after)]
        y = _op.strided_slice(y, begin, end)
    return y


@onnx_op("Pad", since=2)
def _pad_v2(inputs, attr, ctx):
    value = attr.get("value", 0.0)
    return pad_expr(ctx, inputs[0], list(attr["pads"]), scalar(value, ctx.dtype(inputs[0])),
                    attr.get("mode", "constant"))


@onnx_op("Pad", since=11)
def _pad_v11(inputs, attr, ctx):
    pads = ctx.int_list(inputs[1], "pads")
    value = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
    axes = ctx.int_list(inputs[3], "axes") if len(inputs) > 3 and inputs[3] is not None else None
    return pad_expr(ctx, inputs[0], pads, value, attr.get("mode", "constant"), axes)


# -- CenterCropPad --------------------------------------------------------------------------------------------------
def center_crop_pad_widths(diff):
    """Pad widths (before, after) that take an axis to ``size + diff``: centered, the odd pixel goes to the
    end when padding and the crop window starts rounded down when cropping (negative widths crop)."""
    before = diff // 2 if diff >= 0 else -((-diff) // 2)
    return before, diff - before


@onnx_op("CenterCropPad", since=18)
def _center_crop_pad(inputs, attr, ctx):
    x = inputs[0]
    shape = ctx.shape(x)
    nd = len(shape)
    axes = [_axis(ctx, int(a), nd) for a in attr.get("axes", range(nd))]
    target = ctx.int_list(inputs[1], "shape")
    if len(target) != len(axes):
        raise ctx.error(f"shape holds {len(target)} values for {len(axes)} axes")
    before, after = [0] * nd, [0] * nd
    for a, t in zip(axes, target):
        if t < 0:
            raise ctx.error(f"a negative target size {t}")
        before[a], after[a] = center_crop_pad_widths(t - shape[a])
    return pad_expr(ctx, x, before + after, None, "constant")


# -- CumSum --------------------------------------------------------------------------------------------------------
@onnx_op("CumSum", since=11)
def _cum_sum(inputs, attr, ctx):
    x = inputs[0]
    axis = int(np.asarray(ctx.require_value(inputs[1], "axis")).reshape(-1)[0])
    return cum_sum_expr(ctx, x, axis, int(attr.get("exclusive", 0)), int(attr.get("reverse", 0)))


def cum_sum_expr(ctx, x, axis: int, exclusive: int, reverse: int):
    """CumSum along a known ``axis``: a product with a 0/1 triangular matrix."""
    shape = ctx.shape(x)
    nd = len(shape)
    axis = _axis(ctx, axis, nd)
    n = shape[axis]
    i = np.arange(n)
    # weight[j, i] = 1 when x[i] contributes to out[j]
    if reverse:
        w = (i[None, :] > i[:, None]) if exclusive else (i[None, :] >= i[:, None])
    else:
        w = (i[None, :] < i[:, None]) if exclusive else (i[None, :] <= i[:, None])
    dt = ctx.dtype(x)
    cdt = dt if dt.startswith("float") else "float64"
    perm = [a for a in range(nd) if a != axis] + [axis]
    moved = _op.transpose(x, perm) if axis != nd - 1 else x
    flat = _op.reshape(moved, [-1, n])
    if cdt != dt:
        flat = _op.cast(flat, cdt)
    out = _nn.dense(flat, const(w.astype(cdt)), units=n)
    if cdt != dt:
        out = _op.cast(out, dt)
    out = _op.reshape(out, [shape[a] for a in perm])
    if axis != nd - 1:
        out = _op.transpose(out, list(np.argsort(perm)))
    return out


# -- CumProd / TopK (relay.cumprod / relay.topk) ----------------------------------------------------------------------
@onnx_op("CumProd", since=26)
def _cum_prod(inputs, attr, ctx):
    axis = int(np.asarray(ctx.require_value(inputs[1], "axis")).reshape(-1)[0])
    return cum_prod_expr(ctx, inputs[0], axis, bool(int(attr.get("exclusive", 0))),
                         bool(int(attr.get("reverse", 0))))


def cum_prod_expr(ctx, x, axis: int, exclusive: bool, reverse: bool):
    """CumProd along a known ``axis`` (relay.cumprod; reversal by ``reverse``)."""
    axis = _axis(ctx, axis, ctx.ndim(x))
    if reverse:
        x = _op.reverse(x, axis)
    out = _op.cumprod(x, axis=axis, exclusive=exclusive)
    return _op.reverse(out, axis) if reverse else out


def _topk(ctx, x, k, axis, largest):
    nd = ctx.ndim(x)
    axis = _axis(ctx, axis, nd)
    n = ctx.shape(x)[axis]
    if not 0 <= k <= n:
        raise KilnError(f"TopK: k={k} is outside [0, {n}] for axis {axis} of shape {ctx.shape(x)}")
    # ties: the lower index first, for both largest and smallest (ONNX's rule; relay.topk's too)
    values, indices = _op.topk(x, k=k, axis=axis, ret_type="both", is_ascend=not largest, dtype="int64")
    return [values, indices]


@onnx_op("TopK", since=1)
def _topk_v1(inputs, attr, ctx):
    return _topk(ctx, inputs[0], int(attr["k"]), int(attr.get("axis", -1)), True)


@onnx_op("TopK", since=10)
def _topk_v10(inputs, attr, ctx):
    k = int(np.asarray(ctx.require_value(inputs[1], "K")).reshape(-1)[0])
    return _topk(ctx, inputs[0], k, int(attr.get("axis", -1)), True)


@onnx_op("TopK", since=11)
def _topk_v11(inputs, attr, ctx):
    # sorted=0 lets the output be in any order: the sorted order is one valid answer
    k = int(np.asarray(ctx.require_value(inputs[1], "K")).reshape(-1)[0])
    return _topk(ctx, inputs[0], k, int(attr.get("axis", -1)), bool(int(attr.get("largest", 1))))


# -- reductions -----------------------------------------------------------------------------------------------------
def _reduce_axes(ctx, inputs, attr, axes_as_input: bool):
    if axes_as_input:
        axes = ctx.int_list(inputs[1], "axes") if len(inputs) > 1 and inputs[1] is not None else []
    else:
        axes = list(attr.get("axes", []))
    return axes


def _reduction(name, body, axes_input_since):
    """Register Reduce* op ``name``: axes as an attribute until opset ``axes_input_since``, as an input from
    then on; ``body(ctx, x, axes, keepdims)`` computes the reduction."""
    def convert(inputs, attr, ctx, axes_as_input):
        x = inputs[0]
        axes = _reduce_axes(ctx, inputs, attr, axes_as_input)
        keepdims = bool(int(attr.get("keepdims", 1)))
        if not axes:
            if int(attr.get("noop_with_empty_axes", 0)):
                return x
            axes = list(range(ctx.ndim(x)))
        nd = ctx.ndim(x)
        axes = sorted({_axis(ctx, a, nd) for a in axes})
        return body(ctx, x, axes, keepdims)

    @onnx_op(name, since=1)
    def convert_axes_attr(inputs, attr, ctx):
        return convert(inputs, attr, ctx, False)

    @onnx_op(name, since=axes_input_since)
    def convert_axes_input(inputs, attr, ctx):
        return convert(inputs, attr, ctx, True)


def _sq(x):
    return _op.multiply(x, x)


_REDUCERS = {
    "ReduceMax": lambda ctx, x, a, k: _op.max(x, axis=a, keepdims=k),
    "ReduceMin": lambda ctx, x, a, k: _op.min(x, axis=a, keepdims=k),
    "ReduceMean": lambda ctx, x, a, k: _op.mean(x, axis=a, keepdims=k),
    "ReduceProd": lambda ctx, x, a, k: _op.prod(x, axis=a, keepdims=k),
    "ReduceL1": lambda ctx, x, a, k: _op.sum(_op.abs(x), axis=a, keepdims=k),
    "ReduceL2": lambda ctx, x, a, k: _l2(ctx, x, a, k),
    "ReduceSumSquare": lambda ctx, x, a, k: _op.sum(_sq(x), axis=a, keepdims=k),
    "ReduceLogSum": lambda ctx, x, a, k: _op.log(_op.sum(x, axis=a, keepdims=k)),
    "ReduceLogSumExp": lambda ctx, x, a, k: _logsumexp(ctx, x, a, k),
}


def _l2(ctx, x, axes, keepdims):
    dt = ctx.dtype(x)
    if dt.startswith("float"):
        return _op.sqrt(_op.sum(_sq(x), axis=axes, keepdims=keepdims))
    s = _op.cast(_op.sum(_sq(x), axis=axes, keepdims=keepdims), "float64")
    return _op.cast(_op.sqrt(s), dt)


def _logsumexp(ctx, x, axes, keepdims):
    dt = ctx.dtype(x)
    if not dt.startswith("float"):
        return _op.cast(_logsumexp(ctx, _op.cast(x, "float64"), axes, keepdims), dt)
    mx = _op.max(x, axis=axes, keepdims=True)
    safe = _op.where(_op.isfinite(mx), mx, scalar(0, dt))
    s = _op.log(_op.sum(_op.exp(_op.subtract(x, safe)), axis=axes, keepdims=True))
    out = _op.add(s, safe)
    if not keepdims:
        out = _op.squeeze(out, axis=axes)
    return out


for _name, _body in _REDUCERS.items():
    _reduction(_name, _body, axes_input_since=18)
_reduction("ReduceSum", lambda ctx, x, a, k: _op.sum(x, axis=a, keepdims=k), axes_input_since=13)


def _arg_reduce(fn):
    def convert(inputs, attr, ctx):
        x = inputs[0]
        axis = _axis(ctx, int(attr.get("axis", 0)), ctx.ndim(x))
        out = fn(x, axis=[axis], keepdims=bool(int(attr.get("keepdims", 1))),
                 select_last_index=bool(int(attr.get("select_last_index", 0))))
        return _op.cast(out, "int64")
    return convert


onnx_op("ArgMax", since=1)(_arg_reduce(_op.argmax))
onnx_op("ArgMin", since=1)(_arg_reduce(_op.argmin))
