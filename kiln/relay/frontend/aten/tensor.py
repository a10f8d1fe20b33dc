"""aten shape, data-movement, indexing, creation and dtype-conversion ops."""
from __future__ import annotations

import numbers

import numpy as np

from ....error import FrontendError
from ...expr import Constant, Expr
from ..pytorch_utils import DTypeName
from .registry import register
from ... import op
from .math import promote


def _op():
    return op


def _axis(d: int, ndim: int) -> int:
    d = int(d)
    return d + ndim if d < 0 else d


# -- identity-like ------------------------------------------------------------------------------
@register("contiguous", "clone", "detach", "alias", "lift_fresh_copy", "lift_fresh", "dropout",
          "feature_dropout", "alpha_dropout", "feature_alpha_dropout", "_native_dropout_identity", "copy",
          "resolve_conj", "resolve_neg", "positive", "_unsafe_view_identity", "device", "cpu")
def _identity(ctx, args):
    return args[0]


@register("native_dropout")
def _native_dropout(ctx, args):
    x = args[0]
    return [x, _op().ones_like(x).astype("bool")]


# -- reshaping ------------------------------------------------------------------------------------
@register("view", "reshape", "_unsafe_view", "_reshape_alias")
def _reshape(ctx, args):
    x = args[0]
    if isinstance(args[1], DTypeName):  # view(dtype): a bit cast
        raise FrontendError("aten::view(dtype) reinterprets memory; kiln does not support bit casts")
    shape = ctx.int_list(args[1], "shape")
    return ctx.fold(_op().reshape(x, shape))


@register("view_as", "reshape_as")
def _view_as(ctx, args):
    return _op().reshape(args[0], list(ctx.shape(args[1])))


@register("flatten")
def _flatten(ctx, args):
    x = args[0]
    shape = ctx.shape(x)
    nd = len(shape)
    if nd == 0:
        return _op().reshape(x, [1])
    start = _axis(args.get("start_dim", 0), nd)
    end = _axis(args.get("end_dim", -1), nd)
    new = list(shape[:start]) + [int(np.prod(shape[start:end + 1], dtype=np.int64))] + list(shape[end + 1:])
    return ctx.fold(_op().reshape(x, new))


@register("unflatten")
def _unflatten(ctx, args):
    x = args[0]
    shape = list(ctx.shape(x))
    d = _axis(args[1], len(shape))
    sizes = ctx.int_list(args[2], "sizes")
    return _op().reshape(x, shape[:d] + sizes + shape[d + 1:])


@register("permute")
def _permute(ctx, args):
    x = args[0]
    nd = ctx.ndim(x)
    return ctx.fold(_op().transpose(x, [_axis(d, nd) for d in ctx.int_list(args[1], "dims")]))


@register("transpose", "swapaxes")
def _transpose(ctx, args):
    x = args[0]
    nd = ctx.ndim(x)
    if nd < 2:
        return x
    axes = list(range(nd))
    a, b = _axis(args[1], nd), _axis(args[2], nd)
    axes[a], axes[b] = axes[b], axes[a]
    return ctx.fold(_op().transpose(x, axes))


@register("t", "numpy_T")
def _t(ctx, args):
    x = args[0]
    if ctx.ndim(x) < 2:
        return x
    return ctx.fold(_op().transpose(x, list(range(ctx.ndim(x)))[::-1]))


@register("squeeze")
def _squeeze(ctx, args):
    x = args[0]
    shape = ctx.shape(x)
    if len(args) < 2 or args[1] is None:
        return _op().squeeze(x)
    dims = [_axis(d, len(shape)) for d in ctx.int_list(args[1], "dim")]
    dims = [d for d in dims if d < len(shape) and shape[d] == 1]  # PyTorch ignores non-1 dims
    if not dims:
        return x
    return ctx.fold(_op().squeeze(x, axis=dims))


@register("unsqueeze")
def _unsqueeze(ctx, args):
    x = ctx.as_expr(args[0])
    d = int(args[1])
    if d < 0:
        d += ctx.ndim(x) + 1
    return ctx.fold(_op().expand_dims(x, d))


