"""conv2d in NCHW[x]c on x86 (TVM's ``conv2d_NCHWc.x86``; depthwise is in ``depthwise_conv2d.py``).

Data ``[N, C/ic_bn, H, W, ic_bn]``, kernel ``[O/oc_bn, C/ic_bn, KH, KW, ic_bn, oc_bn]`` (``OIHW{i}i{o}o``), output
``[N, O/oc_bn, OH, OW, oc_bn]``: the innermost ``oc_bn`` output channels are one SIMD vector, and a row of
``reg_n`` output pixels of it stays in registers while the reduction over input channels and the kernel window
runs. Given plain NCHW tensors (no AlterOpLayout), the computes pack data and kernel inside the kernel and
``conv2d_nchw`` unpacks the result; with AlterOpLayout the graph carries NCHW{x}c between convolutions and the
kernel is packed once at compile time (FoldConstant).

Knobs of the regular conv (``conv2d_NCHWc.x86``): ``tile_ic`` / ``tile_oc`` (the channel blocks: only the rule
of :func:`channel_block`, so a tuned layer reads and writes the layouts its neighbours use and the graph needs
no layout transform the tuner could not see), ``tile_oh`` x ``tile_ow`` (the 2-D pixel tile held in registers
with its ``oc_bn`` lanes: 12 to 14 accumulator vectors where the shape allows, at most :func:`tile_budget`;
smaller tiles measured 25-30% slower), ``tile_occ`` (1 or 2 output-channel chunks in the register tile: with two, each broadcast input value
meets twice the weight vectors, in a pixel tile half as wide; it pays where the input has few
channels, as in the 3-channel stem, measured 58 -> 75 GFLOP/s on one thread), ``order`` (0: output-channel
chunks outside the rows, the weights of a chunk stay in cache; 1: rows outside the chunks, the input rows stay
in cache while all weights stream) and ``unroll_kw``. While tuning (``autotvm.GLOBAL_SCOPE.in_tuning``) the
template takes data and kernel already packed, as in the network, so a measurement is not that of packing the
weights on every call. The fallback's tile leaves registers for its weight vectors and the broadcast
(:func:`tile_budget`: 12 accumulators of AVX2's 16 with two vectors a pixel, 14 with one, 28 of AVX-512's 32),
its row the fewest tiles that budget allows, evened out (:func:`fallback_row`: AVX2 56 -> 6 + a tail, 7 -> 4 + 3;
AVX-512 56 -> 28, 31 -> 16 + 15), 2 rows when one row leaves room, two chunks where that tile is still under the
budget's fewest (:func:`fallback_chunks`: AVX-512's 7-wide rows, 7 -> 14 accumulators; one thread, CPU time, AMD
Zen 5, old -> new fallback: resnet 3x3 512@7 1.22x, 3x3/2 256->512 to 7x7 1.24x, the 1x1 convs at 7x7
(512->2048, 2048->512, 960->160, 160->960, 320->1280) 1.19-1.25x, a 3x3 output 1.58x; AVX2 keeps one chunk on
these and gains 1.21x on a 3-wide row), ``order`` from a traffic estimate (:func:`fallback_order`) and unrolls the
kernel row for strided or single-tile-row layers. AVX2's former 7-pixel rows of two vectors (14 accumulators, 17
registers with the weights and the broadcast) kept an accumulator on the stack: resnet50's 1x1 and strided convs
ran at 64-75 GFLOP/s, with 6-pixel rows 85-128 (``-mcpu=core-avx2`` code on AMD Zen 5, one thread; resnet50 83 ->
58 ms). A layer whose input block is narrower than a vector (the 3-channel stem) keeps the kernel row a loop.
"""
from __future__ import annotations

from itertools import product

from ... import autotvm, te
from ...error import KilnError
from ...tir import op as T
from ..nn.conv2d import _out_size, _params
from ..nn.pad import pad
from ..tag import is_broadcast, is_injective
from ..utils import get_const_tuple
from .utils import (divisor_at_most, is_static, nchwc_output_axes, prefetch_weights, reduction_flops,
                    scaled_registers, schedule_anchored, simd_width, size_hint, vector_registers, worth_parallel)

