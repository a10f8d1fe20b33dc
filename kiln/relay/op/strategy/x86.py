"""x86 strategies (TVM's ``relay/op/strategy/x86.py``): for targets with the "cpu" key (``llvm``, ``c``) the
``kiln.topi.x86`` implementations join the generic ones at a higher plevel.

* conv2d (NCHW, groups 1 / depthwise) -> ``conv2d_NCHWc.x86`` / ``depthwise_conv2d_NCHWc.x86`` (packing inside
  the kernel when AlterOpLayout did not run), ``nn.contrib_conv2d_NCHWc`` / ``nn.contrib_depthwise_conv2d_NCHWc``
  -> the packed kernels; 3x3 stride-1 conv2d also -> ``conv2d_NCHWc_winograd.x86`` at a lower plevel (taken
  only where a tuning record is faster), ``nn.contrib_conv2d_winograd_without_weight_transform`` -> its packed
  form, ``nn.contrib_conv2d_winograd_weight_transform`` -> the generic transform;
* dense (2-D data) -> ``dense_pack.x86``; ``nn.contrib_dense_pack`` (weight pre-packed by AlterOpLayout);
  batch_matmul -> ``batch_matmul.x86``;
* every op whose strategy uses a generic injective / reduce / pool / softmax / layer_norm schedule gets the
  vectorized x86 schedule of the same name (:func:`register_x86_schedules`, run after the op library's
  ``register_all``).

``nn.contrib_dense_pack`` (TVM's op of that name) is defined here until the op library has it.
"""
from __future__ import annotations

import numpy as np

from ....error import OpNotImplemented, TypeInferenceError
from ....ir.attrs import Attrs, Field
from ....ir.op import Op, OpPattern, register_op_attr
from ....ir.type import TensorType
from .._define import define_op
from ..op import OpStrategy
from . import generic as G

X86_PLEVEL = 15


def _is_cpu(target) -> bool:
    return "cpu" in G._target_keys(target)


def _x86():
    from ....topi import x86
    return x86


def _schedule(name: str):
    def schedule(attrs, outs, target):
        return getattr(_x86(), name)(outs)
    schedule.__name__ = name
    return schedule


# -- nn.contrib_dense_pack ----------------------------------------------------------------------------------
def _dtype_or_empty(value) -> str:
    from ....runtime.dtype import dtype_str
    return "" if value in (None, "") else dtype_str(value)


class DensePackAttrs(Attrs):
    type_key = "relay.attrs.DensePackAttrs"
    fields = {"units": Field(None, lambda v: None if v is None else int(v)), "out_dtype": Field("", _dtype_or_empty),
              "weight_layout": "NC"}


def _dense_pack_rel(arg_types, attrs):
    from ..type_relations import shape_text, tensor_arg
    data = tensor_arg(arg_types, 0, "data")
    weight = tensor_arg(arg_types, 1, "weight")
    if len(data.shape) != 2 or len(weight.shape) != 3 or int(data.shape[1]) != int(weight.shape[1]):
        raise TypeInferenceError(f"nn.contrib_dense_pack: expects data [M, K] and a packed weight [N/bn, K, bn], got "
                                 f"{shape_text(data.shape)} and {shape_text(weight.shape)}")
    n_pad = int(weight.shape[0]) * int(weight.shape[2])
    units = n_pad if attrs.units is None else int(attrs.units)
    if not n_pad - int(weight.shape[2]) < units <= n_pad:
        raise TypeInferenceError(f"nn.contrib_dense_pack: units={units} does not fit the packed weight "
                                 f"{shape_text(weight.shape)} (its last panel may pad at most "
                                 f"{int(weight.shape[2]) - 1} rows)")
    return TensorType((data.shape[0], units), attrs.out_dtype or data.dtype)


def _dense_pack_ref(attrs, inputs, out_type):
    data, w = inputs
    nb, k, bn = w.shape
    units = nb * bn if attrs.units is None else int(attrs.units)
    weight = w.transpose(0, 2, 1).reshape(nb * bn, k)[:units]
    dt = out_type.dtype
    return np.matmul(data.astype(dt), weight.astype(dt).T)


def _dense_pack_compute(attrs, inputs, out_type):
    nb, _, bn = (int(d) for d in inputs[1].shape)
    units = None if attrs.units is None or int(attrs.units) == nb * bn else int(attrs.units)
    extra = () if units is None else (units,)  # the workload of an unpadded weight stays TVM's 4 arguments
    return [_x86().dense_pack(inputs[0], inputs[1], None, attrs.out_dtype or out_type.dtype, *extra)]


