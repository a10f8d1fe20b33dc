"""x86 strategies (TVM's ``relay/op/strategy/x86.py``): for targets with the "cpu" key (``llvm``, ``c``) the
``kiln.topi.x86`` implementations join the generic ones at a higher plevel. Everything here is a registration
on a generic strategy of ``generic.py`` (``@G.conv2d_strategy.register("cpu")``):

* conv2d (NCHW, groups 1 / depthwise) -> ``conv2d_NCHWc.x86`` / ``depthwise_conv2d_NCHWc.x86`` (packing inside
  the kernel when AlterOpLayout did not run), ``nn.contrib_conv2d_NCHWc`` / ``nn.contrib_depthwise_conv2d_NCHWc``
  -> the packed kernels; 3x3 stride-1 conv2d also -> ``conv2d_NCHWc_winograd.x86`` at a lower plevel (taken
  only where a tuning record is faster), ``nn.contrib_conv2d_winograd_without_weight_transform`` -> its packed
  form;
* dense (2-D data) -> ``dense_pack.x86``; ``nn.contrib_dense_pack`` (weight pre-packed by AlterOpLayout);
  batch_matmul -> ``batch_matmul.x86`` (int16 x int16 -> int32 also ``batch_matmul_int16.x86``);
* softmax, fast_softmax -> ``topi.x86.softmax_x86`` (vectorizable row reductions, fast exp); tanh, erf ->
  vectorizable computes (``topi.fast_tanh``, ``topi.fast_erf``).

Ops with a generic strategy need nothing here: their ``topi.generic`` schedule (injective, reduce, pool,
softmax, layer_norm, ...) is a generic function that ``topi/x86`` registers its vectorized schedule on. The
AlterOpLayout rewrites are in ``x86_alter_op.py``.
"""
from __future__ import annotations

from .... import topi
from ....error import OpNotImplemented
from ....topi import x86 as topi_x86
from ..op import OpStrategy, schedule_by_name
from . import generic as G
from .generic import wrap_topi_schedule as _wrap
from ....topi.x86.conv2d_int8 import int8_supported
from ....target.x86 import get_simd_width
from ....topi.x86.conv2d_winograd import winograd_pays

X86_PLEVEL = 15


def _dense_pack_compute(attrs, inputs, out_type):
    nb, _, bn = (int(d) for d in inputs[1].shape)
    units = None if attrs.units is None or int(attrs.units) == nb * bn else int(attrs.units)
    extra = () if units is None else (units,)  # the workload of an unpadded weight stays TVM's 4 arguments
    return [topi_x86.dense_pack(G.dense_data(inputs[0], inputs[1]), inputs[1], None,
                                attrs.out_dtype or out_type.dtype, *extra)]


@G.dense_pack_strategy.register("cpu")
def dense_pack_strategy_cpu(attrs, inputs, out_type, target):
    strategy = OpStrategy()
    if len(inputs[1].shape) == 4 and str(inputs[1].dtype) == "int16":  # NC16n2c (AlterOpLayout of dense_int16.x86)
        def compute_int16(a, ins, t):
            nb, bn = int(ins[1].shape[0]), int(ins[1].shape[2])
            extra = () if a.units is None or int(a.units) == nb * bn else (int(a.units),)
            return [topi_x86.dense_int16(ins[0], ins[1], None, "int32", *extra)]
        strategy.add_implementation(compute_int16, _wrap(topi_x86.schedule_dense_int16), name="dense_int16.x86",
                                    plevel=X86_PLEVEL)
        return strategy
    if len(inputs[1].shape) == 4:  # NC16n4c int8 weight (AlterOpLayout of dense_int8.x86)
        def compute_int8(a, ins, t):
            nb, bn = int(ins[1].shape[0]), int(ins[1].shape[2])
            # the units argument only where the weight's last panel is zero-padded (the workload stays 4 args)
            extra = () if a.units is None or int(a.units) == nb * bn else (int(a.units),)
            return [topi_x86.dense_int8(ins[0], ins[1], None, "int32", *extra)]
        strategy.add_implementation(
            compute_int8,
            _wrap(topi_x86.schedule_dense_int8), name="dense_int8.x86", plevel=X86_PLEVEL)
        return strategy
    strategy.add_implementation(_dense_pack_compute, _wrap(topi_x86.schedule_dense_pack),
                                name="dense_pack.x86", plevel=X86_PLEVEL)
    return strategy


# -- conv2d ---------------------------------------------------------------------------------------------------
_conv_args = G._conv_args


