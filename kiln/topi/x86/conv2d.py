"""conv2d in NCHW[x]c on x86 (TVM's ``conv2d_NCHWc.x86`` and ``depthwise_conv2d_NCHWc.x86``).

Data ``[N, C/ic_bn, H, W, ic_bn]``, kernel ``[O/oc_bn, C/ic_bn, KH, KW, ic_bn, oc_bn]`` (``OIHW{i}i{o}o``), output
``[N, O/oc_bn, OH, OW, oc_bn]``: the innermost ``oc_bn`` output channels are one SIMD vector, and a row of
``reg_n`` output pixels of it stays in registers while the reduction over input channels and the kernel window
runs. Given plain NCHW tensors (no AlterOpLayout), the computes pack data and kernel inside the kernel and
``conv2d_nchw`` unpacks the result; with AlterOpLayout the graph carries NCHW{x}c between convolutions and the
kernel is packed once at compile time (FoldConstant).

Knobs: ``tile_ic`` / ``tile_oc`` (channel blocks), ``tile_ow`` (register row), ``unroll_kw``. The fallback takes
the SIMD width for the channel blocks (the largest divisor not above it) and a row of at most 12 pixels.
"""
from __future__ import annotations

from ... import autotvm, te
from ...error import KilnError
from ...tir import op as T
from ..nn.conv2d import _out_size, _params
from ..nn.pad import pad
from ..utils import get_const_tuple
from .utils import as_list, divisor_at_most, simd_width, reduction_flops, traverse_inline, worth_parallel

MAX_REG_N = 12


def _parse_blocked(layout: str, letter: str) -> int:
    """The block factor of sub-axis ``letter`` in a layout such as ``NCHW8c`` (0 when absent)."""
    import re
    m = re.search(r"(\d+)" + letter, layout)
    return int(m.group(1)) if m else 0


def channel_block(c: int, lanes: int | None = None) -> int:
    """The fallback NCHW[x]c block of ``c`` channels: two SIMD vectors when they divide ``c`` (and the
    vectors are AVX2-sized or smaller), else one, else the largest divisor not above one vector. The rule
    depends on ``c`` alone, so a producer's output block equals its consumer's input block and the graph
    needs no layout transform between convolutions."""
    lanes = lanes or simd_width()
    if lanes < 16 and c % (2 * lanes) == 0:
        return 2 * lanes
    if c % lanes == 0:
        return lanes
    return divisor_at_most(c, lanes)


