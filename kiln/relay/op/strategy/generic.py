"""Generic (target-independent) strategies: TOPI computes paired with ``topi.generic`` schedules.

Each ``*_strategy`` is a generic function (``kiln.target.override_native_generic_func``):
``fn(attrs, inputs, out_type, target) -> OpStrategy``, dispatched on the current target's keys; a target adds
its implementations with ``@conv2d_strategy.register("cpu")`` (``strategy/x86.py``). The schedules named here
are ``topi.generic``'s generic functions, so an op with a generic strategy still gets a target's schedule when the
target's TOPI folder registers one. TOPI computes are looked up when a strategy runs, so a missing one raises
``OpNotImplemented`` naming the op at compile time.
"""
from __future__ import annotations

from typing import Callable

from ....error import OpNotImplemented
from .... import te
from ....target import Target
from ....target.generic_func import override_native_generic_func
from ....topi.nn.winograd_util import conv2d_winograd_weight_transform
from .. import op as _op
from .._define import topi_fn
from ..nn._conv_pool import pad4, pair, to_primal
from ..op import OpStrategy, generic_schedule, implementation_name, schedule_by_name

__all__ = ["wrap_topi_schedule", "schedule_by_name", "wrap_compute_conv2d",
           "wrap_compute_dense", "wrap_compute_batch_matmul", "wrap_compute_softmax", "conv2d_generic_compute",
           "conv2d_strategy", "conv2d_NCHWc_strategy", "depthwise_conv2d_NCHWc_strategy", "conv2d_transpose_strategy",
           "conv2d_winograd_without_weight_transform_strategy", "conv2d_winograd_weight_transform_strategy",
           "dense_strategy", "dense_pack_strategy", "batch_matmul_pack_strategy", "matmul_strategy", "batch_matmul_strategy", "softmax_strategy",
           "fast_softmax_strategy", "log_softmax_strategy", "pool_strategy", "global_pool_strategy",
           "adaptive_pool_strategy", "layer_norm_strategy", "group_norm_strategy", "batch_norm_strategy",
           "tanh_strategy", "erf_strategy"]


def wrap_topi_schedule(topi_schedule: Callable) -> Callable:
    """Adapt ``topi.*.schedule_*(outs)`` to the strategy's ``schedule(attrs, outs, target)`` (run under
    ``target``: templates query their config for it, generic schedules dispatch on its keys)."""
    def schedule(attrs, outs, target):
        with Target.canon_target(target):
            return topi_schedule(outs)
    schedule.__name__ = getattr(topi_schedule, "__name__", "schedule")
    return schedule


def _one(strategy_name: str, op_name: str, compute: Callable, schedule: str) -> OpStrategy:
    """A strategy of one implementation: ``compute`` with the ``topi.generic`` schedule ``schedule``, named after
    whoever provides that schedule under the current target (``pool2d.x86``, ``conv2d.generic``)."""
    strategy = OpStrategy()
    strategy.add_implementation(compute, schedule_by_name(schedule),
                                name=implementation_name(strategy_name, generic_schedule(schedule)))
    return strategy


def _compute_from_registry(op_name: str) -> Callable:
    def compute(attrs, inputs, out_type):
        fn = _op.get(op_name).get_attr("FTVMCompute")
        if fn is None:
            raise OpNotImplemented(f"operator {op_name} has no compute (FTVMCompute) registered")
        return fn(attrs, inputs, out_type)
    return compute


# -- conv2d -----------------------------------------------------------------------------------------------------
def _conv_args(attrs, out_type):
    return pair(attrs.strides, "strides"), pad4(attrs.padding), pair(attrs.dilation, "dilation"), \
        (attrs.out_dtype or out_type.dtype)


