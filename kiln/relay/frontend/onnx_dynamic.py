"""ONNX converters for shape operands that are run-time values (TVM's frontend emits ``dyn.*`` ops for them).

The static converters (onnx_ops_*.py) need every shape operand known at import time. When one refuses a node
because a shape operand is computed from graph inputs, or because an input has unknown (``relay.Any``)
dims, the importer looks up the node's run-time-shape variant (registered here with ``@onnx_op(..., dynamic=True)``,
in the same registry as the static converters): Reshape/Expand/Tile/Slice/TopK/ConstantOfShape/Resize/Upsample/
Pad/CenterCropPad become ``dyn.*`` ops and Shape/Size of an unknown shape become ``shape_of`` at run time;
NonZero/Compress of run-time data get an output length computed from the data (a data-dependent ``arange``).
Axes given as run-time inputs (Reduce*, Squeeze/Unsqueeze, Split, CumSum...) are in onnx_dynamic_axes.py. The resulting module runs
on the VM; ``DynamicToStatic`` folds back whatever becomes constant. ``from_onnx(...,
convert_config={"use_dyn_ops": False})`` turns this off (the static converters' errors then stand). See docs/onnx.md.
"""
from __future__ import annotations

import numpy as np

from ...error import KilnError
from .. import op as _op
from ..expr import const as _relay_const
from ..op import dyn as _dyn, nn as _nn
from .data_dependent import nonzero_positions
from .onnx_common import lookup, onnx_op

__all__ = ["convert_dynamic"]

_INT64_MAX = np.iinfo(np.int64).max


def const(value):
    """A constant keeping its numpy dtype (int64 shape pieces stay int64)."""
    value = np.asarray(value)
    return _relay_const(value, str(value.dtype))


def _wants_dynamic(err: KilnError) -> bool:
    return (bool(getattr(err, "runtime_inputs", None)) or bool(getattr(err, "dynamic_shape", False))
            or bool(getattr(err, "data_dependent", False)))


def _run_time_anyway(err: KilnError, ctx) -> bool:
    """With use_dyn_ops=False, values that no binding of graph inputs can make static still take the dyn.*
    converters: those computed from a loop's counter or carried values (names that are not graph inputs), and
    tensors with Any dims once the model has control flow (the outputs of a Loop/Scan)."""
    flags = getattr(ctx.graph, "flags", {})
    names = set(getattr(err, "runtime_inputs", None) or ())
    if names and not names <= flags.get("graph_inputs", set()):
        return True
    return bool(getattr(err, "dynamic_shape", False) and flags.get("control_flow"))


def convert_dynamic(op_type: str, inputs, attr, ctx, err: KilnError):
    """The dynamic conversion of a node a static converter refused with ``err`` (re-raised when none applies)."""
    if not _wants_dynamic(err) or not (ctx.graph.config.get("use_dyn_ops", True) or _run_time_anyway(err, ctx)):
        raise err
    entry = lookup(op_type, ctx.node.domain)
    fn = entry.get_converter(ctx.opset, dynamic=True) if entry is not None else None
    if fn is None:
        raise err
    return fn(inputs, attr, ctx)


def _i64(x, ctx):
    return x if ctx.dtype(x) == "int64" else _op.cast(x, "int64")


def _length(x, ctx, what: str) -> int:
    shape = ctx.shape(x, dynamic_ok=True)
    n = shape[0] if shape else 1
    if not isinstance(n, int):
        raise ctx.unsupported(f"a {what} operand of unknown length")
    return n


def _ndim(x, ctx) -> int:
    return len(ctx.shape(x, dynamic_ok=True))


def _piece(vec, j: int):
    return _op.strided_slice(vec, [j], [j + 1])


