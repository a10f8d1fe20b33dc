"""AlterOpLayout hooks for x86 (TVM's ``topi/x86/conv2d_alter_op.py`` and ``dense_alter_op.py``).

* ``nn.conv2d`` (NCHW / OIHW, groups 1) -> ``nn.contrib_conv2d_NCHWc`` with data ``NCHW{ic_bn}c``, kernel
  ``OIHW{ic_bn}i{oc_bn}o`` and output ``NCHW{oc_bn}c``; depthwise (groups = channels, multiplier 1) ->
  ``nn.contrib_depthwise_conv2d_NCHWc`` with kernel ``OIHW1i{bn}o``. The block sizes are the ones the
  ``conv2d_NCHWc.x86`` template picks for the NCHW workload (tuned config or fallback).
* ``nn.dense`` with a 2-D data and a weight whose rows split by the packing width ->
  ``nn.contrib_dense_pack`` over ``layout_transform(weight, "NC", "NC{bn}n")``.

The layout rewriter places ``layout_transform`` where values cross layouts (graph boundaries, ops that must
see NCHW); FoldConstant then packs constant weights once at compile time. Hooks act only under a CPU target
(``with kiln.target.Target("llvm")``), and import Relay lazily (topi sits below relay).
"""
from __future__ import annotations

from ... import te
from ..utils import get_const_tuple


def _cpu_target():
    from ...target import Target
    tgt = Target.current(allow_none=True)
    if tgt is None or "cpu" not in (getattr(tgt, "keys", None) or []):
        return None
    return tgt


def _shape(tinfo) -> tuple:
    return tuple(int(getattr(d, "value", d)) for d in tinfo.shape)


def conv2d_alter_layout(attrs, inputs, tinfos, out_type):
    """The x86 layout choice for one ``nn.conv2d`` call (None keeps it as it is)."""
    if _cpu_target() is None:
        return None
    from ... import relay
    from . import conv2d as C
    if attrs.data_layout != "NCHW" or attrs.kernel_layout != "OIHW":
        return None
    d_t, k_t = tinfos[0], tinfos[1]
    if len(d_t.shape) != 4 or len(k_t.shape) != 4 or str(d_t.dtype) != "float32":
        return None
    dshape, kshape = _shape(d_t), _shape(k_t)
    n, ic, h, w = dshape
    oc, kic, kh, kw = kshape
    groups = int(attrs.groups)
    out_dtype = attrs.out_dtype or str(out_type.dtype)
    strides, padding, dilation = tuple(attrs.strides), tuple(attrs.padding), tuple(attrs.dilation)
    data = te.placeholder(dshape, str(d_t.dtype), name="data")
    kernel = te.placeholder(kshape, str(k_t.dtype), name="kernel")
    common = dict(strides=strides, padding=padding, dilation=dilation, groups=groups, channels=oc,
                  kernel_size=(kh, kw), out_dtype=attrs.out_dtype)
    if groups == 1:
        out = C.conv2d_NCHWc(data, kernel, strides, padding, dilation, "NCHW", "NCHW", out_dtype)
        oc_bn = get_const_tuple(out.shape)[-1]
        kvec = [t for t in out.op.input_tensors if t.op.name == "kernel_vec"][0]
        ic_bn = get_const_tuple(kvec.shape)[-2]
        return relay.nn.contrib_conv2d_nchwc(inputs[0], inputs[1], data_layout=f"NCHW{ic_bn}c",
                                             kernel_layout=f"OIHW{ic_bn}i{oc_bn}o", out_layout=f"NCHW{oc_bn}c",
                                             **common)
    if groups == ic and kic == 1 and oc == ic:
        out = C.depthwise_conv2d_NCHWc(data, kernel, strides, padding, dilation, "NCHW", "NCHW", out_dtype)
        bn = get_const_tuple(out.shape)[-1]
        return relay.nn.contrib_depthwise_conv2d_nchwc(inputs[0], inputs[1], data_layout=f"NCHW{bn}c",
                                                       kernel_layout=f"OIHW1i{bn}o", out_layout=f"NCHW{bn}c",
                                                       **common)
    return None


def dense_pack_width(units: int, lanes: int) -> int:
    """Packing width for a dense weight of ``units`` rows: 2 or 1 SIMD vectors, 0 when neither divides."""
    for bn in (2 * lanes, lanes):
        if units >= bn and units % bn == 0:
            return bn
    return 0


def dense_alter_layout(attrs, inputs, tinfos, out_type):
    """The x86 layout choice for one ``nn.dense`` call: pack the weight into NC{bn}n panels."""
    if _cpu_target() is None:
        return None
    from ... import relay
    from .utils import simd_width
    d_t, w_t = tinfos[0], tinfos[1]
    if len(d_t.shape) != 2 or len(w_t.shape) != 2 or str(d_t.dtype) != "float32":
        return None
    units = _shape(w_t)[0]
    bn = dense_pack_width(units, simd_width())
    if not bn:
        return None
    weight = relay.layout_transform(inputs[1], "NC", f"NC{bn}n")
    from ...relay.op.strategy.x86 import contrib_dense_pack
    return contrib_dense_pack(inputs[0], weight, units=units, out_dtype=attrs.out_dtype, weight_layout=f"NC{bn}n")
