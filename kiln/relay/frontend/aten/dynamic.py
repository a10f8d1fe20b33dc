"""aten ops whose output shape depends on the input values: nonzero (and its spellings), masked_select,
unique, boolean-mask indexing and writes. Their results have ``relay.Any()`` lengths, so the module runs on
the Relay VM (``relay.vm.compile`` / ``relay.create_executor("vm", ...)``); the Relay graphs come from the
shared helpers in ``frontend/data_dependent.py``. Inputs must have static shapes (only the results are
dynamic). Constant inputs are evaluated at import time (numpy), giving static results.
"""
from __future__ import annotations

import numpy as np

from ....error import FrontendError, OpNotImplemented
from ... import op
from .. import data_dependent as dd
from .registry import register


def _axis(d: int, ndim: int) -> int:
    d = int(d)
    return d + ndim if d < 0 else d


def _static_shape(ctx, x, what: str) -> tuple:
    shape = tuple(ctx.shape(x))
    if not all(isinstance(d, (int, np.integer)) for d in shape):
        raise OpNotImplemented(f"aten::{ctx.op_name}: {what} has a dimension known only at run time {shape}; "
                               "kiln's data-dependent ops need inputs of static shape")
    return tuple(int(d) for d in shape)


def _flat(x, shape):
    return x if len(shape) == 1 else op.reshape(x, [-1])


def _hit(ctx, x):
    dt = ctx.dtype(x)
    return x if dt == "bool" else op.not_equal(x, ctx.const(0, dt))


# -- nonzero ------------------------------------------------------------------------------------
def _coords(ctx, x) -> list:
    shape = _static_shape(ctx, x, "the input")
    val = ctx.value(x)
    if val is not None:  # a constant: its nonzero entries are known now
        return [ctx.const(c, "int64") for c in np.nonzero(np.asarray(val).reshape(shape))]
    if not shape:  # a 0-d tensor is treated as 1-d
        return dd.nonzero_coords(op.reshape(x, [1]), (1,), ctx.dtype(x))
    return dd.nonzero_coords(x, shape, ctx.dtype(x))


@register("nonzero", "argwhere")
def _nonzero(ctx, args):
    """[count, ndim] int64 coordinates, row-major order."""
    if not _static_shape(ctx, args[0], "the input"):
        raise OpNotImplemented("aten::nonzero of a 0-d tensor (a [count, 0] result) is not supported; "
                               "reshape the input to 1-d or use nonzero(as_tuple=True)")
    cs = _coords(ctx, args[0])
    if not cs:
        return dd.empty("int64", (0, 0))
    return op.concatenate([op.expand_dims(c, 1) for c in cs], 1)


@register("nonzero_numpy")
def _nonzero_numpy(ctx, args):
    """``nonzero(as_tuple=True)`` / one-argument ``where``: one coordinate vector per axis."""
    return _coords(ctx, args[0])


@register("nonzero_static")
def _nonzero_static(ctx, args):
    """nonzero padded (or cut) to ``size`` rows with ``fill_value``: a static shape."""
    x = args[0]
    size, fill = int(ctx.scalar(args["size"], "size")), int(args.get("fill_value", -1))
    shape = _static_shape(ctx, x, "the input")
    nd = max(len(shape), 1)
    n = int(np.prod(shape, dtype=np.int64))
    if size == 0 or n == 0:
        return ctx.const(np.full((size, nd), fill), "int64")
    flat = _flat(x, shape) if shape else op.reshape(x, [1])
    hit = op.cast(_hit(ctx, flat), "int64")
    running = op.cumsum(hit, axis=0, dtype="int64")
    pos = dd.lower_bound(running, n, ctx.const(np.arange(1, size + 1), "int64"))  # n past the last hit
    valid = op.less(ctx.const(np.arange(size), "int64"), op.sum(hit))
    cols = []
    dims = shape or (1,)
    for k, d in enumerate(dims):
        stride = int(np.prod(dims[k + 1:], dtype=np.int64))
        c = pos if stride == 1 else op.floor_divide(pos, ctx.const(stride, "int64"))
        c = c if k == 0 else op.floor_mod(c, ctx.const(d, "int64"))
        cols.append(op.expand_dims(op.where(valid, c, ctx.const(fill, "int64")), 1))
    return op.concatenate(cols, 1)


def where_one_arg(ctx, args):
    """``torch.where(cond)``: as ``nonzero(cond, as_tuple=True)`` (called by the ``where`` converter)."""
    return _coords(ctx, args[0])


# -- masked select --------------------------------------------------------------------------------
@register("masked_select")
def _masked_select(ctx, args):
    x, mask = args[0], args[1]
    xs, ms = _static_shape(ctx, x, "the input"), _static_shape(ctx, mask, "the mask")
    try:
        shape = tuple(np.broadcast_shapes(xs, ms))
    except ValueError:
        raise FrontendError(f"aten::masked_select: the mask's shape {ms} does not broadcast with the input's "
                            f"{xs}") from None
    if xs != shape:
        x = op.broadcast_to(x, list(shape))
    if ms != shape:
        mask = op.broadcast_to(mask, list(shape))
    n = int(np.prod(shape, dtype=np.int64))
    if n == 0:
        return dd.empty(ctx.dtype(x))
    pos = dd.nonzero_positions(_hit(ctx, _flat(mask, shape) if shape else op.reshape(mask, [1])), n)
    return op.take(_flat(x, shape) if shape else op.reshape(x, [1]), pos, axis=0)