# -- shape queries ---------------------------------------------------------------------------------------------
@onnx_op("Shape", since=1, dynamic=True)
def _shape(inputs, attr, ctx):
    n = _ndim(inputs[0], ctx)
    s = _op.shape_of(inputs[0], "int64")
    start, end = int(attr.get("start", 0)), attr.get("end")
    start = min(max(start + n if start < 0 else start, 0), n)
    end = n if end is None else int(end)
    end = min(max(end + n if end < 0 else end, 0), n)
    return s if (start, end) == (0, n) else _op.strided_slice(s, [start], [end])


@onnx_op("Size", since=1, dynamic=True)
def _size(inputs, attr, ctx):
    return _op.prod(_op.shape_of(inputs[0], "int64"))


# -- shape operands at run time --------------------------------------------------------------------------------
@onnx_op("Reshape", since=5, dynamic=True)
def _reshape(inputs, attr, ctx):
    return _dyn.reshape(inputs[0], _i64(inputs[1], ctx), allowzero=bool(int(attr.get("allowzero", 0))))


@onnx_op("Expand", since=8, dynamic=True)
def _expand(inputs, attr, ctx):
    x, shape = inputs[0], _i64(inputs[1], ctx)
    k, nd = _length(shape, ctx, "shape"), _ndim(x, ctx)
    if k < nd:  # ONNX broadcasts both ways: the target may be shorter than the input
        shape = _op.concatenate([const(np.ones(nd - k, "int64")), shape], 0)
    return _dyn.broadcast_to(x, shape)


@onnx_op("Tile", since=6, dynamic=True)
def _tile(inputs, attr, ctx):
    return _dyn.tile(inputs[0], _i64(inputs[1], ctx))


@onnx_op("ConstantOfShape", since=9, dynamic=True)
def _constant_of_shape(inputs, attr, ctx):
    value = np.asarray(attr.get("value", np.zeros(1, "float32")))
    if value.size != 1:
        raise ctx.error(f"value must hold one element, got {value.size}")
    dt = str(value.dtype)
    return _dyn.full(const(value.reshape(()).astype(dt)), _i64(inputs[0], ctx), dt)


@onnx_op("Slice", since=10, dynamic=True)
def _slice(inputs, attr, ctx):
    x = inputs[0]
    nd = _ndim(x, ctx)
    starts, ends = _i64(inputs[1], ctx), _i64(inputs[2], ctx)
    k = _length(starts, ctx, "starts")
    axes = inputs[3] if len(inputs) > 3 and inputs[3] is not None else None
    steps = inputs[4] if len(inputs) > 4 and inputs[4] is not None else None
    if axes is not None and ctx.value(axes) is None:  # the axes are run-time values too
        from .onnx_dynamic_axes import scatter_axes  # noqa: PLC0415 (that module imports this one)
        begin = scatter_axes(axes, nd, starts, 0, ctx)
        end = scatter_axes(axes, nd, ends, _INT64_MAX, ctx)
        stride = scatter_axes(axes, nd, _i64(steps, ctx), 1, ctx) if steps is not None else const(np.ones(nd, "int64"))
        return _dyn.strided_slice(x, begin, end, stride)
    if axes is None:
        axes = list(range(k))
    else:
        axes = [int(a) for a in np.asarray(ctx.value(axes)).reshape(-1)]
    axes = [a + nd if a < 0 else a for a in axes]
    if sorted(set(axes)) != sorted(axes) or any(not 0 <= a < nd for a in axes):
        raise ctx.error(f"axes {axes} are not distinct axes of a rank-{nd} input")
    steps = _i64(steps, ctx) if steps is not None else None
    begin, end, stride = [], [], []
    for a in range(nd):
        if a in axes:
            j = axes.index(a)
            begin.append(_piece(starts, j))
            end.append(_piece(ends, j))
            stride.append(_piece(steps, j) if steps is not None else const(np.ones(1, "int64")))
        else:
            begin.append(const(np.zeros(1, "int64")))
            end.append(const(np.array([_INT64_MAX], "int64")))
            stride.append(const(np.ones(1, "int64")))
    return _dyn.strided_slice(x, _op.concatenate(begin, 0), _op.concatenate(end, 0), _op.concatenate(stride, 0))


