"""Depthwise conv2d in NCHW[x]c on x86 (TVM's ``depthwise_conv2d_NCHWc.x86`` template).

Data ``[N, C/bn, H, W, bn]``, kernel ``[C/bn, 1, KH, KW, 1, bn]`` (``OIHW1i{bn}o``), output
``[N, C/bn, OH, OW, bn]``; channel multiplier 1. A depthwise conv does only ``KH*KW`` multiply-adds per
output value, so it is bound by moving data, and the schedule is built around not moving it twice:

* no padded copy of the input: the zero padding is read through a condition on the input row / column
  (the compute's ``data_pad`` stage is inlined). The row condition is invariant along a row and the column
  conditions are the same for every kernel row, so the compiler keeps them cheap; interior pixels take the
  always-true branch;
* per (channel block, output row, tile of ``reg_n`` pixels) the ``reg_n x bn`` accumulators are a local
  stage whose loops are all unrolled (kernel window, pixels, channel vector), so they live in vector
  registers; each input pixel vector is loaded once per kernel row and used by every accumulator that
  needs it (``(reg_n - 1) * stride + KW`` loads for ``reg_n * KW`` multiply-adds);
* the fused epilogue (clip / add / ...) is applied to the accumulators in registers as they are stored;
* parallel over (batch x channel blocks x output rows).

Knobs (TVM's names): ``tile_ic`` / ``tile_oc`` (channel block: only the layout rule's, see
:func:`dw_channel_block`, so a tuned layer keeps its neighbours' layout), ``tile_ow``
(pixels per register tile) and ``unroll_kw`` (unroll the kernel width; the kernel rows are always unrolled
when the window is at most 5x5). Fallback: the NCHWc channel block of ``conv2d_alter_layout`` and the widest
register tile that fits the 16 AVX2 registers.

Given plain NCHW data with a ``[C, 1, KH, KW]`` kernel (no AlterOpLayout), the compute packs both inside
(with the config's channel block) and :func:`depthwise_conv2d_nchw` unpacks the result; while tuning
(``autotvm.GLOBAL_SCOPE.in_tuning``) it takes them already packed, as the network runs it.
"""
from __future__ import annotations

from ... import autotvm, te
from ...autotvm.task.task import _current_target
from ...autotvm.task.topi_integration import get_workload
from ...error import KilnError
from ...tir import op as T
from ..nn.conv2d import _out_size, _params
from ..utils import get_const_tuple
from .utils import (divisor_at_most, is_static, nchwc_output_axes, scaled_registers, schedule_anchored, simd_width,
                    size_hint, worth_parallel)
from .conv2d import _inline_injective_above, channel_block

TASK = "depthwise_conv2d_NCHWc.x86"


def dw_channel_block(c: int, lanes: int | None = None) -> int:
    """The fallback channel block of a depthwise conv over ``c`` channels: the NCHWc block the neighbouring
    1x1 convolutions use (two SIMD vectors when they divide ``c``, else one, else the largest divisor not
    above one vector), so no layout transform sits between them."""
    return channel_block(c, lanes)