def conv2d_generic_compute(attrs, inputs, out_type):
    """conv2d through topi: NCHW/OIHW or NHWC/HWIO; grouped convolutions use the group_conv2d computes."""
    strides, padding, dilation, out_dtype = _conv_args(attrs, out_type)
    data, kernel = inputs
    layout, klayout, groups = attrs.data_layout, attrs.kernel_layout, attrs.groups
    if layout == "NCHW" and klayout == "OIHW":
        if groups == 1:
            return [topi_fn("nn.conv2d_nchw", "nn.conv2d")(data, kernel, strides, padding, dilation, out_dtype)]
        return [topi_fn("nn.group_conv2d_nchw", "nn.conv2d")(data, kernel, strides, padding, dilation, groups,
                                                             out_dtype)]
    if layout == "NHWC" and klayout == "HWIO":
        if groups == 1:
            return [topi_fn("nn.conv2d_nhwc", "nn.conv2d")(data, kernel, strides, padding, dilation, out_dtype)]
        return [topi_fn("nn.group_conv2d_nhwc", "nn.conv2d")(data, kernel, strides, padding, dilation, groups,
                                                             out_dtype)]
    raise OpNotImplemented(f"nn.conv2d with data_layout={layout}, kernel_layout={klayout} has no TOPI compute "
                           "in kiln yet (supported: NCHW/OIHW, NHWC/HWIO)")


def _out_dtype(attrs, inputs):
    dt = getattr(attrs, "out_dtype", "")
    return inputs[0].dtype if dt in ("", "same", None) else dt


def wrap_compute_conv2d(topi_compute: Callable, *, need_data_layout=False, need_kernel_layout=False,
                        need_out_layout=False, has_groups=False, need_auto_scheduler_layout=False,
                        need_meta_schedule_layout=False) -> Callable:
    """A conv2d FTVMCompute calling ``topi_compute(data, kernel, strides, padding, dilation, [groups],
    [data_layout], [kernel_layout], [out_layout], out_dtype)`` (TVM's helper, same flags)."""
    def compute(attrs, inputs, out_type):
        args = [inputs[0], inputs[1], pair(attrs.strides, "strides"), pad4(attrs.padding),
                pair(attrs.dilation, "dilation")]
        if has_groups:
            args.append(attrs.groups)
        if need_data_layout:
            args.append(attrs.data_layout)
        if need_kernel_layout:
            args.append(attrs.kernel_layout)
        if need_out_layout:
            args.append(attrs.out_layout or attrs.data_layout)
        args.append(_out_dtype(attrs, inputs))
        return [topi_compute(*args)]
    return compute


def wrap_compute_dense(topi_compute: Callable, need_auto_scheduler_layout=False,
                       need_meta_schedule_layout=False) -> Callable:
    """A dense FTVMCompute calling ``topi_compute(data, weight, None, out_dtype)``."""
    def compute(attrs, inputs, out_type):
        return [topi_compute(inputs[0], inputs[1], None, _out_dtype(attrs, inputs))]
    return compute


def wrap_compute_batch_matmul(topi_compute: Callable, *, need_auto_scheduler_layout=False,
                              need_out_dtype=False) -> Callable:
    """A batch_matmul FTVMCompute calling ``topi_compute(a, b, oshape, out_dtype, transpose_a, transpose_b)``."""
    def compute(attrs, inputs, out_type):
        return [topi_compute(inputs[0], inputs[1], list(out_type.shape),
                             out_type.dtype if need_out_dtype else None, attrs.transpose_a, attrs.transpose_b)]
    return compute


def wrap_compute_softmax(topi_compute: Callable) -> Callable:
    """A softmax FTVMCompute calling ``topi_compute(data, axis)``."""
    def compute(attrs, inputs, out_type):
        return [topi_compute(inputs[0], attrs.axis)]
    return compute


