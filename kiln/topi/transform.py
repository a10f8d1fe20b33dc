"""Injective transforms (TVM's ``topi.transform``): reshape, transpose, slicing, gathering, layouts."""
from __future__ import annotations

import math as _math

from .. import te
from ..error import KilnError
from ..te.lower import VIEW_OF_INPUT
from ..tir import expr as E, op as T, stmt as S
from ..tir.assert_message import assert_message
from . import tag
from .broadcast import REQUIRES, broadcast_index, broadcast_requirements, broadcast_shape
from .utils import get_const_tuple, normalize_axis, prod, ravel_index, unravel_index
from .testing.layout import parse_layout


def _compute(shape, f, name):
    return te.compute(shape, f, name=name, tag=tag.INJECTIVE)


def expand_dims(a, axis: int, num_newaxis: int = 1):
    ndim = len(a.shape)
    axis = normalize_axis(axis, ndim + 1, "expand_dims axis")
    shape = list(a.shape[:axis]) + [1] * num_newaxis + list(a.shape[axis:])
    return _compute(shape, lambda *i: a(*(i[:axis] + i[axis + num_newaxis:])), "T_expand_dims")


def squeeze(a, axis=None):
    shape = get_const_tuple(a.shape)
    if axis is None:
        axes = [d for d, n in enumerate(shape) if n == 1]
    else:
        axes = [normalize_axis(x, len(shape), "squeeze axis") for x in ([axis] if isinstance(axis, int) else axis)]
        for x in axes:
            if shape[x] != 1:
                raise KilnError(f"squeeze: axis {x} has size {shape[x]}, not 1 (shape {shape})")
    out_shape = [n for d, n in enumerate(shape) if d not in axes]

    def f(*i):
        it = iter(i)
        return a(*[T.const(0, "int32") if d in axes else next(it) for d in range(len(shape))])
    return _compute(out_shape, f, "T_squeeze")


def transpose(a, axes=None):
    ndim = len(a.shape)
    axes = list(range(ndim - 1, -1, -1)) if axes is None or len(axes) == 0 else [
        normalize_axis(int(x), ndim, "transpose axis") for x in axes]
    if sorted(axes) != list(range(ndim)):
        raise KilnError(f"transpose: axes {axes} are not a permutation of 0..{ndim - 1}")
    shape = [a.shape[x] for x in axes]

    def f(*i):
        idx = [None] * ndim
        for out_d, in_d in enumerate(axes):
            idx[in_d] = i[out_d]
        return a(*idx)
    return _compute(shape, f, "T_transpose")


