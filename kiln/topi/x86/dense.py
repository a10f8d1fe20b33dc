"""Dense (``data · weightᵀ``) on x86 as a blocked GEMM over a packed weight (TVM's ``dense_pack.x86``).

The weight ``[N, K]`` is packed into panels ``[ceil(N / bn), K, bn]`` (zero-padded when ``bn`` does not
divide ``N``), so the micro-kernel reads ``bn`` consecutive floats per ``k``. The packing is its own compute
stage: when the weight is a graph constant, AlterOpLayout (``conv2d_alter_op.dense_alter_layout``) rewrites
``nn.dense`` into ``nn.contrib_dense_pack`` with a ``layout_transform`` of the weight, which FoldConstant
computes once at compile time; the compute then sees an already packed 3-D weight.

Schedule: the output is tiled ``bm x bn``; a ``bm x bn`` accumulator (cache_write) lives at the block, its
reduction is split by ``ku`` and reordered outside the block's rows and columns, rows unrolled and columns
vectorized: ``bm * bn / simd`` accumulator registers. Blocks are parallel. All tile sizes are AutoTVM knobs.

The data operand is read in place, except where its rows alias in L1: when a row is a multiple of 4 KiB long
(K = 1024, 2048, 3072 floats: BERT's and GPT-2's second FFN layer) all ``bm`` rows of a block fall into the
same cache sets, and the fallback packs the rows per call into ``[ceil(M / bm), K, bm]`` blocks
(``pack_data``, knob ``pack_data``; rule and numbers at :data:`DATA_PACK_ALIAS_BYTES`). Tried on Zen 3 and
not kept (session 10, paired single-thread A/B): cache blocking of K (kc = 256 / 384, the block's partial
sums added into the output per kc block through an rfactor'ed stage) was slower on every shape (128 x 768 x
768: 0.94-0.97x, 1024^3: 0.69-0.85x): with the row blocks inside each kc block, every kc step re-reads and
re-stores the output tile, and a 16-wide weight panel streams from L2 fast enough (the micro-kernel's hot
loop is 12 FMAs, 2 loads and 6 broadcasts per k with no spill; 64 x 512 x 784 runs at 92% of the measured
101 GFLOP/s single-core FMA peak).
"""
from __future__ import annotations

from ... import autotvm, te
from ...error import KilnError
from ...runtime.dtype import parse_dtype
from ...tir import op as T
from ..utils import get_const_tuple
from .utils import (as_list, divisor_at_most, is_static, prefetch_weights, scaled_registers, simd_width, size_hint,
                    reduction_flops, traverse_inline, vector_registers, worth_parallel)


def _ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def _define_dense_space(cfg, M, N, K, bn_fixed: int | None = None, units: int | None = None,
                        data_itemsize: int | None = None):
    """The GEMM config space (with the ``pack_data`` knob when ``data_itemsize`` is given: dense_pack only). A symbolic M, N or K (a VM kernel) is taken at its size hint (rows: a loop over
    blocks of ``tile_y`` with a guarded last block; columns: whole zero-padded panels); a symbolic K is not
    unrolled (a reduction over a run-time length)."""
    lanes = simd_width()
    sym_k = not is_static(K)
    M, N, K = size_hint(M), size_hint(N), size_hint(K)
    if bn_fixed is None:
        cands = sorted({lanes, 2 * lanes, 4 * lanes} | ({N, narrow_panel_width(N)} if N < lanes else set()))
        cfg.define_split("tile_x", N, num_outputs=3, policy="candidate",
                         candidate=[[-1, o, b] for b in cands for o in (1, 2, 4)])
    else:
        cfg.define_split("tile_x", N, num_outputs=3, policy="candidate",
                         candidate=[[-1, o, bn_fixed] for o in (1, 2, 4)])
    rows = [r for r in range(1, 9) if r <= M] or [1]
    cfg.define_split("tile_y", M, num_outputs=3, policy="candidate",
                     candidate=[[-1, o, r] for r in rows for o in (1, 2)])
    if sym_k:
        cfg.define_split("tile_k", K, num_outputs=2, policy="candidate", candidate=[[-1, 1]])
    else:
        cfg.define_split("tile_k", K, num_outputs=2, policy="factors", filter=lambda e: e.size[-1] <= 16)
    knob_pack = data_itemsize is not None and is_static(M) and M >= 2
    if knob_pack:
        cfg.define_knob("pack_data", [0, 1])
    if cfg.is_fallback:
        bn = bn_fixed or (2 * lanes if N >= 2 * lanes else lanes if N >= lanes else narrow_panel_width(N))
        if units is None and N % bn:
            units = N  # packed per call into zero-padded panels
        mr, panels = gemm_block(M, N, bn, lanes, scaled_registers(12), padded_units=units)
        cfg["tile_x"] = autotvm.task.SplitEntity([-1, panels, bn])
        cfg["tile_y"] = autotvm.task.SplitEntity([-1, 1, mr])
        cfg["tile_k"] = autotvm.task.SplitEntity([-1, 1 if sym_k else divisor_at_most(K, fallback_k_unroll())])
        if knob_pack:
            cfg["pack_data"] = autotvm.task.OtherOptionEntity(int(pack_data_pays(M, K, mr, data_itemsize)))