def _conv2d_nchw_compute(attrs, inputs, out_type):
    strides, padding, dilation, out_dtype = _conv_args(attrs, out_type)
    return [topi_x86.conv2d_nchw(inputs[0], inputs[1], strides, padding, dilation, out_dtype)]


def _depthwise_nchw_compute(attrs, inputs, out_type):
    strides, padding, dilation, out_dtype = _conv_args(attrs, out_type)
    return [topi_x86.depthwise_conv2d_nchw(inputs[0], inputs[1], strides, padding, dilation, out_dtype)]


def _is_depthwise(attrs, inputs) -> bool:
    c = getattr(inputs[0].shape[1], "value", inputs[0].shape[1])
    k = [getattr(x, "value", x) for x in inputs[1].shape]
    return isinstance(c, int) and attrs.groups == c and k[1] == 1 and k[0] == c


def _all_static(dims) -> bool:
    """Whether every dim is a known size (an int or IntImm; not Any or a shape variable)."""
    return all(isinstance(getattr(d, "value", d), int) for d in dims)


def _static_conv(inputs, out_type) -> bool:
    """Static sizes but the batch (NCHW data and output, the whole weight): the NCHWc schedules tile them (a VM
    kernel over unknown spatial sizes or a run-time weight of unknown shape takes the generic direct conv)."""
    return _all_static(list(inputs[0].shape[1:]) + list(inputs[1].shape) + list(out_type.shape[1:]))


def _static_channels(inputs, out_type) -> bool:
    """Static channels and weight (batch, height and width may be unknown): the float NCHWc schedules take a
    symbolic height and width (a VM kernel over unknown spatial sizes: rows one at a time, the register
    row of output pixels over a run-time width with a guarded last tile), tuned at a size hint."""
    return _all_static([inputs[0].shape[1]] + list(inputs[1].shape) + [out_type.shape[1]])


def _winograd_nchw_compute(attrs, inputs, out_type):
    strides, padding, dilation, out_dtype = _conv_args(attrs, out_type)
    return [topi_x86.conv2d_nchw_winograd(inputs[0], inputs[1], strides, padding, dilation, out_dtype)]


def _winograd_applies(attrs, inputs) -> bool:
    k = [int(x) for x in inputs[1].shape]
    return (attrs.groups == 1 and k[2:] == [3, 3] and tuple(attrs.strides) == (1, 1)
            and tuple(attrs.dilation) == (1, 1))


# Winograd joins below the direct conv, except where ``topi.x86.conv2d_winograd.winograd_pays`` (enough channels
# and output pixels: 1.4-3.5x the direct conv's speed on resnet's 3x3 layers, untuned, AVX2; with AVX-512 not
# where its transformed weights stream for too few tiles, e.g. 512@7), where it joins above it.
# A tuning log overrides either way (select_implementation compares the tuned costs of both templates). Its
# float32 rounding error is larger (F(4x4, 3x3) ~1e-5 relative, F(2x2) ~1e-6), so small convs keep the direct one.
WINOGRAD_PLEVEL = X86_PLEVEL - 5
WINOGRAD_DEFAULT_PLEVEL = X86_PLEVEL + 1


def _winograd_plevel(inputs, out_type, target) -> int:
    try:
        int(inputs[0].shape[0])  # the Winograd schedule tiles over batch x tiles: static sizes only
        ic = int(inputs[0].shape[1])
        oc, oh, ow = (int(x) for x in out_type.shape[1:4])
    except (TypeError, ValueError):  # a symbolic batch, channel or spatial dim (a VM kernel): the direct conv
        return WINOGRAD_PLEVEL
    lanes = get_simd_width(target, "float32")
    return WINOGRAD_DEFAULT_PLEVEL if winograd_pays(ic, oc, oh, ow, lanes) else WINOGRAD_PLEVEL


def _conv2d_int8_compute(attrs, inputs, out_type):
    strides, padding, dilation, out_dtype = _conv_args(attrs, out_type)
    return [topi_x86.conv2d_nchw_int8(inputs[0], inputs[1], strides, padding, dilation, out_dtype or "int32")]


def _int8_conv_applies(attrs, inputs, out_type, target) -> bool:
    """uint8 x int8 -> int32 regular NCHW conv on a target with an int8 dot product (AVX2 at least)."""
    return (attrs.data_layout == "NCHW" and attrs.kernel_layout == "OIHW" and attrs.groups == 1
            and str(inputs[0].dtype) == "uint8" and str(inputs[1].dtype) == "int8"
            and str(out_type.dtype) == "int32" and int8_supported(target) and _static_conv(inputs, out_type))


