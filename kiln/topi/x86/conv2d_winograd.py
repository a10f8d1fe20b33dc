"""Winograd F(m x m, 3 x 3) convolution on x86 in NCHW[x]c (AutoTVM template ``conv2d_NCHWc_winograd.x86``).

A 3x3 stride-1 conv computes ``m x m`` outputs per tile of ``alpha x alpha`` inputs (``alpha = m + 2``) as
``Y = A^T [(G g G^T) * (B^T d B)] A``: per tile and channel the multiplications of the kernel window become an
element-wise product of ``alpha x alpha`` transformed tiles, so the conv is one GEMM per transformed position
``(e, n)`` (over the input channels) between the transformed kernel ``U`` and the transformed input tiles
``V``, plus cheap transforms before and after. F(4x4, 3x3) does 36 multiplications where the direct conv does
144 per 16 outputs; F(2x2, 3x3) 16 for 36.

Stages (all in NCHW{x}c blocks, the innermost block is the SIMD vector):

* ``data_pad`` (the packed input padded so that every tile reads in bounds; sizes ``m`` does not divide get a
  partial last tile whose extra outputs are never written),
* ``V[e, n, p, c]`` (``p`` = tile over batch x tile rows x tile columns) in two separable passes
  (``winograd_input_rows`` then ``V``): each pass is generated per transform index as a sum of the nonzero
  matrix entries only (a ``Select`` over the index that unrolling turns into one branch), so no product with
  a zero coefficient is left for the C compiler (which may not drop ``x * 0.0f`` without -ffast-math),
* ``M[e, n, ko, p, ob] = sum_c U[e, n, ko, c, ob] * V[e, n, p, c]`` (``winograd_gemm``): a register tile of
  ``tile_p`` tiles x ``oc_bn`` lanes accumulates in a cache_write stage while ``c`` runs; each step broadcasts
  one ``V`` value per tile against the ``oc_bn`` weights, as the direct conv's pixel tile does,
* the output transform, separable too: ``winograd_output_rows`` per tile, then the conv output itself
  (tag ``conv2d_NCHWc_winograd``) written ``m x m`` pixels per tile with any fused epilogue.

Knobs (6 configs): ``tile_ic`` / ``tile_oc`` (channel blocks, the :func:`~.conv2d.channel_block` rule only, as
the direct conv), ``tile_size`` (m: 2 or 4) and ``tile_p`` (tiles in the GEMM's register block: 10, 12 or 14
accumulator vectors). The GEMM runs output-channel chunks outside the tile blocks (a weight chunk stays in L1
while the transformed input streams; the reverse order measured the same within noise, so it is no knob).
Fallback: m from :func:`fallback_tile_size` (4, or 2 below 25 4x4 tiles per image, 16 with AVX-512) and
blocks of up to 12 accumulators (24 with AVX-512), the tiles shared evenly between them. relay.build takes this
template untuned where :func:`winograd_pays` (docs/architecture.md). On resnet-18's 3x3 stride-1 layers (one
thread, Zen 3 AVX2, packed inputs)
m = 4 beat m = 2 by 1.5-2x on the 56 and 28 layers and was about even at 14 (F(4x4) multiplies 4x less than
the direct conv, F(2x2) 2.25x); m = 4 ran 2.2-3.4x faster than conv2d_NCHWc.x86's fallback there. At 7x7 with
512 channels the transformed kernel (36 MB for m = 4) streams from memory and both are near the direct conv.
The flops counted are those
of the direct conv, so GFLOP/s compare with ``conv2d_NCHWc.x86``.
"""
from __future__ import annotations

from ... import autotvm, te
from ...error import KilnError
from ...tir import op as T
from ..nn.conv2d import _out_size, _params
from ..nn.pad import pad
from ..nn.winograd_util import by_column, winograd_matrices
from ..utils import get_const_tuple
from .conv2d import _block_candidates, _knob, channel_block, pack_data, unpack_nchwc
from .utils import (is_static, nchwc_output_axes, prefetch_weights, scaled_registers, schedule_anchored,
                    simd_width, size_hint, worth_parallel)

