"""aten sorting, scattering, indexing and creation ops beyond ``tensor.py``: sort/argsort/topk, scatter*,
index_put (general, with accumulate), take, one_hot, bincount, meshgrid, broadcast_tensors, fill_/zero_, randn."""
from __future__ import annotations

import numpy as np

from ....error import FrontendError
from ...expr import Expr
from .registry import register, relay_op
from .tensor import _axis, _full, _wrap_indices
from ... import op
from .math import promote


def _op():
    return op


# -- sorting --------------------------------------------------------------------------------------
def _argsort(ctx, x, dim, descending):
    # relay's argsort orders NaN like numpy (last when ascending); PyTorch does the same
    return _op().argsort(x, axis=dim, is_ascend=not descending, dtype="int64")


@register("sort")
def _sort(ctx, args):
    x = args[0]
    dim = _axis(args.get("dim", -1), ctx.ndim(x))
    descending = bool(args.get("descending", False))
    idx = _argsort(ctx, x, dim, descending)
    return [_op().gather(x, dim, idx), idx]


@register("argsort")
def _argsort_op(ctx, args):
    x = args[0]
    return _argsort(ctx, x, _axis(args.get("dim", -1), ctx.ndim(x)), bool(args.get("descending", False)))


@register("topk")
def _topk(ctx, args):
    x = args[0]
    k = int(ctx.scalar(args[1], "k"))
    dim = _axis(args.get("dim", -1), ctx.ndim(x))
    largest = bool(args.get("largest", True))
    if k == 0:
        shape = list(ctx.shape(x))
        shape[dim] = 0
        raise FrontendError("aten::topk with k=0 gives an empty tensor; kiln does not build empty tensors")
    out = _op().topk(x, k=k, axis=dim, ret_type="both", is_ascend=not largest, dtype="int64")
    return [out[0], out[1]]


# -- scattering -----------------------------------------------------------------------------------
def _index_shaped(ctx, src, index):
    """``src`` cut to the shape of ``index`` (PyTorch reads only that corner of src)."""
    ss, si = ctx.shape(src), ctx.shape(index)
    if tuple(ss) == tuple(si):
        return src
    if len(ss) != len(si) or any(i > s for i, s in zip(si, ss)):
        raise FrontendError(f"aten::{ctx.op_name}: index {tuple(si)} does not fit in src {tuple(ss)}")
    return _op().strided_slice(src, [0] * len(si), list(si))


def _scatter_src(ctx, x, index, src):
    dt = ctx.dtype(x)
    if isinstance(src, Expr):
        return ctx.cast(_index_shaped(ctx, src, index), dt)
    return _op().full(ctx.const(src, dt), list(ctx.shape(index)), dt)


_TORCH_REDUCE = {None: "update", "add": "add", "sum": "add", "multiply": "mul", "prod": "mul", "mean": "mean",
                 "amax": "max", "amin": "min"}
_IDENTITY = {"add": 0, "mul": 1, "mean": 0}


def scatter(ctx, x, dim, index, src, reduce=None, include_self=True):
    dim = _axis(dim, ctx.ndim(x))
    red = _TORCH_REDUCE.get(reduce)
    if red is None and reduce is not None:
        raise FrontendError(f"aten::{ctx.op_name}: unknown reduce {reduce!r} (expected one of "
                            f"{sorted(k for k in _TORCH_REDUCE if k)})")
    if int(np.prod(ctx.shape(index))) == 0:  # PyTorch: an empty index writes nothing, whatever its rank
        return x
    index = ctx.cast(index, "int64")
    src = _scatter_src(ctx, x, index, src)
    if ctx.ndim(index) == 0:
        index, src = _op().reshape(index, [1]), _op().reshape(src, [1])
    if include_self or red == "update":
        return relay_op("scatter_elements")(x, index, src, axis=dim, reduction=red)
    # include_self=False: the scattered positions start from the reduction's identity (mean: from nothing)
    dt = ctx.dtype(x)
    if red in ("max", "min"):
        info = np.finfo(dt) if dt.startswith("float") else np.iinfo(dt)
        ident = -np.inf if (red == "max" and dt.startswith("float")) else (
            np.inf if dt.startswith("float") else (info.min if red == "max" else info.max))
    else:
        ident = _IDENTITY[red]
    fill = _op().full(ctx.const(ident, dt), list(ctx.shape(index)), dt)
    base = relay_op("scatter_elements")(x, index, fill, axis=dim, reduction="update")
    if red != "mean":
        return relay_op("scatter_elements")(base, index, src, axis=dim, reduction=red)
    total = relay_op("scatter_elements")(base, index, src, axis=dim, reduction="add")
    ones = _op().full(ctx.const(1, dt), list(ctx.shape(index)), dt)
    count = relay_op("scatter_elements")(_op().zeros_like(x), index, ones, axis=dim, reduction="add")
    hit = _op().greater(count, ctx.const(0, dt))
    denom = _op().where(hit, count, ctx.const(1, dt))
    mean = _op().floor_divide(total, denom) if not dt.startswith("float") else _op().divide(total, denom)
    return _op().where(hit, mean, x)


