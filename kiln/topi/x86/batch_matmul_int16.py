"""Exact int16 x int16 -> int32 batch_matmul on x86 (``batch_matmul_int16.x86``): the x86 QNN legalization gives
``qnn.batch_matmul`` on 8-bit operands this form (``x - zp_x`` and ``y - zp_y`` within +-255 as int16), and each
batch is the int16 dense of :mod:`kiln.topi.x86.dense_int16` (``vpmaddwd``: two int16 products summed exactly into
an int32 lane, no zero-point correction left).

``y`` is usually an activation (attention's keys / values), so it is packed per batch inside the kernel
(``[B, N/16, K/2, 16, 2]``, zero-padded; from ``[B, N, K]`` with ``transpose_b`` or ``[B, K, N]`` without); a
constant ``y`` arrives packed already (AlterOpLayout's ``nn.contrib_batch_matmul_pack``, folded at compile time), and
``x`` read as ``[B, M, K]`` (a transposing copy where ``transpose_a``, zero columns where K is odd). A batch of 1
on either side broadcasts, as ``nn.batch_matmul`` defines.
"""
from __future__ import annotations

from ... import autotvm, te
from ...error import KilnError
from ...tir import op as T
from ..utils import get_const_tuple
from .conv2d_int8 import vectorize_int32_epilogue
from .dense_int8 import N_BN, _tile, plain_reduction, tile_rows
from .dense_int16 import K_PAIR, define_tile_m
from .tensor_intrin import dot_s16s16_intrin
from .utils import reduction_flops, schedule_anchored, worth_parallel