def dw_row_tile(ow: int, vecs_per_pixel: int, stride_w: int = 1, max_acc: int | None = None) -> int:
    """The fallback register tile along the output row: as many pixels as fit in 8 vector registers of
    accumulators (the other 8 hold input and weight vectors; wider tiles measured slower: gcc starts to
    spill), preferring a divisor of ``ow``; a non-dividing tile is taken when ``ow`` has only small
    divisors (the tail is guarded). ``stride_w`` is part of the signature for tuned variants. ``max_acc``
    defaults to 8 scaled to the target's register file (16 of AVX-512's 32 registers)."""
    max_acc = max_acc or scaled_registers(8)
    limit = max(1, max_acc // max(1, vecs_per_pixel))
    best = divisor_at_most(ow, limit)
    if ow > limit and best * 2 <= limit:
        return limit
    return best


def _define_space(cfg, c: int, ow, kw: int, stride_w: int, bn: int | None) -> None:
    """The config space; a symbolic output width (a VM kernel over unknown W) is taken at its size hint and
    the fallback tile is the widest that fits (the run-time row is full tiles and a guarded last one)."""
    sym_w = not is_static(ow)
    ow = size_hint(ow)
    lanes = simd_width()
    # the channel block is the layout rule's only (the packed call's own block): a tuned block becomes the
    # graph's layout (conv2d_alter_layout reads tile_oc), and a block other than the neighbouring 1x1 convs'
    # puts layout transforms around the depthwise conv that the kernel measured alone never paid; on
    # mobilenet_v2 (Zen 5) records choosing blocks of 4 to 40 made the tuned network slower than the untuned
    block = [[-1, bn or dw_channel_block(c, lanes)]]
    cfg.define_split("tile_ic", c, num_outputs=2, policy="candidate", candidate=block)
    cfg.define_split("tile_oc", c, num_outputs=2, policy="candidate", candidate=block)
    cfg.define_split("tile_ow", ow, num_outputs=2, policy="verbose", filter=lambda e: e.size[-1] <= 16)
    cfg.define_knob("unroll_kw", [True, False])
    if cfg.is_fallback:
        bn = bn or dw_channel_block(c, lanes)
        vecs = -(-bn // lanes)
        cfg["tile_ic"] = autotvm.task.SplitEntity([-1, bn])
        cfg["tile_oc"] = autotvm.task.SplitEntity([-1, bn])
        row = max(1, scaled_registers(8) // vecs) if sym_w else dw_row_tile(ow, vecs, stride_w)
        cfg["tile_ow"] = autotvm.task.SplitEntity([-1, row])
        cfg["unroll_kw"] = autotvm.task.OtherOptionEntity(kw <= 5)


def _check_dw_kernel(task: str, data, kernel, blocks=None) -> tuple:
    """The shapes of a depthwise conv's operands (fp32 and int8 templates): NCHW{bn}c data with an OIHW1i{bn}o
    kernel, or NCHW data with a [C, 1, KH, KW] kernel; channel multiplier 1. Returns ``(n, c, h, w, kh, kw,
    bn)``, ``bn`` None for plain NCHW; ``blocks``: the channel blocks the template supports (any when None)."""
    d_shape, k_shape = get_const_tuple(data.shape), get_const_tuple(kernel.shape)
    if len(d_shape) == 4 and len(k_shape) == 4:
        n, c, h, w = d_shape
        kc, mult, kh, kw = k_shape
        bn = None
    elif len(d_shape) == 5 and len(k_shape) == 6:
        n, cc, h, w, bn = d_shape
        kcc, mult, kh, kw, one, kbn = k_shape
        c, kc = cc * bn, kcc * kbn
        if one != 1 or kbn != bn or (blocks is not None and bn not in blocks):
            blk = "" if blocks is None else f" ({' or '.join(map(str, blocks))} channels a block)"
            raise KilnError(f"{task}: the kernel must be OIHW1i{bn}o for NCHW{bn}c data{blk}, got kernel shape "
                            f"{k_shape} for data {d_shape}")
    else:
        raise KilnError(f"{task}: expects NCHW{{x}}c data with an OIHW1i{{x}}o kernel (or NCHW data with a "
                        f"[C, 1, KH, KW] kernel), got shapes {d_shape} and {k_shape}")
    if kc != c or mult != 1:
        raise KilnError(f"{task}: needs a kernel with {c} channels and channel multiplier 1, got kernel shape "
                        f"{k_shape} for data {d_shape}")
    return n, c, h, w, kh, kw, bn


@autotvm.register_topi_compute(TASK)
def depthwise_conv2d_NCHWc(cfg, data, kernel, strides, padding, dilation, layout, out_layout,  # noqa: N802
                           out_dtype="float32"):
    """Depthwise conv2d (multiplier 1) of NCHW{bn}c data and an OIHW1i{bn}o kernel -> NCHW{bn}c; plain NCHW data
    with a [C, 1, KH, KW] kernel is packed inside with the config's channel block."""
    out_dtype = out_dtype or data.dtype
    n, c, h, w, kh, kw, bn = _check_dw_kernel(TASK, data, kernel)
    packed = bn is not None
    s_h, s_w, d_h, d_w, (pt, pl, pb, pr), dk_h, dk_w = _params(strides, dilation, padding, kh, kw)
    oh = _out_size(h, pt + pb, dk_h, s_h, "depthwise_conv2d_NCHWc")
    ow = _out_size(w, pl + pr, dk_w, s_w, "depthwise_conv2d_NCHWc")
    _define_space(cfg, c, ow, kw, s_w, bn if packed else None)
    if packed:
        data_vec, kernel_vec = data, kernel
    elif autotvm.GLOBAL_SCOPE.in_tuning:
        # measured alone while tuning: take data and kernel already packed, as the network runs it (the
        # producer writes NCHW{bn}c, AlterOpLayout packs the kernel at compile time), so the timing is the
        # conv's and not that of packing the input on every call (as much traffic as the conv itself)
        bn = cfg["tile_oc"].size[-1]
        if c % bn:
            raise KilnError(f"{TASK}: channel block {bn} does not divide the {c} channels")
        data_vec = te.placeholder((n, c // bn, h, w, bn), dtype=data.dtype, name="data_vec")
        kernel_vec = te.placeholder((c // bn, 1, kh, kw, 1, bn), dtype=kernel.dtype, name="kernel_vec")
    else:
        bn = cfg["tile_oc"].size[-1]
        if c % bn:
            raise KilnError(f"{TASK}: channel block {bn} does not divide the {c} channels")
        data_vec = te.compute((n, c // bn, h, w, bn), lambda b, co, y, x, ci: data[b, co * bn + ci, y, x],
                              name="data_vec", tag="dw_pack_data")
        kernel_vec = te.compute((c // bn, 1, kh, kw, 1, bn),
                                lambda co, i, y, x, j, ci: kernel[co * bn + ci, i, y, x],
                                name="kernel_vec", tag="dw_pack_kernel")
    hp, wp = h + pt + pb, w + pl + pr

    def pad_read(b, co, y, x, ci):
        conds = []
        if pt:
            conds.append(y >= pt)
        if pb:
            conds.append(y < h + pt)
        if pl:
            conds.append(x >= pl)
        if pr:
            conds.append(x < w + pl)
        value = data_vec[b, co, y - pt, x - pl, ci]
        if not conds:
            return value
        return T.if_then_else(T.all(*conds), value, T.const(0, data_vec.dtype))

    # the padded input as a stage of its own (TVM's structure, and what AutoTVM features see); the schedule
    # inlines it, so the padding is a condition on the read and no padded copy is made
    data_pad = te.compute((n, c // bn, hp, wp, bn), pad_read, name="data_pad", tag="dw_pad")
    ry = te.reduce_axis((0, kh), name="kh")
    rx = te.reduce_axis((0, kw), name="kw")
    cfg.add_flop(2 * n * c * oh * ow * kh * kw)
    return te.compute(
        (n, c // bn, oh, ow, bn),
        lambda b, co, y, x, ci: te.sum(
            T.cast(data_pad[b, co, y * s_h + ry * d_h, x * s_w + rx * d_w, ci], out_dtype)
            * T.cast(kernel_vec[co, 0, ry, rx, 0, ci], out_dtype), axis=[ry, rx]),
        name="depthwise_conv2d_NCHWc", tag="depthwise_conv2d_NCHWc")


def depthwise_conv2d_nchw(data, kernel, strides, padding, dilation, out_dtype="float32"):
    """NCHW depthwise conv2d (multiplier 1) through the NCHWc kernel: packs inside, unpacks the result."""
    out = depthwise_conv2d_NCHWc(data, kernel, strides, padding, dilation, "NCHW", "NCHW", out_dtype)
    n, cc, h, w, bn = get_const_tuple(out.shape)
    return te.compute((n, cc * bn, h, w), lambda b, c, y, x: out[b, c // bn, y, x, c % bn],
                      name="output_unpack", tag="injective,unpack_nchwc")


def _schedule_inputs(s, conv_op, parallel: bool) -> None:
    """Inline the padding stage; the packing stages of an unpacked call are their own parallel loops."""
    for t in conv_op.input_tensors:
        op = t.op
        if op.tag == "dw_pad":
            s[op].compute_inline()
            for u in op.input_tensors:
                if u.op.tag == "dw_pack_data":
                    _schedule_pack(s, u.op, parallel)
        elif op.tag in ("dw_pack_kernel", "dw_pack_data"):
            _schedule_pack(s, op, parallel)


def _schedule_pack(s, op, parallel: bool) -> None:
    axes = list(s[op].op.axis)
    fused = s[op].fuse(*axes[:3]) if len(axes) >= 3 else axes[0]
    if parallel and op.tag == "dw_pack_data":
        s[op].parallel(fused)


def _vectorize_lanes(stage, axis, block: int) -> None:
    stage.vectorize(axis)


def _schedule_dw(s, cfg, C, O, what: str = "depthwise_conv2d_NCHWc", vectorize_output=_vectorize_lanes) -> None:
    """The register-tiled schedule of depthwise conv ``C`` whose fused output is ``O`` (5-D, or the 4-D
    unpacked form). ``vectorize_output(stage, channel_axis, block)`` vectorizes the output stage (the int8
    template passes one that works one int32 register at a time: 8 lanes on AVX2, 16 on AVX-512)."""
    reg_n = int(cfg["tile_ow"].size[-1])
    unroll_kw = bool(cfg["unroll_kw"].val)
    bn = get_const_tuple(C.shape)[-1]
    n, cc, oh, ow, _ = get_const_tuple(C.shape)
    ry, rx = C.op.reduce_axis
    kh = int(ry.dom.extent.value)
    flops = 2 * size_hint(n) * cc * size_hint(oh) * size_hint(ow) * bn * kh * int(rx.dom.extent.value)
    parallel = worth_parallel(flops)
    _schedule_inputs(s, C.op, parallel)
    CC = s.cache_write(C, "global") if C.op is O else C
    b, co, y, x, ci = nchwc_output_axes(s, O, bn, what)
    _tile_rows(s, CC, O, b, co, y, x, ci, reg_n, unroll_kw, vectorize_output)
    par = s[O].fuse(b, co, y)
    if parallel:
        s[O].parallel(par)


def _tile_rows(s, CC, O, b, co, y, x, ci, reg_n: int, unroll_kw: bool, vectorize_output=_vectorize_lanes):
    """The register tiles of a depthwise conv's rows: ``O``'s row split in ``reg_n``-pixel tiles (unrolled, the
    channel block vectorized), the accumulator stage ``CC`` computed per tile with the kernel window outside
    the unrolled pixels."""
    bn = get_const_tuple(CC.shape)[-1]
    xo, xi = s[O].split(x, factor=reg_n)
    s[O].reorder(b, co, y, xo, xi, ci)
    s[O].unroll(xi)
    vectorize_output(s[O], ci, bn)
    s[CC].compute_at(s[O], xo)
    _, _, _, cx, cci = s[CC].op.axis
    cry, crx = s[CC].op.reduce_axis
    s[CC].reorder(cry, crx, cx, cci)
    if int(cry.dom.extent.value) <= 5:
        s[CC].unroll(cry)
    if unroll_kw:
        s[CC].unroll(crx)
    s[CC].unroll(cx)
    s[CC].vectorize(cci)


def schedule_dw_at(s, DW, D, parent, axis) -> None:
    """Schedule depthwise conv ``DW`` (tensor), whose fused epilogue ``D`` is read by the stage ``parent``, so
    that the rows ``parent`` needs are computed at ``parent``'s loop ``axis`` (a fused depthwise + pointwise
    kernel: the pointwise conv's row tile). Serial, with the register tile of the depthwise conv's own config
    (tuned, or the fallback its compute filled in); ``D`` is ``DW`` when there is no epilogue (then the
    accumulators get a stage of their own)."""
    _schedule_inputs(s, DW.op, parallel=False)
    _inline_injective_above(s, D.op)  # the epilogue's inner stages (it stops at the depthwise conv)
    CC = s.cache_write(DW, "global") if D.op is DW.op else DW
    workload = get_workload([DW], TASK)
    cfg = autotvm.DispatchContext.current.query(_current_target(), workload) if workload else None
    try:
        reg_n, unroll_kw = int(cfg["tile_ow"].size[-1]), bool(cfg["unroll_kw"].val)
    except (KeyError, TypeError):  # no config of this template (a compute called outside AutoTVM's wrapper)
        _, _, _, ow, bn = get_const_tuple(DW.shape)
        reg_n = dw_row_tile(ow, -(-bn // simd_width()))
        unroll_kw = int(DW.op.reduce_axis[1].dom.extent.value) <= 5
    s[D].compute_at(s[parent], axis)
    b, co, y, x, ci = s[D].op.axis
    _tile_rows(s, CC, D, b, co, y, x, ci, reg_n, unroll_kw)


@autotvm.register_topi_schedule(TASK)
def schedule_depthwise_conv2d_NCHWc(cfg, outs):  # noqa: N802
    """Schedule of depthwise_conv2d_NCHWc (5-D output, with a fused epilogue) or of its unpacked NCHW form."""
    return schedule_anchored(outs, "depthwise_conv2d_NCHWc", lambda s, C, O: _schedule_dw(s, cfg, C, O))


schedule_depthwise_conv2d_nchw = schedule_depthwise_conv2d_NCHWc

__all__ = ["depthwise_conv2d_NCHWc", "schedule_depthwise_conv2d_NCHWc", "depthwise_conv2d_nchw",
           "schedule_depthwise_conv2d_nchw", "dw_channel_block", "dw_row_tile", "schedule_dw_at"]