# -- unique -------------------------------------------------------------------------------------
def _unique(ctx, x, return_inverse: bool, return_counts: bool, consecutive: bool = False):
    shape = _static_shape(ctx, x, "the input")
    n = int(np.prod(shape, dtype=np.int64))
    dt = ctx.dtype(x)
    r = dd.unique_flat(_flat(x, shape) if shape else op.reshape(x, [1]), n, dt, consecutive)
    inverse = r["inverse"]
    if return_inverse and len(shape) != 1 and n:
        inverse = op.reshape(inverse, list(shape))
    elif return_inverse and n == 0:
        inverse = dd.empty("int64", shape)
    return [r["values"], inverse if return_inverse else dd.empty("int64"),
            r["counts"] if return_counts else dd.empty("int64")]


@register("_unique2", "unique")
def _unique2(ctx, args):
    # torch.unique sorts whatever ``sorted`` says (CPU), so the values are always ascending
    return _unique(ctx, args[0], bool(args.get("return_inverse", False)), bool(args.get("return_counts", False)))


@register("_unique")
def _unique_legacy(ctx, args):
    return _unique(ctx, args[0], bool(args.get("return_inverse", False)), False)[:2]


def _unique_dim(ctx, x, dim, return_inverse: bool, return_counts: bool, consecutive: bool):
    shape = _static_shape(ctx, x, "the input")
    if not shape:
        raise FrontendError(f"aten::{ctx.op_name}: dim {dim} is out of range for a 0-d tensor")
    d = _axis(dim, len(shape))
    if not 0 <= d < len(shape):
        raise FrontendError(f"aten::{ctx.op_name}: dim {dim} is out of range for a tensor of rank {len(shape)}")
    n = shape[d]
    rest = shape[:d] + shape[d + 1:]
    m = int(np.prod(rest, dtype=np.int64))
    if n == 0:
        raise OpNotImplemented(f"aten::{ctx.op_name} over an empty dimension {d} of shape {shape}")
    perm = [d] + [i for i in range(len(shape)) if i != d]
    rows = op.transpose(x, perm) if d else x
    rows = op.reshape(rows, [n, m])
    res = dd.unique_rows(rows, n, m, consecutive)
    values = op.reshape(res["values"], [-1] + list(rest))
    if d:
        inv = [0] * len(shape)
        for i, p in enumerate(perm):
            inv[p] = i
        values = op.transpose(values, inv)
    return [values, res["inverse"] if return_inverse else dd.empty("int64"),
            res["counts"] if return_counts else dd.empty("int64")]


@register("unique_dim")
def _unique_dim_conv(ctx, args):
    return _unique_dim(ctx, args[0], int(args[1]), bool(args.get("return_inverse", False)),
                       bool(args.get("return_counts", False)), consecutive=False)


@register("unique_consecutive")
def _unique_consecutive(ctx, args):
    inv, cnt, dim = bool(args.get("return_inverse", False)), bool(args.get("return_counts", False)), args["dim"]
    if dim is None:
        return _unique(ctx, args[0], inv, cnt, consecutive=True)
    return _unique_dim(ctx, args[0], int(dim), inv, cnt, consecutive=True)


@register("unique_dim_consecutive")
def _unique_dim_consecutive(ctx, args):
    return _unique_dim(ctx, args[0], int(args[1]), bool(args.get("return_inverse", False)),
                       bool(args.get("return_counts", False)), consecutive=True)


# -- boolean-mask indexing ----------------------------------------------------------------------
def is_mask(ctx, t) -> bool:
    return t is not None and not isinstance(t, (int, float, list, tuple)) and ctx.dtype(t) in ("bool", "uint8")


def _mask_positions(ctx, x, indices):
    """For ``x[..., mask, ...]`` (one boolean mask, no other index tensor): (x with the masked axes merged
    into one, the merged axis, the flat positions of the mask's True entries, the merged shape)."""
    masks = [i for i, t in enumerate(indices) if t is not None]
    if len(masks) != 1 or not is_mask(ctx, indices[masks[0]]):
        raise OpNotImplemented(f"aten::{ctx.op_name}: a boolean mask together with other index tensors "
                               "(x[mask, idx]) is not supported; index with the mask alone")
    p = masks[0]
    mask = indices[p]
    shape = _static_shape(ctx, x, "the indexed tensor")
    ms = _static_shape(ctx, mask, "the mask")
    k = max(len(ms), 1)
    if p + len(ms) > len(shape) or tuple(shape[p:p + len(ms)]) != ms:
        raise FrontendError(f"aten::{ctx.op_name}: the boolean mask of shape {ms} does not match the indexed "
                            f"tensor's shape {shape} at dimension {p}")
    if not ms:  # a 0-d mask adds an axis of length 1 (True) or 0 (False)
        x = op.expand_dims(x, p)
        shape = shape[:p] + (1,) + shape[p:]
    merged = list(shape[:p]) + [int(np.prod(shape[p:p + k], dtype=np.int64))] + list(shape[p + k:])
    n = merged[p]
    flat_mask = op.reshape(mask, [-1]) if len(ms) != 1 else mask
    pos = dd.nonzero_positions(_hit(ctx, flat_mask), n) if n else dd.empty("int64")
    xm = op.reshape(x, merged) if list(shape) != merged else x
    return xm, p, pos, merged