@override_native_generic_func("conv2d_strategy")
def conv2d_strategy(attrs, inputs, out_type, target):
    schedule = {"NCHW": "schedule_conv2d_nchw", "NHWC": "schedule_conv2d_nhwc"}.get(attrs.data_layout,
                                                                                      "schedule_conv2d_nchw")
    if attrs.groups != 1:
        schedule = "schedule_group_conv2d_nchw" if attrs.data_layout == "NCHW" else "schedule_group_conv2d_nhwc"
    return _one("conv2d", "nn.conv2d", conv2d_generic_compute, schedule)


@override_native_generic_func("conv2d_NCHWc_strategy")
def conv2d_NCHWc_strategy(attrs, inputs, out_type, target):  # noqa: N802 (TVM's name)
    def compute(attrs, inputs, out_type):
        strides, padding, dilation, out_dtype = _conv_args(attrs, out_type)
        fn = topi_fn("nn.conv2d_NCHWc", "nn.contrib_conv2d_NCHWc")
        return [fn(inputs[0], inputs[1], strides, padding, dilation, attrs.data_layout,
                   attrs.out_layout or attrs.data_layout, out_dtype)]
    return _one("conv2d_NCHWc", "nn.contrib_conv2d_NCHWc", compute, "schedule_conv2d_nchwc")


@override_native_generic_func("depthwise_conv2d_NCHWc_strategy")
def depthwise_conv2d_NCHWc_strategy(attrs, inputs, out_type, target):  # noqa: N802 (TVM's name)
    raise OpNotImplemented(f"nn.contrib_depthwise_conv2d_NCHWc has implementations for CPU targets only, "
                           f"not {target}")


@override_native_generic_func("conv2d_winograd_without_weight_transform_strategy")
def conv2d_winograd_without_weight_transform_strategy(attrs, inputs, out_type, target):
    raise OpNotImplemented(f"nn.contrib_conv2d_winograd_without_weight_transform has an implementation for CPU "
                           f"targets only, not {target}")


@override_native_generic_func("conv2d_winograd_weight_transform_strategy")
def conv2d_winograd_weight_transform_strategy(attrs, inputs, out_type, target):
    def compute(attrs, inputs, out_type):
        return [conv2d_winograd_weight_transform(inputs[0], attrs.tile_size)]

    def schedule(attrs, outs, target):  # computed once, by FoldConstant: a plain loop nest
        return te.create_schedule([o.op for o in outs])
    strategy = OpStrategy()
    strategy.add_implementation(compute, schedule, name="conv2d_winograd_weight_transform.generic")
    return strategy


@override_native_generic_func("conv2d_transpose_strategy")
def conv2d_transpose_strategy(attrs, inputs, out_type, target):
    def compute(attrs, inputs, out_type):
        if attrs.data_layout != "NCHW" or attrs.kernel_layout != "IOHW":
            raise OpNotImplemented("nn.conv2d_transpose: only NCHW data with an IOHW kernel has a TOPI compute")
        strides, padding, dilation, out_dtype = _conv_args(attrs, out_type)
        out_pad = pair(attrs.output_padding, "output_padding")
        if attrs.groups == 1:
            fn = topi_fn("nn.conv2d_transpose_nchw", "nn.conv2d_transpose")
            return [fn(inputs[0], inputs[1], strides, padding, out_dtype, out_pad, dilation)]
        fn = topi_fn("nn.group_conv2d_transpose_nchw", "nn.conv2d_transpose")
        return [fn(inputs[0], inputs[1], strides, padding, out_dtype, out_pad, attrs.groups, dilation)]
    return _one("conv2d_transpose", "nn.conv2d_transpose", compute, "schedule_conv2d_transpose_nchw")


# -- dense / matmul -----------------------------------------------------------------------------------------------
@override_native_generic_func("dense_strategy")
def dense_strategy(attrs, inputs, out_type, target):
    def compute(attrs, inputs, out_type):
        return [topi_fn("nn.dense", "nn.dense")(dense_data(inputs[0], inputs[1]), inputs[1], None,
                                                attrs.out_dtype or out_type.dtype)]
    return _one("dense", "nn.dense", compute, "schedule_dense")