def _parse_blocked(layout: str, letter: str) -> int:
    """The block factor of sub-axis ``letter`` in a layout such as ``NCHW8c`` (0 when absent)."""
    import re
    m = re.search(r"(\d+)" + letter, layout)
    return int(m.group(1)) if m else 0


def channel_block(c: int, lanes: int | None = None) -> int:
    """The fallback NCHW[x]c block of ``c`` channels: two SIMD vectors when they divide ``c`` (and the
    vectors are AVX2-sized or smaller), else one, else (AVX-512) one and a half vectors, 24 channels, when
    they divide ``c``, else the largest power-of-two divisor of at least 4 lanes (an SSE/AVX2 register), else
    the largest divisor not above one vector (3 for an RGB input). The block is the output kernels' vector,
    so it must be made of machine vectors: a divisor such as 12 on AVX-512 is none, and mobilenet_v2's two
    24-channel 1x1 convolutions ran 28x slower with it than with 8 (Sapphire Rapids, 14.8 of 21 ms). 24 is a
    zmm and a ymm per pixel (PromoteRegisters keeps both pieces in registers): 12 lanes per FMA where a block
    of 8 has 8, so the 1x1 convs writing 24 channels run 1.37-1.4x faster (one thread, AMD Zen 5, mobilenet_v2's
    144->24 and 96->24 at 56x56: 124 -> 170 GFLOP/s; the 24->144 conv reading the block is even, 232 vs 235).
    The rule depends on ``c`` alone, so a producer's output block equals its consumer's input block and the
    graph needs no layout transform between convolutions."""
    lanes = lanes or simd_width()
    if lanes < 16 and c % (2 * lanes) == 0:
        return 2 * lanes
    if c % lanes == 0:
        return lanes
    if lanes >= 16 and c % (lanes + lanes // 2) == 0:
        return lanes + lanes // 2
    pow2 = min(c & -c, lanes)
    if pow2 >= 4:
        return pow2
    return divisor_at_most(c, lanes)


def row_tile(ow: int, vecs_per_pixel: int, max_acc: int | None = None) -> int:
    """A register row of the config space (:func:`_ow_candidates`; the fallback takes :func:`fallback_row`): the
    most output pixels (a divisor of ``ow``) whose ``vecs_per_pixel`` accumulators fit in ``max_acc`` vector
    registers (default :func:`register_budget`: 14 of AVX2's 16, 28 of AVX-512's 32).
    When ``ow`` has only small divisors, a non-dividing row is taken (the tail is peeled)."""
    max_acc = max_acc or register_budget()[0]
    limit = max(1, max_acc // max(1, vecs_per_pixel))
    best = divisor_at_most(ow, limit)
    if ow > limit and best * 2 <= limit:
        return limit
    return best


# Register budget of a pixel tile on AVX2: 16 registers less the weight vector(s) and a broadcast
# (:func:`register_budget` scales it to the target's register file).
MAX_ACC = 14
MIN_ACC = 12


def register_budget() -> tuple:
    """``(most, fewest)`` accumulator vectors of a pixel tile on the current target: (14, 12) with AVX2's
    16 vector registers, (28, 24) with AVX-512's 32."""
    return scaled_registers(MAX_ACC), scaled_registers(MIN_ACC)
def tile_budget(max_acc: int, vecs: int) -> int:
    """Accumulators of a fallback pixel tile whose output-channel block is ``vecs`` vectors: at most ``max_acc``
    (:func:`register_budget`), and few enough that the block's weight vectors and the broadcast input value
    are registers too. gcc does not stream a weight vector from memory as an FMA operand to make room: with
    AVX2's 16 registers a 7-pixel row of a 16-channel block (14 accumulators + 2 weights + 1 broadcast) kept
    one accumulator on the stack, a store-to-load chain through every reduction step (resnet50's 1x1 and
    strided convs at 64-75 GFLOP/s; 6-pixel rows of 12, 115-128; one thread, ``-mcpu=core-avx2`` code on AMD
    Zen 5). So 12 of 16 with two vectors a pixel (13 -> 6 pixels), 14 with one; AVX-512's 32 registers keep 28.
    The 3-channel stem (a reduction step too short to hide anything) measured the same rule (66 -> 96 GFLOP/s
    on one thread, Zen 3)."""
    return max(1, min(max_acc, vector_registers() - vecs - 1))


def fallback_row(ow: int, vecs: int, budget: int) -> int:
    """The fallback register row: the fewest tiles of at most ``budget // vecs`` pixels that cover ``ow``, the
    pixels shared evenly between them (the split's last tile takes the rest, peeled): 56 -> 6 (9 x 6 + 2),
    28 -> 6, 14 -> 5, 7 -> 4 under AVX2's 6-pixel limit; 56 -> 28 and 7 -> 7 under AVX-512's 28. A dividing
    row well under the limit, or a nearly empty last tile, leaves accumulator chains too few to hide the FMA
    latency (one thread, AVX2 code, Zen 5: 1x1 convs at 7x7 with rows of 6 + 1 90 GFLOP/s, 4 + 3 97; 56-wide
    rows of 6 126-128, of 4 117-120)."""
    limit = max(1, budget // max(1, vecs))
    if ow <= limit:
        return ow
    tiles = -(-ow // limit)
    return -(-ow // tiles)


# Per-core cache a reused operand should fit in (half of Zen 3 / Skylake's L2, the rest for the streams).
CACHE_BYTES = 256 * 1024
LLC_SHARE_BYTES = 4 * 1024 * 1024


def _block_candidates(c: int, lanes: int) -> list:
    """Channel-block choices of ``c`` channels: the :func:`channel_block` rule only. A tuned block other than
    the rule's changes the graph's layout (a layout_transform before the next conv and its residual add)
    that a kernel measured alone does not see: on resnet-18, records choosing 8-channel output blocks made
    the tuned network 5-7% slower than the untuned one although each kernel measured faster."""
    return [[-1, channel_block(c, lanes)]]


def _ow_candidates(ow: int, max_acc: int = MAX_ACC) -> list:
    """Register-row lengths to try: the divisors of ``ow`` up to ``max_acc``, plus the non-dividing
    rows (for widths such as 13 whose divisors are all small) and the fallback's (:func:`fallback_row`)."""
    sizes = {d for d in range(1, min(ow, max_acc) + 1) if ow % d == 0}
    sizes |= {row_tile(ow, v, max_acc) for v in (1, 2, 4)}
    sizes |= {fallback_row(ow, v, tile_budget(max_acc, v)) for v in (1, 2)}
    return [[-1, t] for t in sorted(sizes)]


def _oh_candidates(oh: int) -> list:
    return [[-1, t] for t in (1, 2, 3, 4) if t <= oh and oh % t == 0]


def fallback_order(ic: int, oc: int, ih: int, iw: int, oh: int, kh: int, kw: int, ic_bn: int, oc_bn: int,
                   stride: int = 1) -> int:
    """``order`` of the fallback config. Order 0 re-reads the whole input once per output-channel chunk
    (cheap while the input stays in cache); order 1 re-reads all the weights once per output row (cheap while
    they stay in cache). With many input-channel chunks the order-0 input re-read is a stream per chunk that
    the prefetchers follow badly, so order 1 is taken when its weight traffic is not much above that, and the
    weights fit a core's share of the last-level cache (8 MB of them streamed per row measured 12% slower).
    A strided conv (``stride`` > 1, full input blocks) takes order 1 whenever its weights fit that share: an
    output row reads only ``kh`` input rows, which stay in cache while the weights pass, where order 0
    streams the whole input, 4x the output's pixels, per chunk (one thread, Zen 3: 3x3/2 128@56 68 -> 72
    GFLOP/s, 256@28 74 -> 78, 64->128@56 73 -> 80, 1x1/2 64->128@56 66 -> 78; 9 MB of weights (512@14)
    even, so order 0 stays there)."""
    data_bytes = 4 * ic * ih * iw
    weight_bytes = 4 * ic * oc * kh * kw
    if weight_bytes > LLC_SHARE_BYTES:
        return 0
    if stride > 1:
        return 1
    if ic // max(1, ic_bn) < 16:
        return 0
    oy = (oc // max(1, oc_bn)) * data_bytes if data_bytes > CACHE_BYTES else 0
    yo = oh * weight_bytes if weight_bytes > CACHE_BYTES else 0
    return 1 if yo <= 1.5 * oy else 0


def fallback_chunks(acc: int, min_acc: int, max_acc: int, oc_chunks: int, narrow: bool = False) -> int:
    """``tile_occ`` of the fallback: 2 output-channel chunks when the pixel tile of one chunk (``acc``
    accumulators) is under the register budget's fewest and two of it still fit its most, and the chunks
    pair up (the knob's condition), else 1. It is a narrow output row's case: AVX-512's 7-wide rows (one
    odd row of 7 vectors, 7 of 32 registers) take 14 (one thread, AMD Zen 5: resnet 512@7 3x3 1.3x, the 7x7 1x1
    convs of resnet50 / mobilenet_v2 1.1-1.6x). A narrow input block (the stem) or a
    symbolic width keeps one chunk."""
    if narrow or oc_chunks % 2 or acc >= min_acc or 2 * acc > max_acc:
        return 1
    return 2


def _define_nchwc_space(cfg, ic: int, oc: int, ih: int, iw: int, oh: int, ow: int, kh: int, kw: int,
                        stride_w: int = 1, ic_bn=None, oc_bn=None) -> None:
    """The ``conv2d_NCHWc.x86`` config space and its fallback (see the module doc). Symbolic spatial sizes (a VM
    kernel over unknown H/W) are taken at their size hint; the fallback row is then the register budget's
    widest (the run-time width is split into full tiles and a guarded last one)."""
    sym_w = not is_static(ow)
    ih, iw, oh, ow = size_hint(ih), size_hint(iw), size_hint(oh), size_hint(ow)
    lanes = simd_width()
    max_acc, min_acc = register_budget()
    cfg.define_split("tile_ic", ic, num_outputs=2, policy="candidate", candidate=_block_candidates(ic, lanes))
    cfg.define_split("tile_oc", oc, num_outputs=2, policy="candidate", candidate=_block_candidates(oc, lanes))
    cfg.define_split("tile_oh", oh, num_outputs=2, policy="candidate", candidate=_oh_candidates(oh))
    ow_cands = _ow_candidates(ow, max_acc)
    cfg.define_split("tile_ow", ow, num_outputs=2, policy="candidate", candidate=ow_cands)
    cfg.define_knob("order", [0, 1])
    cfg.define_knob("unroll_kw", [False, True] if kw > 1 else [False])
    cfg.define_knob("tile_occ", [1, 2] if (oc // channel_block(oc, lanes)) % 2 == 0 else [1])

    # the fallback's budget per chunk of 1..4 vectors (its weight vectors and the broadcast in registers too:
    # AVX2's 14 accumulators of two-vector blocks kept one on the stack), taken here under the target
    budgets = {v: tile_budget(max_acc, v) for v in range(1, 5)}

    def fits(e) -> bool:
        chunk_vecs = -(-e["tile_oc"].size[-1] // lanes)
        vecs = chunk_vecs * e["tile_occ"].val
        budget = budgets.get(chunk_vecs, max_acc)
        acc = vecs * e["tile_oh"].size[-1] * e["tile_ow"].size[-1]
        most = max(vecs * a * b for (_, a), (_, b) in product(_oh_candidates(oh), ow_cands)
                   if vecs * a * b <= budget)  # a 1x1 tile always fits (vecs <= 4)
        # tiles well under the register budget measured 25-30% slower: not worth a trial
        return min(min_acc, most) <= acc <= budget
    cfg.multi_filter(fits)
    if cfg.is_fallback:
        ic_bn = ic_bn or channel_block(ic, lanes)
        oc_bn = oc_bn or channel_block(oc, lanes)
        vecs = -(-oc_bn // lanes)
        narrow = ic_bn < lanes
        budget = tile_budget(max_acc, vecs)
        # the most pixels the budget allows, in evenly filled tiles, a peeled tail included (stem: 6 pixels
        # and a tail of 4 per 112-wide row, 96 GFLOP/s; the dividing 4, 64)
        row = max(1, budget // vecs) if sym_w else fallback_row(ow, vecs, budget)
        rows = 2 if vecs * row * 2 <= budget and oh % 2 == 0 and row == ow and not sym_w else 1
        cfg["tile_ic"] = autotvm.task.SplitEntity([-1, ic_bn])
        cfg["tile_oc"] = autotvm.task.SplitEntity([-1, oc_bn])
        cfg["tile_oh"] = autotvm.task.SplitEntity([-1, rows])
        cfg["tile_ow"] = autotvm.task.SplitEntity([-1, row])
        # the stride rule of fallback_order is for full blocks: the narrow stem measured even either way
        order = fallback_order(ic, oc, ih, iw, oh, kh, kw, ic_bn, oc_bn, 1 if narrow else stride_w)
        cfg["order"] = autotvm.task.OtherOptionEntity(order)
        # unrolling the kernel row folded the strided input offsets; on stride-1 layers with full blocks it
        # was even. A narrow block (the 3-channel stem) is the exception: there the unrolled row let gcc hoist
        # the few broadcasts of each kernel tap across taps and spill (stem 7x7/2: 66 -> 96 GFLOP/s without it)
        cfg["unroll_kw"] = autotvm.task.OtherOptionEntity(kw > 1 and not narrow and (stride_w > 1 or ow <= row))
        cfg["tile_occ"] = autotvm.task.OtherOptionEntity(
            fallback_chunks(vecs * rows * row, min_acc, budget, oc // oc_bn, narrow or sym_w))


def pack_data(data, ic_bn: int, name="data_vec"):
    n, c, h, w = get_const_tuple(data.shape)
    return te.compute((n, c // ic_bn, h, w, ic_bn), lambda b, cc, y, x, cb: data[b, cc * ic_bn + cb, y, x],
                      name=name, tag="injective,pack_nchwc")


def unpack_nchwc(out, name="output_unpack"):
    n, oc_chunk, h, w, oc_bn = get_const_tuple(out.shape)
    return te.compute((n, oc_chunk * oc_bn, h, w), lambda b, c, y, x: out[b, c // oc_bn, y, x, c % oc_bn],
                      name=name, tag="injective,unpack_nchwc")


@autotvm.register_topi_compute("conv2d_NCHWc.x86")
def conv2d_NCHWc(cfg, data, kernel, strides, padding, dilation, layout, out_layout, out_dtype="float32"):
    """conv2d of NCHW{ic_bn}c data and an OIHW{ic_bn}i{oc_bn}o kernel -> NCHW{oc_bn}c (plain NCHW / OIHW inputs
    are packed inside with the cfg's channel blocks)."""
    out_dtype = out_dtype or data.dtype
    d_shape, k_shape = get_const_tuple(data.shape), get_const_tuple(kernel.shape)
    if len(d_shape) == 4:
        n, ic, h, w = d_shape
        oc, kic, kh, kw = k_shape
        packed = False
    elif len(d_shape) == 5 and len(k_shape) == 6:
        n, icc, h, w, ic_bn = d_shape
        occ, kicc, kh, kw, kib, oc_bn = k_shape
        ic, oc, kic = icc * ic_bn, occ * oc_bn, kicc * kib
        packed = True
    else:
        raise KilnError(f"conv2d_NCHWc.x86: expects NCHW{{x}}c data with an OIHW{{i}}i{{o}}o kernel (or NCHW/OIHW), got "
                        f"shapes {d_shape} and {k_shape}")
    if kic != ic:
        raise KilnError(f"conv2d_NCHWc.x86: data has {ic} input channels but the kernel {kic} (shapes {d_shape}, "
                        f"{k_shape})")
    s_h, s_w, d_h, d_w, (pt, pl, pb, pr), dk_h, dk_w = _params(strides, dilation, padding, kh, kw)
    oh = _out_size(h, pt + pb, dk_h, s_h, "conv2d_NCHWc")
    ow = _out_size(w, pl + pr, dk_w, s_w, "conv2d_NCHWc")
    ih, iw = h + pt + pb, w + pl + pr
    if packed:
        _define_nchwc_space(cfg, ic, oc, ih, iw, oh, ow, kh, kw, s_w, ic_bn, oc_bn)
        data_vec, kernel_vec = data, kernel
    else:
        _define_nchwc_space(cfg, ic, oc, ih, iw, oh, ow, kh, kw, s_w)
        ic_bn, oc_bn = cfg["tile_ic"].size[-1], cfg["tile_oc"].size[-1]
        if ic % ic_bn or oc % oc_bn:
            raise KilnError(f"conv2d_NCHWc.x86: config blocks ic_bn={ic_bn}, oc_bn={oc_bn} do not divide the "
                            f"{ic} input / {oc} output channels")
        if autotvm.GLOBAL_SCOPE.in_tuning:
            # measured alone while tuning: take data and kernel already packed, as the network runs it
            # (AlterOpLayout packs the kernel at compile time, the producer writes NCHW{ic_bn}c), so the
            # timing is the conv's and not that of packing a weight tensor per call
            data_vec = te.placeholder((n, ic // ic_bn, h, w, ic_bn), dtype=data.dtype, name="data_vec")
            kernel_vec = te.placeholder((oc // oc_bn, ic // ic_bn, kh, kw, ic_bn, oc_bn), dtype=kernel.dtype,
                                        name="kernel_vec")
        else:
            data_vec = pack_data(data, ic_bn)
            kernel_vec = te.compute((oc // oc_bn, ic // ic_bn, kh, kw, ic_bn, oc_bn),
                                    lambda o, i, y, x, ib, ob: kernel[o * oc_bn + ob, i * ic_bn + ib, y, x],
                                    name="kernel_vec", tag="conv2d_kernel_pack")
    data_pad = data_vec
    if pt or pl or pb or pr:
        data_pad = pad(data_vec, [0, 0, pt, pl, 0], [0, 0, pb, pr, 0], name="data_pad")
    icc = te.reduce_axis((0, ic // ic_bn), name="ic_chunk")
    icb = te.reduce_axis((0, ic_bn), name="ic_block")
    ry = te.reduce_axis((0, kh), name="kh")
    rx = te.reduce_axis((0, kw), name="kw")
    cfg.add_flop(2 * n * oc * oh * ow * ic * kh * kw)
    return te.compute(
        (n, oc // oc_bn, oh, ow, oc_bn),
        lambda b, oco, y, x, ocb: te.sum(
            T.cast(data_pad[b, icc, y * s_h + ry * d_h, x * s_w + rx * d_w, icb], out_dtype)
            * T.cast(kernel_vec[oco, icc, ry, rx, icb, ocb], out_dtype), axis=[icc, ry, rx, icb]),
        name="conv2d_NCHWc", tag="conv2d_NCHWc")


def conv2d_nchw(data, kernel, strides, padding, dilation, out_dtype="float32"):
    """NCHW conv2d through the NCHWc kernel (packs inside, unpacks the result)."""
    return unpack_nchwc(conv2d_NCHWc(data, kernel, strides, padding, dilation, "NCHW", "NCHW", out_dtype))


def depthwise_producer(conv_op):
    """``(DW, D)`` when the conv's data is a depthwise conv ``DW`` fused into the same kernel (FuseOps'
    ``depthwise_pointwise``), ``D`` the tensor the conv reads: ``DW`` itself or the last stage of its elementwise
    epilogue (the stages between are inlined into ``D``); else None."""
    t = conv_op.input_tensors[0]
    d = t
    while hasattr(t.op, "axis"):
        if t.op.tag == "depthwise_conv2d_NCHWc":
            return t, d
        if not is_broadcast(t.op.tag):
            return None
        # the elementwise chain's operand of the depthwise conv's shape (other operands: constants, biases)
        nxt = [u for u in t.op.input_tensors if get_const_tuple(u.shape) == get_const_tuple(t.shape)
               and hasattr(u.op, "axis")]
        if len(nxt) != 1:
            return None
        t = nxt[0]
    return None


def input_transform_producer(conv_op):
    """The conv's data when it is a relay-level layout transform / padding fused into the kernel (FuseOps'
    ``input_transform``: a stem packing its NCHW input), else None. The conv's own padding and packing stages
    (``data_pad``, ``data_vec``) are not it."""
    t = conv_op.input_tensors[0]
    op = t.op
    if not (hasattr(op, "axis") and is_injective(op.tag) and op.name not in ("data_pad", "data_vec")):
        return None
    shape = get_const_tuple(t.shape)
    return t if len(shape) == 5 and shape[1] * shape[4] <= MAX_TRANSFORM_CHANNELS else None


#: the most input channels of a conv that packs its input per row tile (FuseOps' ``input_transform`` rule reads
#: it): an image's 1, 3 or 4, cheap to pack again for the rows where kernel windows overlap
MAX_TRANSFORM_CHANNELS = 4


def _inline_injective_above(s, op) -> None:
    """Inline the injective stages ``op`` reads (transitively) inside the kernel."""
    todo, seen = [t.op for t in op.input_tensors], set()
    while todo:
        cur = todo.pop()
        if cur in seen or not hasattr(cur, "axis"):  # placeholders (a scalar constant is a compute: inlined)
            continue
        seen.add(cur)
        if is_injective(cur.tag):
            s[cur].compute_inline()
            todo.extend(t.op for t in cur.input_tensors)


def _pack_rows_at(s, D, O, axis) -> None:
    """Compute the fused input transform ``D`` (NCHW{x}c) at ``O``'s row-tile loop ``axis``: the rows of the tile
    (with the kernel window's overlap), its stages above inlined, the channel block unrolled (a stem's 3) or
    vectorized."""
    _inline_injective_above(s, D.op)
    s[D].compute_at(s[O], axis)
    axes = list(s[D].op.axis)
    block = get_const_tuple(D.shape)[-1]
    if block & (block - 1) == 0 and block >= 4:
        s[D].vectorize(axes[-1])
    else:
        s[D].unroll(axes[-1])


def _schedule_producers(s, conv_op, parallel: bool = True, skip=None) -> None:
    """Parallelize the data/kernel packing and padding stages of a conv (each is its own loop nest); ``skip``:
    a producer scheduled elsewhere."""
    for t in conv_op.input_tensors:
        op = t.op
        if op is skip or not hasattr(op, "axis") or not op.input_tensors:
            continue
        if op.tag.startswith("injective") and op.name == "data_pad":
            # the packing stage and any transform fused into the kernel above it: one parallel padded copy
            _inline_injective_above(s, op)
        axes = list(s[op].op.axis)
        if len(axes) >= 3:
            fused = s[op].fuse(axes[0], axes[1], axes[2])
            if parallel:
                s[op].parallel(fused)
        block = get_const_tuple(op.output(0).shape)[-1] if len(axes) == 5 else 0
        if block and block <= 16 and block & (block - 1) == 0:
            s[op].vectorize(axes[-1])
        elif block and block <= 16:
            # a block that is no vector width (the stem's 3 channels): three scalar copies, not 3-lane vectors
            # padded to 4 (the stem's padded copy: 49 -> 27 us for 224x224 on one Zen 5 core)
            s[op].unroll(axes[-1])


def _knob(cfg, name: str, default):
    """A knob's entity, or ``default`` for configs from before the knob existed (old logs)."""
    try:
        return cfg[name]
    except (KeyError, TypeError):
        return default


def _schedule_conv(s, cfg, C, O):
    """The register-tiled schedule of a regular NCHWc conv ``C`` whose fused output is ``O`` (5-D, or 4-D
    unpacked).

    Per (batch, oc chunk, row tile, column tile) the ``tile_oh x tile_ow x oc_bn`` accumulator block is a
    cache_write stage whose loops are all unrolled except the reduction, so the C code generator holds it in
    vector registers: the reduction runs ic chunk, kh, kw, ic block (kept a loop: unrolling it made gcc hoist
    the scalar loads and spill), and each step broadcasts one input value per pixel against the ``oc_bn``
    weights. ``order`` puts the oc chunks outside (0) or inside (1) the row tiles; the parallel loop is the
    fused (batch, chunk, row tile) nest either way. The write-back of the block (with the fused epilogue) is
    unrolled too."""
    oc_bn = get_const_tuple(C.shape)[-1]
    _, _, oh, ow, _ = get_const_tuple(C.shape)
    ow_t = int(cfg["tile_ow"].size[-1])
    if is_static(ow):
        ow_t = min(ow_t, ow)
    oh_t = int(_knob(cfg, "tile_oh", autotvm.task.SplitEntity([-1, 1])).size[-1])
    if oh_t < 1 or not is_static(oh) or oh % oh_t:  # a symbolic height: one row a tile (no guarded rows)
        oh_t = 1
    order = int(_knob(cfg, "order", autotvm.task.OtherOptionEntity(0)).val)
    unroll_kw = bool(_knob(cfg, "unroll_kw", autotvm.task.OtherOptionEntity(False)).val)
    occ = int(_knob(cfg, "tile_occ", autotvm.task.OtherOptionEntity(1)).val)
    if occ < 1 or get_const_tuple(C.shape)[1] % occ:
        occ = 1
    parallel = worth_parallel(reduction_flops(C))
    dw = depthwise_producer(C.op)
    packer = None if dw else input_transform_producer(C.op)
    rows_producer = dw[1] if dw else packer
    _schedule_producers(s, C.op, parallel=parallel, skip=rows_producer.op if rows_producer is not None else None)
    CC = s.cache_write(C, "global") if C.op is O else C
    b, oco, y, x, ocb = nchwc_output_axes(s, O, oc_bn, "conv2d_NCHWc")
    yo, yi = s[O].split(y, factor=oh_t)
    xo, xi = s[O].split(x, factor=ow_t)
    ooo, ooi = s[O].split(oco, factor=occ)
    if rows_producer is not None:
        # a producer fused into the kernel (FuseOps' phase 3): parallel over row tiles only; each computes the
        # producer's rows it reads (all channels) first, then every output chunk reads them from the cache
        s[O].reorder(b, yo, ooo, xo, ooi, yi, xi, ocb)
        par = s[O].fuse(b, yo)
        if dw:
            from .depthwise_conv2d import schedule_dw_at  # depthwise_conv2d imports this module
            schedule_dw_at(s, dw[0], dw[1], O, par)
        else:
            _pack_rows_at(s, packer, O, par)
    elif order == 1:
        s[O].reorder(b, yo, ooo, xo, ooi, yi, xi, ocb)
        par = s[O].fuse(b, yo, ooo)
    else:
        s[O].reorder(b, ooo, yo, xo, ooi, yi, xi, ocb)
        par = s[O].fuse(b, ooo, yo)
    if parallel:
        s[O].parallel(par)
    s[O].unroll(ooi)
    s[O].unroll(yi)
    s[O].unroll(xi)
    s[O].vectorize(ocb)
    s[CC].compute_at(s[O], xo)
    _, coc, cy, cx, cocb = s[CC].op.axis
    icc, ry, rx, icb = s[CC].op.reduce_axis
    cooo, cooi = s[CC].split(coc, factor=occ)
    cyo, cyi = s[CC].split(cy, factor=oh_t)
    cxo, cxi = s[CC].split(cx, factor=ow_t)
    s[CC].reorder(cooo, cyo, cxo, icc, ry, rx, icb, cooi, cyi, cxi, cocb)
    if rows_producer is None:
        # the task after this one reads the next output-channel chunk's weights: with order 0 the chunk's row tiles
        # run in a row (the first reads the weights from memory in a network whose weights exceed the cache, the
        # others from L2), and they request the next chunk between them; with order 1 each task moves to the next
        # chunk and requests it while computing this one. A share per input-channel chunk
        # (topi/x86/utils.prefetch_weights; nothing under its size threshold)
        parts = 1 if order == 1 else (oh // oh_t if is_static(oh) else 0)  # tasks from one chunk to the next
        if parts:
            prefetch_weights(s, O, C.op.input_tensors[1], par, parts, icc)  # [0] the data, [1] the kernel
    if unroll_kw:
        s[CC].unroll(rx)
    s[CC].unroll(cooi)
    s[CC].unroll(cyi)
    s[CC].unroll(cxi)
    s[CC].vectorize(cocb)


@autotvm.register_topi_schedule("conv2d_NCHWc.x86")
def schedule_conv2d_NCHWc(cfg, outs):  # noqa: N802
    """Schedule of conv2d_NCHWc (5-D output) or conv2d_nchw (unpacked 4-D output)."""
    return schedule_anchored(outs, "conv2d_NCHWc", lambda s, C, O: _schedule_conv(s, cfg, C, O))


schedule_conv2d_nchw = schedule_conv2d_NCHWc