def index_with_mask(ctx, x, indices):
    """``x[..., mask, ...]``: the masked axes become one axis holding the selected entries."""
    xm, p, pos, _ = _mask_positions(ctx, x, indices)
    return op.take(xm, pos, axis=p)


def index_put_with_mask(ctx, x, indices, values, accumulate: bool):
    """``x[..., mask, ...] = values`` (or ``+=``): a ``where`` over the masked axes, so the result keeps x's
    static shape. One value per selected entry ([count, *trailing dims], data-dependent) is read for the k-th
    True entry from row k (the mask's running count), through a zero row appended so that an empty selection
    reads nothing out of bounds; a value of the trailing shape (or one value) is broadcast."""
    dt = ctx.dtype(x)
    shape = _static_shape(ctx, x, "the indexed tensor")
    masks = [i for i, t in enumerate(indices) if t is not None]
    xm, p, _, merged = _mask_positions(ctx, x, indices)
    lead = int(np.prod(merged[:p], dtype=np.int64))
    n, r = merged[p], int(np.prod(merged[p + 1:], dtype=np.int64))
    if lead * n * r == 0:
        return x
    x3 = op.reshape(xm, [lead, n, r])
    mask = indices[masks[0]]
    hit = _hit(ctx, op.reshape(mask, [n]) if ctx.shape(mask) != (n,) else mask)
    mask3 = op.reshape(hit, [1, n, 1])
    values = ctx.cast(values, dt)
    vshape = tuple(ctx.shape(values))
    trail = tuple(merged[p + 1:])
    static = all(isinstance(d, (int, np.integer)) for d in vshape)
    if static and (int(np.prod(vshape, dtype=np.int64)) == 1 or len(vshape) <= len(trail)):
        vals = op.reshape(op.broadcast_to(values, list(trail)), [1, 1, r])  # the same value(s) everywhere
    else:
        k = len(vshape) - len(trail) - 1  # the axis of the selected entries in ``values``
        front = vshape[:max(k, 0)]
        ok = k >= 0 and tuple(vshape[k + 1:]) == trail and (
            all(isinstance(d, (int, np.integer)) and int(d) == 1 for d in front) or tuple(front) == tuple(shape[:p]))
        if not ok:
            raise FrontendError(f"aten::{ctx.op_name}: values of shape {vshape} do not broadcast to the "
                                f"selected entries {tuple(shape[:p])} + (count,) + {trail}")
        lv = int(np.prod(front, dtype=np.int64))
        v3 = op.reshape(values, [lv, -1, r])
        v3 = op.concatenate([v3, ctx.const(np.zeros((lv, 1, r)), dt)], 1)
        rank = op.subtract(op.cumsum(op.cast(hit, "int64"), axis=0, dtype="int64"), ctx.const(1, "int64"))
        rank = op.maximum(rank, ctx.const(0, "int64"))
        vals = op.take(v3, rank, axis=1, mode="clip")  # [lv, n, r]
    if accumulate:
        out = op.add(x3, op.where(mask3, vals, ctx.const(0, dt)))
    else:
        out = op.where(mask3, vals, x3)
    if ctx.shape(out) != (lead, n, r):
        out = op.broadcast_to(out, [lead, n, r])
    return op.reshape(out, list(shape))


# -- sizes of data-dependent results (torch.export graphs) ------------------------------------------------
@register("sym_size")
def _sym_size(ctx, args):
    """``aten::sym_size.int``: a Python int for a static dim, else an int64 scalar read at run time."""
    x, dim = args[0], int(args[1])
    shape = tuple(ctx.shape(x))
    d = _axis(dim, len(shape))
    if isinstance(shape[d], (int, np.integer)):
        return int(shape[d])
    return op.take(op.shape_of(x, "int64"), ctx.const(d, "int64"), axis=0)


@register("_assert_scalar", "_assert_async", "sym_constrain_range_for_size", "sym_constrain_range")
def _runtime_assertion(ctx, args):
    """torch.export's range facts about data-dependent sizes (``u0 >= 0``, ``u0 <= numel``): they hold by
    construction of the op that made the size, so kiln does not re-check them; a condition known at import time
    that is false is still an error."""
    cond = args[0] if args else None
    if isinstance(cond, (bool, np.bool_)) and not cond:
        raise FrontendError(f"aten::{ctx.op_name}: the exported program's assertion {args[1] if len(args) > 1 else ''} "
                            "is false for the imported shapes")
    return None