def dense_data(data, weight):
    """``nn.dense``'s data operand for a compute: an unknown K (a VM kernel whose data came out of a reshape
    the importer could not make static) is fixed to the weight's static K with a run-time check
    (``topi.checked_dim``), so the dense schedules see the static reduction they are written for. Weights
    ``[N, K]`` and pre-packed ``[N/bn, K, bn]`` both keep K at index 1."""
    from ....topi.transform import checked_dim
    if len(weight.shape) not in (2, 3) or not data.shape:
        return data
    kw, kd = getattr(weight.shape[1], "value", weight.shape[1]), getattr(data.shape[-1], "value", data.shape[-1])
    if isinstance(kw, int) and not isinstance(kd, int):
        return checked_dim(data, -1, kw, "nn.dense (data's last dim is the weight's in_features)")
    return data


@override_native_generic_func("dense_pack_strategy")
def dense_pack_strategy(attrs, inputs, out_type, target):
    raise OpNotImplemented(f"nn.contrib_dense_pack has an implementation for CPU targets only, not {target}")


@override_native_generic_func("batch_matmul_pack_strategy")
def batch_matmul_pack_strategy(attrs, inputs, out_type, target):
    raise OpNotImplemented(f"nn.contrib_batch_matmul_pack has an implementation for CPU targets only, not {target}")


@override_native_generic_func("matmul_strategy")
def matmul_strategy(attrs, inputs, out_type, target):
    def compute(attrs, inputs, out_type):
        fn = topi_fn("nn.matmul", "nn.matmul")
        return [fn(inputs[0], inputs[1], None, attrs.out_dtype or out_type.dtype, attrs.transpose_a,
                   attrs.transpose_b)]
    return _one("matmul", "nn.matmul", compute, "schedule_matmul")


@override_native_generic_func("batch_matmul_strategy")
def batch_matmul_strategy(attrs, inputs, out_type, target):
    def compute(attrs, inputs, out_type):
        fn = topi_fn("nn.batch_matmul", "nn.batch_matmul")
        return [fn(inputs[0], inputs[1], None, attrs.out_dtype or out_type.dtype, attrs.transpose_a,
                   attrs.transpose_b)]
    return _one("batch_matmul", "nn.batch_matmul", compute, "schedule_batch_matmul")


# -- softmax / norms / pooling ----------------------------------------------------------------------------------------
@override_native_generic_func("softmax_strategy")
def softmax_strategy(attrs, inputs, out_type, target):
    def compute(attrs, inputs, out_type):
        return [topi_fn("nn.softmax", "nn.softmax")(inputs[0], attrs.axis)]
    return _one("softmax", "nn.softmax", compute, "schedule_softmax")


@override_native_generic_func("fast_softmax_strategy")
def fast_softmax_strategy(attrs, inputs, out_type, target):
    def compute(attrs, inputs, out_type):
        return [topi_fn("nn.fast_softmax", "nn.fast_softmax")(inputs[0], attrs.axis)]
    return _one("fast_softmax", "nn.fast_softmax", compute, "schedule_softmax")


@override_native_generic_func("log_softmax_strategy")
def log_softmax_strategy(attrs, inputs, out_type, target):
    def compute(attrs, inputs, out_type):
        return [topi_fn("nn.log_softmax", "nn.log_softmax")(inputs[0], attrs.axis)]
    return _one("log_softmax", "nn.log_softmax", compute, "schedule_log_softmax")


@override_native_generic_func("layer_norm_strategy")
def layer_norm_strategy(attrs, inputs, out_type, target):
    def compute(attrs, inputs, out_type):
        fn = topi_fn("nn.layer_norm", "nn.layer_norm")
        return [fn(inputs[0], inputs[1], inputs[2], [attrs.axis], attrs.epsilon)]
    return _one("layer_norm", "nn.layer_norm", compute, "schedule_layer_norm")