def infer_reshape_shape(data_shape, newshape, reverse: bool = False, allowzero: bool = False) -> list:
    """The one home of reshape's special codes (Relay's type relation and shape function call it too).

    ``newshape`` may use: ``0`` copy the input dim (with ``allowzero`` a literal 0 instead), ``-1`` infer one dim,
    ``-2`` copy all remaining dims, ``-3`` merge the next two input dims, ``-4`` split one input dim into the two
    values that follow (one may be -1). ``reverse`` applies the codes right to left (``contrib_reverse_reshape``).
    Symbolic input dims stay expressions (an inferred -1 becomes ``size // known``, checked at run time).
    """
    data_shape = [x if isinstance(x, E.PrimExpr) else int(x) for x in data_shape]
    newshape = [int(x) for x in newshape]
    given = tuple(newshape)
    if reverse:
        data_shape, newshape = data_shape[::-1], newshape[::-1]
    out, src, i, infer_at = [], 0, 0, None
    while i < len(newshape):
        v = newshape[i]
        if v > 0:
            out.append(v)
            src += 1
        elif v == 0:
            if allowzero:
                out.append(0)
            elif src >= len(data_shape):
                raise KilnError(f"reshape: newshape {given}: code 0 at position {i} has no input dimension to copy "
                                f"(input shape {tuple(data_shape)})")
            else:
                out.append(data_shape[src])
            src += 1
        elif v == -1:
            if infer_at is not None:
                raise KilnError(f"reshape: newshape {given} has more than one -1")
            infer_at = len(out)
            out.append(1)
            src += 1
        elif v == -2:
            out.extend(data_shape[src:])
            src = len(data_shape)
        elif v == -3:
            if src + 1 >= len(data_shape):
                raise KilnError(f"reshape: newshape {given}: code -3 needs two input dimensions at position {src} "
                                f"of {tuple(data_shape)}")
            out.append(data_shape[src] * data_shape[src + 1])
            src += 2
        elif v == -4:
            if i + 2 >= len(newshape) or src >= len(data_shape):
                raise KilnError(f"reshape: newshape {given}: code -4 needs two following values and an input "
                                f"dimension")
            d, d1, d2 = data_shape[src], newshape[i + 1], newshape[i + 2]
            if d1 == -1 and d2 == -1:
                raise KilnError(f"reshape: newshape {given}: code -4 cannot split into two -1 dimensions")
            if d1 == -1:
                d1 = d // d2
            if d2 == -1:
                d2 = d // d1
            if not isinstance(d, E.PrimExpr) and d1 * d2 != d:
                raise KilnError(f"reshape: newshape {given}: code -4 cannot split dimension {d} into {d1} x {d2}")
            out += [d1, d2]
            src += 1
            i += 2
        else:
            raise KilnError(f"reshape: newshape {given}: invalid value {v}")
        i += 1
    if reverse:
        data_shape, out = data_shape[::-1], out[::-1]
        if infer_at is not None:
            infer_at = len(out) - 1 - infer_at
    if any(isinstance(x, E.PrimExpr) for x in data_shape):  # symbolic: -1 is an expression, checked at run time
        if infer_at is not None:  # cancel the symbolic dims copied through, so (n, 3, 4) by (0, -1) gives 12
            rest, known = list(data_shape), []
            for j, d in enumerate(out):
                if j != infer_at and isinstance(d, E.PrimExpr) and any(d is r for r in rest):
                    rest.pop(next(k for k, r in enumerate(rest) if r is d))
                elif j != infer_at:
                    known.append(d)
            numer = prod(rest) if any(isinstance(r, E.PrimExpr) for r in rest) else _math.prod(rest)
            denom = prod(known) if any(isinstance(k, E.PrimExpr) for k in known) else _math.prod(known)
            out[infer_at] = numer // denom
        return out
    total = _math.prod(data_shape)
    if infer_at is not None:
        known = _math.prod(out)
        if known == 0 or total % known:
            raise KilnError(f"reshape: cannot reshape {tuple(data_shape)} ({total} elements) to {given}: "
                            f"the -1 dimension does not divide")
        out[infer_at] = total // known
    if _math.prod(out) != total:
        raise KilnError(f"reshape: cannot reshape {tuple(data_shape)} ({total} elements) to {tuple(out)} "
                        f"({_math.prod(out)} elements)")
    return out


def reshape(a, newshape):
    """Row-major reshape; ``newshape`` may use the Relay codes (0, -1, -2, -3, -4)."""
    in_shape = get_const_tuple(a.shape)
    newshape = get_const_tuple(newshape)
    if not any(isinstance(d, E.PrimExpr) for d in newshape):  # a symbolic target shape is final (no codes)
        newshape = infer_reshape_shape(in_shape, newshape)

    if any(isinstance(d, E.PrimExpr) for d in tuple(in_shape) + tuple(newshape)):
        return _compute(newshape, _symbolic_reshape_index(a, list(in_shape), list(newshape)), "T_reshape")

    def f(*i):
        flat = ravel_index(list(i), newshape)
        return a(*unravel_index(flat, in_shape))
    return _compute(newshape, f, "T_reshape")


def _same_dim(x, y) -> bool:
    if not isinstance(x, E.PrimExpr) and not isinstance(y, E.PrimExpr):
        return int(x) == int(y)
    if not isinstance(x, E.PrimExpr) or not isinstance(y, E.PrimExpr):
        return False
    from ..arith import Analyzer
    d = Analyzer().simplify(x - y)
    return isinstance(d, E.IntImm) and d.value == 0