@onnx_op("TopK", since=10, dynamic=True)
def _topk(inputs, attr, ctx):
    x = inputs[0]
    nd = _ndim(x, ctx)
    axis = int(attr.get("axis", -1))
    axis = axis + nd if axis < 0 else axis
    largest = bool(int(attr.get("largest", 1)))
    k = _op.reshape(_i64(inputs[1], ctx), [])
    values, indices = _dyn.topk(x, k, axis=axis, ret_type="both", is_ascend=not largest, dtype="int64")
    return [values, indices]


_RESIZE_METHODS = {"nearest": "nearest_neighbor", "linear": "linear", "cubic": "cubic"}


@onnx_op("Resize", since=11, dynamic=True)
def _resize(inputs, attr, ctx):
    """Resize of a 4-D NCHW tensor to run-time ``sizes`` (or ``floor(shape * scales)``) over H and W; the
    ``axes`` attribute names which axes ``sizes``/``scales`` are given for (the others keep their size), and
    ``keep_aspect_ratio_policy`` scales both axes by one ratio computed at run time."""
    x = inputs[0]
    if _ndim(x, ctx) != 4:
        raise ctx.unsupported("Resize with run-time sizes of a tensor that is not 4-D")
    if int(attr.get("antialias", 0)):
        raise ctx.unsupported("Resize with run-time sizes and antialias")
    axes = attr.get("axes")
    axes = [int(a) % 4 for a in axes] if axes is not None else [0, 1, 2, 3]
    if len(set(axes)) != len(axes):
        raise ctx.error(f"axes {axes} repeat an axis")
    method = _RESIZE_METHODS.get(attr.get("mode", "nearest"))
    coord = attr.get("coordinate_transformation_mode", "half_pixel")
    if coord in ("tf_crop_and_resize", "half_pixel_symmetric"):
        raise ctx.unsupported(f"coordinate_transformation_mode {coord!r}")
    scales = inputs[2] if len(inputs) > 2 else None
    sizes = inputs[3] if len(inputs) > 3 else None
    shape = _op.shape_of(x, "int64")
    # the run-time value given for each spatial axis (None: the axis keeps its size)
    spatial = [axes.index(a) if a in axes else None for a in (2, 3)]
    if sizes is not None and _length(sizes, ctx, "sizes") > 0:
        if _length(sizes, ctx, "sizes") != len(axes):
            raise ctx.error(f"sizes must hold {len(axes)} values (one per axis in {axes})")
        given = _i64(sizes, ctx)
        policy = attr.get("keep_aspect_ratio_policy", "stretch")
        if policy not in ("stretch", "not_larger", "not_smaller"):
            raise ctx.error(f"keep_aspect_ratio_policy must be stretch, not_larger or not_smaller, got {policy!r}")
        if policy != "stretch":  # one ratio for every axis in `axes`: min (not_larger) or max (not_smaller)
            in_dims = _op.cast(_op.take(shape, const(np.array(axes, "int64"))), "float32")
            ratios = _op.divide(_op.cast(given, "float32"), in_dims)
            r = (_op.min if policy == "not_larger" else _op.max)(ratios, axis=[0], keepdims=True)
            given = _op.cast(_op.floor(_op.add(_op.multiply(r, in_dims), const(np.float32(0.5)))), "int64")
        hw = [_piece(given, j) if j is not None else _piece(shape, 2 + k) for k, j in enumerate(spatial)]
    elif scales is not None:
        if _length(scales, ctx, "scales") != len(axes):
            raise ctx.error(f"scales must hold {len(axes)} values (one per axis in {axes})")
        sc = _op.cast(scales, "float32")
        hw = []
        for k, j in enumerate(spatial):
            dim = _piece(shape, 2 + k)
            if j is None:
                hw.append(dim)
            else:
                hw.append(_op.cast(_op.floor(_op.multiply(_op.cast(dim, "float32"), _piece(sc, j))), "int64"))
    else:
        raise ctx.error("Resize needs scales or sizes")
    hw = _op.concatenate(hw, 0)
    rounding = attr.get("nearest_mode", "round_prefer_floor") if method == "nearest_neighbor" else ""
    return _dyn.image.resize2d(x, hw, layout="NCHW", method=method, coordinate_transformation_mode=coord,
                               rounding_method=rounding, cubic_alpha=float(attr.get("cubic_coeff_a", -0.75)),
                               cubic_exclude=int(attr.get("exclude_outside", 0)),
                               extrapolation_value=float(attr.get("extrapolation_value", 0.0)))