def _depthwise_int8_compute(attrs, inputs, out_type):
    strides, padding, dilation, out_dtype = _conv_args(attrs, out_type)
    return [topi_x86.depthwise_conv2d_nchw_int8(inputs[0], inputs[1], strides, padding, dilation,
                                                out_dtype or "int32")]


def _int8_depthwise_applies(attrs, inputs, out_type, target) -> bool:
    """uint8 x int8 -> int32 NCHW depthwise conv (multiplier 1) on a target with AVX2."""
    return (attrs.data_layout == "NCHW" and attrs.kernel_layout == "OIHW" and attrs.groups > 1
            and _is_depthwise(attrs, inputs) and str(inputs[0].dtype) == "uint8"
            and str(inputs[1].dtype) == "int8" and str(out_type.dtype) == "int32" and int8_supported(target)
            and _static_conv(inputs, out_type))


@G.conv2d_strategy.register("cpu")
def conv2d_strategy_cpu(attrs, inputs, out_type, target):
    strategy = G.conv2d_strategy.fdefault(attrs, inputs, out_type, target)
    if _int8_conv_applies(attrs, inputs, out_type, target):
        strategy.add_implementation(_conv2d_int8_compute, _wrap(topi_x86.schedule_conv2d_nchw_int8),
                                    name="conv2d_NCHWc_int8.x86", plevel=X86_PLEVEL)
    if _int8_depthwise_applies(attrs, inputs, out_type, target):
        strategy.add_implementation(_depthwise_int8_compute, _wrap(topi_x86.schedule_depthwise_conv2d_nchw_int8),
                                    name="depthwise_conv2d_NCHWc_int8.x86", plevel=X86_PLEVEL)
    if attrs.data_layout == "NCHW" and attrs.kernel_layout == "OIHW" and str(inputs[0].dtype) == "float32" \
            and _static_channels(inputs, out_type):
        if attrs.groups == 1:
            strategy.add_implementation(_conv2d_nchw_compute, _wrap(topi_x86.schedule_conv2d_nchw),
                                        name="conv2d_NCHWc.x86", plevel=X86_PLEVEL)
            # Winograd tiles static spatial sizes: unknown H/W keep the direct NCHWc conv
            if _winograd_applies(attrs, inputs) and _static_conv(inputs, out_type):
                strategy.add_implementation(_winograd_nchw_compute, _wrap(topi_x86.schedule_conv2d_nchw_winograd),
                                            name="conv2d_NCHWc_winograd.x86",
                                            plevel=_winograd_plevel(inputs, out_type, target))
        elif _is_depthwise(attrs, inputs):
            strategy.add_implementation(_depthwise_nchw_compute, _wrap(topi_x86.schedule_depthwise_conv2d_nchw),
                                        name="depthwise_conv2d_NCHWc.x86", plevel=X86_PLEVEL)
    return strategy


def _nchwc_compute(fn):
    def compute(attrs, inputs, out_type):
        strides, padding, dilation, out_dtype = _conv_args(attrs, out_type)
        return [fn(inputs[0], inputs[1], strides, padding, dilation, attrs.data_layout,
                   attrs.out_layout or attrs.data_layout, out_dtype)]
    return compute


@G.conv2d_NCHWc_strategy.register("cpu")
def conv2d_NCHWc_strategy_cpu(attrs, inputs, out_type, target):  # noqa: N802 (TVM's name)
    strategy = OpStrategy()
    if str(inputs[0].dtype) == "uint8" and str(inputs[1].dtype) == "int8":
        # the int8 layout AlterOpLayout makes: NCHW{ic_bn}c data, OIHW16o4i kernel
        strategy.add_implementation(_nchwc_compute(topi_x86.conv2d_NCHWc_int8),
                                    _wrap(topi_x86.schedule_conv2d_NCHWc_int8), name="conv2d_NCHWc_int8.x86",
                                    plevel=X86_PLEVEL)
        return strategy
    strategy.add_implementation(_nchwc_compute(topi_x86.conv2d_NCHWc), _wrap(topi_x86.schedule_conv2d_NCHWc),
                                name="conv2d_NCHWc.x86", plevel=X86_PLEVEL)
    return strategy