def _symbolic_reshape_index(a, in_shape: list, out_shape: list):
    """Index function of a reshape over symbolic extents: dims equal at both ends map one to one, only the middle
    is raveled and unraveled, and the outermost unravel needs no modulo (the reshape is valid), so a reshape
    that splits or merges a few dims reads contiguous rows instead of dividing every index by run-time extents."""
    lo = 0
    while lo < min(len(in_shape), len(out_shape)) and _same_dim(in_shape[lo], out_shape[lo]):
        lo += 1
    hi = 0
    while hi < min(len(in_shape), len(out_shape)) - lo and \
            _same_dim(in_shape[len(in_shape) - 1 - hi], out_shape[len(out_shape) - 1 - hi]):
        hi += 1
    mid_in = in_shape[lo:len(in_shape) - hi]
    mid_out = out_shape[lo:len(out_shape) - hi]

    def f(*i):
        i = list(i)
        head, mid, tail = i[:lo], i[lo:len(i) - hi], i[len(i) - hi:]
        if not mid_in:
            return a(*head, *tail)
        flat = ravel_index(mid, mid_out) if mid else T.const(0, "int32")
        idx = []
        for k, n in enumerate(reversed(mid_in)):
            if k == len(mid_in) - 1:
                idx.append(flat)
            else:
                idx.append(flat % n)
                flat = flat // n
        return a(*head, *reversed(idx), *tail)
    return f


def concatenate(a_tuple, axis: int = 0):
    a_tuple = list(a_tuple)
    if not a_tuple:
        raise KilnError("concatenate needs at least one tensor")
    ndim = len(a_tuple[0].shape)
    axis = normalize_axis(axis, ndim, "concatenate axis")
    shapes = [get_const_tuple(t.shape) for t in a_tuple]
    for s in shapes[1:]:
        # a symbolic (dynamic) dim is checked by type inference, not here: two unknown dims are distinct vars
        if len(s) != ndim or any(s[d] != shapes[0][d] for d in range(ndim) if d != axis
                                 and isinstance(s[d], int) and isinstance(shapes[0][d], int)):
            raise KilnError(f"concatenate: shapes {shapes} differ outside axis {axis}")
    sizes = [s[axis] for s in shapes]
    out_shape = list(shapes[0])
    out_shape[axis] = sum(sizes)

    offsets = [0]
    for n in sizes[:-1]:
        offsets.append(offsets[-1] + n)

    def f(*i):
        # a balanced binary search over the inputs' offsets: depth and per-element work grow with
        # log(len(a_tuple)), not with the input count (a 600-way chain was a 600-deep expression)
        pos = i[axis]

        def part(lo, hi):
            if hi - lo == 1:
                idx = list(i)
                idx[axis] = pos - offsets[lo]
                return a_tuple[lo](*idx)
            mid = (lo + hi) // 2
            return T.if_then_else(pos >= offsets[mid], part(mid, hi), part(lo, mid))
        return part(0, len(a_tuple))
    return _compute(out_shape, f, "T_concat")


def stack(tensors, axis: int = 0):
    return concatenate([expand_dims(t, axis) for t in tensors], axis)


def split(ary, indices_or_sections, axis: int = 0):
    """Split into equal sections (an int) or at the given indices."""
    shape = get_const_tuple(ary.shape)
    axis = normalize_axis(axis, len(shape), "split axis")
    size = shape[axis]
    if isinstance(indices_or_sections, int):
        if size % indices_or_sections:
            raise KilnError(f"split: axis {axis} of size {size} does not divide into {indices_or_sections} sections")
        step = size // indices_or_sections
        bounds = [k * step for k in range(indices_or_sections)] + [size]
    else:
        bounds = [0] + [int(x) for x in get_const_tuple(indices_or_sections)] + [size]
    outs = []
    for b, e in zip(bounds[:-1], bounds[1:]):
        out_shape = list(shape)
        out_shape[axis] = max(e - b, 0)

        def f(*i, b=b):
            idx = list(i)
            idx[axis] = idx[axis] + b
            return ary(*idx)
        outs.append(_compute(out_shape, f, "T_split"))
    return outs


