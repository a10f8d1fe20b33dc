"""Exact int8 dense on x86 targets without VNNI, on int16 operands: ``int16`` data ``[M, K]`` x ``int16`` weight
``[N, K]`` -> ``int32`` with ``vpmaddwd`` (two int16 products summed into an int32 lane).

Why: without VNNI the only u8 x s8 instruction, ``vpmaddubsw``, sums two products into int16 with saturation,
so the exact int8 kernels (``maddubs_exact``) split the data into nibbles: per 32 byte products two
``vpmaddubsw``, two ``vpmaddwd`` and the adds. On int16 operands one ``vpmaddwd`` (16 products) and one add do
the same work exactly: half the multiplier-port instructions, and twice the products per instruction of an fp32
FMA. The x86 QNN legalization gives ``qnn.dense`` this form in the exact mode (``maddubs_exact``): the data
operand is ``x - zp_x`` (within +-255, computed by the elementwise kernel that produces ``x``, e.g. the
quantize of ``DynamicQuantizeLinear``), the weight ``w - zp_w``, so there is no zero-point correction at all.

The weight is packed ``NC16n2c`` (``[N/16, K/2, 16, 2]``, zero-padded; AlterOpLayout packs a constant weight
at compile time), so the 2 consecutive ``k`` of one output column are adjacent and the inner (16 columns, 2)
step is :func:`kiln.topi.x86.tensor_intrin.dot_s16s16_intrin`; the register tile and the fused epilogue are
those of :mod:`kiln.topi.x86.dense_int8`.
"""
from __future__ import annotations

from ... import autotvm, te
from ...tir import op as T
from ..utils import get_const_tuple
from .conv2d_int8 import int8_lanes
from .dense_int8 import N_BN, _schedule, dense_operands, pack_weight_panels, unpack_panels
from .tensor_intrin import dot_s16s16_intrin
from .utils import is_static, schedule_anchored, size_hint

K_PAIR = 2


def pack_int16_weight(weight, name: str = "weight_vec"):
    """[N, K] -> [N/16, K/2, 16, 2] (zero-padded)."""
    return pack_weight_panels(weight, K_PAIR, name, "dense_int16_weight_pack")


def _tile_budget(lanes: int) -> int:
    """Rows of the register tile: the register file less the weight vectors of one panel, the broadcast input
    and a spare, over the accumulators of one row (16 columns)."""
    regs = 32 if lanes == 16 else 16
    vecs = N_BN // lanes
    return max(1, min(8, (regs - vecs - 2) // vecs))


def _fallback_tile_m(m: int, budget: int) -> int:
    """Rows of the fallback tile: the fewest row-tile iterations weighted by the per-row broadcast overhead,
    ``ceil(m / t) * t * (1 + 1 / t)`` (taller tiles reuse each weight vector more; a tile that 1 does not leave
    whole pads rows), so M = 128 takes 6 rows (132 computed), M = 7 takes 4 (8 computed)."""
    return min(range(1, min(m, budget) + 1), key=lambda t: (-(-m // t) * t * (1 + 1 / t), -t))


#: Rows of the fallback tile over a symbolic M (a VM kernel over a dynamic batch): every call computes whole tiles, so
#: batch 1 pays for all of them. Measured (QDQ MLP 784-512-512-10 on the VM, AVX2, one Zen 3 core): 4 rows 0.11 ms
#: at batch 1 vs 0.21 ms for the 6 rows the size hint's rule gives, the same at batch 16 (0.49 ms).
SYMBOLIC_TILE_M = 4


def define_tile_m(cfg, m, budget: int = 0) -> tuple:
    """The ``tile_m`` knob of the int16 kernels (rows of the register tile, fallback :func:`_fallback_tile_m`):
    ``(lanes, rows padded to whole tiles)``. The padding rows re-read the last data row (a clamped index, no guard
    in the reduction) and are never stored (the output keeps M rows). A symbolic M (a VM kernel) is taken at its
    size hint for the knob, :data:`SYMBOLIC_TILE_M` rows in the fallback; its padded row count is an expression. ``budget``: the int8 kernel's (default: the int16 one)."""
    lanes = int8_lanes()
    budget = budget or _tile_budget(lanes)
    mh = size_hint(m)
    cfg.define_knob("tile_m", list(range(1, min(mh, budget) + 1)))
    if cfg.is_fallback:
        tm = min(SYMBOLIC_TILE_M, budget) if not is_static(m) else _fallback_tile_m(mh, budget)
        cfg["tile_m"] = autotvm.task.OtherOptionEntity(tm)
    tm = int(cfg["tile_m"].val)
    if not is_static(m):
        return lanes, T.indexdiv(m + (tm - 1), tm) * tm if tm > 1 else m
    return lanes, -(-m // tm) * tm


@autotvm.register_topi_compute("dense_int16.x86")
def dense_int16(cfg, data, weight, bias=None, out_dtype="int32", units=None):
    """int16 [M, K] x int16 [N, K] (or packed [N/16, ceil(K/2), 16, 2]) -> int32 [M, N]; ``units`` (packed weights
    only): the real N when the last panel is zero-padded."""
    out_dtype = out_dtype or "int32"
    m, k, n, d, w_vec = dense_operands("dense_int16.x86", data, weight, out_dtype, units, ("int16", "int16"), K_PAIR,
                                       pack_int16_weight)
    kp = get_const_tuple(w_vec.shape)[1] * K_PAIR
    lanes, mp = define_tile_m(cfg, m)
    ko = te.reduce_axis((0, kp // K_PAIR), name="ko")
    k2 = te.reduce_axis((0, K_PAIR), name="k2")
    cfg.add_flop(2 * size_hint(m) * n * k)

    def row(i):
        return i if mp is m or (is_static(m) and mp == m) else T.min(i, m - 1)
    c = te.compute((mp, get_const_tuple(w_vec.shape)[0], N_BN),
                   lambda i, no, ni: te.sum(T.cast(d[row(i), ko * K_PAIR + k2], "int32")
                                            * T.cast(w_vec[no, ko, ni, k2], "int32"), axis=[ko, k2]),
                   name="dense_int16", tag="dense_int16", attrs={"int8_lanes": lanes})
    return unpack_panels(c, m, n, bias, "dense_int16_unpack")


@autotvm.register_topi_schedule("dense_int16.x86")
def schedule_dense_int16(cfg, outs):
    """Schedule of dense_int16 (with its fused epilogue): dense_int8's tile with the vpmaddwd step."""
    return schedule_anchored(outs, "dense_int16", lambda s, C, O: _schedule(
        s, cfg, C, O, dot_s16s16_intrin(int(C.op.attrs["int8_lanes"]))))