@register("expand")
def _expand(ctx, args):
    x = args[0]
    shape = ctx.shape(x)
    sizes = ctx.int_list(args[1], "size")
    lead = len(sizes) - len(shape)
    out = [(shape[i - lead] if s == -1 else s) for i, s in enumerate(sizes)]
    if tuple(out) == tuple(shape):
        return x
    return ctx.fold(_op().broadcast_to(x, out))


@register("expand_as", "broadcast_as")
def _expand_as(ctx, args):
    return _op().broadcast_to(args[0], list(ctx.shape(args[1])))


@register("broadcast_to")
def _broadcast_to(ctx, args):
    return _expand(ctx, args)


@register("repeat")
def _repeat(ctx, args):
    x = args[0]
    reps = ctx.int_list(args[1], "repeats")
    shape = ctx.shape(x)
    if len(reps) > len(shape):
        x = _op().reshape(x, [1] * (len(reps) - len(shape)) + list(shape))
    return _op().tile(x, reps)


@register("repeat_interleave")
def _repeat_interleave(ctx, args):
    x = args[0]
    reps = args[1]
    if isinstance(reps, Expr):
        val = ctx.value(reps)
        if val is None or val.size != 1:
            raise FrontendError("aten::repeat_interleave with a tensor of repeats has a data-dependent shape")
        reps = int(val.reshape(()))
    dim = args["dim"]
    if dim is None:
        x = _op().reshape(x, (-1,))
        dim = 0
    return _op().repeat(x, int(reps), int(dim))


@register("flip")
def _flip(ctx, args):
    x = args[0]
    for d in ctx.int_list(args[1], "dims"):
        x = _op().reverse(x, axis=d)
    return x


@register("roll")
def _roll(ctx, args):
    x = args[0]
    shifts = ctx.int_list(args[1], "shifts")
    dims = ctx.int_list(args[2], "dims")
    if not dims:
        shape = ctx.shape(x)
        flat = _op().reshape(x, (-1,))
        return _op().reshape(_roll_axis(ctx, flat, shifts[0], 0), list(shape))
    for s, d in zip(shifts, dims):
        x = _roll_axis(ctx, x, s, d)
    return x


def _roll_axis(ctx, x, shift, dim):
    n = ctx.shape(x)[dim]
    idx = (np.arange(n) - shift) % n
    return _op().take(x, ctx.const(idx, "int64"), axis=dim)


# -- joining and splitting ----------------------------------------------------------------------
def _tensor_list(ctx, v):
    if isinstance(v, Expr):
        return [v]
    return [ctx.as_expr(t) for t in v]


@register("cat", "concat", "concatenate")
def _cat(ctx, args):
    tensors = [t for t in _tensor_list(ctx, args[0])]
    tensors = [t for t in tensors if not (ctx.ndim(t) == 1 and ctx.shape(t)[0] == 0)] or tensors
    tensors = promote(ctx, *tensors) if len(tensors) > 1 else tensors
    if len(tensors) == 1:
        return tensors[0]
    dim = _axis(args.get("dim", 0), ctx.ndim(tensors[0]))
    return ctx.fold(_op().concatenate(tensors, axis=dim))


@register("stack")
def _stack(ctx, args):
    tensors = _tensor_list(ctx, args[0])
    tensors = promote(ctx, *tensors) if len(tensors) > 1 else tensors
    dim = int(args.get("dim", 0))
    if dim < 0:
        dim += ctx.ndim(tensors[0]) + 1
    return ctx.fold(_op().stack(tensors, axis=dim))


def _split_by_sizes(ctx, x, sizes, dim):
    dim = _axis(dim, ctx.ndim(x))
    if len(sizes) == 1:
        return [x]
    points = list(np.cumsum(sizes)[:-1].astype(int))
    parts = _op().split(x, [int(p) for p in points], axis=dim)
    return [parts[i] for i in range(len(sizes))]