def strided_slice_plan(shape, begin, end, strides=None, axes=None, slice_mode: str = "end") -> list:
    """(start, stop, step) per axis with numpy slice semantics; the one rule shared by the Relay type
    relation, its numpy reference and this compute.

    Negative begin/end count from the end, out-of-range values (including INT_MIN/INT_MAX sentinels) clamp,
    and ``stop`` may be -1 for a negative step that runs through index 0 (so pass it to ``range``, or
    turn it into a ``slice`` with :func:`plan_slices`). Missing strides are 1, as in TVM.
    """
    shape = [int(n) for n in shape]
    ndim = len(shape)
    begin = [int(x) for x in (begin or ())]
    end = [int(x) for x in (end or ())]
    strides = [int(x) for x in (strides or ())]
    if slice_mode not in ("end", "size"):
        raise KilnError(f"strided_slice: slice_mode must be 'end' or 'size', got {slice_mode!r}")
    if axes is None:
        if len(begin) > ndim:
            raise KilnError(f"strided_slice: begin {begin} is longer than the rank {ndim}")
        axes = list(range(len(begin)))
    else:
        axes = [normalize_axis(int(a), ndim, "strided_slice axis") for a in axes]
    plan = [(0, n, 1) for n in shape]
    for k, ax in enumerate(axes):
        b = begin[k] if k < len(begin) else None
        e = end[k] if k < len(end) else None
        s = strides[k] if k < len(strides) else 1
        if slice_mode == "size":
            s = 1
            b = b or 0
            e = None if (e is None or e < 0) else b + e
        if s == 0:
            raise KilnError(f"strided_slice: a stride of 0 is invalid (axis {ax})")
        plan[ax] = slice(b, e, s).indices(shape[ax])
    return plan


def plan_slices(plan) -> tuple:
    """numpy ``slice`` objects for a plan from :func:`strided_slice_plan` (a stop of -1 means 'through 0')."""
    # slice.indices() uses -1 for "before index 0"; numpy would read that as "the last element"
    return tuple(slice(b, e if e >= 0 else None, s) if len(range(b, e, s)) else slice(0, 0, 1)
                 for b, e, s in plan)


def _const_ints(values):
    """Python ints from a list of ints / IntImms (None stays None); big sentinels pass through untouched."""
    if values is None:
        return None
    return [int(v) if isinstance(v, int) else int(get_const_tuple([v])[0]) for v in values]


def strided_slice(a, begin, end, strides=None, axes=None, slice_mode="end"):
    """``a[begin:end:strides]`` per axis, with numpy semantics (negative begin/end/strides allowed)."""
    shape = get_const_tuple(a.shape)
    ndim = len(shape)
    static = [n if isinstance(n, int) else 0 for n in shape]
    args = (_const_ints(begin), _const_ints(end), _const_ints(strides), _const_ints(axes), slice_mode)
    plan = strided_slice_plan(static, *args)
    starts = [p[0] for p in plan]
    steps = [p[2] for p in plan]
    lengths = [len(range(*p)) for p in plan]
    for d, start, length in _symbolic_slices(shape, *args):  # unknown (VM) dims: run-time start and length
        starts[d], lengths[d] = start, length

    def f(*i):
        return a(*[starts[d] + i[d] * steps[d] for d in range(ndim)])
    return _compute(lengths, f, "T_strided_slice")