@onnx_op("Upsample", since=9, dynamic=True)
def _upsample(inputs, attr, ctx):
    """Upsample (opset 9) with run-time scales: Resize with ``asymmetric`` coordinates (``floor`` for nearest)."""
    mode = attr.get("mode", "nearest")
    if mode not in ("nearest", "linear"):
        raise ctx.error(f"mode must be nearest or linear, got {mode!r}")
    resize_attr = {"mode": mode, "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    return _resize([inputs[0], None, inputs[1]], resize_attr, ctx)


@onnx_op("Pad", since=11, dynamic=True)
def _pad(inputs, attr, ctx):
    """Constant-mode Pad with run-time ``pads`` ([b0, b1, ..., e0, e1, ...]) and optional constant value."""
    x = inputs[0]
    nd = _ndim(x, ctx)
    mode = attr.get("mode", "constant")
    if mode not in ("constant", "edge", "reflect", "wrap"):
        raise ctx.error(f"mode must be constant, reflect, edge or wrap, got {mode!r}")
    pads = _i64(inputs[1], ctx)
    if len(inputs) > 3 and inputs[3] is not None:  # pads for the named axes only: [b_j..., e_j...]
        from .onnx_dynamic_axes import scatter_axes  # noqa: PLC0415 (that module imports this one)
        k = _length(inputs[3], ctx, "axes")
        if _length(pads, ctx, "pads") != 2 * k:
            raise ctx.error(f"pads must hold {2 * k} values for {k} axes")
        pads = _op.concatenate([scatter_axes(inputs[3], nd, _op.strided_slice(pads, [0], [k]), 0, ctx),
                                scatter_axes(inputs[3], nd, _op.strided_slice(pads, [k], [2 * k]), 0, ctx)], 0)
    if _length(pads, ctx, "pads") != 2 * nd:
        raise ctx.error(f"pads must hold {2 * nd} values for a rank-{nd} input")
    width = _op.transpose(_op.reshape(pads, [2, nd]), [1, 0])
    value = inputs[2] if len(inputs) > 2 and inputs[2] is not None else const(np.zeros((), ctx.dtype(x)))
    return _dyn.nn.pad(x, width, _op.reshape(value, []), pad_mode=mode)


# -- products over unknown dims ----------------------------------------------------------------------------------
def _static_dim(d):
    v = getattr(d, "value", d)
    return int(v) if isinstance(v, (int, np.integer)) else None


@onnx_op("MatMul", since=1, dynamic=True)
def _matmul(inputs, attr, ctx):
    """numpy.matmul where leading dims are unknown: a 2-D right operand is one ``nn.dense`` over the left
    operand flattened to rows; equal-rank operands are one ``nn.batch_matmul`` over the merged batch dims. The
    output shape is rebuilt from the operands' run-time shapes."""
    a, b = inputs[0], inputs[1]
    ashape, bshape = ctx.shape(a, dynamic_ok=True), ctx.shape(b, dynamic_ok=True)
    ra, rb = len(ashape), len(bshape)
    if ra < 2 or rb < 2:
        raise ctx.unsupported("MatMul of a 1-D operand with unknown dims")
    k, k2 = _static_dim(ashape[-1]), _static_dim(bshape[-2])
    if k is not None and k2 is not None and k != k2:
        raise ctx.error(f"MatMul inner dimensions differ: {k} and {k2}")
    lead = _op.strided_slice(_op.shape_of(a, "int64"), [0], [ra - 1])
    if rb == 2:
        n = _static_dim(bshape[1])
        if k is None and k2 is None:
            raise ctx.unsupported("MatMul whose inner dimension is unknown in both operands")
        kk = k if k is not None else k2
        a2 = a if ra == 2 else _op.reshape(a, [-1, kk])
        out = _nn.dense(a2, _op.transpose(b, [1, 0]))
        if ra == 2:
            return out
        last = const(np.array([n], "int64")) if n is not None else _op.strided_slice(
            _op.shape_of(b, "int64"), [1], [2])
        return _dyn.reshape(out, _op.concatenate([lead, last], 0))
    if ra != rb:
        raise ctx.unsupported(f"MatMul of rank-{ra} and rank-{rb} operands with unknown dims (broadcast batch)")
    for da, db in zip(ashape[:-2], bshape[:-2]):
        sa, sb = _static_dim(da), _static_dim(db)
        if sa is not None and sb is not None and sa != sb:
            raise ctx.unsupported("MatMul that broadcasts batch dims with unknown dims")
    if ra == 3:
        return _nn.batch_matmul(a, b, transpose_b=False)
    bs = _op.shape_of(b, "int64")
    a3 = _dyn.reshape(a, _op.concatenate([const(np.array([-1], "int64")),
                                          _op.strided_slice(_op.shape_of(a, "int64"), [ra - 2], [ra])], 0))
    b3 = _dyn.reshape(b, _op.concatenate([const(np.array([-1], "int64")),
                                          _op.strided_slice(bs, [rb - 2], [rb])], 0))
    out = _nn.batch_matmul(a3, b3, transpose_b=False)
    return _dyn.reshape(out, _op.concatenate([lead, _op.strided_slice(bs, [rb - 1], [rb])], 0))


# -- indexing over unknown dims --------------------------------------------------------------------------------
def _axis_of(ctx, axis: int, nd: int) -> int:
    a = axis + nd if axis < 0 else axis
    if not 0 <= a < nd:
        raise ctx.error(f"axis {axis} is out of range for a rank-{nd} input")
    return a


def _runtime_dim(x, axis: int, dtype: str):
    """``x.shape[axis]`` at run time, as a scalar of ``dtype``."""
    return _op.cast(_op.take(_op.shape_of(x, "int64"), const(np.int64(axis))), dtype)


@onnx_op("Gather", since=1, dynamic=True)
def _gather(inputs, attr, ctx):
    """Gather where the data has unknown dims: ``take(mode="raise")`` counts negative indices from the end and
    fails the run on an index out of range (as ONNX Runtime does)."""
    x, idx = inputs
    axis = _axis_of(ctx, int(attr.get("axis", 0)), _ndim(x, ctx))
    return _op.take(x, idx, axis=axis, mode="raise")


@onnx_op("GatherElements", since=11, dynamic=True)
def _gather_elements(inputs, attr, ctx):
    """GatherElements where the gathered axis is unknown: indices checked against the run-time size through
    ``take(arange(dim), idx, mode="raise")`` (an index out of range fails the run)."""
    x, idx = inputs
    axis = _axis_of(ctx, int(attr.get("axis", 0)), _ndim(x, ctx))
    dt = ctx.dtype(idx)
    dim = _runtime_dim(x, axis, dt)
    positions = _op.arange(const(np.zeros((), dt)), dim, const(np.ones((), dt)), dtype=dt)
    return _op.gather(x, axis, _op.take(positions, idx, axis=0, mode="raise"))


# -- values decided at run time ----------------------------------------------------------------------------------
@onnx_op("Range", since=11, dynamic=True)
def _range(inputs, attr, ctx):
    """Range with run-time start/limit/delta: ``arange`` over scalar operands (its length is computed by the
    VM from the values: a data-dependent shape function)."""
    dt = ctx.dtype(inputs[0])
    start, limit, delta = (_op.reshape(x, []) if _ndim(x, ctx) else x for x in inputs[:3])
    return _op.arange(start, limit, delta, dtype=dt)


def _scalar_i64(x, ctx):
    """A one-element operand as an int64 scalar expression."""
    x = _i64(x, ctx)
    return _op.reshape(x, []) if _ndim(x, ctx) else x


@onnx_op("Trilu", since=14, dynamic=True)
def _trilu(inputs, attr, ctx):
    """Trilu with a run-time diagonal ``k``: the output shape is the input's; the kept triangle is
    ``col - row >= k`` (upper) or ``<= k`` (lower), compared against the value at run time."""
    x = inputs[0]
    shape = ctx.shape(x, dynamic_ok=True)
    if len(shape) < 2:
        raise ctx.error(f"Trilu needs a tensor of rank >= 2, got rank {len(shape)}")
    k = _scalar_i64(inputs[1], ctx) if len(inputs) > 1 and inputs[1] is not None else const(np.int64(0))
    n, m = _static_dim(shape[-2]), _static_dim(shape[-1])
    if n is not None and m is not None:
        diff = const(np.arange(m, dtype="int64")[None, :] - np.arange(n, dtype="int64")[:, None])
    else:
        one, zero = const(np.int64(1)), const(np.int64(0))
        rows = _op.arange(zero, _runtime_dim(x, len(shape) - 2, "int64"), one, dtype="int64")
        cols = _op.arange(zero, _runtime_dim(x, len(shape) - 1, "int64"), one, dtype="int64")
        diff = _op.subtract(_op.expand_dims(cols, 0), _op.expand_dims(rows, 1))
    keep = _op.greater_equal(diff, k) if int(attr.get("upper", 1)) else _op.less_equal(diff, k)
    return _op.where(keep, x, const(np.zeros((), ctx.dtype(x))))


@onnx_op("OneHot", since=9, dynamic=True)
def _one_hot(inputs, attr, ctx):
    """OneHot with a run-time ``depth``: the new axis has that length (known at run time only); negative
    indices count from ``depth``, indices out of range give an all-``off`` row (as ONNX says)."""
    idx, depth, values = inputs
    rank = _ndim(idx, ctx) + 1
    axis = _axis_of(ctx, int(attr.get("axis", -1)), rank)
    d = _scalar_i64(depth, ctx)  # ONNX: a depth of another type is cast to int64
    idx = _i64(idx, ctx)
    idx = _op.where(_op.less(idx, const(np.int64(0))), _op.add(idx, d), idx)
    idx = _op.expand_dims(idx, axis)
    pos = _op.arange(const(np.int64(0)), d, const(np.int64(1)), dtype="int64")
    if rank - axis - 1:
        pos = _op.reshape(pos, [-1] + [1] * (rank - axis - 1))
    off = _op.reshape(_op.strided_slice(values, [0], [1]), [])
    on = _op.reshape(_op.strided_slice(values, [1], [2]), [])
    return _op.where(_op.equal(idx, pos), on, off)


# -- output shapes decided by the data ----------------------------------------------------------------------------
def _nonzero_positions(x, ctx):
    """The flat positions of the nonzero entries of ``x``, in order: an int64 vector whose length (the count
    of nonzeros) is known at run time only (``data_dependent.nonzero_positions``, shared with the PyTorch
    frontend: O(size) memory)."""
    shape = ctx.shape(x)
    dt = ctx.dtype(x)
    flat = _op.reshape(x, [-1])
    hit = flat if dt == "bool" else _op.not_equal(flat, const(np.zeros((), dt)))
    return nonzero_positions(hit, int(np.prod(shape, dtype=np.int64))), shape


@onnx_op("NonZero", since=9, dynamic=True)
def _non_zero(inputs, attr, ctx):
    """NonZero of run-time data: [rank, count] int64 coordinates (row-major order, as numpy.nonzero)."""
    pos, shape = _nonzero_positions(inputs[0], ctx)
    if not shape:
        return _op.expand_dims(pos, 0)
    strides = [int(np.prod(shape[k + 1:], dtype=np.int64)) for k in range(len(shape))]
    coords = [_op.floor_mod(_op.floor_divide(pos, const(np.int64(st))), const(np.int64(max(d, 1))))
              for st, d in zip(strides, shape)]
    return _op.concatenate([_op.expand_dims(c, 0) for c in coords], 0)  # (stack has no shape function)


@onnx_op("Compress", since=9, dynamic=True)
def _compress(inputs, attr, ctx):
    """Compress with a run-time condition: the slices (or, without ``axis``, the flat elements) where the
    condition holds; a condition shorter than the axis drops the rest (as ONNX says)."""
    x, cond = inputs
    pos, _ = _nonzero_positions(cond, ctx)
    axis = attr.get("axis")
    if axis is None:
        x, axis = _op.reshape(x, [-1]), 0
    nd = _ndim(x, ctx)
    return _op.take(x, pos, axis=_axis_of(ctx, int(axis), nd), mode="clip")


@onnx_op("CenterCropPad", since=18, dynamic=True)
def _center_crop_pad(inputs, attr, ctx):
    """CenterCropPad to a run-time target shape: one ``dyn.nn.pad`` whose negative widths crop."""
    x = inputs[0]
    nd = _ndim(x, ctx)
    axes = [_axis_of(ctx, int(a), nd) for a in attr.get("axes", range(nd))]
    if _length(inputs[1], ctx, "shape") != len(axes):
        raise ctx.error(f"shape must hold {len(axes)} values (one per axis in {axes})")
    target, shape = _i64(inputs[1], ctx), _op.shape_of(x, "int64")
    zero, two = const(np.int64(0)), const(np.int64(2))
    before, after = [], []
    for a in range(nd):
        if a not in axes:
            before.append(const(np.zeros(1, "int64")))
            after.append(const(np.zeros(1, "int64")))
            continue
        diff = _op.subtract(_piece(target, axes.index(a)), _piece(shape, a))
        b = _op.where(_op.greater_equal(diff, zero), _op.floor_divide(diff, two),
                      _op.negative(_op.floor_divide(_op.negative(diff), two)))
        before.append(b)
        after.append(_op.subtract(diff, b))
    width = _op.transpose(_op.reshape(_op.concatenate(before + after, 0), [2, nd]), [1, 0])
    return _dyn.nn.pad(x, width, const(np.zeros((), ctx.dtype(x))))


@onnx_op("Unique", since=11, dynamic=True)
def _unique(inputs, attr, ctx):
    """Unique of run-time data (no ``axis``): the sorted input's run starts give the unique values (their
    count is known at run time only); first indices, counts and inverse indices come from comparing every
    element with every unique value (count x size: fine for small tensors, quadratic for large ones)."""
    if attr.get("axis") is not None:
        return _unique_axis(inputs[0], int(attr["axis"]), bool(int(attr.get("sorted", 1))), ctx)
    x = inputs[0]
    n = int(np.prod(ctx.shape(x), dtype=np.int64))
    flat = _op.reshape(x, [-1])
    srt = _op.sort(flat, axis=0)
    if n > 1:
        starts = _op.not_equal(_op.strided_slice(srt, [1], [n]), _op.strided_slice(srt, [0], [n - 1]))
        starts = _op.concatenate([const(np.ones(1, "bool")), starts], 0)
    else:
        starts = _op.ones_like(_op.cast(srt, "bool"))
    pos, _ = _nonzero_positions(starts, ctx)
    vals = _op.take(srt, pos, axis=0)                                          # [m], ascending
    eq = _op.equal(_op.expand_dims(flat, 1), _op.expand_dims(vals, 0))        # [n, m]
    counts = _op.sum(_op.cast(eq, "int64"), axis=[0])
    index = const(np.arange(n, dtype="int64").reshape(n, 1))
    first = _op.min(_op.where(eq, index, const(np.int64(n))), axis=[0])
    if int(attr.get("sorted", 1)):
        inverse = _op.sum(_op.cast(_op.less(_op.expand_dims(vals, 0), _op.expand_dims(flat, 1)), "int64"),
                          axis=[1])
        return [vals, first, inverse, counts]
    # order of first occurrence: unique k goes to slot rank[k] = #{j: first[j] < first[k]}
    rank = _op.sum(_op.cast(_op.less(_op.expand_dims(first, 0), _op.expand_dims(first, 1)), "int64"), axis=[1])
    slots = _op.arange(const(np.int64(0)), _op.sum(_op.cast(starts, "int64")), const(np.int64(1)), dtype="int64")
    place = _op.equal(_op.expand_dims(slots, 1), _op.expand_dims(rank, 0))  # [m slots, m uniques]

    def permute(v):
        return _op.sum(_op.where(place, _op.expand_dims(v, 0), _op.zeros_like(_op.expand_dims(v, 0))), axis=[1])
    first_of_x = _op.sum(_op.where(eq, _op.expand_dims(first, 0), const(np.int64(0))), axis=[1])
    inverse = _op.sum(_op.cast(_op.less(_op.expand_dims(first, 0), _op.expand_dims(first_of_x, 1)), "int64"),
                      axis=[1])
    return [permute(vals), permute(first), inverse, permute(counts)]


def _unique_axis(x, axis: int, sort: bool, ctx):
    """Unique slices of run-time data along ``axis`` (static shape): the slices as rows of an [n, m] matrix,
    unique rows in lexicographic order (``data_dependent.unique_rows``: m stable argsorts); with ``sorted=0``
    the uniques are reordered by first occurrence (slot s takes the unique whose first index ranks s)."""
    from .data_dependent import unique_rows
    shape = ctx.shape(x)
    nd = len(shape)
    if not -nd <= axis < nd:
        raise ctx.error(f"axis {axis} is out of range for rank {nd}")
    axis %= nd
    n = int(shape[axis])
    rest = [int(d) for k, d in enumerate(shape) if k != axis]
    moved = _op.transpose(x, [axis] + [k for k in range(nd) if k != axis]) if axis else x
    r = unique_rows(_op.reshape(moved, [n, int(np.prod(rest, dtype=np.int64))]), n,
                    int(np.prod(rest, dtype=np.int64)))
    vals, first, inverse, counts = r["values"], r["first"], r["inverse"], r["counts"]
    if not sort:
        rank = _op.sum(_op.cast(_op.less(_op.expand_dims(first, 0), _op.expand_dims(first, 1)), "int64"), axis=[1])
        slots = _op.arange(const(np.int64(0)), _op.sum(_op.ones_like(first)), const(np.int64(1)), dtype="int64")
        place = _op.equal(_op.expand_dims(slots, 1), _op.expand_dims(rank, 0))       # [slot, unique]
        order = _op.sum(_op.where(place, _op.expand_dims(slots, 0), const(np.int64(0))), axis=[1])
        vals, first, counts = (_op.take(v, order, axis=0) for v in (vals, first, counts))
        inverse = _op.take(rank, inverse, axis=0)
    vals = _op.reshape(vals, [-1] + rest)
    if axis:
        back = list(range(1, axis + 1)) + [0] + list(range(axis + 1, nd))
        vals = _op.transpose(vals, back)
    return [vals, first, inverse, counts]
