"""x86 AlterOpLayout rewrites (TVM's ``_alter_conv2d_layout`` / ``_alter_dense_layout`` of ``topi/x86``), registered
for ``"cpu"`` on the generic functions of ``relay/op/nn/_alter_layout.py``. They live on the Relay side because they
build Relay calls; the layout decisions themselves (channel blocks, packing widths) are ``topi/x86``'s.

* ``nn.conv2d`` (NCHW / OIHW, groups 1) -> ``nn.contrib_conv2d_NCHWc`` with data ``NCHW{ic_bn}c``, kernel
  ``OIHW{ic_bn}i{oc_bn}o`` and output ``NCHW{oc_bn}c``; depthwise (groups = channels, multiplier 1) ->
  ``nn.contrib_depthwise_conv2d_NCHWc`` with kernel ``OIHW1i{bn}o``. The block sizes are the ones the
  ``conv2d_NCHWc.x86`` template picks for the NCHW workload (tuned config or fallback); a tuned config is
  also registered for the packed workload (``DispatchContext.update``) so the kernel built later uses its tiles.
  When a tuning log makes ``conv2d_NCHWc_winograd.x86`` the choice (a 3x3, stride-1 conv whose Winograd record
  is faster than its direct one), the call becomes ``nn.contrib_conv2d_winograd_without_weight_transform`` on
  ``NCHW{ic_bn}c`` data with the weight ``layout_transform(contrib_conv2d_winograd_weight_transform(w, m),
  "HWOI", "HWOI{oc_bn}o")``, which FoldConstant computes once.
* ``nn.dense`` with a 2-D data and a weight of at least one SIMD vector of rows ->
  ``nn.contrib_dense_pack`` over ``layout_transform(weight, "NC", "NC{bn}n")`` (``bn`` tuned or default); rows
  that ``bn`` does not divide (GPT-2's 50257-word LM head) are zero-padded first (``nn.pad``) and the packed
  dense keeps ``units``.
* ``nn.batch_matmul`` on int16 with a constant ``y`` (``batch_matmul_int16.x86``) -> ``nn.contrib_batch_matmul_pack``
  over ``y`` packed ``[B, N/16, ceil(K/2), 16, 2]`` (FoldConstant packs it once).

The layout rewriter places ``layout_transform`` where values cross layouts (graph boundaries, ops that must
see NCHW); FoldConstant then packs constant weights once at compile time.
"""
from __future__ import annotations

import copy

from .... import autotvm, te
from ....ir.op import Op
from ....target import Target
from ....topi.x86.conv2d_alter_op import conv_blocks, dense_pack_block, winograd_tile
from ....topi.x86.depthwise_conv2d import dw_channel_block
from ....topi.x86.utils import simd_width
from ...backend.te_compiler import select_implementation
from ..nn import _alter_layout
from ..nn import nn as relay_nn
from ..nn._dense_pack import contrib_dense_pack
from ..nn._batch_matmul_pack import contrib_batch_matmul_pack
from ..transform import layout_transform
from .. import transform as _transform
from .generic import _conv_args
from ....topi.x86.utils import size_hint
from ....ir.type import TensorType
from ....topi.x86.conv2d_int8 import ic_block, oc_block
from ....topi.x86.dense_int8 import N_BN


def _shape(tinfo) -> tuple:
    return tuple(int(getattr(d, "value", d)) for d in tinfo.shape)


class _RowsHint:
    """A dense data type whose unknown dims read as their size hint (``topi.x86.utils.size_hint``), for the
    layout choice only."""

    def __init__(self, t, k=None):
        self.shape = tuple(size_hint(d) for d in t.shape)
        if k is not None and self.shape:  # an unknown K is the weight's (checked at run time: dense_data)
            self.shape = self.shape[:-1] + (k,)
        self.dtype = t.dtype

    @staticmethod
    def out_type(out_type):
        return TensorType(tuple(size_hint(d) for d in out_type.shape), out_type.dtype)


class _Dims:
    """A shape holder for :func:`_is_dynamic` (some dims of a type)."""

    def __init__(self, shape):
        self.shape = tuple(shape)