def _symbolic_slices(shape, begin, end, strides, axes, slice_mode) -> list:
    """(axis, start, length) for each symbolic dim of ``shape``, with the clamping of
    :func:`strided_slice_plan` as expressions of the run-time size (positive strides only)."""
    ndim = len(shape)
    begin, end, strides = list(begin or ()), list(end or ()), list(strides or ())
    axes = list(range(len(begin))) if axes is None else [normalize_axis(x, ndim, "strided_slice axis") for x in axes]
    out = []
    for d, n in enumerate(shape):
        if isinstance(n, int):
            continue
        if d not in axes:
            out.append((d, 0, n))
            continue
        k = axes.index(d)
        b = begin[k] if k < len(begin) else None
        e = end[k] if k < len(end) else None
        s = strides[k] if k < len(strides) else 1
        if slice_mode == "size":
            s, b = 1, b or 0
            e = None if (e is None or e < 0) else b + e
        if s <= 0:
            raise KilnError(f"strided_slice: a stride of {s} over an axis of unknown size (axis {d}) is not "
                            "supported (positive strides only)")
        zero = T.const(0, n.dtype)

        def clamp(v):
            if v is None:
                return None
            if v < 0:
                return T.max(n + T.const(v, n.dtype), zero)
            return T.min(T.const(v, n.dtype), n) if v < 2 ** 31 - 1 else n  # INT32/INT64_MAX: "to the end"
        start = clamp(b) if b else zero
        stop = clamp(e) if e is not None else n
        out.append((d, start, T.floordiv(T.max(stop - start + T.const(s - 1, n.dtype), zero), T.const(s, n.dtype))))
    return out


def checked_indices(indices, n: int, what: str = "take"):
    """``indices`` with negative entries counted from the end (``-n <= i < n``), checked at run time: an
    index out of range makes the kernel fail with a message naming it (an AssertStmt, reported through the
    kernel's error return, docs/abi.md). A separate serial stage: the check must not be inlined away."""
    shape = get_const_tuple(indices.shape)
    dt = indices.dtype

    def body(ins, outs):
        src, dst = ins[0], outs[0]
        loop_vars = [te.var(f"i{d}") for d in range(len(shape))]
        v = src[loop_vars] if loop_vars else src[[]]
        if isinstance(n, int):
            lo, hi = T.const(-n, dt), T.const(n, dt)
            msg = assert_message(f"{what}: index {{}} is out of range for an axis of size {n} "
                                 f"(valid: {-n}..{n - 1})", v)
        else:  # a symbolic axis size (a VM kernel): checked against the size it has at run time
            hi = n if n.dtype == dt else T.cast(n, dt)
            lo = T.const(0, dt) - hi
            msg = assert_message(f"{what}: index {{}} is out of range for an axis of size {{}} "
                                 f"(valid: -size..size-1)", v, n)
        fixed = T.Select(v < T.const(0, dt), v + hi, v)
        stmt = S.AssertStmt(T.logical_and(v >= lo, v < hi), msg, S.BufferStore(dst, fixed, loop_vars))
        for var, extent in reversed(list(zip(loop_vars, shape))):
            stmt = S.For(var, 0, extent, S.ForKind.SERIAL, stmt)
        return stmt
    return te.extern(shape, [indices], body, name="T_checked_indices", dtype=dt, tag="checked_indices")


def checked_dim(data, axis: int, value: int, what: str):
    """``data`` with its unknown (symbolic) ``axis`` fixed to the static ``value``: a view of the same memory (no
    copy) whose kernel first checks the run-time size, failing the call with a message naming ``what`` when it
    differs (an AssertStmt, reported through the kernel's error return). A static axis is checked here and
    ``data`` returned as is.

    For VM kernels whose operand has an unknown dim that another operand fixes (``nn.dense``'s K when only the
    weight's is known): the computes after it see the static size (static strides)."""
    shape = list(get_const_tuple(data.shape))
    axis = normalize_axis(axis, len(shape), "checked_dim axis")
    n = shape[axis]
    if isinstance(n, int):
        if n != value:
            raise KilnError(f"{what}: axis {axis} has size {n}, expected {value}")
        return data
    out_shape = list(shape)
    out_shape[axis] = value

    def body(ins, outs):
        msg = assert_message(f"{what}: axis {axis} of the input must have size {value} at run time (it has {{}})",
                             n)
        return S.AssertStmt(E.EQ(n, T.const(value, n.dtype)), msg, S.Evaluate(T.const(0, "int32")))
    return te.extern(out_shape, [data], body, name="T_checked_dim", dtype=data.dtype, tag="checked_dim",
                     attrs={VIEW_OF_INPUT: 0})


