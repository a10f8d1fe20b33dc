"""int8 conv2d on x86 (TVM's ``conv2d_NCHWc_int8.x86``): ``uint8`` data x ``int8`` weights -> ``int32``.

Layouts: data ``NCHW{ic_bn}c`` (``[N, C/ic_bn, H, W, ic_bn]``, ``ic_bn`` a multiple of 4), kernel
``OIHW{ic_bn/4}i{oc_bn}o4i`` (``[O/oc_bn, C/ic_bn, KH, KW, ic_bn/4, oc_bn, 4]``): the 4 consecutive input
channels of one output channel are 4 adjacent bytes, so one int32 lane of an accumulator reduces them with
one ``vpdpbusd`` (VNNI) or ``vpmaddubsw`` + ``vpmaddwd`` (AVX2 / AVX-512BW). Output ``NCHW{oc_bn}c`` int32,
``oc_bn`` 16, or 8 where the output channels are a multiple of 8 but not of 16 (mobilenet_v2's 24: the
layer stays blocked instead of packing / unpacking around itself). Plain NCHW / OIHW inputs are packed inside
(channels padded to a multiple of 4 and the output channels to one of ``oc_bn`` with zeros) and the result
unpacked.

The reduction ``(ic chunk, kh, kw, ic block / 4, 4)`` runs around a register tile of ``tile_ow`` output
pixels x ``oc_bn`` channels; the inner ``(oc_bn channels, 4)`` step is tensorized with
:func:`kiln.topi.x86.tensor_intrin.dot_u8s8_intrin` (one intrinsic per SIMD register of int32: 2 on AVX2, 1
on AVX-512). The intrinsic's mode comes from the target: ``vnni`` where it has AVX512-VNNI or AVX-VNNI,
else ``maddubs_exact`` (exact for every int8 weight), or ``maddubs`` (int16 pair sums that saturate;
exact for 7-bit weights) when the PassContext option ``relay.x86.int8_saturating_madd`` is set (the x86 QNN
legalization sets nothing: see docs/qnn.md). In ``maddubs`` mode on 8 lanes the step is one ``__asm__``
statement (``tensor_intrin`` ``asm_step``) and the register tile follows :func:`_asm_tile_px` (see docs/qnn.md).
"""
from __future__ import annotations

from ... import autotvm, te
from ...te import schedule as te_schedule
from ...error import KilnError
from ...tir import op as T
from ..nn.conv2d import _out_size, _params
from ..nn.pad import pad
from ..utils import get_const_tuple
from .conv2d import _schedule_producers
from .tensor_intrin import ASM_STEP, dot_u8s8_intrin
from .utils import divisor_at_most, reduction_flops, schedule_anchored, simd_width, worth_parallel
from ...transform.config import register_pass_config
from ...target.x86 import target_cpu_flags
from ...transform import PassContext

OC_BN = 16
OC_BLOCKS = (16, 8)
SATURATING_OPTION = "relay.x86.int8_saturating_madd"


def _register_option() -> None:
    try:
        register_pass_config(SATURATING_OPTION, bool, default=False,
                             doc="x86 int8 kernels without VNNI: one vpmaddubsw per 4 channels whose int16 pair "
                                 "sums saturate (exact for 7-bit weights, e.g. ONNX Runtime's reduce_range) "
                                 "instead of the exact two-step form")
    except Exception:  # noqa: BLE001 - registered already (module reloaded)
        pass


_register_option()


def int8_mode(target=None) -> str:
    """The dot-product mode of the int8 kernels for ``target`` (current target when None)."""
    flags = target_cpu_flags(target)
    if "avx512vnni" in flags or "avxvnni" in flags:
        return "vnni"
    if bool(PassContext.current().config.get(SATURATING_OPTION, False)):
        return "maddubs"
    return "maddubs_exact"


def int8_lanes(target=None) -> int:
    """int32 lanes of one accumulator register: 16 where the target has AVX-512BW (or VNNI on zmm), else 8."""
    flags = target_cpu_flags(target)
    return 16 if "avx512bw" in flags else 8


def int8_supported(target=None) -> bool:
    """Whether the target has an int8 dot-product instruction (AVX2 at least)."""
    flags = target_cpu_flags(target)
    return "avx2" in flags or "avx512bw" in flags