def _is_dynamic(tinfos) -> bool:
    """Whether a type has an unknown (``relay.Any``) dim: the layout choice needs static workloads, so such
    calls keep their layout (the VM compiles them with symbolic extents)."""
    for t in tinfos:
        for d in t.shape:
            try:
                int(getattr(d, "value", d))
            except (TypeError, ValueError):
                return True
    return False


def _select(op_name: str, attrs, tinfos, out_type, target):
    """(implementation, outputs, workload, cfg) of the op as relay.build would compile it: the strategy's
    choice (or AutoTVM's tuned one) on placeholders of the call's types, the AutoTVM workload of that
    implementation and the current dispatch context's config for it (None, None when it is no template)."""
    placeholders = [te.placeholder(_shape(t), str(t.dtype), name=f"in{i}") for i, t in enumerate(tinfos)]
    impl, outs = select_implementation(Op.get(op_name), attrs, placeholders, out_type, target)
    workload = autotvm.task.get_workload(outs)
    if workload is None:
        return impl, outs, None, None
    return impl, outs, workload, autotvm.task.DispatchContext.current.query(target, workload)


def _remember_config(target, workload, cfg, new_args, task_name: str) -> None:
    """TVM's trick for tuned layouts: the kernel compiled later computes the translated (packed) workload,
    so the dispatch context is told to answer that workload with the config tuned for the original one
    (a fallback config is not forwarded: a packed workload tuned on its own keeps its own record)."""
    if cfg is None or getattr(cfg, "is_fallback", True):
        return
    new_workload = autotvm.task.args_to_workload(new_args, task_name)
    # a copy: update() marks its config cost 0 (user-provided, assumed best), and the original keeps its
    # measured cost for the next call of the same workload, where select_implementation compares costs
    # across templates (direct vs Winograd)
    autotvm.task.DispatchContext.current.update(target, new_workload, copy.copy(cfg))


