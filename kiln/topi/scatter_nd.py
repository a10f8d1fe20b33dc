"""``scatter_nd`` (TVM's ``topi.scatter_nd``): a copy of ``data`` with ``updates`` written (or reduced) at the
coordinates ``indices`` lists.

Layout as TVM: ``indices`` is [M, Y_0..Y_{K-1}] (the index depth first), ``updates`` is
[Y_0..Y_{K-1}, X_M..X_{N-1}] and ``data`` is [X_0..X_{N-1}]. An extern stage written with the IR builder: copy
``data``, then one pass over the Y positions in order (so "update" keeps the last duplicate and "add" sums all
of them). Each coordinate is checked when the kernel runs: negative ones count from the end (-X_k..X_k-1) and one
outside that range fails the call with a message (an AssertStmt) before anything is written there.
"""
from __future__ import annotations

from .. import te, tir
from ..error import KilnError
from ..tir import op as T, stmt as S
from .utils import get_const_tuple, prod

__all__ = ["scatter_nd", "SCATTER_ND_MODES"]

SCATTER_ND_MODES = ("update", "add", "mul", "min", "max")


def _combine(mode: str, old, new):
    if mode == "update":
        return new
    if mode == "add":
        return old + new
    if mode == "mul":
        return old * new
    if mode == "min":
        return T.min(old, new)
    return T.max(old, new)


def _i64(v):
    """A static size as an int64 constant, a symbolic one cast to int64 (flat offsets may pass 2**31)."""
    return T.const(int(v), "int64") if isinstance(v, int) else T.cast(v, "int64")


def scatter_nd(data, indices, updates, mode: str = "update"):
    """data [X_0..X_{N-1}], indices [M, Y...] (integers), updates [Y..., X_M..X_{N-1}] -> data's shape."""
    if mode not in SCATTER_ND_MODES:
        raise KilnError(f"scatter_nd: mode must be one of {SCATTER_ND_MODES}, got {mode!r}")
    dshape = list(get_const_tuple(data.shape))
    ishape = list(get_const_tuple(indices.shape))
    ushape = list(get_const_tuple(updates.shape))
    if not ishape:
        raise KilnError("scatter_nd: indices must have at least one dimension (the index depth M first)")
    m = ishape[0]
    if not isinstance(m, int):
        raise KilnError("scatter_nd: the first dimension of indices (the index depth M) must be static")
    if m > len(dshape) or len(ushape) != len(ishape) - 1 + len(dshape) - m:
        raise KilnError(f"scatter_nd: indices {tuple(ishape)} and updates {tuple(ushape)} do not fit data "
                        f"{tuple(dshape)} (updates must be indices.shape[1:] + data.shape[M:])")
    if not str(indices.dtype).startswith(("int", "uint")):
        raise KilnError(f"scatter_nd: indices must be integers, got {indices.dtype}")
    if updates.dtype != data.dtype:
        raise KilnError(f"scatter_nd: updates are {updates.dtype} but data is {data.dtype}")
    n_total, n_pos, inner = (_i64(prod(part)) for part in (dshape, ishape[1:], dshape[m:]))
    dims = dshape[:m]
    mode_ = mode

    def kernel(ins, outs):
        ib = tir.ir_builder.create()
        # indexed flat: the builder unravels a flat index over each buffer's shape
        src, idx, upd, out = (ib.buffer_ptr(b) for b in (ins[0], ins[1], ins[2], outs[0]))
        with ib.for_range(0, n_total, name="i", dtype="int64") as i:
            out[i] = src[i]
        off = ib.allocate("int64", (1,), name="off", scope="local")
        with ib.for_range(0, n_pos, name="y", dtype="int64") as y:
            off[0] = T.const(0, "int64")
            for k in range(m):
                size = _i64(dims[k])
                v = T.cast(idx[T.const(k, "int64") * n_pos + y], "int64")
                msg = (f"scatter_nd: an index on axis {k} is out of range for data of shape {tuple(dshape)} "
                       f"(valid: -size..size-1)")
                ib.emit(S.AssertStmt(T.all(v >= T.const(0, "int64") - size, v < size), msg,
                                     S.Evaluate(T.const(0, "int32"))))
                off[0] = off[0] * size + T.Select(v < T.const(0, "int64"), v + size, v)
            with ib.for_range(0, inner, name="j", dtype="int64") as j:
                o = off[0] * inner + j
                out[o] = _combine(mode_, out[o], upd[y * inner + j])
        return ib.get()

    return te.extern(dshape, [data, indices, updates], kernel, dtype=data.dtype, name="scatter_nd",
                     tag="scatter_nd")