def ic_block(c: int) -> int:
    """Input-channel block of ``c`` channels (after padding them to a multiple of 4): 16, 8 or 4."""
    c4 = -(-c // 4) * 4
    for bn in (16, 8):
        if c4 % bn == 0:
            return bn
    return 4


def oc_block(oc: int) -> int:
    """Output-channel block of ``oc`` channels: 16, or 8 where that pads fewer channels (24 -> 3 x 8, not
    2 x 16; a multiple of 16 stays 16: two weight vectors per broadcast input use the registers better)."""
    return 8 if -(-oc // 8) * 8 < -(-oc // 16) * 16 else 16


def check_u8s8(task: str, data, kernel, out_dtype: str) -> None:
    """The int8 kernels compute uint8 data x int8 weights -> int32 only: anything else is a clear error."""
    if str(data.dtype) != "uint8" or str(kernel.dtype) != "int8" or out_dtype != "int32":
        raise KilnError(f"{task}: computes uint8 data x int8 kernel -> int32, got {data.dtype} x {kernel.dtype} -> "
                        f"{out_dtype} (int8 data is shifted to uint8 by the x86 QNN legalization)")


def _acc_budget(mode: str, lanes: int, oc_bn: int = OC_BN) -> int:
    """Accumulator registers of the pixel tile: the register file less the weights, the broadcast input and
    the mode's constants / temporaries. VNNI on AVX-512 keeps 5 spare: with 28 accumulators (30 live zmm with
    the weights and the broadcast) gcc 12 spills part of the tile around every vpdpbusd
    (-march=sapphirerapids); 26 gives rows of 14 pixels that stay in registers, one weight load and 14
    broadcast + vpdpbusd pairs per step."""
    regs = 32 if lanes == 16 else 16
    vecs = max(1, oc_bn // lanes)
    spare = {"vnni": 5 if lanes == 16 else 2, "maddubs": 4, "maddubs_exact": 6}[mode]
    return regs - vecs - spare


def asm_step(mode: str, lanes: int) -> bool:
    """Whether the conv's dot-product step is the one-asm-statement form (tensor_intrin.ASM_STEP)."""
    return (mode, lanes) in ASM_STEP


def _asm_tile_px(vecs: int, kh: int, kw: int, ic_bn: int) -> int:
    """Pixels of the register tile with the asm step (16 ymm: the broadcast, the ones vector and one temporary
    besides the accumulators; the weights may stay memory operands). Measured on one Zen 3 core: 7 pixels x 2
    vectors (14 accumulators) is fastest for 3x3-like windows over 8+ input channels (89 vs 77 GMAC/s at 4
    pixels); a 1x1 window or a 4-channel input (the RGB stem) has a short reduction per tile and runs best at 4
    pixels (the 7x7 stem 93 vs 68 GMAC/s); one vector (8-channel blocks): 8 pixels."""
    if vecs == 1:
        return 8
    return 7 if kh * kw > 1 and ic_bn >= 8 else 4


def _define_space(cfg, oh: int, ow: int, mode: str, lanes: int, oc_bn: int = OC_BN, kh: int = 3, kw: int = 3,
                  ic_bn: int = 16) -> None:
    vecs = max(1, oc_bn // lanes)
    if asm_step(mode, lanes) and mode == "maddubs":
        budget = _asm_tile_px(vecs, kh, kw, ic_bn)
    else:
        budget = max(1, _acc_budget(mode, lanes, oc_bn) // vecs)
    cands = sorted({d for d in range(1, min(ow, budget) + 1) if ow % d == 0} | {min(ow, budget)})
    cfg.define_split("tile_ow", ow, num_outputs=2, policy="candidate", candidate=[[-1, t] for t in cands])
    cfg.define_knob("tile_oh", [t for t in (1, 2) if oh % t == 0])
    if cfg.is_fallback:
        row = divisor_at_most(ow, budget)
        if ow > budget and row * 2 <= budget:
            row = budget
        rows = 2 if row * 2 <= budget and oh % 2 == 0 and row == ow else 1
        cfg["tile_ow"] = autotvm.task.SplitEntity([-1, row])
        cfg["tile_oh"] = autotvm.task.OtherOptionEntity(rows)


def pack_int8_data(data, ic_bn: int, name: str = "data_vec"):
    """NCHW -> NCHW{ic_bn}c, channels padded with zeros to a multiple of ``ic_bn``."""
    n, c, h, w = get_const_tuple(data.shape)
    cp = -(-c // ic_bn) * ic_bn
    zero = T.const(0, data.dtype)

    def f(b, cc, y, x, cb):
        ch = cc * ic_bn + cb
        return data[b, ch, y, x] if cp == c else T.if_then_else(ch < c, data[b, T.min(ch, c - 1), y, x], zero)
    return te.compute((n, cp // ic_bn, h, w, ic_bn), f, name=name, tag="injective,pack_nchwc")


def pack_int8_kernel(kernel, ic_bn: int, oc_bn: int = OC_BN, name: str = "kernel_vec"):
    """OIHW -> OIHW{ic_bn/4}i{oc_bn}o4i, both channel counts padded with zero weights."""
    o, c, kh, kw = get_const_tuple(kernel.shape)
    op_, cp = -(-o // oc_bn) * oc_bn, -(-c // ic_bn) * ic_bn
    zero = T.const(0, kernel.dtype)

    def f(oo, cc, y, x, i4, ob, k):
        oc, ic = oo * oc_bn + ob, cc * ic_bn + i4 * 4 + k
        val = kernel[T.min(oc, o - 1), T.min(ic, c - 1), y, x]
        if op_ == o and cp == c:
            return kernel[oc, ic, y, x]
        return T.if_then_else(T.all(oc < o, ic < c), val, zero)
    return te.compute((op_ // oc_bn, cp // ic_bn, kh, kw, ic_bn // 4, oc_bn, 4), f, name=name,
                      tag="conv2d_int8_kernel_pack")


@autotvm.register_topi_compute("conv2d_NCHWc_int8.x86")
def conv2d_NCHWc_int8(cfg, data, kernel, strides, padding, dilation, layout, out_layout, out_dtype="int32"):
    """int8 conv2d: NCHW{ic_bn}c uint8 data with an OIHW{ic_bn/4}i{oc_bn}o4i int8 kernel -> NCHW{oc_bn}c int32
    (plain NCHW / OIHW inputs are packed inside)."""
    out_dtype = out_dtype or "int32"
    check_u8s8("conv2d_NCHWc_int8.x86", data, kernel, out_dtype)
    d_shape, k_shape = get_const_tuple(data.shape), get_const_tuple(kernel.shape)
    if len(d_shape) == 4 and len(k_shape) == 4:
        n, ic, h, w = d_shape
        oc, kic, kh, kw = k_shape
        if kic != ic:
            raise KilnError(f"conv2d_NCHWc_int8.x86: data has {ic} input channels but the kernel {kic}")
        ic_bn, oc_bn = ic_block(ic), oc_block(oc)
        data_vec, kernel_vec = pack_int8_data(data, ic_bn), pack_int8_kernel(kernel, ic_bn, oc_bn)
    elif len(d_shape) == 5 and len(k_shape) == 6:
        # the kernel AlterOpLayout packs: OIHW{oc_bn}o4i ([O/oc_bn, C/4, KH, KW, oc_bn, 4]); the data's ic_bn
        # chunks index it as (chunk * ic_bn/4 + ic_4)
        n, icc, h, w, ic_bn = d_shape
        occ, kic4, kh, kw, oc_bn, four = k_shape
        if four != 4 or oc_bn not in OC_BLOCKS or ic_bn % 4 or kic4 * 4 != icc * ic_bn:
            raise KilnError(f"conv2d_NCHWc_int8.x86: kernel {k_shape} (OIHW{{16|8}}o4i) does not match data "
                            f"{d_shape}")
        oc = occ * oc_bn
        data_vec = data
        kernel_vec = kernel
    elif len(d_shape) == 5 and len(k_shape) == 7:
        n, icc, h, w, ic_bn = d_shape
        occ, kicc, kh, kw, kib4, oc_bn, four = k_shape
        if four != 4 or kib4 * 4 != ic_bn or kicc != icc or oc_bn not in OC_BLOCKS:
            raise KilnError(f"conv2d_NCHWc_int8.x86: kernel {k_shape} does not match data {d_shape} (expects "
                            f"[O/oc_bn, C/ic_bn, KH, KW, ic_bn/4, oc_bn, 4], oc_bn 16 or 8)")
        oc = occ * oc_bn
        data_vec, kernel_vec = data, kernel
    else:
        raise KilnError(f"conv2d_NCHWc_int8.x86: expects NCHW/OIHW or NCHW{{c}}c/OIHW{{i}}i{{o}}o4i shapes, got "
                        f"{d_shape} and {k_shape}")
    s_h, s_w, d_h, d_w, (pt, pl, pb, pr), dk_h, dk_w = _params(strides, dilation, padding, kh, kw)
    oh = _out_size(h, pt + pb, dk_h, s_h, "conv2d_NCHWc_int8")
    ow = _out_size(w, pl + pr, dk_w, s_w, "conv2d_NCHWc_int8")
    mode, lanes = int8_mode(), min(int8_lanes(), oc_bn)
    icc_n, ic_bn = get_const_tuple(data_vec.shape)[1], get_const_tuple(data_vec.shape)[4]
    _define_space(cfg, oh, ow, mode, lanes, oc_bn, kh, kw, ic_bn)
    data_pad = data_vec
    if pt or pl or pb or pr:
        data_pad = pad(data_vec, [0, 0, pt, pl, 0], [0, 0, pb, pr, 0], name="data_pad")
    occ_n = get_const_tuple(kernel_vec.shape)[0]
    icc = te.reduce_axis((0, icc_n), name="ic_chunk")
    ry = te.reduce_axis((0, kh), name="kh")
    rx = te.reduce_axis((0, kw), name="kw")
    ic4 = te.reduce_axis((0, ic_bn // 4), name="ic_4")
    k4 = te.reduce_axis((0, 4), name="ic_k")
    cfg.add_flop(2 * n * oc * oh * ow * icc_n * ic_bn * kh * kw)
    if len(get_const_tuple(kernel_vec.shape)) == 6:
        def wv(oco, icc_, ry_, rx_, ic4_, ocb, k4_):
            return kernel_vec[oco, icc_ * (ic_bn // 4) + ic4_, ry_, rx_, ocb, k4_]
    else:
        def wv(oco, icc_, ry_, rx_, ic4_, ocb, k4_):
            return kernel_vec[oco, icc_, ry_, rx_, ic4_, ocb, k4_]
    conv = te.compute(
        (n, occ_n, oh, ow, oc_bn),
        lambda b, oco, y, x, ocb: te.sum(
            T.cast(data_pad[b, icc, y * s_h + ry * d_h, x * s_w + rx * d_w, ic4 * 4 + k4], "int32")
            * T.cast(wv(oco, icc, ry, rx, ic4, ocb, k4), "int32"), axis=[icc, ry, rx, ic4, k4]),
        name="conv2d_NCHWc_int8", tag="conv2d_NCHWc_int8", attrs={"int8_mode": mode, "int8_lanes": lanes})
    return conv


def conv2d_nchw_int8(data, kernel, strides, padding, dilation, out_dtype="int32"):
    """NCHW int8 conv2d through the packed kernel (packs inside, unpacks the ``oc`` real channels)."""
    conv = conv2d_NCHWc_int8(data, kernel, strides, padding, dilation, "NCHW", "NCHW", out_dtype)
    oc = get_const_tuple(kernel.shape)[0]
    n, _, oh, ow, oc_bn = get_const_tuple(conv.shape)
    return te.compute((n, oc, oh, ow), lambda b, c, y, x: conv[b, c // oc_bn, y, x, c % oc_bn],
                      name="output_unpack", tag="injective,unpack_nchwc")


def vectorize_int32_epilogue(stage, axis, extent: int) -> None:
    """Vectorize an int8 kernel's output loop one int32 register at a time (8 lanes on AVX2, 16 on AVX-512):
    the requantize epilogue computes on int32 lanes, and GCC keeps wider int32 vectors than a register in
    memory. Narrower than the register tile's vectors is wrong too: the epilogue's reads of the tile must have
    the tile's width, else PromoteRegisters leaves the tile in memory (on AVX-512 an 8-lane epilogue kept the
    28 accumulators of the VNNI conv on the stack, stored after every vpdpbusd)."""
    lanes = simd_width()
    if extent > lanes and extent % lanes == 0:
        outer, inner = stage.split(axis, factor=lanes)
        stage.unroll(outer)
        stage.vectorize(inner)
    else:
        stage.vectorize(axis)


def cache_channel_params(s, O, at) -> None:
    """Copy each per-channel parameter of a fused epilogue (bias, requantize multiplier and shifts: inputs of the
    output stage ``O`` whose dims other than ``channel_axes`` are 1) into a local buffer at loop ``at``.

    Why: the uint8 output store goes through a ``char`` pointer, which may alias anything, so GCC reloads every
    parameter after each store and recomputes what the requantize helper derives from it (the rounding constant,
    the shift, the odd-lane multiplier) once per 8 outputs; inside a parallel loop's closure the pointers' ``restrict``
    does not help. A local copy cannot be aliased: loaded once per tile, the derived constants are hoisted."""
    if not isinstance(O, te.ComputeOp):
        return
    out_ndim = len(O.output(0).shape)
    channel_axes = (1, 4) if out_ndim == 5 else (1,)
    readers: dict = {}   # placeholder -> the ops (O or stages inlined into it) that read it
    work, seen = [O], set()
    while work:
        op = work.pop()
        for t in op.input_tensors:
            if isinstance(t.op, te.PlaceholderOp):
                readers.setdefault(t, [])
                if op not in readers[t]:
                    readers[t].append(op)
            elif t.op not in seen and t.op in s.stage_map and s[t.op].attach_type == te_schedule.kInline:
                seen.add(t.op)
                work.append(t.op)
    for t, ops in readers.items():
        shape = get_const_tuple(t.shape)
        if len(shape) != out_ndim or all(d == 1 for d in shape):
            continue
        if any(d != 1 for i, d in enumerate(shape) if i not in channel_axes):
            continue
        local = s.cache_read(t, "local", ops)
        s[local].compute_at(s[O], at)
        s[local].vectorize(s[local].op.axis[-1])


def _schedule_conv(s, cfg, C, O):
    """Register tile ``tile_oh x tile_ow`` pixels x ``oc_bn`` channels (a cache_write stage), reduction outside,
    the (16 channels x 4) step tensorized; the output stage (with any fused epilogue) vectorized."""
    mode, lanes = C.op.attrs["int8_mode"], int(C.op.attrs["int8_lanes"])
    if hasattr(mode, "value"):
        mode = mode.value
    _, _, oh, ow, oc_bn = get_const_tuple(C.shape)
    ow_t = min(int(cfg["tile_ow"].size[-1]), ow)
    try:
        oh_t = int(cfg["tile_oh"].val)
    except (KeyError, TypeError, AttributeError):
        oh_t = 1
    if oh_t < 1 or oh % oh_t:
        oh_t = 1
    parallel = worth_parallel(reduction_flops(C))
    _schedule_producers(s, C.op, parallel)
    o_shape = get_const_tuple(O.output(0).shape)
    if len(o_shape) == 4 and o_shape[1] < oc_bn:
        # fewer output channels than one panel: the unpack's bounds cut the panel short of the intrinsic's width
        # (a tensorized region must be whole), so such a conv keeps a plain vectorizable reduction
        b, oco, y, x, ocb = s[C].op.axis
        s[C].reorder(b, oco, y, x, *s[C].op.reduce_axis, ocb)
        return
    CC = s.cache_write(C, "global") if C.op is O else C
    axes = list(s[O].op.axis)
    if len(axes) == 5:
        b, oco, y, x, ocb = axes
    else:
        b, c, y, x = axes
        oco, ocb = s[O].split(c, factor=oc_bn)
    yo, yi = s[O].split(y, factor=oh_t)
    xo, xi = s[O].split(x, factor=ow_t)
    s[O].reorder(b, oco, yo, xo, yi, xi, ocb)
    par = s[O].fuse(b, oco, yo)
    if parallel:
        s[O].parallel(par)
    s[O].unroll(yi)
    s[O].unroll(xi)
    vectorize_int32_epilogue(s[O], ocb, oc_bn)
    s[CC].compute_at(s[O], xo)
    cache_channel_params(s, s[O].op, xo)
    _, _, cy, cx, cocb = s[CC].op.axis
    icc, ry, rx, ic4, k4 = s[CC].op.reduce_axis
    cyo, cyi = s[CC].split(cy, factor=oh_t)
    cxo, cxi = s[CC].split(cx, factor=ow_t)
    cvo, cvi = s[CC].split(cocb, factor=lanes)
    s[CC].reorder(cyo, cxo, icc, ry, rx, ic4, cyi, cxi, cvo, cvi, k4)
    s[CC].unroll(cyi)
    s[CC].unroll(cxi)
    s[CC].unroll(cvo)
    s[CC].tensorize(cvi, dot_u8s8_intrin(lanes, mode, asm_step=asm_step(mode, lanes)))


@autotvm.register_topi_schedule("conv2d_NCHWc_int8.x86")
def schedule_conv2d_NCHWc_int8(cfg, outs):  # noqa: N802
    """Schedule of conv2d_NCHWc_int8 (5-D output, or the unpacked NCHW one, with fused epilogues)."""
    return schedule_anchored(outs, "conv2d_NCHWc_int8", lambda s, C, O: _schedule_conv(s, cfg, C, O))


schedule_conv2d_nchw_int8 = schedule_conv2d_NCHWc_int8
