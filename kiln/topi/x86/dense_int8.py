"""int8 dense on x86 (TVM's ``dense_int8.x86``): ``uint8`` data ``[M, K]`` x ``int8`` weight ``[N, K]`` -> ``int32``.

The weight is packed ``NC16n4c`` (``[N/16, K/4, 16, 4]``, K padded to a multiple of 4 and N to one of 16 with
zeros; a 4-D weight is taken as packed already), so the 4 consecutive ``k`` of one output column are adjacent
bytes and the inner ``(16 columns, 4)`` step is the same tensorized dot product as the int8 conv's
(:func:`kiln.topi.x86.tensor_intrin.dot_u8s8_intrin`, the mode from the target). A register tile of
``tile_m`` rows x 16 columns accumulates over ``K/4`` in registers; the unpack to ``[M, N]`` carries the fused
epilogue (requantize).

A symbolic M (a VM kernel over an unknown batch) takes the int16 kernel's tile knob at M's size hint
(:func:`kiln.topi.x86.dense_int16.define_tile_m`: 4 rows in the fallback); the product's rows are padded to whole tiles (the padding rows re-read
the last data row and are never stored), the static column panels form the parallel loop and the row tiles run
inside it, so one kernel serves every row count with the static build's register tile.
"""
from __future__ import annotations

import inspect

from ... import autotvm, te
from ...error import KilnError
from ...tir import op as T
from ..utils import get_const_tuple
from .conv2d_int8 import _acc_budget, int8_lanes, int8_mode, vectorize_int32_epilogue
from .tensor_intrin import dot_u8s8_intrin
from .utils import is_static, reduction_flops, schedule_anchored, size_hint, worth_parallel

N_BN = 16