def row_tile(ow: int, vecs_per_pixel: int, max_acc: int = 14) -> int:
    """The fallback register row: the most output pixels (a divisor of ``ow``) whose ``vecs_per_pixel``
    accumulators fit in ``max_acc`` vector registers (16 on AVX2 less the weight vectors and a broadcast).
    When ``ow`` has only small divisors, a non-dividing row is taken (the tail is peeled)."""
    limit = max(1, max_acc // max(1, vecs_per_pixel))
    best = divisor_at_most(ow, limit)
    if ow > limit and best * 2 <= limit:
        return limit
    return best


def _define_conv_space(cfg, ic: int, oc: int, ow: int, ic_bn=None, oc_bn=None, depthwise=False):
    lanes = simd_width()
    cfg.define_split("tile_ic", ic, num_outputs=2, policy="factors", filter=lambda e: e.size[-1] <= 4 * lanes)
    cfg.define_split("tile_oc", oc, num_outputs=2, policy="factors", filter=lambda e: e.size[-1] <= 4 * lanes)
    cfg.define_split("tile_ow", ow, num_outputs=2, policy="verbose", filter=lambda e: e.size[-1] <= 32)
    if not depthwise:
        cfg.define_knob("unroll_kw", [True, False])
    if cfg.is_fallback:
        ic_bn = ic_bn or channel_block(ic, lanes)
        oc_bn = oc_bn or channel_block(oc, lanes)
        vecs = -(-oc_bn // lanes)
        cfg["tile_ic"] = autotvm.task.SplitEntity([-1, ic_bn])
        cfg["tile_oc"] = autotvm.task.SplitEntity([-1, oc_bn])
        cfg["tile_ow"] = autotvm.task.SplitEntity([-1, row_tile(ow, vecs, 12 if depthwise else 14)])
        if not depthwise:
            cfg["unroll_kw"] = autotvm.task.OtherOptionEntity(False)


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
    if packed:
        _define_conv_space(cfg, ic, oc, ow, ic_bn, oc_bn)
        data_vec, kernel_vec = data, kernel
    else:
        _define_conv_space(cfg, ic, oc, ow)
        ic_bn, oc_bn = cfg["tile_ic"].size[-1], cfg["tile_oc"].size[-1]
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


@autotvm.register_topi_compute("depthwise_conv2d_NCHWc.x86")
def depthwise_conv2d_NCHWc(cfg, data, kernel, strides, padding, dilation, layout, out_layout, out_dtype="float32"):
    """Depthwise conv2d (channel multiplier 1) of NCHW{b}c data and an OIHW1i{b}o kernel -> NCHW{b}c; plain
    NCHW data with a [C, 1, KH, KW] kernel is packed inside."""
    out_dtype = out_dtype or data.dtype
    d_shape, k_shape = get_const_tuple(data.shape), get_const_tuple(kernel.shape)
    if len(d_shape) == 4 and len(k_shape) == 4:
        n, c, h, w = d_shape
        kc, mult, kh, kw = k_shape
        packed = False
    elif len(d_shape) == 5 and len(k_shape) == 6:
        n, cc, h, w, cb = d_shape
        kcc, mult, kh, kw, _one, kb = k_shape
        c, kc = cc * cb, kcc * kb
        packed = True
    else:
        raise KilnError(f"depthwise_conv2d_NCHWc.x86: expects NCHW{{x}}c data with an OIHW1i{{x}}o kernel, got "
                        f"shapes {d_shape} and {k_shape}")
    if kc != c or mult != 1:
        raise KilnError(f"depthwise_conv2d_NCHWc.x86: needs a kernel with {c} channels and multiplier 1, got kernel "
                        f"shape {k_shape} for data {d_shape}")
    s_h, s_w, d_h, d_w, (pt, pl, pb, pr), dk_h, dk_w = _params(strides, dilation, padding, kh, kw)
    oh = _out_size(h, pt + pb, dk_h, s_h, "depthwise_conv2d_NCHWc")
    ow = _out_size(w, pl + pr, dk_w, s_w, "depthwise_conv2d_NCHWc")
    if packed:
        _define_conv_space(cfg, c, c, ow, cb, cb, depthwise=True)
        data_vec, kernel_vec = data, kernel
    else:
        _define_conv_space(cfg, c, c, ow, depthwise=True)
        cb = cfg["tile_oc"].size[-1]
        data_vec = pack_data(data, cb)
        kernel_vec = te.compute((c // cb, 1, kh, kw, 1, cb), lambda o, i, y, x, ib, ob: kernel[o * cb + ob, 0, y, x],
                                name="kernel_vec", tag="conv2d_kernel_pack")
    data_pad = data_vec
    if pt or pl or pb or pr:
        data_pad = pad(data_vec, [0, 0, pt, pl, 0], [0, 0, pb, pr, 0], name="data_pad")
    ry = te.reduce_axis((0, kh), name="kh")
    rx = te.reduce_axis((0, kw), name="kw")
    cfg.add_flop(2 * n * c * oh * ow * kh * kw)
    return te.compute(
        (n, c // cb, oh, ow, cb),
        lambda b, co, y, x, ci: te.sum(
            T.cast(data_pad[b, co, y * s_h + ry * d_h, x * s_w + rx * d_w, ci], out_dtype)
            * T.cast(kernel_vec[co, 0, ry, rx, 0, ci], out_dtype), axis=[ry, rx]),
        name="depthwise_conv2d_NCHWc", tag="depthwise_conv2d_NCHWc")


def conv2d_nchw(data, kernel, strides, padding, dilation, out_dtype="float32"):
    """NCHW conv2d through the NCHWc kernel (packs inside, unpacks the result)."""
    return unpack_nchwc(conv2d_NCHWc(data, kernel, strides, padding, dilation, "NCHW", "NCHW", out_dtype))


def depthwise_conv2d_nchw(data, kernel, strides, padding, dilation, out_dtype="float32"):
    """NCHW depthwise conv2d (multiplier 1) through the NCHWc kernel."""
    return unpack_nchwc(depthwise_conv2d_NCHWc(data, kernel, strides, padding, dilation, "NCHW", "NCHW",
                                               out_dtype))


def _schedule_producers(s, conv_op, local_pad: bool = False, parallel: bool = True):
    """Parallelize the data/kernel packing and padding stages of a conv (each is its own loop nest); with
    ``local_pad`` the padding stage is left to the caller (computed next to its consumer); returns it."""
    pad_op = None
    for t in conv_op.input_tensors:
        op = t.op
        if not hasattr(op, "axis") or not op.input_tensors:
            continue
        if op.tag.startswith("injective") and op.name == "data_pad":
            inner = op.input_tensors[0].op
            if hasattr(inner, "axis") and inner.input_tensors and "pack_nchwc" in inner.tag:
                s[inner].compute_inline()
            pad_op = op
            if local_pad:
                continue
        axes = list(s[op].op.axis)
        if len(axes) >= 3:
            fused = s[op].fuse(axes[0], axes[1], axes[2])
            if parallel:
                s[op].parallel(fused)
        if len(axes) == 5:
            s[op].vectorize(axes[-1]) if get_const_tuple(op.output(0).shape)[-1] <= 16 else None
    return pad_op


def _pad_of(conv_op):
    for t in conv_op.input_tensors:
        if t.op.name == "data_pad" and t.op.tag.startswith("injective"):
            return t.op
    return None


def _strided(pad_op, C) -> bool:
    """Whether the conv ``C`` reading the padded input ``pad_op`` has a row stride above 1 (from the
    shapes: padded rows vs output rows)."""
    if pad_op is None:
        return False
    hp = get_const_tuple(pad_op.output(0).shape)[2]
    oh = get_const_tuple(C.shape)[2]
    return oh > 1 and hp >= 2 * oh


def _schedule_nchwc(s, cfg, C, O, depthwise: bool):
    """The register-blocked schedule of an NCHWc conv ``C`` whose fused output is ``O`` (5-D, or 4-D unpacked).

    Per (batch, oc chunk, output row, row tile) the ``reg_n x oc_bn`` accumulator block is a cache_write
    stage whose loops are all unrolled except the reduction, so the C code generator holds it in vector
    registers: the reduction runs ic chunk, kh, kw, ic block (kept a loop: unrolling it made gcc hoist the
    scalar loads and spill), and each step broadcasts one input value per pixel against the ``oc_bn``
    weights (one or two vector loads). The write-back of the block (with the fused epilogue) is unrolled too.
    """
    reg_n = cfg["tile_ow"].size[-1]
    oc_bn = get_const_tuple(C.shape)[-1]
    unroll_kw = (not depthwise) and bool(cfg["unroll_kw"].val)
    parallel = worth_parallel(reduction_flops(C))
    pad_op = _schedule_producers(s, C.op, local_pad=depthwise and _strided(_pad_of(C.op), C), parallel=parallel)
    if C.op is O:
        CC = s.cache_write(C, "global")
    else:
        CC = C
    out_axes = list(s[O].op.axis)
    if len(out_axes) == 5:
        b, oco, y, x, ocb = out_axes
        xo, xi = s[O].split(x, factor=reg_n)
        s[O].reorder(b, oco, y, xo, xi, ocb)
    elif len(out_axes) == 4:
        b, oc, y, x = out_axes
        oco, ocb = s[O].split(oc, factor=oc_bn)
        xo, xi = s[O].split(x, factor=reg_n)
        s[O].reorder(b, oco, y, xo, xi, ocb)
    else:
        raise KilnError(f"conv2d_NCHWc schedule: unexpected output rank {len(out_axes)}")
    par = s[O].fuse(b, oco, y)
    if parallel:
        s[O].parallel(par)
    s[O].unroll(xi)
    s[O].vectorize(ocb)
    if pad_op is not None and depthwise and _strided(pad_op, C):
        # depthwise: the few padded input rows one output row needs, copied next to it (in cache), instead
        # of a padded copy of the whole input (as large as the input, for 9 FMAs per output)
        s[pad_op].compute_at(s[O], par)
        pad_axes = list(s[pad_op].op.axis)
        if get_const_tuple(pad_op.output(0).shape)[-1] <= 16:
            s[pad_op].vectorize(pad_axes[-1])
    s[CC].compute_at(s[O], xo)
    _, _, _, cx, cocb = s[CC].op.axis
    cxo, cxi = s[CC].split(cx, factor=reg_n)
    if depthwise:
        ry, rx = s[CC].op.reduce_axis
        s[CC].reorder(cxo, ry, rx, cxi, cocb)
        s[CC].unroll(rx)
    else:
        icc, ry, rx, icb = s[CC].op.reduce_axis
        s[CC].reorder(cxo, icc, ry, rx, icb, cxi, cocb)
        if unroll_kw:
            s[CC].unroll(rx)
    s[CC].unroll(cxi)
    s[CC].vectorize(cocb)


def _make_schedule(tag: str, depthwise: bool):
    def schedule(cfg, outs):
        outs = as_list(outs)
        s = te.create_schedule([o.op for o in outs])

        def callback(op):
            if op.tag == tag:
                _schedule_nchwc(s, cfg, op.output(0), outs[0].op, depthwise)
        traverse_inline(s, outs[0].op, callback)
        return s
    return schedule


schedule_conv2d_NCHWc = autotvm.register_topi_schedule("conv2d_NCHWc.x86")(
    _make_schedule("conv2d_NCHWc", depthwise=False))
schedule_conv2d_NCHWc.__doc__ = "Schedule of conv2d_NCHWc (5-D output) or conv2d_nchw (unpacked 4-D output)."
schedule_depthwise_conv2d_NCHWc = autotvm.register_topi_schedule("depthwise_conv2d_NCHWc.x86")(
    _make_schedule("depthwise_conv2d_NCHWc", depthwise=True))
schedule_depthwise_conv2d_NCHWc.__doc__ = "Schedule of depthwise_conv2d_NCHWc (or its unpacked NCHW form)."
schedule_conv2d_nchw = schedule_conv2d_NCHWc
schedule_depthwise_conv2d_nchw = schedule_depthwise_conv2d_NCHWc