define_op("nn.contrib_dense_pack", num_inputs=2, args=("data", "weight"), attrs=DensePackAttrs, rel=_dense_pack_rel,
          rel_name="DensePack", pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=_dense_pack_ref,
          compute=_dense_pack_compute, level=10)


def contrib_dense_pack(data, weight, units=None, out_dtype="", weight_layout="NC"):
    """``relay.nn.contrib_dense_pack``: dense with a weight packed as ``NC{bn}n`` (``[N/bn, K, bn]``)."""
    from ...expr import Call
    op = Op.get("nn.contrib_dense_pack")
    return Call(op, [data, weight], op.make_attrs(units=units, out_dtype=out_dtype, weight_layout=weight_layout))


def _dense_pack_strategy(attrs, inputs, out_type, target):
    strategy = OpStrategy()
    strategy.add_implementation(_dense_pack_compute, _schedule("schedule_dense_pack"), name="dense_pack.x86",
                                plevel=X86_PLEVEL)
    return strategy


register_op_attr("nn.contrib_dense_pack", "FTVMStrategy", _dense_pack_strategy)


# -- conv2d ---------------------------------------------------------------------------------------------------
def _conv_args(attrs, out_type):
    return G._conv_args(attrs, out_type)


def _conv2d_nchw_compute(attrs, inputs, out_type):
    strides, padding, dilation, out_dtype = _conv_args(attrs, out_type)
    return [_x86().conv2d_nchw(inputs[0], inputs[1], strides, padding, dilation, out_dtype)]


def _depthwise_nchw_compute(attrs, inputs, out_type):
    strides, padding, dilation, out_dtype = _conv_args(attrs, out_type)
    return [_x86().depthwise_conv2d_nchw(inputs[0], inputs[1], strides, padding, dilation, out_dtype)]


def _is_depthwise(attrs, inputs) -> bool:
    d = [int(x) for x in inputs[0].shape]
    k = [int(x) for x in inputs[1].shape]
    return attrs.groups == d[1] and k[1] == 1 and k[0] == d[1]


def _winograd_nchw_compute(attrs, inputs, out_type):
    strides, padding, dilation, out_dtype = _conv_args(attrs, out_type)
    return [_x86().conv2d_nchw_winograd(inputs[0], inputs[1], strides, padding, dilation, out_dtype)]


def _winograd_applies(attrs, inputs) -> bool:
    k = [int(x) for x in inputs[1].shape]
    return (attrs.groups == 1 and k[2:] == [3, 3] and tuple(attrs.strides) == (1, 1)
            and tuple(attrs.dilation) == (1, 1))


# Winograd joins below the direct conv: like TVM, relay.build takes it only where a tuning log says it is
# faster (select_implementation compares the tuned costs of both templates); its float32 rounding error is
# larger (F(4x4, 3x3) ~1e-5 relative), so it is no default.
WINOGRAD_PLEVEL = X86_PLEVEL - 5


@G.conv2d_strategy.register("cpu")
def conv2d_strategy_cpu(attrs, inputs, out_type, target):
    strategy = G.conv2d_strategy.default(attrs, inputs, out_type, target)
    if attrs.data_layout == "NCHW" and attrs.kernel_layout == "OIHW" and str(inputs[0].dtype) == "float32":
        if attrs.groups == 1:
            strategy.add_implementation(_conv2d_nchw_compute, _schedule("schedule_conv2d_nchw"),
                                        name="conv2d_NCHWc.x86", plevel=X86_PLEVEL)
            if _winograd_applies(attrs, inputs):
                strategy.add_implementation(_winograd_nchw_compute, _schedule("schedule_conv2d_nchw_winograd"),
                                            name="conv2d_NCHWc_winograd.x86", plevel=WINOGRAD_PLEVEL)
        elif _is_depthwise(attrs, inputs):
            strategy.add_implementation(_depthwise_nchw_compute, _schedule("schedule_depthwise_conv2d_nchw"),
                                        name="depthwise_conv2d_NCHWc.x86", plevel=X86_PLEVEL)
    return strategy


def _nchwc_compute(fn_name):
    def compute(attrs, inputs, out_type):
        strides, padding, dilation, out_dtype = _conv_args(attrs, out_type)
        fn = getattr(_x86(), fn_name)
        return [fn(inputs[0], inputs[1], strides, padding, dilation, attrs.data_layout,
                   attrs.out_layout or attrs.data_layout, out_dtype)]
    return compute