@register("scatter")
def _scatter(ctx, args):
    return scatter(ctx, args[0], args[1], args[2], args[3], args["reduce"])


@register("scatter_add")
def _scatter_add(ctx, args):
    return scatter(ctx, args[0], args[1], args[2], args[3], "add")


@register("scatter_reduce")
def _scatter_reduce(ctx, args):
    return scatter(ctx, args[0], args[1], args[2], args[3], args[4], bool(args.get("include_self", True)))


def _one_value(ctx, values) -> bool:
    """A value of static shape with one element (x[mask] = v writes it everywhere the mask holds)."""
    vs = ctx.shape(values)
    return all(isinstance(d, (int, np.integer)) for d in vs) and int(np.prod(vs, dtype=np.int64)) == 1


@register("index_put", "_index_put_impl")
def _index_put(ctx, args):
    """``x[indices] = values`` (or ``+=`` with accumulate): the indexed positions are flattened to one axis and
    written with scatter_elements; a single boolean mask becomes a where."""
    x, indices, values = args[0], list(args[1]), args[2]
    accumulate = bool(args.get("accumulate", False))
    shape = list(ctx.shape(x))
    dt = ctx.dtype(x)
    values = ctx.as_expr(values, dt)
    if len(indices) == 1 and indices[0] is not None and ctx.dtype(indices[0]) in ("bool", "uint8") \
            and ctx.shape(indices[0]) == tuple(shape) and not accumulate and _one_value(ctx, values):
        v = _op().broadcast_to(values, shape)
        return _op().where(ctx.cast(indices[0], "bool"), v, x)
    if any(t is not None and ctx.dtype(t) in ("bool", "uint8") for t in indices):
        from .dynamic import index_put_with_mask  # the selected entries' count is known at run time only
        return index_put_with_mask(ctx, x, indices, values, accumulate)
    positions = [i for i, t in enumerate(indices) if t is not None]
    if positions != list(range(len(positions))):
        raise FrontendError("aten::index_put: kiln supports index tensors on the leading axes only "
                            "(x[i, j] = v, not x[:, i] = v); permute the tensor first")
    k = len(positions)
    idx = [_wrap_indices(ctx, ctx.as_expr(indices[i]), shape[i]) for i in positions]
    idx = promote(ctx, *idx, dtype="int64")
    bshape = list(np.broadcast_shapes(*[ctx.shape(t) for t in idx]))
    flat = None
    for i, t in enumerate(idx):
        t = _op().broadcast_to(t, bshape) if list(ctx.shape(t)) != bshape else t
        flat = t if flat is None else flat * ctx.const(shape[i], "int64") + t
    rest = shape[k:]
    m = int(np.prod(bshape, dtype=np.int64))
    r = int(np.prod(rest, dtype=np.int64))
    lead = int(np.prod(shape[:k], dtype=np.int64))
    flat = _op().reshape(flat, [m, 1])
    flat = _op().broadcast_to(flat, [m, r]) if r != 1 else flat
    vals = _op().reshape(_op().broadcast_to(values, bshape + rest), [m, r])
    data = _op().reshape(x, [lead, r])
    out = relay_op("scatter_elements")(data, flat, vals, axis=0, reduction="add" if accumulate else "update")
    return _op().reshape(out, shape)



# -- indexing -------------------------------------------------------------------------------------
@register("take")
def _take(ctx, args):
    x, index = args[0], args[1]
    n = int(np.prod(ctx.shape(x), dtype=np.int64))
    return _op().take(_op().reshape(x, [-1]), _wrap_indices(ctx, index, n), axis=0)


@register("one_hot")
def _one_hot(ctx, args):
    x = args[0]
    depth = int(args.get("num_classes", -1))
    if depth < 0:
        val = ctx.value(x)
        if val is None:
            raise FrontendError("aten::one_hot without num_classes sizes its output by the largest input value "
                                "(data-dependent); pass num_classes")
        depth = int(val.max()) + 1
    return _op().one_hot(ctx.cast(x, "int64"), ctx.const(1, "int64"), ctx.const(0, "int64"), depth, -1, "int64")


