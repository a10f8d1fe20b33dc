"""int8 depthwise conv2d on x86 (``depthwise_conv2d_NCHWc_int8.x86``): ``uint8`` data x ``int8`` weights ->
``int32``, channel multiplier 1 (mobilenet's 3x3 depthwise layers after the x86 QNN legalization).

Layouts as the fp32 template's (:mod:`kiln.topi.x86.depthwise_conv2d`): data ``NCHW{bn}c``, kernel
``OIHW1i{bn}o``, output ``NCHW{bn}c`` int32, ``bn`` 16 or 8 (:func:`kiln.topi.x86.conv2d_int8.oc_block`: the
block the int8 1x1 convs write, so the layers chain without layout transforms). Plain NCHW data with a
``[C, 1, KH, KW]`` kernel is packed inside, channels padded with zeros to a multiple of ``bn``, and the ``C``
real channels unpacked.

Arithmetic: each product ``uint8 * int8`` fits int16 (``255 * 128 = 32640``), so it is formed in int16
(``vpmovzxbw`` + ``vpmullw``: 16 channels per AVX2 register) and widened to the int32 accumulators. The
sum is exact for every input. A depthwise conv does ``KH*KW`` multiply-adds per output, so it is bound by
moving data: its uint8 input is a quarter of the float32 one the exact-float lowering read, and the
requantize epilogue (``fixed_point_multiply_broadcast``, clip, cast) is applied to the accumulators in
registers and stores uint8.

The schedule is the fp32 template's (one register tile of ``tile_ow`` pixels x 16 channels per output row,
kernel window unrolled, the padding read through a condition instead of a padded copy, parallel over
channel blocks x rows); the knobs are the same (``tile_ow``, ``unroll_kw``).
"""
from __future__ import annotations

from ... import autotvm, te
from ...tir import op as T
from ..nn.conv2d import _out_size, _params
from ..utils import get_const_tuple
from .conv2d_int8 import cache_channel_params, check_u8s8, oc_block, vectorize_int32_epilogue
from .depthwise_conv2d import _check_dw_kernel, _define_space, _schedule_inputs, dw_row_tile
from .utils import nchwc_output_axes, schedule_anchored, simd_width, worth_parallel

TASK = "depthwise_conv2d_NCHWc_int8.x86"
BN = 16
BLOCKS = (16, 8)