def take(a, indices, axis=None, batch_dims: int = 0, mode: str = "clip"):
    """Gather along ``axis`` (flattened if None); ``mode``: "clip", "wrap", "fast" (no bounds handling) or,
    a kiln extension, "raise" (negative indices count from the end; an index out of range fails the call
    with an error, as ONNX Runtime does for Gather)."""
    if mode not in ("clip", "wrap", "fast", "raise"):
        raise KilnError(f"take: mode must be 'clip', 'wrap', 'fast' or 'raise', got {mode!r}")
    if batch_dims:
        raise KilnError("take: batch_dims other than 0 is not implemented in kiln")
    a_shape = get_const_tuple(a.shape)
    scalar_idx = not hasattr(indices, "shape")
    if mode == "raise":
        if scalar_idx:
            n = prod(a_shape) if axis is None else a_shape[normalize_axis(axis, len(a_shape), "take axis")]
            value = int(indices)
            if not -n <= value < n:
                raise KilnError(f"take: index {value} is out of range for an axis of size {n}")
            indices = value + n if value < 0 else value
        else:
            n = prod(a_shape) if axis is None else a_shape[normalize_axis(axis, len(a_shape), "take axis")]
            indices = checked_indices(indices, n)
        mode = "fast"
    i_shape = () if scalar_idx else get_const_tuple(indices.shape)

    def fix(idx, n):
        idx = T.cast(idx, "int32") if idx.dtype not in ("int32", "int64") else idx
        if mode == "clip":
            return T.min(T.max(idx, T.const(0, idx.dtype)), _extent(n - 1, idx.dtype))
        if mode == "wrap":
            return T.floormod(idx, _extent(n, idx.dtype))
        return idx

    def _extent(n, dtype):  # an axis size: a number, or a symbolic extent (a dynamic dim on the VM)
        return T.const(n, dtype) if isinstance(n, int) else T.cast(n, dtype)

    def load_index(ii):
        if scalar_idx:
            return T.convert(indices) if not isinstance(indices, int) else T.const(indices, "int32")
        return indices(*ii)

    if axis is None:
        n = prod(a_shape)

        def f(*i):
            flat = fix(load_index(i), n)
            return a(*unravel_index(flat, a_shape))
        return _compute(list(i_shape), f, "T_take")
    axis = normalize_axis(axis, len(a_shape), "take axis")
    out_shape = list(a_shape[:axis]) + list(i_shape) + list(a_shape[axis + 1:])
    ni = len(i_shape)

    def g(*i):
        idx = fix(load_index(i[axis:axis + ni]), a_shape[axis])
        return a(*(list(i[:axis]) + [idx] + list(i[axis + ni:])))
    return _compute(out_shape, g, "T_take")


def gather(data, axis: int, indices):
    """``out[i][j] = data[i][indices[i][j]]`` along ``axis`` (torch.gather)."""
    ndim = len(data.shape)
    axis = normalize_axis(axis, ndim, "gather axis")
    if len(indices.shape) != ndim:
        raise KilnError(f"gather: indices rank {len(indices.shape)} differs from data rank {ndim}")

    def f(*i):
        idx = list(i)
        idx[axis] = indices(*i)
        return data(*idx)
    return _compute(indices.shape, f, "T_gather")