@register("bincount")
def _bincount(ctx, args):
    """The output length is max(input) + 1 (at least minlength): data-dependent. A constant input is counted
    now; otherwise the length the model was traced with is used (values past it are not counted)."""
    x, weights = args[0], args["weights"]
    minlength = int(args.get("minlength", 0))
    val = ctx.value(x)
    if val is not None:
        n = max(int(val.max()) + 1 if val.size else 0, minlength)
    else:
        traced = (getattr(ctx, "out_shapes", None) or [None])[0]
        if not traced:
            raise FrontendError("aten::bincount: the output length (max(input) + 1) depends on the input values, "
                                "and the traced graph does not record it; kiln needs static shapes")
        n = int(traced[0])
    dt = ctx.dtype(weights) if weights is not None else "int64"
    upd = ctx.cast(weights, dt) if weights is not None else _op().full(ctx.const(1, dt), list(ctx.shape(x)), dt)
    zeros = _op().full(ctx.const(0, dt), [n], dt)
    return relay_op("scatter_elements")(zeros, ctx.cast(x, "int64"), upd, axis=0, reduction="add")


# -- broadcasting helpers -------------------------------------------------------------------------
@register("meshgrid")
def _meshgrid(ctx, args):
    tensors = [ctx.as_expr(t) for t in args[0]]
    indexing = args.get("indexing", "ij")
    if indexing not in ("ij", "xy"):
        raise FrontendError(f"aten::meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    sizes = [int(np.prod(ctx.shape(t), dtype=np.int64)) for t in tensors]
    swap = indexing == "xy" and len(tensors) >= 2
    order = list(range(len(tensors)))
    if swap:
        order[0], order[1] = 1, 0
    out_shape = [sizes[i] for i in order]
    outs = []
    for i, t in enumerate(tensors):
        pos = order.index(i)
        view = [1] * len(tensors)
        view[pos] = sizes[i]
        outs.append(_op().broadcast_to(_op().reshape(t, view), out_shape))
    return outs


@register("broadcast_tensors")
def _broadcast_tensors(ctx, args):
    tensors = [ctx.as_expr(t) for t in args[0]]
    shape = list(np.broadcast_shapes(*[ctx.shape(t) for t in tensors]))
    return [t if list(ctx.shape(t)) == shape else _op().broadcast_to(t, shape) for t in tensors]


# -- filling --------------------------------------------------------------------------------------
@register("copy_")
def _copy_(ctx, args):
    """``self.copy_(src)``: src broadcast to self's shape and cast to self's dtype (the importer then writes
    the result into self and, for a view, into its base: ``pytorch_inplace.py``)."""
    x, src = args[0], args[1]
    dt = ctx.dtype(x)
    src = ctx.as_expr(src, dt) if not isinstance(src, Expr) else ctx.cast(src, dt)
    shape = list(ctx.shape(x))
    return src if list(ctx.shape(src)) == shape else _op().broadcast_to(src, shape)


@register("fill")
def _fill(ctx, args):
    x, v = args[0], args[1]
    return _full(ctx, ctx.shape(x), v, ctx.dtype(x))


@register("zero")
def _zero(ctx, args):
    x = args[0]
    return _full(ctx, ctx.shape(x), 0, ctx.dtype(x))


@register("is_floating_point")
def _is_floating_point(ctx, args):
    return ctx.dtype(args[0]) in ("float16", "bfloat16", "float32", "float64")


# -- random ---------------------------------------------------------------------------------------
def _random_normal(ctx, shape, dtype):
    """Normal samples drawn once, at import time, into a constant.

    kiln has no random-number op. TVM maps aten::randn to random.normal with a threefry key fixed when the
    model is imported, so its compiled model also returns the same numbers on every run; kiln does the
    same with numpy's generator. The values cannot match PyTorch's (another generator), only the shape,
    dtype and distribution do.
    """
    import torch
    if not dtype.startswith("float"):
        raise FrontendError(f"aten::{ctx.op_name}: dtype {dtype} is not a floating dtype")
    rng = np.random.default_rng(int(torch.initial_seed()) % (2 ** 63))
    return ctx.const(rng.standard_normal(shape).astype("float32" if dtype == "bfloat16" else dtype), dtype)


@register("randn")
def _randn(ctx, args):
    dtype = str(args["dtype"] or ctx.default_dtype)
    return _random_normal(ctx, ctx.int_list(args[0], "size"), dtype)


@register("randn_like")
def _randn_like(ctx, args):
    x = args[0]
    dtype = str(args["dtype"] or ctx.dtype(x))
    return _random_normal(ctx, list(ctx.shape(x)), dtype)