@G.conv2d_NCHWc_strategy.register("cpu")
def conv2d_NCHWc_strategy_cpu(attrs, inputs, out_type, target):  # noqa: N802 (TVM's name)
    strategy = OpStrategy()
    strategy.add_implementation(_nchwc_compute("conv2d_NCHWc"), _schedule("schedule_conv2d_NCHWc"),
                                name="conv2d_NCHWc.x86", plevel=X86_PLEVEL)
    return strategy


@G.generic_strategy
def conv2d_winograd_without_weight_transform_strategy(attrs, inputs, out_type, target):
    raise OpNotImplemented(f"nn.contrib_conv2d_winograd_without_weight_transform has an implementation for CPU "
                           f"targets only, not {target}")


@conv2d_winograd_without_weight_transform_strategy.register("cpu")
def conv2d_winograd_without_weight_transform_strategy_cpu(attrs, inputs, out_type, target):
    if len(inputs[0].shape) != 5 or len(inputs[1].shape) != 5:
        raise OpNotImplemented(
            "nn.contrib_conv2d_winograd_without_weight_transform on CPU computes on NCHW<x>c data with an "
            f"HWOI<o>o transformed weight (what AlterOpLayout produces); got data_layout={attrs.data_layout}, "
            f"kernel_layout={attrs.kernel_layout}: run relay.build at opt_level 3, or use nn.conv2d")
    strategy = OpStrategy()
    strategy.add_implementation(_nchwc_compute("conv2d_NCHWc_winograd"), _schedule("schedule_conv2d_NCHWc_winograd"),
                                name="conv2d_NCHWc_winograd.x86", plevel=X86_PLEVEL)
    return strategy


@G.generic_strategy
def conv2d_winograd_weight_transform_strategy(attrs, inputs, out_type, target):
    from ....topi.nn.winograd_util import conv2d_winograd_weight_transform

    def compute(attrs, inputs, out_type):
        return [conv2d_winograd_weight_transform(inputs[0], attrs.tile_size)]

    def schedule(attrs, outs, target):
        from .... import te
        return te.create_schedule([o.op for o in outs])
    strategy = OpStrategy()
    strategy.add_implementation(compute, schedule, name="conv2d_winograd_weight_transform.generic")
    return strategy


for _op_name, _strategy in (("nn.contrib_conv2d_winograd_without_weight_transform",
                             conv2d_winograd_without_weight_transform_strategy),
                            ("nn.contrib_conv2d_winograd_weight_transform", conv2d_winograd_weight_transform_strategy)):
    if not Op.get(_op_name).has_attr("FTVMStrategy"):
        register_op_attr(_op_name, "FTVMStrategy", _strategy)


@G.generic_strategy
def depthwise_conv2d_NCHWc_strategy(attrs, inputs, out_type, target):  # noqa: N802 (TVM's name)
    raise OpNotImplemented(f"nn.contrib_depthwise_conv2d_NCHWc has implementations for CPU targets only, "
                           f"not {target}")


@depthwise_conv2d_NCHWc_strategy.register("cpu")
def depthwise_conv2d_NCHWc_strategy_cpu(attrs, inputs, out_type, target):  # noqa: N802
    strategy = OpStrategy()
    strategy.add_implementation(_nchwc_compute("depthwise_conv2d_NCHWc"),
                                _schedule("schedule_depthwise_conv2d_NCHWc"),
                                name="depthwise_conv2d_NCHWc.x86", plevel=X86_PLEVEL)
    return strategy


if not Op.get("nn.contrib_depthwise_conv2d_NCHWc").has_attr("FTVMStrategy"):
    register_op_attr("nn.contrib_depthwise_conv2d_NCHWc", "FTVMStrategy", depthwise_conv2d_NCHWc_strategy)


# -- dense / batch_matmul ---------------------------------------------------------------------------------
@G.dense_strategy.register("cpu")
def dense_strategy_cpu(attrs, inputs, out_type, target):
    strategy = G.dense_strategy.default(attrs, inputs, out_type, target)
    if len(inputs[0].shape) == 2:
        def compute(attrs, inputs, out_type):
            return [_x86().dense_pack(inputs[0], inputs[1], None, attrs.out_dtype or out_type.dtype)]
        strategy.add_implementation(compute, _schedule("schedule_dense_pack"), name="dense_pack.x86",
                                    plevel=X86_PLEVEL)
    return strategy