def gather_nd(a, indices, batch_dims=0, index_rank=None):
    """``out[y...] = a[indices[0][y...], ..., indices[M-1][y...], rest...]`` (``index_rank``: M, when the
    first dimension of ``indices`` is symbolic)."""
    if batch_dims:
        raise KilnError("gather_nd: batch_dims other than 0 is not implemented in kiln")
    i_shape = get_const_tuple(indices.shape)
    m = i_shape[0] if isinstance(i_shape[0], int) or index_rank is None else int(index_rank)
    if not isinstance(m, int):
        raise KilnError("gather_nd: the first dimension of indices is symbolic; give index_rank")
    out_shape = list(i_shape[1:]) + list(a.shape[m:])

    def f(*i):
        y, rest = i[:len(i_shape) - 1], i[len(i_shape) - 1:]
        return a(*([indices(*((T.const(k, "int32"),) + tuple(y))) for k in range(m)] + list(rest)))
    return _compute(out_shape, f, "T_gather_nd")


def where(condition, x, y):
    """``condition ? x : y`` elementwise, with broadcasting of all three."""
    def shp(t):
        return t.shape if hasattr(t, "shape") else []
    out = broadcast_shape(broadcast_shape(shp(condition), shp(x), "where"), shp(y), "where")

    def val(t, i):
        return t(*broadcast_index(t, i, out)) if hasattr(t, "shape") else T.convert(t)

    def f(*i):
        c = val(condition, i)
        c = c if c.dtype == "bool" else T.not_equal(c, T.const(0, c.dtype))
        return T.Select(c, val(x, i), val(y, i))
    conds = broadcast_requirements([shp(t) for t in (condition, x, y) if hasattr(t, "shape")], out, "where")
    return te.compute(out, f, name="T_where", tag=tag.BROADCAST, attrs={REQUIRES: conds} if conds else None)


def _fill(fill_value, dtype):
    """The fill value as an expression: a number, or a 0-d tensor (a Relay constant the TE compiler did not
    fold, as in the VM's symbolic lowering) read and cast."""
    if isinstance(fill_value, te.Tensor):
        fill_value = fill_value()
    if isinstance(fill_value, E.PrimExpr):
        return T.cast(fill_value, dtype) if str(fill_value.dtype) != dtype else fill_value
    return T.const(fill_value, dtype)


def full(shape, dtype, fill_value):
    return te.compute(list(shape), lambda *i: _fill(fill_value, dtype), name="T_full", tag=tag.ELEMWISE)


def full_like(x, fill_value):
    return te.compute(x.shape, lambda *i: _fill(fill_value, x.dtype), name="T_full_like", tag=tag.ELEMWISE)


def zeros(shape, dtype="float32"):
    return full(shape, dtype, 0)


def ones(shape, dtype="float32"):
    return full(shape, dtype, 1)


def arange(start, stop=None, step=1, dtype="float32"):
    if stop is None:
        start, stop = 0, start
    n = int(_math.ceil((float(stop) - float(start)) / float(step)))
    if n < 0:
        n = 0

    def f(i):
        return T.const(start, dtype) + T.cast(i, dtype) * T.const(step, dtype)
    return _compute([n], f, "T_arange")


def tile(a, reps):
    shape = get_const_tuple(a.shape)
    reps = list(get_const_tuple(reps))
    n = max(len(shape), len(reps))
    shape = [1] * (n - len(shape)) + list(shape)
    reps = [1] * (n - len(reps)) + reps
    out_shape = [s * r for s, r in zip(shape, reps)]
    offset = n - len(a.shape)

    def f(*i):
        return a(*[i[d] % shape[d] for d in range(offset, n)])
    return _compute(out_shape, f, "T_tile")


def repeat(a, repeats: int, axis: int):
    shape = list(get_const_tuple(a.shape))
    axis = normalize_axis(axis, len(shape), "repeat axis")
    if repeats < 1:
        raise KilnError(f"repeat: repeats must be at least 1, got {repeats}")
    out_shape = list(shape)
    out_shape[axis] *= repeats

    def f(*i):
        idx = list(i)
        idx[axis] = idx[axis] // repeats
        return a(*idx)
    return _compute(out_shape, f, "T_repeat")