@autotvm.register_topi_compute(TASK)
def depthwise_conv2d_NCHWc_int8(cfg, data, kernel, strides, padding, dilation, layout, out_layout,  # noqa: N802
                                out_dtype="int32"):
    """uint8 NCHW{bn}c data x int8 OIHW1i{bn}o kernel -> int32 NCHW{bn}c (plain NCHW / [C, 1, KH, KW] inputs
    are packed inside with bn = 16 or 8, channels zero-padded)."""
    out_dtype = out_dtype or "int32"
    check_u8s8(TASK, data, kernel, out_dtype)
    n, c, h, w, kh, kw, packed_bn = _check_dw_kernel(TASK, data, kernel, BLOCKS)
    if packed_bn is None:
        bn = oc_block(c)
        cp = -(-c // bn) * bn
        zd, zk = T.const(0, "uint8"), T.const(0, "int8")

        def fdata(b, co, y, x, ci):
            ch = co * bn + ci
            return data[b, ch, y, x] if cp == c else T.if_then_else(ch < c, data[b, T.min(ch, c - 1), y, x], zd)

        def fkernel(co, i, y, x, j, ci):
            ch = co * bn + ci
            return (kernel[ch, i, y, x] if cp == c else
                    T.if_then_else(ch < c, kernel[T.min(ch, c - 1), i, y, x], zk))
        data_vec = te.compute((n, cp // bn, h, w, bn), fdata, name="data_vec", tag="dw_pack_data")
        kernel_vec = te.compute((cp // bn, 1, kh, kw, 1, bn), fkernel, name="kernel_vec", tag="dw_pack_kernel")
    else:
        bn, cp = packed_bn, c
        data_vec, kernel_vec = data, kernel
    s_h, s_w, d_h, d_w, (pt, pl, pb, pr), dk_h, dk_w = _params(strides, dilation, padding, kh, kw)
    oh = _out_size(h, pt + pb, dk_h, s_h, TASK)
    ow = _out_size(w, pl + pr, dk_w, s_w, TASK)
    _define_space(cfg, cp, ow, kw, s_w, bn)
    _define_row_tiles(cfg, oh, ow, s_w, bn)

    def pad_read(b, co, y, x, ci):
        conds = [cond for cond, needed in ((y >= pt, pt), (y < h + pt, pb), (x >= pl, pl), (x < w + pl, pr))
                 if needed]
        value = data_vec[b, co, y - pt, x - pl, ci]
        return T.if_then_else(T.all(*conds), value, T.const(0, "uint8")) if conds else value

    data_pad = te.compute((n, cp // bn, h + pt + pb, w + pl + pr, bn), pad_read, name="data_pad", tag="dw_pad")
    ry = te.reduce_axis((0, kh), name="kh")
    rx = te.reduce_axis((0, kw), name="kw")
    cfg.add_flop(2 * n * cp * oh * ow * kh * kw)
    if float_exact(kh * kw):
        # float32 FMAs on the converted bytes: every partial sum is an integer below 2**24, so exact
        wf = te.compute(get_const_tuple(kernel_vec.shape), lambda *i: T.cast(T.cast(kernel_vec[i], "int32"), "float32"),
                        name="kernel_f32", tag="dw_pack_kernel")
        acc = te.compute(
            (n, cp // bn, oh, ow, bn),
            lambda b, co, y, x, ci: te.sum(
                T.cast(T.cast(data_pad[b, co, y * s_h + ry * d_h, x * s_w + rx * d_w, ci], "int32"), "float32")
                * wf[co, 0, ry, rx, 0, ci], axis=[ry, rx]),
            name="depthwise_conv2d_NCHWc_int8", tag="depthwise_conv2d_NCHWc_int8")
        return te.compute(acc.shape, lambda *i: T.cast(acc[i], "int32"), name="dw_int8_acc", tag="elemwise")
    return te.compute(
        (n, cp // bn, oh, ow, bn),
        lambda b, co, y, x, ci: te.sum(T.cast(
            T.cast(data_pad[b, co, y * s_h + ry * d_h, x * s_w + rx * d_w, ci], "int16")
            * T.cast(kernel_vec[co, 0, ry, rx, 0, ci], "int16"), "int32"), axis=[ry, rx]),
        name="depthwise_conv2d_NCHWc_int8", tag="depthwise_conv2d_NCHWc_int8")


def _define_row_tiles(cfg, oh: int, ow: int, stride_w: int, bn: int) -> None:
    """The int8 template's own register tile: ``tile_oh`` output rows x ``tile_ow`` pixels x one SIMD vector of
    channels (the channel block is walked one vector at a time outside the tile). Each converted input vector
    feeds every accumulator whose window covers it, so a taller, narrower-per-vector tile converts each input byte
    fewer times (2 rows x 4 pixels: (2+2) x (4+2) conversions per 72 multiply-adds, vs 3 x 6 per 36 for the fp32
    template's 1 row x 4 pixels x 2 vectors)."""
    cfg.define_knob("tile_oh", [t for t in (1, 2, 4) if oh % t == 0])
    if cfg.is_fallback:
        rows = 2 if oh % 2 == 0 else 1
        cfg["tile_oh"] = autotvm.task.OtherOptionEntity(rows)
        cfg["tile_ow"] = autotvm.task.SplitEntity([-1, dw_row_tile(ow, rows, stride_w)])


def float_exact(taps: int) -> bool:
    """Whether a window of ``taps`` uint8 x int8 products sums exactly in float32 (below 2**24 in magnitude)."""
    return taps * 255 * 128 < (1 << 24)


def depthwise_conv2d_nchw_int8(data, kernel, strides, padding, dilation, out_dtype="int32"):
    """NCHW uint8 x int8 depthwise conv2d through the blocked kernel (packs inside, unpacks the real channels)."""
    out = depthwise_conv2d_NCHWc_int8(data, kernel, strides, padding, dilation, "NCHW", "NCHW", out_dtype)
    c = get_const_tuple(data.shape)[1]
    n, _, h, w, bn = get_const_tuple(out.shape)
    return te.compute((n, c, h, w), lambda b, ch, y, x: out[b, ch // bn, y, x, ch % bn],
                      name="output_unpack", tag="injective,unpack_nchwc")


@autotvm.register_topi_schedule(TASK)
def schedule_depthwise_conv2d_NCHWc_int8(cfg, outs):  # noqa: N802
    """The fp32 depthwise template's register-tiled schedule, on the int8 compute (with its fused epilogue); the
    output stage (int32 accumulators -> requantize -> uint8) is vectorized one int32 register at a time (8 lanes
    on AVX2, 16 on AVX-512; vectors wider than a register would go through memory)."""
    return schedule_anchored(outs, "depthwise_conv2d_NCHWc_int8", lambda s, C, O: _schedule_dw_int8(s, cfg, C, O))


def _schedule_dw_int8(s, cfg, C, O) -> None:
    """Register tile ``tile_oh x tile_ow`` pixels x one vector of channels (``C``'s local stage, every loop
    unrolled, the window outside the pixels so GCC converts each input vector once per tile); parallel over
    (batch x channel blocks x row tiles); the output stage (requantize epilogue) works one int32 register at a time."""
    reg_n = int(cfg["tile_ow"].size[-1])
    try:
        oh_t = int(cfg["tile_oh"].val)
    except (KeyError, TypeError, AttributeError):
        oh_t = 1
    n, cc, oh, ow, bn = get_const_tuple(C.shape)
    if oh_t < 1 or oh % oh_t:
        oh_t = 1
    ry, rx = C.op.reduce_axis
    kh = int(ry.dom.extent.value)
    vec = min(bn, max(8, simd_width()))
    if bn % vec:
        vec = bn
    parallel = worth_parallel(2 * n * cc * oh * ow * bn * kh * int(rx.dom.extent.value))
    _schedule_inputs(s, C.op, parallel)
    for t in C.op.input_tensors:
        if t.op.name == "kernel_f32":   # the weights as float32, converted on every call: a vector of channels
            s[t].vectorize(s[t].op.axis[-1])
    CC = s.cache_write(C, "global") if C.op is O else C
    b, co, y, x, ci = nchwc_output_axes(s, O, bn, TASK)
    yo, yi = s[O].split(y, factor=oh_t)
    xo, xi = s[O].split(x, factor=reg_n)
    cio, cii = s[O].split(ci, factor=vec)
    s[O].reorder(b, co, yo, xo, cio, yi, xi, cii)
    par = s[O].fuse(b, co, yo)
    if parallel:
        s[O].parallel(par)
    s[O].unroll(yi)
    s[O].unroll(xi)
    vectorize_int32_epilogue(s[O], cii, vec)
    s[CC].compute_at(s[O], cio)
    cache_channel_params(s, s[O].op, cio)
    _, _, cy, cx, cci = s[CC].op.axis
    cry, crx = s[CC].op.reduce_axis
    s[CC].reorder(cry, crx, cy, cx, cci)
    if kh <= 5:
        s[CC].unroll(cry)
    if bool(cfg["unroll_kw"].val):
        s[CC].unroll(crx)
    s[CC].unroll(cy)
    s[CC].unroll(cx)
    s[CC].vectorize(cci)


schedule_depthwise_conv2d_nchw_int8 = schedule_depthwise_conv2d_NCHWc_int8