def _pack_y(y, transpose_b: bool, n: int, k: int):
    """[B, N, K] (transpose_b) or [B, K, N] -> [B, N/16, K/2, 16, 2], zero-padded."""
    by = get_const_tuple(y.shape)[0]
    np_, kp = -(-n // N_BN) * N_BN, -(-k // K_PAIR) * K_PAIR
    zero = T.const(0, "int16")

    def f(b, no, ko, ni, k2):
        row, col = no * N_BN + ni, ko * K_PAIR + k2
        r, c = (row, col) if np_ == n and kp == k else (T.min(row, n - 1), T.min(col, k - 1))
        v = y[b, r, c] if transpose_b else y[b, c, r]
        if np_ == n and kp == k:
            return v
        return T.if_then_else(T.all(row < n, col < k), v, zero)
    return te.compute((by, np_ // N_BN, kp // K_PAIR, N_BN, K_PAIR), f, name="y_pack",
                      tag="batch_matmul_int16_pack")


@autotvm.register_topi_compute("batch_matmul_int16.x86")
def batch_matmul_int16(cfg, x, y, out_shape=None, out_dtype="int32", transpose_a=False, transpose_b=True, units=None):
    """int16 ``x`` [B, M, K] (``[B, K, M]`` with transpose_a) x int16 ``y`` [B, N, K] (``[B, K, N]`` without
    transpose_b; or packed ``[B, N/16, ceil(K/2), 16, 2]``, ``transpose_b`` then ignored, AlterOpLayout's form of
    a constant ``y``) -> int32 [B, M, N]; ``units`` (packed ``y`` only): the real N when the last panel is
    zero-padded."""
    out_dtype = out_dtype or "int32"
    if str(x.dtype) != "int16" or str(y.dtype) != "int16" or out_dtype != "int32":
        raise KilnError(f"batch_matmul_int16.x86: computes int16 x int16 -> int32, got {x.dtype} x {y.dtype} -> "
                        f"{out_dtype}")
    xs, ys = get_const_tuple(x.shape), get_const_tuple(y.shape)
    packed = len(ys) == 5
    if len(xs) != 3 or len(ys) not in (3, 5) or not all(isinstance(d, int) for d in xs + ys):
        raise KilnError(f"batch_matmul_int16.x86: needs static 3-D inputs (y may be packed 5-D), got {xs} and {ys}")
    bx, (m, k) = xs[0], ((xs[2], xs[1]) if transpose_a else xs[1:])
    if packed:
        by, n, ky = ys[0], ys[1] * N_BN, k
        if ys[3:] != (N_BN, K_PAIR) or not ys[2] * K_PAIR - K_PAIR < k <= ys[2] * K_PAIR:
            raise KilnError(f"batch_matmul_int16.x86: a packed y must be [B, N/16, ceil(K/2), 16, 2] for K={k}, "
                            f"got {ys}")
        if units is not None:
            if not n - N_BN < int(units) <= n:
                raise KilnError(f"batch_matmul_int16.x86: units={units} does not fit the packed y {ys}")
            n = int(units)
    else:
        by, (n, ky) = ys[0], (ys[1:] if transpose_b else (ys[2], ys[1]))
    if ky != k or (bx != by and 1 not in (bx, by)):
        raise KilnError(f"batch_matmul_int16.x86: shapes {xs} and {ys} do not multiply (transpose_a={transpose_a}, "
                        f"transpose_b={transpose_b})")
    batch = max(bx, by)
    y_vec = y if packed else _pack_y(y, transpose_b, n, k)
    kp = get_const_tuple(y_vec.shape)[2] * K_PAIR
    d = x
    if transpose_a or kp != k:
        def fx(b, i, j):
            jj = j if kp == k else T.min(j, k - 1)
            v = x[b, jj, i] if transpose_a else x[b, i, jj]
            return v if kp == k else T.if_then_else(j < k, v, T.const(0, "int16"))
        d = te.compute((bx, m, kp), fx, name="x_pad", tag="injective,pad")
    lanes, mp = define_tile_m(cfg, m)
    ko = te.reduce_axis((0, kp // K_PAIR), name="ko")
    k2 = te.reduce_axis((0, K_PAIR), name="k2")
    cfg.add_flop(2 * batch * m * n * k)

    def row(i):
        return i if mp == m else T.min(i, m - 1)

    def bxi(b):
        return b if bx == batch else 0

    def byi(b):
        return b if by == batch else 0
    c = te.compute((batch, mp, get_const_tuple(y_vec.shape)[1], N_BN),
                   lambda b, i, no, ni: te.sum(T.cast(d[bxi(b), row(i), ko * K_PAIR + k2], "int32")
                                               * T.cast(y_vec[byi(b), no, ko, ni, k2], "int32"), axis=[ko, k2]),
                   name="batch_matmul_int16", tag="batch_matmul_int16", attrs={"int8_lanes": lanes})
    return te.compute((batch, m, n), lambda b, i, j: c[b, i, j // N_BN, j % N_BN], name="batch_matmul_int16_unpack",
                      tag="injective,unpack")


def _schedule(s, cfg, C, O) -> None:
    """Per batch, dense_int16's register tile (``tile_m`` rows x 16 columns, reduction outside, the 8- or
    16-lane ``vpmaddwd`` step tensorized); the packing stages parallel over the batch."""
    lanes = int(C.op.attrs["int8_lanes"])
    tm = tile_rows(cfg, get_const_tuple(C.shape)[1])
    par_ok = worth_parallel(reduction_flops(C))
    for t in C.op.input_tensors:
        if hasattr(t.op, "axis") and t.op.input_tensors:
            if par_ok:
                s[t.op].parallel(s[t.op].op.axis[0])
    n = get_const_tuple(O.output(0).shape)[2]
    if n < N_BN:  # fewer columns than one panel: a plain reduction (a tensorized region must be whole)
        plain_reduction(s, C)
        return
    b, i, j = s[O].op.axis
    io, ii = s[O].split(i, factor=tm)
    jo, ji = s[O].split(j, factor=N_BN)
    s[O].reorder(b, io, jo, ii, ji)
    par = s[O].fuse(b, io, jo)
    if par_ok:
        s[O].parallel(par)
    s[O].unroll(ii)
    vectorize_int32_epilogue(s[O], ji, N_BN)
    s[C].compute_at(s[O], par)
    _tile(s, C, tm, lanes, dot_s16s16_intrin(lanes))


@autotvm.register_topi_schedule("batch_matmul_int16.x86")
def schedule_batch_matmul_int16(cfg, outs):
    """Schedule of batch_matmul_int16 (with its fused epilogue)."""
    return schedule_anchored(outs, "batch_matmul_int16", lambda s, C, O: _schedule(s, cfg, C, O))