@register("split", "split_with_sizes", "unsafe_split", "unsafe_split_with_sizes")
def _split(ctx, args):
    x = args[0]
    dim = int(args.get("dim", 0))
    n = ctx.shape(x)[_axis(dim, ctx.ndim(x))]
    size = args[1]
    if isinstance(size, (list, tuple)):
        sizes = ctx.int_list(size, "split_sizes")
    else:
        size = int(ctx.scalar(size))
        sizes = [size] * (n // size) + ([n % size] if n % size else [])
    return _split_by_sizes(ctx, x, sizes, dim)


@register("chunk", "unsafe_chunk")
def _chunk(ctx, args):
    x = args[0]
    chunks = int(args[1])
    dim = int(args.get("dim", 0))
    n = ctx.shape(x)[_axis(dim, ctx.ndim(x))]
    size = -(-n // chunks)
    sizes = [size] * (n // size) + ([n % size] if n % size else [])
    return _split_by_sizes(ctx, x, sizes, dim)


@register("tensor_split")
def _tensor_split(ctx, args):
    x = args[0]
    dim = int(args.get("dim", 0))
    n = ctx.shape(x)[_axis(dim, ctx.ndim(x))]
    spec = args[1]
    val = ctx.value(spec)
    if isinstance(val, np.ndarray):  # the tensor overload: a 0-d tensor of sections, or a 1-d tensor of indices
        if val.ndim > 1:
            raise FrontendError(f"tensor_split: tensor_indices_or_sections must be 0-d or 1-d, got shape {val.shape}")
        spec = [int(v) for v in val.reshape(-1)] if val.ndim == 1 else int(val)
    elif spec is not None and val is None:
        raise FrontendError("tensor_split: the sections/indices tensor must be known at import time, got an "
                            "expression that depends on the inputs")
    if isinstance(spec, (list, tuple)):
        pts = [0] + ctx.int_list(spec, "indices") + [n]
        sizes = [b - a for a, b in zip(pts[:-1], pts[1:])]
    else:
        k = int(spec)
        sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
    return _split_by_sizes(ctx, x, sizes, dim)


@register("unbind")
def _unbind(ctx, args):
    x = args[0]
    dim = _axis(args.get("dim", 0), ctx.ndim(x))
    n = ctx.shape(x)[dim]
    parts = _split_by_sizes(ctx, x, [1] * n, dim)
    return [_op().squeeze(p, axis=[dim]) for p in parts]


# -- slicing and indexing -----------------------------------------------------------------------
_BIG = 2 ** 62


@register("slice")
def _slice(ctx, args):
    x = args[0]
    shape = ctx.shape(x)
    dim = _axis(args.get("dim", 0), len(shape))
    n = shape[dim]
    start = args["start"]
    end = args["end"]
    step = int(args.get("step", 1))
    if any(isinstance(v, Expr) and ctx.value(v) is None for v in (start, end)):
        return _runtime_slice(ctx, x, dim, start, end, step)
    start = 0 if start is None else int(ctx.scalar(start))
    end = n if end is None else int(ctx.scalar(end))
    start = max(0, min(n, start + n if start < 0 else start))
    end = max(0, min(n, end + n if end < 0 else end))
    if start == 0 and end == n and step == 1:
        return x
    end = max(end, start)
    return ctx.fold(_op().strided_slice(x, [start], [end], [step], axes=[dim]))


def _runtime_slice(ctx, x, dim: int, start, end, step: int):
    """``x[start:end]`` along ``dim`` with a bound computed at run time (``values[0:length]``, a size() of
    another tensor): ``dyn.strided_slice``, which takes negative bounds from the end and clamps them, as
    PyTorch does; the sliced axis becomes ``relay.Any()`` (the VM runs it)."""
    from ...op import dyn
    shape = ctx.shape(x)
    if step <= 0:
        raise FrontendError(f"aten::slice: step must be positive, got {step}")

    def bound(v, default):
        if v is None:
            return ctx.const([default], "int64")
        if isinstance(v, Expr):
            return _op().reshape(ctx.cast(v, "int64"), [1])
        return ctx.const([int(ctx.scalar(v))], "int64")

    n = shape[dim] if isinstance(shape[dim], (int, np.integer)) else np.iinfo(np.int64).max
    begin = _op().concatenate([ctx.const(np.zeros(dim), "int64"), bound(start, 0)], 0) if dim else bound(start, 0)
    ends = [int(d) if isinstance(d, (int, np.integer)) else np.iinfo(np.int64).max for d in shape[:dim]]
    stop = _op().concatenate([ctx.const(ends, "int64"), bound(end, n)], 0) if dim else bound(end, n)
    return dyn.strided_slice(x, begin, stop, ctx.const([1] * dim + [step], "int64"))


@register("diff")
def _diff(ctx, args):
    """torch.diff: n-th forward difference along ``dim`` (after optional prepend/append);
    boolean inputs use "not equal", as torch does."""
    op = _op()
    x = args[0]
    dim = _axis(args.get("dim", -1), ctx.ndim(x))
    parts = [t for t in (args.get("prepend"), x, args.get("append")) if t is not None]
    if len(parts) > 1:
        x = ctx.fold(op.concatenate(parts, axis=dim))
    for _ in range(int(args.get("n", 1))):
        size = ctx.shape(x)[dim]
        if size <= 1:
            raise ValueError(f"aten::diff: dimension {dim} has {size} element(s); needs at least 2 per order")
        hi = op.strided_slice(x, [1], [size], [1], axes=[dim])
        lo = op.strided_slice(x, [0], [size - 1], [1], axes=[dim])
        x = ctx.fold(op.not_equal(hi, lo) if ctx.dtype(x) == "bool" else op.subtract(hi, lo))
    return x


@register("select")
def _select(ctx, args):
    x = args[0]
    shape = ctx.shape(x)
    dim = _axis(args[1], len(shape))
    idx = int(ctx.scalar(args[2], "index"))
    if idx < 0:
        idx += shape[dim]
    out = _op().strided_slice(x, [idx], [idx + 1], [1], axes=[dim])
    return ctx.fold(_op().squeeze(out, axis=[dim]))


@register("narrow")
def _narrow(ctx, args):
    x = args[0]
    dim = _axis(args[1], ctx.ndim(x))
    start = int(ctx.scalar(args[2]))
    length = int(ctx.scalar(args[3]))
    if start < 0:
        start += ctx.shape(x)[dim]
    return _op().strided_slice(x, [start], [start + length], [1], axes=[dim])


def _wrap_indices(ctx, idx, n):
    """Index tensor as int64 with negative entries wrapped. PyTorch raises on an index outside -n..n-1, so
    does kiln: constants are checked at import time, run-time indices by ``take(arange(n), idx, mode="raise")``
    (the kernel fails the call naming the axis size) instead of being clamped silently."""
    if ctx.dtype(idx) == "bool":
        raise FrontendError(f"{ctx.op_name}: a boolean mask is not an index tensor here (boolean-mask "
                            "indexing x[mask] is supported through aten::index, on the VM)")
    idx = ctx.cast(idx, "int64")
    val = ctx.value(idx)
    if val is not None:
        val = np.asarray(val)
        if ((val < -n) | (val >= n)).any():
            raise FrontendError(f"aten::{ctx.op_name}: indices {val.reshape(-1)[:8].tolist()} are out of range for "
                                f"a dimension of size {n}")
        return ctx.const(np.where(val < 0, val + n, val), "int64")
    return _op().take(ctx.const(np.arange(n), "int64"), idx, axis=0, mode="raise")


@register("index_select")
def _index_select(ctx, args):
    x = args[0]
    dim = _axis(args[1], ctx.ndim(x))
    idx = _wrap_indices(ctx, args[2], ctx.shape(x)[dim])
    return _op().take(x, idx, axis=dim)


@register("embedding")
def _embedding(ctx, args):
    weight, indices = args[0], args[1]
    # an out-of-range token id fails the run (PyTorch raises) instead of reading a clamped row
    return _op().take(weight, _wrap_indices(ctx, indices, ctx.shape(weight)[0]), axis=0, mode="fast")


@register("gather")
def _gather(ctx, args):
    x = args[0]
    dim = _axis(args[1], ctx.ndim(x))
    idx = _wrap_indices(ctx, args[2], ctx.shape(x)[dim])
    return _op().gather(x, dim, idx)


@register("index", "_index_put_impl_index", "_unsafe_index")
def _index(ctx, args):
    x = args[0]
    indices = list(args[1])
    shape = ctx.shape(x)
    positions = [i for i, t in enumerate(indices) if t is not None]
    if not positions:
        return x
    if any(ctx.is_tensor(indices[i]) and ctx.dtype(indices[i]) in ("bool", "uint8") for i in positions):
        from .dynamic import index_with_mask  # x[mask]: a data-dependent length, for the VM
        return index_with_mask(ctx, x, indices)
    idx = [_wrap_indices(ctx, ctx.as_expr(indices[i]), shape[i]) for i in positions]
    first, last = positions[0], positions[-1]
    if positions != list(range(first, last + 1)):
        # index tensors separated by a sliced axis: PyTorch puts the broadcast index dims first, which is
        # the adjacent case after moving the indexed axes to the front
        rest = [i for i in range(len(shape)) if i not in positions]
        x = _op().transpose(x, positions + rest)
        shape = [shape[i] for i in positions + rest]
        positions = list(range(len(positions)))
        first, last = 0, len(positions) - 1
    if len(idx) == 1:
        return _op().take(x, idx[0], axis=first)
    # several adjacent index tensors: broadcast them, flatten the indexed axes, and take once
    idx = promote(ctx, *idx, dtype="int64")
    bshape = np.broadcast_shapes(*[ctx.shape(i) for i in idx])
    flat = None
    for i, t in zip(positions, idx):
        t = _op().broadcast_to(t, list(bshape)) if ctx.shape(t) != tuple(bshape) else t
        flat = t if flat is None else flat * ctx.const(shape[i], "int64") + t
    merged = list(shape[:first]) + [int(np.prod(shape[first:last + 1]))] + list(shape[last + 1:])
    return _op().take(_op().reshape(x, merged), flat, axis=first)


# -- creation -------------------------------------------------------------------------------------
def _creation_dtype(ctx, args, fill=None, like=None):
    dtype = args["dtype"]
    if dtype is not None:
        return str(dtype)
    if like is not None:
        return ctx.dtype(like)
    if isinstance(fill, bool):
        return "bool"
    if isinstance(fill, numbers.Integral):
        return "int64"
    return ctx.default_dtype


def _full(ctx, shape, value, dtype):
    shape = [int(s) for s in shape]
    if isinstance(value, Expr):
        return _op().full(ctx.cast(value, dtype), shape, dtype)
    return _op().full(ctx.const(value, dtype), shape, dtype)


@register("zeros", "empty", "new_empty", "empty_strided", "new_empty_strided")
def _zeros(ctx, args):
    first = 1 if ctx.op_name.startswith("new_") else 0
    like = args[0] if first else None
    return _full(ctx, ctx.int_list(args[first], "size"), 0, _creation_dtype(ctx, args, 0.0, like))


@register("ones")
def _ones(ctx, args):
    return _full(ctx, ctx.int_list(args[0], "size"), 1, _creation_dtype(ctx, args, 1.0))


@register("full")
def _full_op(ctx, args):
    v = args[1]
    return _full(ctx, ctx.int_list(args[0], "size"), v, _creation_dtype(ctx, args, v))


@register("new_zeros")
def _new_zeros(ctx, args):
    return _full(ctx, ctx.int_list(args[1], "size"), 0, _creation_dtype(ctx, args, like=args[0]))


@register("new_ones")
def _new_ones(ctx, args):
    return _full(ctx, ctx.int_list(args[1], "size"), 1, _creation_dtype(ctx, args, like=args[0]))


@register("new_full")
def _new_full(ctx, args):
    return _full(ctx, ctx.int_list(args[1], "size"), args[2], _creation_dtype(ctx, args, like=args[0]))


@register("zeros_like", "empty_like")
def _zeros_like(ctx, args):
    x = args[0]
    return _full(ctx, ctx.shape(x), 0, _creation_dtype(ctx, args, like=x))


@register("ones_like")
def _ones_like(ctx, args):
    x = args[0]
    return _full(ctx, ctx.shape(x), 1, _creation_dtype(ctx, args, like=x))


@register("full_like")
def _full_like(ctx, args):
    x = args[0]
    return _full(ctx, ctx.shape(x), args[1], _creation_dtype(ctx, args, like=x))


@register("scalar_tensor")
def _scalar_tensor(ctx, args):
    v = args[0]
    return ctx.const(v, _creation_dtype(ctx, args, float(v) if not isinstance(v, bool) else v))


@register("tensor")
def _tensor(ctx, args):
    v = args[0]
    if isinstance(v, Expr):
        return v
    arr = np.asarray(v)
    dtype = args["dtype"]
    if dtype is None:
        dtype = "bool" if arr.dtype == np.bool_ else ("int64" if arr.dtype.kind in "iu" else ctx.default_dtype)
    return ctx.const(arr, str(dtype))


@register("arange")
def _arange(ctx, args):
    names = args.names
    vals = [ctx.scalar(args[n]) for n in ("start", "end", "step") if n in names and args[n] is not None]
    if "start" not in names:  # arange(end, ...)
        vals = [ctx.scalar(args[0])]
    dtype = args["dtype"]
    if dtype is None:
        dtype = "int64" if all(isinstance(v, numbers.Integral) for v in vals) else ctx.default_dtype
    return ctx.const(np.arange(*vals).astype(str(dtype)), str(dtype))


@register("linspace")
def _linspace(ctx, args):
    start, end, steps = ctx.scalar(args[0]), ctx.scalar(args[1]), int(args[2])
    dtype = str(args["dtype"] or ctx.default_dtype)
    return ctx.const(np.linspace(start, end, steps).astype(dtype), dtype)


@register("tril", "triu")
def _tri(ctx, args):
    x = args[0]
    shape = ctx.shape(x)
    k = int(args.get("diagonal", 0))
    rows, cols = shape[-2], shape[-1]
    mask = np.tril(np.ones((rows, cols), bool), k) if ctx.op_name.startswith("tril") \
        else np.triu(np.ones((rows, cols), bool), k)
    return _op().where(ctx.const(mask, "bool"), x, _op().zeros_like(x))


# -- dtype conversion -----------------------------------------------------------------------------
@register("to", "_to_copy", "type")
def _to(ctx, args):
    x = args[0]
    dtype = None
    for v in list(args)[1:]:
        if isinstance(v, DTypeName):
            dtype = str(v)
            break
        if isinstance(v, Expr) and ctx.overload == "other":
            dtype = ctx.dtype(v)
            break
    if dtype is None:
        return x
    if not isinstance(x, Expr):
        return ctx.const(x, dtype)
    return ctx.cast(x, dtype)


@register("type_as")
def _type_as(ctx, args):
    return ctx.cast(args[0], ctx.dtype(args[1]))


for _name, _dt in {"float": "float32", "double": "float64", "half": "float16", "long": "int64", "int": "int32",
                   "bool": "bool", "bfloat16": "bfloat16", "short": "int16", "char": "int8",
                   "byte": "uint8"}.items():
    register(_name)(lambda ctx, args, _dt=_dt: ctx.cast(args[0], _dt))


@register("Int", "IntImplicit")
def _int(ctx, args):
    return int(ctx.scalar(args[0], "the value converted to int"))


@register("Float", "FloatImplicit")
def _float(ctx, args):
    return float(ctx.scalar(args[0], "the value converted to float"))


@register("Bool", "BoolImplicit", "is_nonzero")
def _bool(ctx, args):
    return bool(ctx.scalar(args[0], "the value converted to bool"))


@register("ScalarImplicit", "item", "_local_scalar_dense")
def _scalar_implicit(ctx, args):
    val = ctx.value(args[0])
    if val is None:
        raise FrontendError(f"aten::{ctx.op_name} reads a tensor's value at import time, but it depends on "
                            "the inputs (data-dependent control flow?)")
    return val.reshape(()).item() if isinstance(val, np.ndarray) else val


@register("__getitem__", "getitem")
def _getitem(ctx, args):
    seq, i = args[0], args[1]
    if isinstance(i, slice):
        return seq[i]
    return seq[int(i)]


@register("len")
def _len(ctx, args):
    v = args[0]
    if isinstance(v, Expr):
        return ctx.shape(v)[0]
    return len(v)


@register("list")
def _list(ctx, args):
    return list(args[0])


@register("floordiv")
def _py_floordiv(ctx, args):
    return args[0] // args[1]