@G.batch_matmul_strategy.register("cpu")
def batch_matmul_strategy_cpu(attrs, inputs, out_type, target):
    strategy = G.batch_matmul_strategy.default(attrs, inputs, out_type, target)

    def compute(attrs, inputs, out_type):
        return [_x86().batch_matmul(inputs[0], inputs[1], None, attrs.out_dtype or out_type.dtype,
                                    bool(attrs.transpose_a), bool(attrs.transpose_b))]
    strategy.add_implementation(compute, _schedule("schedule_batch_matmul"), name="batch_matmul.x86",
                                plevel=X86_PLEVEL)
    return strategy


# -- vectorized schedules for the generic-schedule ops ------------------------------------------------------------
X86_SCHEDULES = ("schedule_injective", "schedule_reduce", "schedule_pool", "schedule_adaptive_pool",
                 "schedule_global_pool", "schedule_softmax", "schedule_log_softmax", "schedule_layer_norm")


# Elementwise ops whose x86 twin computes a vectorizable expression instead of a libm call (which the C code
# runs lane by lane): float32 tanh / erf by the rational approximations of topi.fast_tanh / fast_erf (within
# 3.5e-7 / 4.2e-7 of the exact value). GELU (BERT's erf form, GPT-2's tanh form) is the common user.
def _vector_compute(topi_name: str, with_axis: bool = False):
    def compute(attrs, inputs, out_type):
        from .... import topi
        fn = topi
        for part in topi_name.split("."):
            fn = getattr(fn, part)
        return [fn(inputs[0], attrs.axis) if with_axis else fn(inputs[0])]
    compute.__name__ = topi_name
    return compute


# ops whose CPU compute uses a vectorizable approximation of a libm function (docs/architecture.md)
X86_VECTOR_COMPUTES = {"tanh": _vector_compute("fast_tanh"), "erf": _vector_compute("fast_erf"),
                       "nn.softmax": _vector_compute("nn.fast_softmax", with_axis=True)}


def _with_x86_schedules(fstrategy, op_name: str | None = None):
    """Wrap an op's strategy: on CPU targets every implementation scheduled by a generic schedule named in
    X86_SCHEDULES gets a twin with the x86 schedule of that name, at a higher plevel (for the ops of
    X86_VECTOR_COMPUTES, with the vectorizable compute)."""
    def strategy_fn(attrs, inputs, out_type, target):
        strategy = fstrategy(attrs, inputs, out_type, target)
        if not _is_cpu(target) or not hasattr(strategy, "implementations"):
            return strategy
        for impl in list(strategy.implementations()):
            name = getattr(impl._schedule, "__name__", "")
            if name in X86_SCHEDULES and not impl.name.endswith(".x86"):
                compute = impl._compute
                if op_name in X86_VECTOR_COMPUTES:
                    compute = X86_VECTOR_COMPUTES[op_name]
                strategy.add_implementation(compute, _schedule(name), name=impl.name.replace(".generic", "")
                                            + ".x86", plevel=impl.plevel + 5)
        return strategy
    strategy_fn.__name__ = getattr(fstrategy, "__name__", "strategy") + "_x86"
    strategy_fn.x86_wrapped = True
    return strategy_fn


def register_x86_schedules() -> None:
    """Wrap the strategy of every registered op (idempotent; called after the op library registers them)."""
    for name in Op.list_op_names():
        op = Op.get(name)
        fstrategy = op.get_attr("FTVMStrategy")
        if fstrategy is None or getattr(fstrategy, "x86_wrapped", False) or name.startswith("test."):
            continue
        op.set_attr("FTVMStrategy", _with_x86_schedules(fstrategy, name), 11, _replace=True)


def _register_alter_hooks() -> None:
    from ....topi.x86 import conv2d_alter_op as A
    for name, hook in (("nn.conv2d", A.conv2d_alter_layout), ("nn.dense", A.dense_alter_layout)):
        op = Op.get(name)
        if not op.has_attr("FTVMAlterOpLayout"):
            register_op_attr(name, "FTVMAlterOpLayout", hook)


def _hook_register_all() -> None:
    """Run register_x86_schedules right after the op library's register_all (relay/op/__init__ calls it after
    importing this package). TODO(ops engineer): call strategy.x86.register_x86_schedules() explicitly there."""
    from .. import _schedules
    if getattr(_schedules.register_all, "x86_hooked", False):
        return
    original = _schedules.register_all

    def register_all():
        original()
        register_x86_schedules()
    register_all.x86_hooked = True
    _schedules.register_all = register_all


_register_alter_hooks()
_hook_register_all()