@G.conv2d_winograd_without_weight_transform_strategy.register("cpu")
def conv2d_winograd_without_weight_transform_strategy_cpu(attrs, inputs, out_type, target):
    if len(inputs[0].shape) != 5 or len(inputs[1].shape) != 5:
        raise OpNotImplemented(
            "nn.contrib_conv2d_winograd_without_weight_transform on CPU computes on NCHW<x>c data with an "
            f"HWOI<o>o transformed weight (what AlterOpLayout produces); got data_layout={attrs.data_layout}, "
            f"kernel_layout={attrs.kernel_layout}: run relay.build at opt_level 3, or use nn.conv2d")
    strategy = OpStrategy()
    strategy.add_implementation(_nchwc_compute(topi_x86.conv2d_NCHWc_winograd),
                                _wrap(topi_x86.schedule_conv2d_NCHWc_winograd), name="conv2d_NCHWc_winograd.x86", plevel=X86_PLEVEL)
    return strategy


@G.depthwise_conv2d_NCHWc_strategy.register("cpu")
def depthwise_conv2d_NCHWc_strategy_cpu(attrs, inputs, out_type, target):  # noqa: N802
    strategy = OpStrategy()
    if str(inputs[0].dtype) == "uint8" and str(inputs[1].dtype) == "int8":
        # the int8 depthwise layout AlterOpLayout makes: NCHW16c data, OIHW1i16o kernel
        strategy.add_implementation(_nchwc_compute(topi_x86.depthwise_conv2d_NCHWc_int8),
                                    _wrap(topi_x86.schedule_depthwise_conv2d_NCHWc_int8),
                                    name="depthwise_conv2d_NCHWc_int8.x86", plevel=X86_PLEVEL)
        return strategy
    strategy.add_implementation(_nchwc_compute(topi_x86.depthwise_conv2d_NCHWc),
                                _wrap(topi_x86.schedule_depthwise_conv2d_NCHWc),
                                name="depthwise_conv2d_NCHWc.x86", plevel=X86_PLEVEL)
    return strategy


# -- dense / batch_matmul ---------------------------------------------------------------------------------
@G.dense_strategy.register("cpu")
def dense_strategy_cpu(attrs, inputs, out_type, target):
    strategy = G.dense_strategy.fdefault(attrs, inputs, out_type, target)
    # the int8/int16 kernels serve unknown rows (a VM kernel over a dynamic batch; tiles at the size hint); an
    # unknown K or weight takes the generic dense
    if (len(inputs[0].shape) == 2 and str(inputs[0].dtype) == "uint8" and str(inputs[1].dtype) == "int8"
            and str(out_type.dtype) == "int32" and int8_supported(target) and _static_but_rows(inputs)):
        def compute_int8(attrs, inputs, out_type):
            return [topi_x86.dense_int8(inputs[0], inputs[1], None, "int32")]
        strategy.add_implementation(compute_int8, _wrap(topi_x86.schedule_dense_int8), name="dense_int8.x86",
                                    plevel=X86_PLEVEL + 1)
        return strategy
    if (len(inputs[0].shape) == 2 and str(inputs[0].dtype) == "int16" and str(inputs[1].dtype) == "int16"
            and str(out_type.dtype) == "int32" and int8_supported(target) and _static_but_rows(inputs)):
        # the exact int8 dense without VNNI (x86 QNN legalization): vpmaddwd on int16 operands
        def compute_int16(attrs, inputs, out_type):
            return [topi_x86.dense_int16(inputs[0], inputs[1], None, "int32")]
        strategy.add_implementation(compute_int16, _wrap(topi_x86.schedule_dense_int16), name="dense_int16.x86",
                                    plevel=X86_PLEVEL + 1)
        return strategy
    if len(inputs[0].shape) == 2:
        def compute(attrs, inputs, out_type):
            return [topi_x86.dense_pack(G.dense_data(inputs[0], inputs[1]), inputs[1], None,
                                        attrs.out_dtype or out_type.dtype)]
        strategy.add_implementation(compute, _wrap(topi_x86.schedule_dense_pack), name="dense_pack.x86",
                                    plevel=X86_PLEVEL)
    return strategy


def _static(inputs) -> bool:
    return _all_static(d for t in inputs for d in t.shape)


def _static_but_rows(inputs) -> bool:
    """Static sizes but the data's rows (dim 0): the int8/int16 dense kernels take a symbolic M."""
    return _all_static(list(inputs[1].shape) + list(inputs[0].shape[1:]))