def pack_weight_panels(weight, group: int, name: str, tag: str):
    """[N, K] -> [N/16, K/group, 16, group] (zero-padded): the panels of the int8 (group 4) and int16 (group 2)
    dense kernels, ``group`` consecutive ``k`` of one output column adjacent."""
    n, k = get_const_tuple(weight.shape)
    np_, kp = -(-n // N_BN) * N_BN, -(-k // group) * group
    zero = T.const(0, weight.dtype)

    def f(no, ko, ni, kg):
        row, col = no * N_BN + ni, ko * group + kg
        if np_ == n and kp == k:
            return weight[row, col]
        return T.if_then_else(T.all(row < n, col < k), weight[T.min(row, n - 1), T.min(col, k - 1)], zero)
    # the axes are named by the signature te.compute reads: the inner one k2 / k4, as the kernels' loops read
    f.__signature__ = inspect.Signature([inspect.Parameter(a, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                                         for a in ("no", "ko", "ni", f"k{group}")])
    return te.compute((np_ // N_BN, kp // group, N_BN, group), f, name=name, tag=tag)


def pack_int8_weight(weight, name: str = "weight_vec"):
    """[N, K] -> [N/16, K/4, 16, 4] (zero-padded)."""
    return pack_weight_panels(weight, 4, name, "dense_int8_weight_pack")


def dense_operands(task: str, data, weight, out_dtype: str, units, dtypes: tuple, group: int, pack):
    """The operand checks shared by the packed int dense kernels: ``dtypes`` (data, weight) -> int32, a weight
    ``[N, K]`` (packed here by ``pack``) or packed ``[N/16, ceil(K/group), 16, group]`` with ``units`` fitting its
    last panel. Returns ``(m, k, n, data, packed weight)``, the data zero-padded to whole groups of K."""
    d_dtype, w_dtype = dtypes
    if str(data.dtype) != d_dtype or str(weight.dtype) != w_dtype or out_dtype != "int32":
        raise KilnError(f"{task}: computes {d_dtype} data x {w_dtype} weight -> int32, got {data.dtype} x "
                        f"{weight.dtype} -> {out_dtype}")
    m, k = get_const_tuple(data.shape)
    w_shape = get_const_tuple(weight.shape)
    if len(w_shape) == 2:
        n, wk = w_shape
        if wk != k:
            raise KilnError(f"{task}: data has {k} columns but the weight {wk}")
        w_vec = pack(weight)
    elif len(w_shape) == 4 and w_shape[2:] == (N_BN, group) and w_shape[1] * group >= k > w_shape[1] * group - group:
        n = w_shape[0] * N_BN
        if units is not None:
            if not n - N_BN < int(units) <= n:
                raise KilnError(f"{task}: units={units} does not fit the packed weight {w_shape}")
            n = int(units)
        w_vec = weight
    else:
        raise KilnError(f"{task}: weight must be [N, K] or packed [N/16, ceil(K/{group}), 16, {group}] for K={k}, "
                        f"got {w_shape}")
    kp = get_const_tuple(w_vec.shape)[1] * group
    d = data
    if kp != k:
        d = te.compute((m, kp), lambda i, j: T.if_then_else(j < k, data[i, T.min(j, k - 1)], T.const(0, d_dtype)),
                       name="data_pad", tag="injective,pad")
    return m, k, n, d, w_vec


@autotvm.register_topi_compute("dense_int8.x86")
def dense_int8(cfg, data, weight, bias=None, out_dtype="int32", units=None):
    """uint8 [M, K] x int8 [N, K] (or packed [N/16, K/4, 16, 4]) -> int32 [M, N]; ``units`` (packed weights only):
    the real N when the last panel is zero-padded (AlterOpLayout pads the 1000-class classifier to 1008)."""
    out_dtype = out_dtype or "int32"
    m, k, n, d, w_vec = dense_operands("dense_int8.x86", data, weight, out_dtype, units, ("uint8", "int8"), 4,
                                       pack_int8_weight)
    kp = get_const_tuple(w_vec.shape)[1] * 4
    mode, lanes = int8_mode(), int8_lanes()
    budget = max(1, _acc_budget(mode, lanes) // (N_BN // lanes))
    mp = m
    if is_static(m):
        cfg.define_knob("tile_m", [t for t in range(1, min(m, budget) + 1) if m % t == 0])
        if cfg.is_fallback:
            cfg["tile_m"] = autotvm.task.OtherOptionEntity(max(t for t in range(1, min(m, budget) + 1) if m % t == 0))
    else:  # unknown rows: the int16 kernel's tile rule at the size hint, rows padded to whole tiles
        from .dense_int16 import define_tile_m
        _, mp = define_tile_m(cfg, m, budget)

    def row(i):  # padding rows (a symbolic M in whole tiles) re-read the last data row
        return i if mp is m else T.min(i, m - 1)
    ko = te.reduce_axis((0, kp // 4), name="ko")
    k4 = te.reduce_axis((0, 4), name="k4")
    cfg.add_flop(2 * size_hint(m) * n * k)
    c = te.compute((mp, get_const_tuple(w_vec.shape)[0], N_BN),
                   lambda i, no, ni: te.sum(T.cast(d[row(i), ko * 4 + k4], "int32")
                                            * T.cast(w_vec[no, ko, ni, k4], "int32"), axis=[ko, k4]),
                   name="dense_int8", tag="dense_int8", attrs={"int8_mode": mode, "int8_lanes": lanes})
    return unpack_panels(c, m, n, bias, "dense_int8_unpack")


def unpack_panels(c, m: int, n: int, bias, name: str):
    """The packed product ``[M', N/16, 16]`` -> ``[M, N]`` (``name``), plus the int32 cast of ``bias`` when given."""
    out = te.compute((m, n), lambda i, j: c[i, j // N_BN, j % N_BN], name=name, tag="injective,unpack")
    if bias is not None:
        out = te.compute((m, n), lambda i, j: out[i, j] + T.cast(bias[j], "int32"), name="bias_add",
                         tag="injective,broadcast")
    return out


def _schedule(s, cfg, C, O, intrin=None):
    """Tile ``O`` (the unpacked output with its epilogue) around the packed product ``C``; ``intrin`` replaces
    the inner (lanes x pair/quad) step (the uint8 x int8 dot product of ``C``'s mode when None)."""
    lanes = int(C.op.attrs["int8_lanes"])
    if intrin is None:
        mode = C.op.attrs["int8_mode"]
        intrin = dot_u8s8_intrin(lanes, getattr(mode, "value", mode))
    tm = tile_rows(cfg, get_const_tuple(C.shape)[0])
    for t in C.op.input_tensors:
        if hasattr(t.op, "axis") and t.op.input_tensors and t.op is not C.op:
            ax = s[t.op].op.axis
            if len(ax) >= 2 and worth_parallel(reduction_flops(C)):
                s[t.op].parallel(ax[0])
    n = get_const_tuple(O.output(0).shape)[1]
    if n < N_BN:
        # fewer columns than one panel: the consumer's bounds cut the panel short of the intrinsic's width (a
        # tensorized region must be whole), so such a layer (a handful of outputs) keeps a plain reduction
        plain_reduction(s, C)
        return
    i, j = s[O].op.axis
    io, ii = s[O].split(i, factor=tm)
    jo, ji = s[O].split(j, factor=N_BN)
    if is_static(i.dom.extent):
        s[O].reorder(io, jo, ii, ji)
        par = at = s[O].fuse(io, jo)
    else:  # unknown rows: fusing them in would index the tiles by a symbolic div/mod; the panels are parallel
        s[O].reorder(jo, io, ii, ji)
        par, at = jo, io
    if worth_parallel(reduction_flops(C)):
        s[O].parallel(par)
    s[O].unroll(ii)
    vectorize_int32_epilogue(s[O], ji, N_BN)
    s[C].compute_at(s[O], at)
    _tile(s, C, tm, lanes, intrin)


def tile_rows(cfg, rows: int) -> int:
    """The config's ``tile_m`` where it divides ``rows`` (the product's rows are whole tiles: dense_int16 pads
    them, the output may have fewer; symbolic rows are always padded), else 1."""
    try:
        tm = int(cfg["tile_m"].val)
    except (KeyError, TypeError, AttributeError):
        tm = 1
    if not is_static(rows):
        return max(tm, 1)
    return tm if tm >= 1 and rows % tm == 0 else 1


def plain_reduction(s, C) -> None:
    """``C`` (``[..., rows, N/16, 16]`` over the (K/group, group) reduction) as a plain reduction with the 16
    columns innermost: for fewer columns than one panel, where the intrinsic's region would not be whole."""
    *outer, ci, cno, cni = s[C].op.axis
    ko, kk = s[C].op.reduce_axis
    s[C].reorder(*outer, ci, cno, ko, kk, cni)


def _tile(s, C, tm: int, lanes: int, intrin) -> None:
    """The register tile of ``tm`` rows x 16 columns (per leading batch index), reduction outside, the
    (lanes x group) step tensorized."""
    *outer, ci, cno, cni = s[C].op.axis
    ko, kk = s[C].op.reduce_axis
    cio, cii = s[C].split(ci, factor=tm)
    cvo, cvi = s[C].split(cni, factor=lanes)
    s[C].reorder(*outer, cio, cno, ko, cii, cvo, cvi, kk)
    s[C].unroll(cii)
    s[C].unroll(cvo)
    s[C].tensorize(cvi, intrin)


@autotvm.register_topi_schedule("dense_int8.x86")
def schedule_dense_int8(cfg, outs):
    """Schedule of dense_int8 (with its fused epilogue)."""
    return schedule_anchored(outs, "dense_int8", lambda s, C, O: _schedule(s, cfg, C, O))