def fallback_k_unroll() -> int:
    """Reduction steps unrolled in the fallback micro-kernel: 8 with AVX2's 16 registers (less loop overhead
    per block; on Zen 3 within 2% of no unrolling), 1 with AVX-512's 32. gcc's -ffast-math reassociation
    splits the unrolled accumulation chains into separate multiplies and adds (1.5x the FP operations),
    and with AVX-512's 24-accumulator block the extra temporaries spill: the hot loop of a 64x512x784 GEMM
    compiled for skylake-avx512 had 64 mul + 64 add beside 128 FMAs and 110 stack accesses; unrolled by 1,
    24 FMAs and none (checked on the generated assembly, see tests/topi/x86/test_x86_dense_narrow.py)."""
    return 1 if vector_registers() >= 32 else 8


def narrow_panel_width(n: int) -> int:
    """Panel width for fewer columns than one SIMD vector (a 10-class head on AVX-512, 5 on AVX2): ``n``
    itself when it is a power of two (one unpadded block), else the largest power of two below it, so the
    zero-padded panels form at least two column blocks (see :func:`gemm_block`'s ``padded_units``)."""
    if n & (n - 1) == 0:
        return n
    return 1 << (n.bit_length() - 1)


def gemm_block(M: int, N: int, bn: int, lanes: int, max_acc: int = 12, padded_units: int | None = None) -> tuple:
    """The fallback register block ``(rows, weight panels)``: 6 rows of one ``bn``-wide panel (12 AVX2
    accumulators for bn = 16: 2 weight vector loads and 6 broadcasts per 12 FMAs; rows that do not divide M
    leave a guarded last block: gcc keeps the guard in the loop as a well-predicted branch); with fewer rows (batch-1
    GEMV-like shapes) more panels, so that enough independent FMA chains hide the FMA latency. The fallback
    passes ``max_acc`` scaled to the target's register file (24 with AVX-512: more panels for few rows).

    ``padded_units`` (the real column count when the panels are zero-padded past it) keeps at least two column
    blocks: with one, bound inference sizes the block's staging tile by the real columns, not the padded
    panel, and the micro-kernel's last panel turns into guarded scalar code (the MLP's 64 x 10 classifier
    ran 8x slower)."""
    vecs = max(1, -(-bn // lanes))
    mr = max(1, min(M, 6, max_acc // vecs))
    panels = 1
    n_panels = -(-N // bn)
    while panels * 2 * mr * vecs <= max_acc and n_panels % (panels * 2) == 0:
        if padded_units is not None and padded_units <= panels * 2 * bn:
            break
        panels *= 2
    return mr, panels


#: the fallback packs the data rows per call (:func:`pack_data`) when a row is a multiple of this many bytes
#: long (every row of a block then maps to the same L1 sets: 4 KiB aliasing) and the operand has at least
#: :data:`DATA_PACK_MIN_BYTES`. Zen 3, one thread, speed packed / unpacked, median of 11 paired interleaved
#: rounds (rounds won), two runs under load 5-8 (``benchmarks.gemm_pack_ab``, results/gemm_s10_pack_ab.md):
#: K = 3072: 128 x 768 1.035 / 1.023 (10 / 7 of 11), 256 x 768 1.054 / 1.070; K = 2048: 128 x 768 1.036 /
#: 1.072; K = 1024: 1024 x 1024 1.080 / 1.076, 128 x 768 (512 KiB) 1.017 / 1.055, 64 x 512 (256 KiB) 0.997.
#: Rows not 4 KiB apart gain nothing or lose the packing pass: K = 768 (128 / 512 x 768) 0.97-1.01, K = 1536
#: 0.98-1.01, K = 512 0.97-0.98, 64 x 512 x 784 0.975-0.988. BERT-base (seq 128) end to end 1.036 / 1.018
#: at one thread, 1.022 at two; GPT-2 0.994 (within noise).
DATA_PACK_ALIAS_BYTES = 4096
DATA_PACK_MIN_BYTES = 1 << 19


def pack_data_pays(M: int, K: int, mr: int, itemsize: int = 4) -> bool:
    """Whether the fallback packs the data rows (see :data:`DATA_PACK_ALIAS_BYTES`): at least two row blocks,
    rows a multiple of 4 KiB apart and an operand of at least :data:`DATA_PACK_MIN_BYTES`."""
    return (M >= 2 * mr and (K * itemsize) % DATA_PACK_ALIAS_BYTES == 0
            and M * K * itemsize >= DATA_PACK_MIN_BYTES)


def pack_data(data, mr: int, name: str = "packed_data"):
    """``[M, K]`` -> ``[ceil(M / mr), K, mr]`` row blocks, zero beyond ``M``: the micro-kernel's ``mr``
    broadcasts per reduction step then read one contiguous stream instead of ``mr`` rows ``K`` apart."""
    M, K = get_const_tuple(data.shape)
    if M % mr == 0:
        return te.compute((M // mr, K, mr), lambda z, k, r: data[z * mr + r, k], name=name, tag="dense_data_pack")
    zero = T.const(0, data.dtype)
    return te.compute((_ceil_div(M, mr), K, mr),
                      lambda z, k, r: T.if_then_else(z * mr + r < M, data[T.min(z * mr + r, M - 1), k], zero),
                      name=name, tag="dense_data_pack")


def pack_weight(weight, bn: int, name: str = "packed_weight"):
    """``[N, K]`` -> ``[ceil(N / bn), K, bn]`` panels, zero beyond ``N``."""
    N, K = get_const_tuple(weight.shape)
    if N % bn == 0:
        return te.compute((N // bn, K, bn), lambda z, k, x: weight[z * bn + x, k], name=name,
                          tag="dense_weight_pack")
    zero = T.const(0, weight.dtype)
    return te.compute((_ceil_div(N, bn), K, bn),
                      lambda z, k, x: T.if_then_else(z * bn + x < N, weight[T.min(z * bn + x, N - 1), k], zero),
                      name=name, tag="dense_weight_pack")


@autotvm.register_topi_compute("dense_pack.x86")
def dense_pack(cfg, data, weight, bias=None, out_dtype=None, units=None):
    """``data [M, K] · weight [N, K]ᵀ (+ bias)``; ``weight`` may be pre-packed ``[ceil(N / bn), K, bn]``, its
    last panel zero-padded when ``units`` (N) is below ``nb * bn``.

    When ``bn`` does not divide N the GEMM computes a padded ``[M, nb * bn]`` stage (every micro-kernel block
    full, so it stays vectorized with no guard) and a ``[M, N]`` output stage copies it (with the bias): only
    the stores of the last column block are guarded."""
    out_dtype = out_dtype or data.dtype
    d_shape = get_const_tuple(data.shape)
    if len(d_shape) != 2:
        raise KilnError(f"dense_pack.x86: data must be 2-D [batch, in_features], got shape {d_shape}")
    M, K = d_shape
    itemsize = max(1, parse_dtype(str(data.dtype)).bits // 8)
    w_shape = get_const_tuple(weight.shape)
    if len(w_shape) == 3:
        nb, kw, bn = w_shape
        n_pad = nb * bn
        N = n_pad if units is None else int(units)
        if not n_pad - bn < N <= n_pad:
            raise KilnError(f"dense_pack.x86: units={N} does not match the packed weight {w_shape} (expects "
                            f"{n_pad - bn + 1}..{n_pad} units)")
        _define_dense_space(cfg, M, n_pad, K, bn_fixed=bn, units=N if N != n_pad else None,
                            data_itemsize=itemsize)
        packw = weight
    elif len(w_shape) == 2:
        N, kw = w_shape
        if units is not None and int(units) != N:
            raise KilnError(f"dense_pack.x86: units={units} but the weight has {N} rows")
        _define_dense_space(cfg, M, N, K, data_itemsize=itemsize)
        bn = cfg["tile_x"].size[-1]
        packw = pack_weight(weight, bn)
        n_pad = _ceil_div(N, bn) * bn
    else:
        raise KilnError(f"dense_pack.x86: weight must be [units, in_features] or packed [units/bn, in_features, bn], "
                        f"got shape {w_shape}")
    if kw != K:
        raise KilnError(f"dense_pack.x86: data {d_shape} and weight {w_shape} disagree on in_features ({K} vs {kw})")
    k = te.reduce_axis((0, K), name="k")
    if _knob(cfg, "pack_data"):
        mr = cfg["tile_y"].size[-1]
        packd = pack_data(data, mr)

        def data_at(y, kk):
            return packd[y // mr, kk, y % mr]
    else:
        def data_at(y, kk):
            return data[y, kk]
    out = te.compute((M, n_pad), lambda y, x: te.sum(
        T.cast(data_at(y, k), out_dtype) * T.cast(packw[x // bn, k, x % bn], out_dtype), axis=k),
        name="T_dense_pack", tag="dense_pack", attrs={"units": N} if n_pad != N else None)
    if bias is not None:
        out = te.compute((M, N), lambda y, x: out[y, x] + T.cast(bias[x], out_dtype), name="T_add",
                         tag="broadcast")
    elif n_pad != N:
        out = te.compute((M, N), lambda y, x: out[y, x], name="T_dense_unpad", tag="injective")
    cfg.add_flop(2 * size_hint(M) * N * K)
    return out


def _knob(cfg, name: str) -> int:
    """A knob's value, 0 where the space does not define it (a symbolic M, one row)."""
    try:
        return int(cfg[name].val)
    except (KeyError, AttributeError, TypeError):
        return 0


#: the dense's weight prefetch (``schedule_gemm_block``) goes out in this many slices of the reduction at most
PREFETCH_SLICES = 8


def schedule_gemm_block(s, cfg, C, O, n_batch: int = 0, staged: bool = False, weights=None):
    """Tile output stage ``O``'s last two axes (rows, columns) into ``mr x (panels * bn)`` blocks (tile_y's
    inner factor, tile_x's two inner factors), accumulate ``C`` in a block-local cache at the block and
    vectorize: the reduction (split by tile_k, the inner part unrolled) runs outside the unrolled rows and
    panels, so every step broadcasts ``mr`` data values against ``panels * bn / simd`` weight vectors and
    the C code generator keeps the ``mr * panels * bn / simd`` accumulators in registers. Blocks are
    ordered column-panel outer, rows inner (a weight panel stays in cache while the rows stream); the
    ``n_batch`` leading axes of ``O`` and the block loops form the parallel loop.

    ``staged``: a GEMM whose columns were padded to whole panels (``C`` wider than the output ``O``): the
    accumulator in registers (cache_write of ``C``) is stored by full vectors into a block-local ``C`` staging
    tile, from which ``O`` (the unpadding copy plus any fused epilogue) reads under the column guard. Reading
    the accumulator itself under that guard (scalar accesses) made every block's accumulators live in memory
    (2x slower).

    ``weights`` (dense: the packed weight; a constant only): the row blocks of a column panel request the next panel's
    weights, a share at the start of each of up to :data:`PREFETCH_SLICES` slices of the reduction
    (:func:`prefetch_weights`: weights of at least 1 MiB, in a network whose weights exceed the last-level
    cache). There (BERT's and GPT-2's 340 MB of encoder weights) the first row block of each panel otherwise
    reads the panel from memory while its FMAs wait: Zen 5, two threads, paired rounds, GPT-2 0.971x and
    BERT-base 0.965x end to end (``-mcpu=core-avx2`` code: 0.973x, 0.968x), resnet50 (its 8 MB classifier)
    0.992x; a chain of 24 GPT-2-sized denses (226 MB) 0.97x, where the hot kernels alone lose nothing."""
    if C.op is O or staged:
        CC = s.cache_write(C, "global")
    else:
        CC = C
    out_axes = list(s[O].op.axis)
    extra_outer, y, x = out_axes[:n_batch], out_axes[-2], out_axes[-1]
    yt, yo, yi = cfg["tile_y"].apply(s, O, y)
    xt, xo, xi = cfg["tile_x"].apply(s, O, x)
    s[O].reorder(*extra_outer, xt, yt, yo, yi, xo, xi)
    static_y, static_x = is_static(y.dom.extent), is_static(x.dom.extent)
    if static_y and static_x:
        par = s[O].fuse(*extra_outer, xt, yt)
    elif static_x:  # symbolic rows (a VM kernel): fusing them in would index the blocks by symbolic div/mod and
        # guard every inner statement; the static column panels form the parallel loop, the row blocks run inside
        par = s[O].fuse(*extra_outer, xt) if extra_outer else xt
    else:  # symbolic columns too (batch_matmul's N = seq): the batch is the parallel loop, the blocks inside
        par = s[O].fuse(*extra_outer) if len(extra_outer) > 1 else extra_outer[0] if extra_outer else xt
    if worth_parallel(reduction_flops(C)):
        s[O].parallel(par)
    s[O].unroll(yi)
    s[O].unroll(xo)
    s[O].vectorize(xi)
    bn = cfg["tile_x"].size[-1]
    if staged:
        s[C].compute_at(s[O], yo)
        sy, sx = list(s[C].op.axis)[-2:]
        sxo, sxi = s[C].split(sx, factor=bn)
        s[C].unroll(sy)
        s[C].unroll(sxo)
        s[C].vectorize(sxi)
    s[CC].compute_at(s[O], yo)
    axes = list(s[CC].op.axis)
    cy, cx = axes[-2], axes[-1]
    cxo, cxi = s[CC].split(cx, factor=bn)
    (kk,) = s[CC].op.reduce_axis
    ko, ki = cfg["tile_k"].apply(s, CC, kk)
    s[CC].reorder(ko, ki, cy, cxo, cxi)
    if weights is not None and static_y and static_x and is_static(kk.dom.extent):
        row_blocks = _ceil_div(int(y.dom.extent), cfg["tile_y"].size[-1] * cfg["tile_y"].size[-2])
        # the requests go out at the start of each of a few equal slices of the reduction (a share per slice):
        # one share per reduction step computed its line range (two integer divisions) every few FMAs
        slices = divisor_at_most(_ceil_div(int(kk.dom.extent), cfg["tile_k"].size[-1]), PREFETCH_SLICES)
        spread = ko
        if slices > 1:
            spread, ko = s[CC].split(ko, nparts=slices)
        prefetch_weights(s, O, weights, par, row_blocks, spread)
    s[CC].unroll(ki)
    s[CC].unroll(cy)
    s[CC].unroll(cxo)
    s[CC].vectorize(cxi)
    return CC


def padded_units(op):
    """The real column count of a GEMM stage computed over whole (zero-padded) weight panels, else None."""
    attrs = getattr(op, "attrs", None) or {}
    units = attrs.get("units") if hasattr(attrs, "get") else None
    if units is None:
        return None
    return int(getattr(units, "value", units)) if is_static(units) else units  # symbolic N: an expression


def _schedule_pack_stage(s, packw, parallel: bool = True):
    """The per-call weight packing (when the weight was not packed at compile time): vectorized along the
    panel width when it is a SIMD-friendly size, parallel over panels for enough work."""
    if not hasattr(packw.op, "axis") or packw.op.name == "placeholder" or not packw.op.input_tensors:
        return
    z, _, x = packw.op.axis
    if parallel:
        s[packw].parallel(z)
    if get_const_tuple(packw.shape)[-1] <= 4 * simd_width() and packw.op.tag == "dense_weight_pack" and \
            "if_then_else" not in str(packw.op.body):
        s[packw].vectorize(x)


def _schedule_data_pack(s, packd, parallel: bool) -> None:
    """The per-call packing of the data rows: parallel over row blocks, the block's rows unrolled."""
    z, _, r = packd.op.axis
    if parallel:
        s[packd].parallel(z)
    s[packd].unroll(r)


@autotvm.register_topi_schedule("dense_pack.x86")
def schedule_dense_pack(cfg, outs):
    """Schedule of :func:`dense_pack` (and its fused epilogue)."""
    outs = as_list(outs)
    s = te.create_schedule([o.op for o in outs])

    def callback(op):
        if op.tag != "dense_pack":
            return
        C = op.output(0)
        O = outs[0].op
        packw = [t for t in op.input_tensors if t.op.tag != "dense_data_pack"][-1]  # the (packed) weight
        _schedule_pack_stage(s, packw, worth_parallel(reduction_flops(C)))
        for t in op.input_tensors:
            if t.op.tag == "dense_data_pack":
                _schedule_data_pack(s, t, worth_parallel(reduction_flops(C)))
        # the weight: prefetched when it is a constant (packed at compile time), not when packed per call
        schedule_gemm_block(s, cfg, C, O, staged=padded_units(op) is not None, weights=packw)
    traverse_inline(s, outs[0].op, callback)
    return s