def _alter_conv2d_int8(attrs, inputs, tinfos, out_type, target):
    """uint8 x int8 conv on the ``conv2d_NCHWc_int8.x86`` kernel -> ``nn.contrib_conv2d_NCHWc`` over
    NCHW{ic_bn}c data and an OIHW{oc_bn}o4i kernel (packed once, by FoldConstant), output NCHW{oc_bn}c
    (``oc_bn`` 16, or 8 for channel counts that are multiples of 8 only); only when the channels need no
    padding (input a multiple of 4, output of ``oc_bn``)."""
    _, _, workload, cfg = _select("nn.conv2d", attrs, tinfos[:2], out_type, target)
    strides, padding, dilation, out_dtype = _conv_args(attrs, out_type)
    n, _, h, w = _shape(tinfos[0])
    if workload is not None and workload[0] == "depthwise_conv2d_NCHWc_int8.x86":
        # int8 depthwise: NCHW{bn}c data / output (the block the int8 convs around it use), OIHW1i{bn}o kernel
        c, kh, kw = _shape(tinfos[0])[1], _shape(tinfos[1])[2], _shape(tinfos[1])[3]
        bn = oc_block(c)
        if c % bn:
            return None
        _remember_config(target, workload, cfg, [te.placeholder((n, c // bn, h, w, bn), "uint8", name="data"),
                                                 te.placeholder((c // bn, 1, kh, kw, 1, bn), "int8", name="kernel"),
                                                 strides, padding, dilation, f"NCHW{bn}c", f"NCHW{bn}c", out_dtype],
                         workload[0])
        return relay_nn.contrib_depthwise_conv2d_nchwc(
            inputs[0], inputs[1], strides=attrs.strides, padding=attrs.padding, dilation=attrs.dilation,
            groups=int(attrs.groups), channels=c, kernel_size=(kh, kw), out_dtype=attrs.out_dtype,
            data_layout=f"NCHW{bn}c", kernel_layout=f"OIHW1i{bn}o", out_layout=f"NCHW{bn}c")
    if workload is None or workload[0] != "conv2d_NCHWc_int8.x86":
        return None
    _, ic, _, _ = _shape(tinfos[0])
    oc, _, kh, kw = _shape(tinfos[1])
    ic_bn, oc_bn = ic_block(ic), oc_block(oc)
    if ic % ic_bn or oc % oc_bn:
        return None
    _remember_config(target, workload, cfg, [te.placeholder((n, ic // ic_bn, h, w, ic_bn), "uint8", name="data"),
                                             te.placeholder((oc // oc_bn, ic // 4, kh, kw, oc_bn, 4), "int8",
                                                            name="kernel"),
                                             strides, padding, dilation, f"NCHW{ic_bn}c", f"NCHW{oc_bn}c", out_dtype],
                     workload[0])
    return relay_nn.contrib_conv2d_nchwc(
        inputs[0], inputs[1], strides=attrs.strides, padding=attrs.padding, dilation=attrs.dilation,
        groups=int(attrs.groups), channels=oc, kernel_size=(kh, kw), out_dtype=attrs.out_dtype,
        data_layout=f"NCHW{ic_bn}c", kernel_layout=f"OIHW{oc_bn}o4i", out_layout=f"NCHW{oc_bn}c")


@_alter_layout.conv2d_alter_layout.register("cpu")
def conv2d_alter_layout_cpu(attrs, inputs, tinfos, out_type):
    """The x86 layout choice for one ``nn.conv2d`` call (None keeps it as it is).

    As in TVM: the implementation relay.build would pick for the NCHW call is selected; when it is the
    ``conv2d_NCHWc.x86`` / ``depthwise_conv2d_NCHWc.x86`` template, its config for the NCHW workload
    (tuned, or the fallback) gives the channel blocks, the call becomes the packed op, and the packed
    workload is registered in the dispatch context with that config so the kernel uses the tuned tiles."""
    target = Target.current()
    if attrs.data_layout != "NCHW" or attrs.kernel_layout != "OIHW":
        return None
    d_t, k_t = tinfos[0], tinfos[1]
    if _is_dynamic([k_t]) or len(d_t.shape) != 4 or _is_dynamic([_Dims(d_t.shape[1:2])]):
        return None
    if _is_dynamic([_Dims(d_t.shape[2:])]):
        # unknown height / width (a VM model): the float NCHWc convs run them symbolically (direct: rows one
        # at a time, the register row of pixels over a run-time width with a guarded last tile; Winograd:
        # a run-time tile count, the last tile row / column over a padded input); the int8 templates tile
        # static sizes, so they keep the layout
        if str(d_t.dtype) != "float32":
            return None
    if _is_dynamic([d_t]):
        # an unknown batch (a VM model): the NCHWc layout (or Winograd) is chosen at the batch's size
        # hint; the direct conv's batch is its outermost loop and Winograd's tiles run over batch x tile rows x
        # tile columns (a symbolic count padded to whole GEMM blocks of zero tiles), so one kernel serves every batch
        # with the static build's schedule. Unknown H/W are taken at the same hint.
        d_t = _RowsHint(d_t)
        tinfos = [d_t] + list(tinfos[1:])
        out_type = _RowsHint.out_type(out_type)
    if len(d_t.shape) == 4 and len(k_t.shape) == 4 and str(d_t.dtype) == "uint8" and str(k_t.dtype) == "int8":
        return _alter_conv2d_int8(attrs, inputs, tinfos, out_type, target)
    if len(d_t.shape) != 4 or len(k_t.shape) != 4 or str(d_t.dtype) != "float32":
        return None
    _, outs, workload, cfg = _select("nn.conv2d", attrs, tinfos[:2], out_type, target)
    if workload is None or workload[0] not in ("conv2d_NCHWc.x86", "depthwise_conv2d_NCHWc.x86",
                                               "conv2d_NCHWc_winograd.x86"):
        return None
    n, ic, h, w = _shape(d_t)
    oc, kic, kh, kw = _shape(k_t)
    ic_bn, oc_bn = conv_blocks(cfg, outs)
    if not ic_bn or not oc_bn or ic % ic_bn or oc % oc_bn:
        return None
    strides, padding, dilation, out_dtype = _conv_args(attrs, out_type)
    common = dict(strides=attrs.strides, padding=attrs.padding, dilation=attrs.dilation, groups=int(attrs.groups),
                  channels=oc, kernel_size=(kh, kw), out_dtype=attrs.out_dtype)
    dtype = str(d_t.dtype)
    new_data = te.placeholder((n, ic // ic_bn, h, w, ic_bn), dtype, name="data")
    if workload[0] == "conv2d_NCHWc_winograd.x86":
        # tuned to Winograd: the weight is transformed (and blocked) once, by FoldConstant
        m = winograd_tile(cfg, outs)
        alpha = m + 2
        data_layout, kernel_layout, out_layout = f"NCHW{ic_bn}c", f"HWOI{oc_bn}o", f"NCHW{oc_bn}c"
        new_kernel = te.placeholder((alpha, alpha, oc // oc_bn, ic, oc_bn), str(k_t.dtype), name="kernel")
        _remember_config(target, workload, cfg, [new_data, new_kernel, strides, padding, dilation, data_layout,
                                                 out_layout, out_dtype], workload[0])
        weight = layout_transform(relay_nn.contrib_conv2d_winograd_weight_transform(inputs[1], m), "HWOI",
                                  kernel_layout)
        return relay_nn.contrib_conv2d_winograd_without_weight_transform(
            inputs[0], weight, m, data_layout=data_layout, kernel_layout=kernel_layout, out_layout=out_layout,
            **common)
    data = inputs[0]
    if workload[0] == "conv2d_NCHWc.x86":
        data_layout, kernel_layout, out_layout = f"NCHW{ic_bn}c", f"OIHW{ic_bn}i{oc_bn}o", f"NCHW{oc_bn}c"
        new_kernel = te.placeholder((oc // oc_bn, ic // ic_bn, kh, kw, ic_bn, oc_bn), str(k_t.dtype), name="kernel")
        make = relay_nn.contrib_conv2d_nchwc
        if _pad_outside(ic_bn, padding, d_t):
            # a narrow input block (the 3-channel stem): the padding becomes an nn.pad of the NCHW input, which
            # fuses with the graph's input layout_transform into one pass, where the conv's own padded copy was a
            # second pass over the image with 3-lane vectors (serial: under the parallel-work threshold)
            pt, pl, pb, pr = padding
            data = relay_nn.pad(data, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
            h, w, padding = h + pt + pb, w + pl + pr, (0, 0, 0, 0)
            common["padding"] = padding
            new_data = te.placeholder((n, ic // ic_bn, h, w, ic_bn), dtype, name="data")
    else:
        # depthwise (kiln.topi.x86.depthwise_conv2d): one channel block for data, kernel and output, the
        # config's tile_oc (the fallback is dw_channel_block, the block of the neighbouring 1x1 convs)
        bn = oc_bn or dw_channel_block(oc)
        if oc % bn:
            return None
        new_data = te.placeholder((n, ic // bn, h, w, bn), dtype, name="data")
        data_layout, kernel_layout, out_layout = f"NCHW{bn}c", f"OIHW1i{bn}o", f"NCHW{bn}c"
        new_kernel = te.placeholder((oc // bn, 1, kh, kw, 1, bn), str(k_t.dtype), name="kernel")
        make = relay_nn.contrib_depthwise_conv2d_nchwc
    _remember_config(target, workload, cfg, [new_data, new_kernel, strides, padding, dilation, data_layout,
                                             out_layout, out_dtype], workload[0])
    return make(data, inputs[1], data_layout=data_layout, kernel_layout=kernel_layout, out_layout=out_layout,
                **common)


def _pad_outside(ic_bn: int, padding, d_t) -> bool:
    """Whether a direct NCHWc conv's padding is better an ``nn.pad`` in front of it: an input block narrower
    than a SIMD vector (the 3-channel stem of a CNN) with a static size. Its padded copy inside the kernel is
    a loop of 3-lane vectors over the whole image; as an nn.pad of the NCHW input it fuses with the input's
    layout_transform (one pass instead of two). mobilenet_v2's stem (3 -> 32, 3x3/2 at 224x224), layout
    transform + conv: 170 -> 140 us on one thread, 142 -> 98 us on two (AMD Zen 5, median of 30 rounds). FuseOps'
    ``input_transform`` rule then puts that pass inside the conv's kernel, per row tile."""
    if ic_bn >= simd_width() or not any(padding):
        return False
    return not _is_dynamic([d_t]) and not isinstance(d_t, _RowsHint)


def _alter_dense_panels(attrs, inputs, tinfos, out_type, target, task: str, group: int):
    """A dense on the packed int kernel ``task`` -> ``nn.contrib_dense_pack`` over an NC16n{group}c weight (packed
    once by FoldConstant); only when ``group`` divides K. Rows that 16 does not divide are zero-padded first
    (``nn.pad``, also folded) and the packed dense keeps ``units``."""
    _, _, workload, cfg = _select("nn.dense", attrs, tinfos[:2], out_type, target)
    if workload is None or workload[0] != task:
        return None
    units, k = _shape(tinfos[1])
    if k % group:
        return None
    pad = -units % N_BN
    # a tuned config of the plain workload serves the packed one (the arguments dense_pack_strategy_cpu passes)
    new_args = [te.placeholder(_shape(tinfos[0]), str(tinfos[0].dtype), name="data"),
                te.placeholder(((units + pad) // N_BN, k // group, N_BN, group), str(tinfos[1].dtype),
                               name="weight"), None, "int32"] + ([units] if pad else [])
    _remember_config(target, workload, cfg, new_args, task)
    weight = inputs[1]
    if pad:
        weight = relay_nn.pad(weight, ((0, pad), (0, 0)))
    weight = layout_transform(weight, "NC", f"NC{N_BN}n{group}c")
    return contrib_dense_pack(inputs[0], weight, units=units if pad else None, out_dtype=attrs.out_dtype,
                              weight_layout=f"NC{N_BN}n{group}c")


def _alter_dense_int8(attrs, inputs, tinfos, out_type, target):
    """uint8 x int8 dense on ``dense_int8.x86`` -> NC16n4c (TVM's int8 packing; the 1000-class classifier is padded
    to 1008 rows)."""
    return _alter_dense_panels(attrs, inputs, tinfos, out_type, target, "dense_int8.x86", 4)


def _alter_dense_int16(attrs, inputs, tinfos, out_type, target):
    """int16 x int16 dense on ``dense_int16.x86`` -> NC16n2c."""
    return _alter_dense_panels(attrs, inputs, tinfos, out_type, target, "dense_int16.x86", 2)


@_alter_layout.dense_alter_layout.register("cpu")
def dense_alter_layout_cpu(attrs, inputs, tinfos, out_type):
    """The x86 layout choice for one ``nn.dense`` call: pack the weight into NC{bn}n panels, ``bn`` from the
    ``dense_pack.x86`` config when it is tuned (else 2 or 1 SIMD vectors), forwarding a tuned config to the
    packed workload as :func:`conv2d_alter_layout_cpu` does. When ``bn`` does not divide the units the weight is
    zero-padded to whole panels first (``nn.pad``; FoldConstant does both at compile time) and the packed
    dense keeps ``units``, so its output has the original width."""
    target = Target.current()
    d_t, w_t = tinfos[0], tinfos[1]
    if _is_dynamic([w_t]):
        return None
    if len(d_t.shape) == 2 and len(w_t.shape) == 2 and (str(d_t.dtype), str(w_t.dtype)) in (("uint8", "int8"),
                                                                                          ("int16", "int16")):
        if _is_dynamic([_Dims(d_t.shape[1:])]):
            return None
        if _is_dynamic([d_t]):  # unknown rows only (a VM model): chosen at the rows' size hint, weight packed
            tinfos = [_RowsHint(d_t)] + list(tinfos[1:])
            out_type = _RowsHint.out_type(out_type)
        alter = _alter_dense_int8 if str(d_t.dtype) == "uint8" else _alter_dense_int16
        return alter(attrs, inputs, tinfos, out_type, target)
    if _is_dynamic([d_t]):
        # unknown rows (a VM model): the weight is still packed at compile time, the choice made for a
        # representative row count (the dense_pack kernel runs any row count)
        d_t = _RowsHint(d_t, _shape(w_t)[1] if len(w_t.shape) == 2 else None)
    if len(d_t.shape) != 2 or len(w_t.shape) != 2 or str(d_t.dtype) != "float32":
        return None
    units, k = _shape(w_t)
    _, _, workload, cfg = _select("nn.dense", attrs, [d_t, w_t], out_type if not isinstance(d_t, _RowsHint)
                                  else d_t.out_type(out_type), target)
    if workload is None or workload[0] != "dense_pack.x86":
        return None
    if cfg is not None and not getattr(cfg, "is_fallback", True):
        bn = int(cfg["tile_x"].size[-1])
    else:
        bn = dense_pack_block(units, simd_width())
    if not bn:
        return None
    nb = -(-units // bn)
    pad = nb * bn - units
    out_dtype = attrs.out_dtype or str(out_type.dtype)
    new_weight = te.placeholder((nb, k, bn), str(w_t.dtype), name="weight")
    new_data = te.placeholder(_shape(d_t), str(d_t.dtype), name="data")
    new_args = [new_data, new_weight, None, out_dtype] + ([units] if pad else [])
    _remember_config(target, workload, cfg, new_args, "dense_pack.x86")
    weight = inputs[1]
    if pad:
        weight = relay_nn.pad(weight, ((0, pad), (0, 0)))
    weight = layout_transform(weight, "NC", f"NC{bn}n")
    return contrib_dense_pack(inputs[0], weight, units=units, out_dtype=attrs.out_dtype, weight_layout=f"NC{bn}n")


@_alter_layout.batch_matmul_alter_layout.register("cpu")
def batch_matmul_alter_layout_cpu(attrs, inputs, tinfos, out_type):
    """An int16 ``nn.batch_matmul`` on ``batch_matmul_int16.x86`` whose ``y`` is a constant (QNN weights) ->
    ``nn.contrib_batch_matmul_pack`` over ``y`` packed ``[B, N/16, ceil(K/2), 16, 2]`` by Relay ops (transpose,
    pad, reshape) that FoldConstant computes once; the kernel then skips its per-call packing. An activation
    ``y`` keeps the call (the kernel packs it per batch, in cache)."""
    from ...expr import Constant
    target = Target.current()
    x_t, y_t = tinfos[0], tinfos[1]
    if not isinstance(inputs[1], Constant) or _is_dynamic([x_t, y_t]) or len(y_t.shape) != 3:
        return None
    if str(x_t.dtype) != "int16" or str(y_t.dtype) != "int16" or str(out_type.dtype) != "int32":
        return None
    _, _, workload, cfg = _select("nn.batch_matmul", attrs, tinfos[:2], out_type, target)
    if workload is None or workload[0] != "batch_matmul_int16.x86":
        return None
    y = inputs[1]
    if not attrs.transpose_b:
        y = _transform.transpose(y, (0, 2, 1))
    b, n, k = _shape(y_t) if attrs.transpose_b else (_shape(y_t)[0], _shape(y_t)[2], _shape(y_t)[1])
    pad_n, pad_k = -n % N_BN, -k % 2
    # the arguments of contrib_batch_matmul_pack's strategy
    new_args = [te.placeholder(_shape(x_t), "int16", name="x"),
                te.placeholder((b, (n + pad_n) // N_BN, (k + pad_k) // 2, N_BN, 2), "int16", name="y"), None,
                "int32", bool(attrs.transpose_a), True] + ([n] if pad_n else [])
    _remember_config(target, workload, cfg, new_args, "batch_matmul_int16.x86")
    if pad_n or pad_k:
        y = relay_nn.pad(y, ((0, 0), (0, pad_n), (0, pad_k)))
    y = _transform.reshape(y, (b, (n + pad_n) // N_BN, N_BN, (k + pad_k) // 2, 2))
    y = _transform.transpose(y, (0, 1, 3, 2, 4))
    return contrib_batch_matmul_pack(inputs[0], y, units=n if pad_n else None, out_dtype="int32",
                                     transpose_a=bool(attrs.transpose_a))