def flip(a, axis: int = 0):
    shape = get_const_tuple(a.shape)
    axis = normalize_axis(axis, len(shape), "flip axis")

    def f(*i):
        idx = list(i)
        idx[axis] = shape[axis] - 1 - idx[axis]
        return a(*idx)
    return _compute(shape, f, "T_reverse")


reverse = flip


def one_hot(indices, on_value, off_value, depth: int, axis: int, dtype: str):
    ndim = len(indices.shape)
    axis = ndim if axis == -1 else normalize_axis(axis, ndim + 1, "one_hot axis")
    out_shape = list(indices.shape[:axis]) + [depth] + list(indices.shape[axis:])

    def f(*i):
        idx = indices(*(i[:axis] + i[axis + 1:]))
        hit = T.equal(T.cast(idx, "int32"), T.cast(i[axis], "int32"))
        return T.Select(hit, T.cast(T.convert(on_value), dtype), T.cast(T.convert(off_value), dtype))
    return _compute(out_shape, f, "T_one_hot")


def layout_transform(src, src_layout: str, dst_layout: str, schedule_rule: str = "None"):
    """Re-lay ``src`` between layouts such as NCHW, NHWC and NCHW{x}c (TVM's layout strings)."""
    s_axes, d_axes = parse_layout(src_layout), parse_layout(dst_layout)
    s_names = [a for a, _ in s_axes]
    d_names = [a for a, _ in d_axes]
    if sorted(a for a, f in s_axes if f is None) != sorted(a for a, f in d_axes if f is None):
        raise KilnError(f"layout_transform: {src_layout} and {dst_layout} have different primal axes")
    shape = get_const_tuple(src.shape)
    if len(shape) != len(s_axes):
        raise KilnError(f"layout_transform: tensor of rank {len(shape)} does not match layout {src_layout}")
    primal = {}
    for name, _ in s_axes:
        if name.isupper():
            sub = name.lower()
            primal[name] = shape[s_names.index(name)] * (shape[s_names.index(sub)] if sub in s_names else 1)
    d_factor = {a.upper(): f for a, f in d_axes if f is not None}
    out_shape = []
    for name, f in d_axes:
        if f is not None:
            out_shape.append(f)
        else:
            fac = d_factor.get(name, 1)
            if primal[name] % fac:
                raise KilnError(f"layout_transform: axis {name} of size {primal[name]} does not split by {fac}")
            out_shape.append(primal[name] // fac)
    s_factor = {a.upper(): f for a, f in s_axes if f is not None}

    def f(*i):
        # primal coordinate of each axis from the destination indices
        coord = {}
        for name, fac in d_axes:
            if fac is None:
                sub = name.lower()
                coord[name] = i[d_names.index(name)] * d_factor[name] + i[d_names.index(sub)] \
                    if sub in d_names else i[d_names.index(name)]
        idx = []
        for name, fac in s_axes:
            if fac is None:
                sf = s_factor.get(name)
                idx.append(coord[name] // sf if sf else coord[name])
            else:
                idx.append(coord[name.upper()] % fac)
        return src(*idx)
    return _compute(out_shape, f, "T_layout_trans")


def sequence_mask(data, valid_length, mask_value=0.0, axis: int = 0):
    """Replace positions at or beyond each batch's valid length along ``axis`` (0 or 1) with ``mask_value``."""
    if axis not in (0, 1):
        raise KilnError(f"sequence_mask: axis must be 0 or 1, got {axis}")
    batch_axis = 1 - axis

    def f(*i):
        keep = T.cast(i[axis], valid_length.dtype) < valid_length(i[batch_axis])
        return T.Select(keep, data(*i), T.const(mask_value, data.dtype))
    return _compute(data.shape, f, "T_sequence_mask")

__all__ = [_n for _n, _v in list(globals().items())
           if callable(_v) and getattr(_v, "__module__", None) == __name__ and not _n.startswith("_")]