@G.batch_matmul_strategy.register("cpu")
def batch_matmul_strategy_cpu(attrs, inputs, out_type, target):
    strategy = G.batch_matmul_strategy.fdefault(attrs, inputs, out_type, target)
    if (str(inputs[0].dtype) == "int16" and str(inputs[1].dtype) == "int16" and str(out_type.dtype) == "int32"
            and int8_supported(target) and _static(inputs)):
        # the exact 8-bit qnn.batch_matmul (x86 QNN legalization): vpmaddwd on int16 operands, y packed per batch
        def compute_int16(attrs, inputs, out_type):
            return [topi_x86.batch_matmul_int16(inputs[0], inputs[1], None, "int32", bool(attrs.transpose_a),
                                                bool(attrs.transpose_b))]
        strategy.add_implementation(compute_int16, _wrap(topi_x86.schedule_batch_matmul_int16),
                                    name="batch_matmul_int16.x86", plevel=X86_PLEVEL + 1)

    def compute(attrs, inputs, out_type):
        return [topi_x86.batch_matmul(inputs[0], inputs[1], None, attrs.out_dtype or out_type.dtype,
                                  bool(attrs.transpose_a), bool(attrs.transpose_b))]
    strategy.add_implementation(compute, _wrap(topi_x86.schedule_batch_matmul), name="batch_matmul.x86",
                                plevel=X86_PLEVEL)
    return strategy


@G.batch_matmul_pack_strategy.register("cpu")
def batch_matmul_pack_strategy_cpu(attrs, inputs, out_type, target):
    """The packed-y form of ``batch_matmul_int16.x86`` (AlterOpLayout's rewrite of a constant int16 ``y``)."""
    if str(inputs[0].dtype) != "int16" or str(inputs[1].dtype) != "int16" or len(inputs[1].shape) != 5:
        raise OpNotImplemented(f"nn.contrib_batch_matmul_pack: implemented for int16 x and a packed int16 y, got "
                               f"{inputs[0].dtype} x {inputs[1].dtype}")
    strategy = OpStrategy()

    def compute(a, ins, t):
        nb, bn = int(ins[1].shape[1]), int(ins[1].shape[3])
        extra = () if a.units is None or int(a.units) == nb * bn else (int(a.units),)
        return [topi_x86.batch_matmul_int16(ins[0], ins[1], None, "int32", bool(a.transpose_a), True, *extra)]
    strategy.add_implementation(compute, _wrap(topi_x86.schedule_batch_matmul_int16), name="batch_matmul_int16.x86",
                                plevel=X86_PLEVEL)
    return strategy


# -- vectorizable computes ----------------------------------------------------------------------------------------
# Elementwise ops whose CPU compute vectorizes: float32 tanh / erf lower to the vector C helpers of
# kiln.target.vector_math (within 2 / 3 ulp, no libm call per lane; topi.fast_tanh / fast_erf stay opt-in through
# FastMath), softmax by topi.nn.fast_softmax (docs/architecture.md). GELU (BERT's erf form, GPT-2's tanh form) is
# the common user.
def _unary_strategy(name: str, topi_compute):
    def compute(attrs, inputs, out_type):
        return [topi_compute(inputs[0])]
    strategy = OpStrategy()
    strategy.add_implementation(compute, schedule_by_name("schedule_injective"), name=f"{name}.x86",
                                plevel=X86_PLEVEL)
    return strategy


@G.tanh_strategy.register("cpu")
def tanh_strategy_cpu(attrs, inputs, out_type, target):
    return _unary_strategy("tanh", topi.tanh)


@G.erf_strategy.register("cpu")
def erf_strategy_cpu(attrs, inputs, out_type, target):
    return _unary_strategy("erf", topi.erf)


def _softmax_compute(attrs, inputs, out_type):
    return [topi_x86.softmax_x86(inputs[0], attrs.axis)]


@G.softmax_strategy.register("cpu")
def softmax_strategy_cpu(attrs, inputs, out_type, target):
    strategy = OpStrategy()
    strategy.add_implementation(_softmax_compute, schedule_by_name("schedule_softmax"), name="softmax.x86",
                                plevel=X86_PLEVEL)
    return strategy


@G.fast_softmax_strategy.register("cpu")
def fast_softmax_strategy_cpu(attrs, inputs, out_type, target):
    strategy = OpStrategy()
    strategy.add_implementation(_softmax_compute, schedule_by_name("schedule_softmax"), name="fast_softmax.x86",
                                plevel=X86_PLEVEL)
    return strategy