@override_native_generic_func("group_norm_strategy")
def group_norm_strategy(attrs, inputs, out_type, target):
    def compute(attrs, inputs, out_type):
        fn = topi_fn("nn.group_norm", "nn.group_norm")
        ndim = len(inputs[0].shape)
        axes = [d for d in range(ndim) if d not in (0, attrs.axis % ndim)]
        return [fn(inputs[0], inputs[1], inputs[2], attrs.num_groups, attrs.axis, axes, attrs.epsilon)]
    return _one("group_norm", "nn.group_norm", compute, "schedule_group_norm")


@override_native_generic_func("batch_norm_strategy")
def batch_norm_strategy(attrs, inputs, out_type, target):
    def compute(attrs, inputs, out_type):
        fn = topi_fn("nn.batch_norm", "nn.batch_norm")
        outs = fn(*inputs, attrs.axis, attrs.epsilon, attrs.center, attrs.scale)
        return list(outs) if isinstance(outs, (list, tuple)) else [outs]
    return _one("batch_norm", "nn.batch_norm", compute, "schedule_batch_norm")


def _pool_compute(pool_type):
    def compute(attrs, inputs, out_type):
        fn = topi_fn("nn.pool2d", f"nn.{pool_type}_pool2d")
        return [fn(inputs[0], pair(attrs.pool_size, "pool_size"), pair(attrs.strides, "strides"),
                   pair(attrs.dilation, "dilation"), pad4(attrs.padding), pool_type, attrs.ceil_mode, attrs.layout,
                   getattr(attrs, "count_include_pad", False))]
    return compute


@override_native_generic_func("pool_strategy")
def pool_strategy(attrs, inputs, out_type, target):
    pool_type = "avg" if hasattr(attrs, "count_include_pad") and "count_include_pad" in attrs else "max"
    return _one("pool2d", f"nn.{pool_type}_pool2d", _pool_compute(pool_type), "schedule_pool")


def global_pool_strategy_for(pool_type):
    def strategy(attrs, inputs, out_type, target):
        def compute(attrs, inputs, out_type):
            return [topi_fn("nn.global_pool", f"nn.global_{pool_type}_pool2d")(inputs[0], pool_type, attrs.layout)]
        return _one("global_pool", f"nn.global_{pool_type}_pool2d", compute, "schedule_global_pool")
    return override_native_generic_func(f"global_{pool_type}_pool_strategy")(strategy)


def adaptive_pool_strategy_for(pool_type):
    def strategy(attrs, inputs, out_type, target):
        def compute(attrs, inputs, out_type):
            fn = topi_fn("nn.adaptive_pool", f"nn.adaptive_{pool_type}_pool2d")
            size = attrs.output_size or ()
            size = tuple(size) * (2 if len(size) == 1 else 1)
            if not size:
                p = to_primal([int(s) for s in inputs[0].shape], attrs.layout)
                size = (p["H"], p["W"])
            return [fn(inputs[0], size, pool_type, attrs.layout)]
        return _one("adaptive_pool", f"nn.adaptive_{pool_type}_pool2d", compute, "schedule_adaptive_pool")
    return override_native_generic_func(f"adaptive_{pool_type}_pool_strategy")(strategy)


global_pool_strategy = global_pool_strategy_for("avg")
adaptive_pool_strategy = adaptive_pool_strategy_for("avg")


# -- elementwise ops a target may compute differently (strategy/x86.py: vectorizable approximations) ------------
def _injective_from_registry(op_name: str) -> OpStrategy:
    return _one(op_name, op_name, _compute_from_registry(op_name), "schedule_injective")


@override_native_generic_func("tanh_strategy")
def tanh_strategy(attrs, inputs, out_type, target):
    return _injective_from_registry("tanh")


@override_native_generic_func("erf_strategy")
def erf_strategy(attrs, inputs, out_type, target):
    return _injective_from_registry("erf")