# Accumulator vectors of the GEMM's register tile (16 AVX2 registers less a broadcast and a weight vector).
# 8 measured 20-40% slower than 12 on resnet-18's layers, so the space starts at 10.
_ACC_CHOICES = (10, 12, 14)


def winograd_weight_transform(kernel, tile_size: int, oc_bn: int):
    """OIHW kernel ``[CO, CI, 3, 3]`` -> ``U[alpha, alpha, CO // oc_bn, CI, oc_bn]`` with
    ``U[e, n, ko, c, ob] = sum_{i,j} G[e, i] kernel[ko*oc_bn + ob, c, i, j] G[n, j]``."""
    co, ci, kh, kw = get_const_tuple(kernel.shape)
    if (kh, kw) != (3, 3):
        raise KilnError(f"winograd_weight_transform: needs a 3x3 kernel, got {kh}x{kw} (shape {(co, ci, kh, kw)})")
    if oc_bn <= 0 or co % oc_bn:
        raise KilnError(f"winograd_weight_transform: oc_bn={oc_bn} does not divide the {co} output channels")
    _, _, g = winograd_matrices(int(tile_size))
    alpha = int(tile_size) + 2
    gt = g.T  # [3, alpha]: sum_i G[e, i] x_i is column e of G^T weighted by x
    dt = kernel.dtype
    # separable: the rows g G^T first (a small stage the schedule keeps per input channel), then G (g G^T)
    rows = te.compute((alpha, 3, co // oc_bn, ci, oc_bn),
                      lambda n, i, ko, c, ob: by_column(gt, n, lambda j: kernel[ko * oc_bn + ob, c, i, j], dt),
                      name="winograd_U_rows", tag="winograd_weight_rows")
    return te.compute(
        (alpha, alpha, co // oc_bn, ci, oc_bn),
        lambda e, n, ko, c, ob: by_column(gt, e, lambda i: rows[n, i, ko, c, ob], dt),
        name="winograd_U", tag="winograd_weight_transform")


def _schedule_weight_transform(s, U, parallel: bool) -> None:
    e, n, ko, c, ob = s[U].op.axis
    s[U].reorder(ko, c, e, n, ob)
    s[U].unroll(e)
    s[U].unroll(n)
    s[U].vectorize(ob)
    if parallel:
        s[U].parallel(ko)
    rows = U.op.input_tensors[0]
    s[rows].compute_at(s[U], c)
    n, i, _, _, ob = s[rows].op.axis
    s[rows].unroll(n)
    s[rows].unroll(i)
    s[rows].vectorize(ob)


def schedule_winograd_weight_transform(outs):
    """A plain schedule of the kernel transform (it runs at compile time under FoldConstant): the transform
    indices unrolled so each element keeps only its nonzero terms, the output-channel block vectorized."""
    return schedule_anchored(outs, "winograd_weight_transform",
                             lambda s, U, _: _schedule_weight_transform(s, U, parallel=False))


def _tile_p_candidates(oc_bn: int, lanes: int) -> list:
    vecs = -(-oc_bn // lanes)
    return sorted({max(1, scaled_registers(a) // vecs) for a in _ACC_CHOICES})


def _define_space(cfg, ic: int, oc: int, oh: int, ow: int, ic_bn=None, oc_bn=None, n=1) -> None:
    lanes = simd_width()
    cfg.define_split("tile_ic", ic, num_outputs=2, policy="candidate", candidate=_block_candidates(ic, lanes))
    cfg.define_split("tile_oc", oc, num_outputs=2, policy="candidate", candidate=_block_candidates(oc, lanes))
    cfg.define_knob("tile_size", [2, 4])
    cfg.define_knob("tile_p", _tile_p_candidates(oc_bn or channel_block(oc, lanes), lanes))
    if cfg.is_fallback:
        _fallback(cfg, ic, oc, oh, ow, lanes, ic_bn, oc_bn, n)


# Winograd is relay.build's default for a float32 3x3 stride-1 conv with at least this many input and output
# channels (see :func:`winograd_pays`)
MIN_WINOGRAD_CHANNELS = 32
# F(4x4) needs this many 4x4 tiles per image for its GEMMs to reuse each transformed weight enough (AVX2)
MIN_TILES_F4 = 25
# with AVX-512 (16 fp32 lanes, 32 registers) F(4x4) pays from this many (14x14 images)
MIN_TILES_F4_AVX512 = 16
# with AVX-512, an F(2x2) conv whose GEMMs reuse each transformed weight over fewer than MIN_TILES_F4 tiles and
# whose transformed weights exceed this keeps the direct conv (see :func:`winograd_pays`)
MAX_STREAMED_U_BYTES_AVX512 = 8 << 20


def _tiles(oh: int, ow: int, m: int) -> int:
    return (-(-oh // m)) * (-(-ow // m))


def fallback_tile_size(oh: int, ow: int, lanes: int | None = None) -> int:
    """m of the fallback: 4 (4x fewer multiplications than the direct conv where 2x2 gives 2.25x) when the
    image has enough 4x4 tiles, else 2; ``lanes``: fp32 SIMD lanes of the target (default the current one's).
    Each of the alpha^2 GEMMs reuses a transformed weight once per tile, and F(4x4)'s weights are 2.25x larger.
    AVX2 (8 lanes): m = 4 from :data:`MIN_TILES_F4` tiles. At 7x7 (4 tiles of 4x4, 16 of 2x2) m = 2 ran
    92 GFLOP/s against m = 4's 74 (512 channels, one thread, Zen 3); at 14x14 they were even and m = 2 rounds
    10x less (relative error 7e-7 against 1e-5); `-mcpu=core-avx2` code on Zen 5 agreed (m = 4 at 14x14:
    resnet-18 3% slower end to end, two threads). AVX-512 (16 lanes): m = 4 from :data:`MIN_TILES_F4_AVX512`
    tiles, i.e. also at 14x14. Zen 5, 256@14, m = 4 against m = 2: 0.36 against 0.46 ms hot and 0.52 against
    0.58 with caches flushed before each call (two threads), 0.60 / 0.82 and 0.86 / 1.05 on one thread; end to
    end (two threads, interleaved rounds on a shared machine, paired medians, balanced GEMM blocks in both)
    resnet-18 1.033x, resnet-50 1.010x; on one thread resnet-50 even (0.995x)."""
    lanes = lanes or simd_width()
    need = MIN_TILES_F4_AVX512 if lanes >= 16 else MIN_TILES_F4
    return 4 if _tiles(oh, ow, 4) >= need else 2


def winograd_pays(ic: int, oc: int, oh: int, ow: int, lanes: int | None = None) -> bool:
    """Whether a float32 3x3 stride-1 conv should run by Winograd without a tuning record saying so: enough
    channels for the GEMMs to be the work (the transforms cost per channel what a few direct taps do) and an
    output of at least 7x7; ``lanes``: fp32 SIMD lanes of the target (default the current one's).
    Untuned, one thread, Zen 3 AVX2, packed inputs, GFLOP/s counted as the direct conv:
    resnet's 64@56 direct 76 / Winograd (fallback m) 211 / ONNX Runtime 83; 128@28 82 / 292 / 88; 256@14
    80 / 165 / 86; 512@7 67 / 92 / 67.

    With AVX-512 (16 lanes) the direct conv runs about twice as fast per core (twice the lanes, twice the
    registers for its register tile) while F(2x2) at 7x7 is held back by its weights: the transformed
    weights (16/9 of the kernel, 16.8 MB at 512 channels) stream from memory each inference, where the
    network's other weights have evicted them, and each is reused by 16 tiles only. So where the fallback m is
    2, its GEMMs reuse each weight over fewer than :data:`MIN_TILES_F4` tiles and the transformed weights
    exceed :data:`MAX_STREAMED_U_BYTES_AVX512`, AVX-512 keeps the direct conv. Zen 5, caches flushed before
    each call, direct / F(2x2) / F(4x4): two threads 512@7 0.83 / 0.98 / 0.97 ms, 256@7 (4.2 MB) 0.24 / 0.21
    / 0.26, 128@7 0.11 / 0.10 / 0.10; one thread 512@7 1.56 / 1.74 / 1.29 (F(4x4)'s 37.7 MB of weights stream
    at about 29 GB/s: a one-thread win that two threads, sharing the bandwidth, lose). End to end, the
    AVX-512 rules together (this one, m = 4 at 14x14 and the balanced GEMM blocks of :func:`_fallback`)
    against the AVX2 ones (two threads, interleaved rounds on a shared machine, paired medians of 25 rounds,
    two runs): resnet-50 1.038x (95% interval 1.019-1.059) and 1.051x (1.045-1.066), resnet-18 1.059x
    (1.043-1.078) and 1.062x (1.026-1.109); one thread, resnet-50 0.999x and 1.009x (1.004-1.019). AVX2 code
    keeps Winograd at 7x7: `-mcpu=core-avx2` on Zen 5, 512@7 direct 1.89 ms / F(2x2) 1.13 with flushed
    caches, and resnet-18 19% slower end to end with its 7x7 layers direct."""
    if min(ic, oc) < MIN_WINOGRAD_CHANNELS or min(oh, ow) < 7:
        return False
    lanes = lanes or simd_width()
    if lanes < 16 or fallback_tile_size(oh, ow, lanes) == 4:
        return True
    return _tiles(oh, ow, 2) >= MIN_TILES_F4 or 16 * ic * oc * 4 <= MAX_STREAMED_U_BYTES_AVX512


def balanced_tile_p(ntiles: int, most: int) -> int:
    """Tiles per GEMM register block: ``most`` where one block holds all ``ntiles`` (the schedule clamps it),
    else the fewest blocks of at most ``most`` tiles, evened out, so that no nearly empty last block repeats
    the whole reduction over the channels for a few tiles (49 tiles in blocks of 24 left a last block of one
    tile: a single accumulator chain, a third of the GEMM's time for 2% of its work)."""
    if ntiles <= most:
        return most
    blocks = -(-ntiles // most)
    return -(-ntiles // blocks)


def _fallback(cfg, ic, oc, oh, ow, lanes, ic_bn=None, oc_bn=None, n=1) -> None:
    """m from :func:`fallback_tile_size` and a GEMM block of up to 12 accumulators (6 tiles of two AVX2
    vectors, as the direct conv's register budget; 24 accumulators with AVX-512's 32 registers), the tiles
    shared evenly between the blocks (:func:`balanced_tile_p`). resnet's 49-tile layers (256@14 F(2x2),
    128@28 F(4x4)) on AVX-512 then run blocks of 17, 17 and 15 tiles instead of 24, 24 and 1: Zen 5, one
    thread, medians of interleaved rounds, 256@14 0.652 -> 0.620 ms, 128@28 0.444 -> 0.428; with AVX2's
    blocks of 6 tiles (49 = 8 x 6 + 1) the balanced block is 6 again (7 tiles, 14 accumulators, spill: 256@14
    0.97 -> 1.50 ms with `-mcpu=core-avx2` code)."""
    ic_bn = ic_bn or channel_block(ic, lanes)
    oc_bn = oc_bn or channel_block(oc, lanes)
    vecs = -(-oc_bn // lanes)
    cfg["tile_ic"] = autotvm.task.SplitEntity([-1, ic_bn])
    cfg["tile_oc"] = autotvm.task.SplitEntity([-1, oc_bn])
    # a symbolic batch / height / width (a VM kernel over unknown sizes) counts at its size hint
    m = fallback_tile_size(size_hint(oh), size_hint(ow), lanes)
    cfg["tile_size"] = autotvm.task.OtherOptionEntity(m)
    ntiles = size_hint(n) * _tiles(size_hint(oh), size_hint(ow), m)
    cfg["tile_p"] = autotvm.task.OtherOptionEntity(balanced_tile_p(ntiles, max(1, scaled_registers(12) // vecs)))


def _check_conv(strides, dilation, kh: int, kw: int, what: str):
    s_h, s_w, d_h, d_w, pads, _, _ = _params(strides, dilation, (0, 0, 0, 0), kh, kw)
    if (kh, kw) != (3, 3):
        raise KilnError(f"{what}: Winograd F(m x m, 3 x 3) needs a 3x3 kernel, got {kh}x{kw}")
    if (s_h, s_w) != (1, 1):
        raise KilnError(f"{what}: Winograd needs stride 1, got strides ({s_h}, {s_w})")
    if (d_h, d_w) != (1, 1):
        raise KilnError(f"{what}: Winograd needs dilation 1, got dilation ({d_h}, {d_w})")


@autotvm.register_topi_compute("conv2d_NCHWc_winograd.x86")
def conv2d_NCHWc_winograd(cfg, data, kernel, strides, padding, dilation, layout, out_layout,
                          out_dtype="float32"):
    """3x3 stride-1 conv by Winograd F(m x m, 3 x 3): NCHW data with an OIHW kernel (packed and transformed
    inside, or placeholders of the packed shapes while tuning), or NCHW{ic_bn}c data with the transformed
    kernel ``U [alpha, alpha, CO/oc_bn, CI, oc_bn]``; the output is NCHW{oc_bn}c."""
    what = "conv2d_NCHWc_winograd.x86"
    out_dtype = out_dtype or data.dtype
    d_shape, k_shape = get_const_tuple(data.shape), get_const_tuple(kernel.shape)
    if len(d_shape) == 4 and len(k_shape) == 4:
        n, ic, h, w = d_shape
        oc, kic, kh, kw = k_shape
        packed = False
    elif len(d_shape) == 5 and len(k_shape) == 5:
        n, icc, h, w, ic_bn = d_shape
        alpha, alpha2, occ, kic, oc_bn = k_shape
        if alpha != alpha2 or alpha not in (4, 6):
            raise KilnError(f"{what}: the transformed kernel must be [alpha, alpha, CO/oc_bn, CI, oc_bn] with "
                            f"alpha 4 or 6 (F(2x2) / F(4x4)), got shape {k_shape}")
        ic, oc, kh, kw = icc * ic_bn, occ * oc_bn, 3, 3
        packed = True
    else:
        raise KilnError(f"{what}: expects NCHW data with an OIHW kernel, or NCHW{{x}}c data with a transformed "
                        f"[alpha, alpha, CO/oc_bn, CI, oc_bn] kernel; got shapes {d_shape} and {k_shape}")
    if kic != ic:
        raise KilnError(f"{what}: data has {ic} input channels but the kernel {kic} (shapes {d_shape}, {k_shape})")
    _check_conv(strides, dilation, kh, kw, what)
    _, _, _, _, (pt, pl, pb, pr), _, _ = _params(strides, dilation, padding, kh, kw)
    oh = _out_size(h, pt + pb, 3, 1, what)
    ow = _out_size(w, pl + pr, 3, 1, what)
    if packed:
        _define_space(cfg, ic, oc, oh, ow, ic_bn, oc_bn, n)
        m = alpha - 2
        data_vec, U = data, kernel
    else:
        _define_space(cfg, ic, oc, oh, ow, n=n)
        ic_bn, oc_bn = cfg["tile_ic"].size[-1], cfg["tile_oc"].size[-1]
        if ic % ic_bn or oc % oc_bn:
            raise KilnError(f"{what}: config blocks ic_bn={ic_bn}, oc_bn={oc_bn} do not divide the {ic} input / "
                            f"{oc} output channels")
        m = int(cfg["tile_size"].val)
        alpha = m + 2
        if autotvm.GLOBAL_SCOPE.in_tuning:
            # measured alone while tuning: data and transformed kernel arrive as the network feeds them
            data_vec = te.placeholder((n, ic // ic_bn, h, w, ic_bn), dtype=data.dtype, name="data_vec")
            U = te.placeholder((alpha, alpha, oc // oc_bn, ic, oc_bn), dtype=kernel.dtype, name="winograd_U")
        else:
            data_vec = pack_data(data, ic_bn)
            U = winograd_weight_transform(kernel, m, oc_bn)
    A, B, _ = winograd_matrices(m)
    # tile rows / columns; for a symbolic size as (oh + m - 1) // m, a form whose sign bound inference knows
    # (the output stage's tile index stays one point per output tile)
    nh, nw = (oh + m - 1) // m, (ow + m - 1) // m
    ntiles = n * nh * nw
    # a symbolic tile count (a VM kernel): the transformed input and the GEMM run over whole blocks of
    # tile_p tiles (the extra tiles transform zeros), so the GEMM's register block needs no guard in its
    # reduction; the output stage reads the real tiles only
    gemm_tiles = ntiles
    if not is_static(ntiles):
        tp = int(cfg["tile_p"].val)
        gemm_tiles = (ntiles + tp - 1) // tp * tp
    # pad so that the last tile row / column reads alpha inputs in bounds
    pad_b, pad_r = nh * m + 2 - h - pt, nw * m + 2 - w - pl
    if is_static(pad_b) and is_static(pad_r):
        data_pad = pad(data_vec, [0, 0, pt, pl, 0], [0, 0, pad_b, pad_r, 0], name="data_pad") \
            if (pt or pl or pad_b or pad_r) else data_vec
    else:  # symbolic H/W (a VM kernel): the bottom / right padding is a run-time amount
        data_pad = _pad_tiles(data_vec, pt, pl, nh * m + 2, nw * m + 2)
    dt = out_dtype

    def d(p, c, r1, r2):
        b, t = p // (nh * nw), p % (nh * nw)
        v = T.cast(data_pad[b, c // ic_bn, (t // nw) * m + r1, (t % nw) * m + r2, c % ic_bn], dt)
        if gemm_tiles is ntiles:
            return v
        return T.if_then_else(p < ntiles, v, T.const(0, dt))

    # input transform: rows (B^T d) then columns ((B^T d) B)
    vt = te.compute((alpha, alpha, gemm_tiles, ic),
                    lambda e, r2, p, c: by_column(B, e, lambda r1: d(p, c, r1, r2), dt),
                    name="winograd_input_rows", tag="winograd_input_rows")
    V = te.compute((alpha, alpha, gemm_tiles, ic),
                   lambda e, nu, p, c: by_column(B, nu, lambda r2: vt[e, r2, p, c], dt),
                   name="winograd_V", tag="winograd_input_transform")
    rc = te.reduce_axis((0, ic), name="c")
    M = te.compute((alpha, alpha, oc // oc_bn, gemm_tiles, oc_bn),
                   lambda e, nu, ko, p, ob: te.sum(T.cast(U[e, nu, ko, rc, ob], dt) * V[e, nu, p, rc], axis=rc),
                   name="winograd_gemm", tag="winograd_gemm")
    # output transform: A^T M per column of the tile, then (A^T M) A per pixel
    mt = te.compute((alpha, m, oc // oc_bn, ntiles, oc_bn),
                    lambda r1, j, ko, p, ob: by_column(A, j, lambda r2: M[r1, r2, ko, p, ob], dt),
                    name="winograd_output_rows", tag="winograd_output_rows")
    cfg.add_flop(2 * n * oc * oh * ow * ic * 9)

    def out(b, ko, y, x, ob):
        p = b * (nh * nw) + (y // m) * nw + x // m
        return by_column(A, y % m, lambda r1: mt[r1, x % m, ko, p, ob], dt)
    return te.compute((n, oc // oc_bn, oh, ow, oc_bn), out, name="conv2d_NCHWc_winograd",
                      tag="conv2d_NCHWc_winograd")


def _pad_tiles(data_vec, pt: int, pl: int, hp, wp):
    """NCHW{x}c data zero-padded to ``hp x wp`` (``pt`` rows / ``pl`` columns before, the rest after), for
    run-time sizes: the amount after is whatever makes the last tile row / column whole."""
    n, cc, h, w, bn = get_const_tuple(data_vec.shape)
    from ...arith import Analyzer
    hp, wp = Analyzer().simplify(hp), Analyzer().simplify(wp)
    zero = T.const(0, data_vec.dtype)

    def f(b, c, y, x, i):
        inside = T.all(y >= pt, y < h + pt, x >= pl, x < w + pl)
        return T.if_then_else(inside, data_vec[b, c, y - pt, x - pl, i], zero)
    return te.compute((n, cc, hp, wp, bn), f, name="data_pad", tag="injective,pad")


def conv2d_nchw_winograd(data, kernel, strides, padding, dilation, out_dtype="float32"):
    """NCHW conv2d through the Winograd NCHWc kernel (packs and transforms inside, unpacks the result)."""
    return unpack_nchwc(conv2d_NCHWc_winograd(data, kernel, strides, padding, dilation, "NCHW", "NCHW",
                                              out_dtype))


def _stage(tensor_op, tag: str):
    for t in tensor_op.input_tensors:
        if t.op.tag == tag:
            return t
    raise KilnError(f"conv2d_NCHWc_winograd schedule: no {tag} stage under {tensor_op.name}")


def _schedule_winograd(s, cfg, C, O):
    """Schedule the stages of the Winograd conv ``C`` whose (fused) output is ``O`` (5-D, or the 4-D unpack)."""
    n, koc, oh, ow, oc_bn = get_const_tuple(C.shape)
    mt = _stage(C.op, "winograd_output_rows")
    M = _stage(mt.op, "winograd_gemm")
    U, V = M.op.input_tensors
    if U.op.tag == "winograd_input_transform":
        U, V = V, U
    vt = _stage(V.op, "winograd_input_rows")
    alpha = get_const_tuple(M.shape)[0]
    m = alpha - 2
    ic = get_const_tuple(V.shape)[-1]
    ntiles = get_const_tuple(V.shape)[2]
    parallel = worth_parallel(2 * size_hint(n) * koc * oc_bn * size_hint(oh) * size_hint(ow) * ic * 9)
    lanes = simd_width()

    # producers: data padding (the packing inlined into it), kernel transform when computed per call
    data_pad = vt.op.input_tensors[0]
    if data_pad.op.name == "data_pad":
        inner = data_pad.op.input_tensors[0].op
        if hasattr(inner, "axis") and inner.input_tensors and "pack_nchwc" in inner.tag:
            s[inner].compute_inline()
        b, cc, y, x, cb = s[data_pad].op.axis
        fused = s[data_pad].fuse(b, cc, y)
        if parallel:
            s[data_pad].parallel(fused)
        s[data_pad].vectorize(cb)
    if U.op.tag == "winograd_weight_transform":
        _schedule_weight_transform(s, U, parallel)

    # input transform: per (tile, channel block) both passes in registers, channel block vectorized
    ic_bn = get_const_tuple(data_pad.shape)[-1]
    e, nu, p, c = s[V].op.axis
    co, ci = s[V].split(c, factor=ic_bn)
    s[V].reorder(p, co, e, nu, ci)
    if parallel:
        s[V].parallel(p)
    s[V].unroll(e)
    s[V].unroll(nu)
    s[V].vectorize(ci)
    s[vt].compute_at(s[V], co)
    e, r2, _, c = s[vt].op.axis
    s[vt].unroll(e)
    s[vt].unroll(r2)
    s[vt].vectorize(c)

    # batched GEMM: a tile_p x oc_bn accumulator block per (e, nu, ko, p block)
    tile_p = int(_knob(cfg, "tile_p", autotvm.task.OtherOptionEntity(scaled_registers(12) // max(1, -(-oc_bn // lanes)))).val)
    # a symbolic tile count (a VM kernel's unknown batch: tiles over batch x tile rows x tile columns) is at
    # least one image's tiles; the GEMM's last tile block is guarded
    tile_p = max(1, min(tile_p, ntiles if is_static(ntiles) else tile_p))
    MC = s.cache_write(M, "global")
    e, nu, ko, p, ob = s[M].op.axis
    po, pi = s[M].split(p, factor=tile_p)
    s[M].reorder(e, nu, ko, po, pi, ob)
    en = s[M].fuse(e, nu)
    if parallel:
        s[M].parallel(en)
    s[M].unroll(pi)
    s[M].vectorize(ob)
    s[MC].compute_at(s[M], po)
    _, _, _, cp, cob = s[MC].op.axis
    (crc,) = s[MC].op.reduce_axis
    cpo, cpi = s[MC].split(cp, factor=tile_p)
    s[MC].reorder(cpo, crc, cpi, cob)
    s[MC].unroll(cpi)
    s[MC].vectorize(cob)
    # each (e, nu) task reads its slice of the transformed weights, from memory in a network whose weights exceed
    # the cache: it requests the next task's slice between its reduction steps (topi/x86/utils.prefetch_weights)
    prefetch_weights(s, M, U, en, 1, crc)

    # output transform: per output tile, A^T M in registers then the m x m pixels (with the fused epilogue)
    if C.op is not O:
        s[C].compute_inline()
    b, oco, y, x, ocb = nchwc_output_axes(s, O, oc_bn, "conv2d_NCHWc_winograd")
    yo, yi = s[O].split(y, factor=m)
    xo, xi = s[O].split(x, factor=m)
    s[O].reorder(b, oco, yo, xo, yi, xi, ocb)
    fused = s[O].fuse(b, oco, yo)
    if parallel:
        s[O].parallel(fused)
    s[O].unroll(yi)
    s[O].unroll(xi)
    s[O].vectorize(ocb)
    r1, j, mko, mp, ob = s[mt].op.axis
    if is_static(oh) and is_static(ow):
        s[mt].compute_at(s[O], xo)
    else:
        # unknown H/W (a VM kernel): bound inference cannot narrow the output tile's index (batch x tile
        # row x tile column, run-time strides) to one tile, so A^T M is a stage of its own over all tiles
        # (one more pass over an M-sized tensor) instead of a region per output tile
        s[mt].reorder(mko, mp, r1, j, ob)
        fused_mt = s[mt].fuse(mko, mp)
        if parallel:
            s[mt].parallel(fused_mt)
    s[mt].unroll(r1)
    s[mt].unroll(j)
    s[mt].vectorize(ob)


@autotvm.register_topi_schedule("conv2d_NCHWc_winograd.x86")
def schedule_conv2d_NCHWc_winograd(cfg, outs):  # noqa: N802
    """Schedule of conv2d_NCHWc_winograd (5-D output, fused epilogues) or conv2d_nchw_winograd (4-D)."""
    return schedule_anchored(outs, "conv2d_NCHWc_winograd", lambda s, C, O: _schedule_winograd(s, cfg, C, O))


schedule_conv2d_nchw_winograd = schedule_conv2d_NCHWc_winograd
