"""Compute and strategy registrations for every op (TVM's ``_tensor.py`` / ``_transform.py`` / ``nn/_nn.py``).

Injective, broadcast and elementwise ops pair their FTVMCompute with the generic injective schedule,
reductions with the reduce schedule; the other nn ops get the strategies of ``strategy.generic``.
"""
from __future__ import annotations

from ...error import OpNotImplemented
from ...ir.op import Op, OpPattern
from ...target.generic_func import override_native_generic_func
from ._define import DEFINED_OPS, topi_compute, topi_fn
from .nn._spatial_attrs import pad_tuple
from .op import register_broadcast_schedule, register_compute, register_injective_schedule, \
    register_reduce_schedule, register_strategy
from .strategy import generic as G


def _pad_args(attrs, inputs, out_type):
    before = [w[0] for w in attrs.pad_width]
    after = [w[1] for w in attrs.pad_width]
    if attrs.pad_mode != "constant":
        fn = "edge_pad" if attrs.pad_mode == "edge" else "mirror_pad"
        return None, fn, before, after
    return inputs[1], "pad", before, after


def _pad_compute(attrs, inputs, out_type):
    value, fn_name, before, after = _pad_args(attrs, inputs, out_type)
    fn = topi_fn(f"nn.{fn_name}", "nn.pad")
    if fn_name == "pad":
        return [fn(inputs[0], before, after, value())]
    if fn_name == "mirror_pad":
        return [fn(inputs[0], before, after, "REFLECT")]
    return [fn(inputs[0], before, after)]


def _bias_add_compute(attrs, inputs, out_type):
    data, bias = inputs
    axis = attrs.axis % len(data.shape)
    expand = len(data.shape) - axis - 1
    if expand:
        bias = topi_fn("expand_dims", "nn.bias_add")(bias, 1, expand)
    return [topi_fn("add", "nn.bias_add")(data, bias)]


def _batch_flatten_compute(attrs, inputs, out_type):
    return [topi_fn("reshape", "nn.batch_flatten")(inputs[0], list(out_type.shape))]


def _upsampling_compute(attrs, inputs, out_type):
    fn = topi_fn("nn.upsampling", "nn.upsampling")
    return [fn(inputs[0], attrs.scale_h, attrs.scale_w, attrs.layout, attrs.method, attrs.align_corners)]


def _resize2d_compute(attrs, inputs, out_type):
    fn = topi_fn("image.resize2d", "image.resize2d")
    return [fn(inputs[0], list(attrs.roi), list(attrs.size), attrs.layout, attrs.method,
               attrs.coordinate_transformation_mode, attrs.rounding_method, attrs.cubic_alpha, attrs.cubic_exclude,
               attrs.extrapolation_value, attrs.out_dtype or out_type.dtype)]


def _dropout_compute(attrs, inputs, out_type):
    raise OpNotImplemented("nn.dropout has no compute: run relay.transform.SimplifyInference() first (it removes "
                           "dropout at inference)")


def _topk_compute(attrs, inputs, out_type):
    fn = topi_fn("topk", "topk")
    out = fn(inputs[0], attrs.k, attrs.axis, attrs.ret_type, attrs.is_ascend, attrs.dtype or "int32")
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _scan_compute(name):
    def compute(attrs, inputs, out_type):
        return [topi_fn(name, name)(inputs[0], attrs.axis, out_type.dtype, attrs.exclusive)]
    compute.__name__ = f"compute_{name}"
    return compute


def _pool1d_compute(pool_type):
    def compute(attrs, inputs, out_type):
        fn = topi_fn("nn.pool1d", f"nn.{pool_type}_pool1d")
        return [fn(inputs[0], tuple(attrs.pool_size), tuple(attrs.strides), tuple(attrs.dilation),
                   pad_tuple(attrs.padding, 1), pool_type, attrs.ceil_mode, attrs.layout,
                   getattr(attrs, "count_include_pad", False))]
    return compute


def _conv1d_compute(attrs, inputs, out_type):
    fn = topi_fn("nn.group_conv1d_ncw", "nn.conv1d")
    if attrs.data_layout != "NCW" or attrs.kernel_layout != "OIW":
        raise OpNotImplemented(f"nn.conv1d with {attrs.data_layout}/{attrs.kernel_layout} has no TOPI compute in "
                               "kiln (supported: NCW/OIW)")
    return [fn(inputs[0], inputs[1], attrs.strides[0], pad_tuple(attrs.padding, 1), attrs.dilation[0], attrs.groups,
               attrs.out_dtype or out_type.dtype)]


def _instance_norm_compute(attrs, inputs, out_type):
    fn = topi_fn("nn.instance_norm_nd", "nn.instance_norm")
    return [fn(inputs[0], inputs[1], inputs[2], attrs.axis, attrs.epsilon, attrs.center, attrs.scale)]


def _collapse_sum_like_compute(attrs, inputs, out_type):
    return [topi_fn("collapse_sum", "collapse_sum_like")(inputs[0], list(out_type.shape))]


_NN_COMPUTES = {
    "nn.relu": topi_compute("nn.relu", "nn.relu"),
    "nn.leaky_relu": topi_compute("nn.leaky_relu", "nn.leaky_relu", lambda a, i, t: [i[0], a.alpha]),
    "nn.prelu": topi_compute("nn.prelu", "nn.prelu", lambda a, i, t: [i[0], i[1], a.axis]),
    "nn.pad": _pad_compute,
    "nn.bias_add": _bias_add_compute,
    "nn.batch_flatten": _batch_flatten_compute,
    "nn.upsampling": _upsampling_compute,
    "image.resize2d": _resize2d_compute,
    "nn.dropout": _dropout_compute,
    "nn.depth_to_space": topi_compute("nn.depth_to_space", "nn.depth_to_space",
                                      lambda a, i, t: [i[0], a.block_size, a.layout, a.mode]),
    "nn.space_to_depth": topi_compute("nn.space_to_depth", "nn.space_to_depth",
                                      lambda a, i, t: [i[0], a.block_size, a.layout]),
    "slice_like": topi_compute("slice_like", "slice_like", lambda a, i, t: [i[0], i[1], a.axes]),
    "collapse_sum_like": _collapse_sum_like_compute,
    "ndarray_size": topi_compute("ndarray_size", "ndarray_size", lambda a, i, t: [i[0], a.dtype]),
    "nn.l2_normalize": topi_compute("nn.l2_normalize", "nn.l2_normalize",
                                    lambda a, i, t: [i[0], a.eps, list(a.axis) or None]),
    "nn.lrn": topi_compute("nn.lrn", "nn.lrn", lambda a, i, t: [i[0], a.size, a.axis, a.alpha, a.beta, a.bias]),
    "nn.instance_norm": _instance_norm_compute,
}

def _strategy(name: str, fn):
    """A generic-function strategy ``name`` whose default is ``fn`` (targets may register their own)."""
    return override_native_generic_func(name)(fn)


_NN_STRATEGIES = {
    "nn.conv2d": G.conv2d_strategy,
    "nn.contrib_conv2d_NCHWc": G.conv2d_NCHWc_strategy,
    "nn.contrib_depthwise_conv2d_NCHWc": G.depthwise_conv2d_NCHWc_strategy,
    "nn.contrib_conv2d_winograd_without_weight_transform": G.conv2d_winograd_without_weight_transform_strategy,
    "nn.contrib_conv2d_winograd_weight_transform": G.conv2d_winograd_weight_transform_strategy,
    "nn.contrib_dense_pack": G.dense_pack_strategy,
    "nn.contrib_batch_matmul_pack": G.batch_matmul_pack_strategy,
    "tanh": G.tanh_strategy,
    "erf": G.erf_strategy,
    "nn.conv2d_transpose": G.conv2d_transpose_strategy,
    "nn.dense": G.dense_strategy,
    "nn.matmul": G.matmul_strategy,
    "nn.batch_matmul": G.batch_matmul_strategy,
    "nn.softmax": G.softmax_strategy,
    "nn.fast_softmax": G.fast_softmax_strategy,
    "nn.log_softmax": G.log_softmax_strategy,
    "nn.layer_norm": G.layer_norm_strategy,
    "nn.group_norm": G.group_norm_strategy,
    "nn.batch_norm": G.batch_norm_strategy,
    "nn.max_pool2d": _strategy("max_pool_strategy", lambda a, i, t, tg: G._one(
        "pool2d", "nn.max_pool2d", G._pool_compute("max"), "schedule_pool")),
    "nn.avg_pool2d": _strategy("avg_pool_strategy", lambda a, i, t, tg: G._one(
        "pool2d", "nn.avg_pool2d", G._pool_compute("avg"), "schedule_pool")),
    **{f"nn.{k}_pool2d_grad": _strategy(f"{k}_pool2d_grad_strategy", lambda a, i, t, tg, k=k: G._one(
        "pool_grad", f"nn.{k}_pool2d_grad", G._compute_from_registry(f"nn.{k}_pool2d_grad"), "schedule_pool"))
       for k in ("max", "avg")},
    "nn.conv1d_transpose": _strategy("conv1d_transpose_strategy", lambda a, i, t, tg: G._one(
        "conv1d_transpose_ncw", "nn.conv1d_transpose", G._compute_from_registry("nn.conv1d_transpose"),
        "schedule_conv3d_transpose_ncdhw")),
    "nn.global_avg_pool2d": G.global_pool_strategy_for("avg"),
    "nn.global_max_pool2d": G.global_pool_strategy_for("max"),
    "nn.adaptive_avg_pool2d": G.adaptive_pool_strategy_for("avg"),
    "nn.adaptive_max_pool2d": G.adaptive_pool_strategy_for("max"),
    "nn.conv1d": _strategy("conv1d_strategy", lambda a, i, t, tg: G._one(
        "conv1d_ncw", "nn.conv1d", _conv1d_compute,
        "schedule_conv1d_ncw" if a.groups == 1 else "schedule_group_conv1d_ncw")),
    "nn.max_pool1d": _strategy("max_pool1d_strategy", lambda a, i, t, tg: G._one(
        "pool1d", "nn.max_pool1d", _pool1d_compute("max"), "schedule_pool")),
    "nn.avg_pool1d": _strategy("avg_pool1d_strategy", lambda a, i, t, tg: G._one(
        "pool1d", "nn.avg_pool1d", _pool1d_compute("avg"), "schedule_pool")),
    "nn.conv3d": _strategy("conv3d_strategy", lambda a, i, t, tg: G._one(
        "conv3d_ncdhw", "nn.conv3d", G._compute_from_registry("nn.conv3d"), "schedule_conv3d_ncdhw")),
    "nn.conv3d_transpose": _strategy("conv3d_transpose_strategy", lambda a, i, t, tg: G._one(
        "conv3d_transpose_ncdhw", "nn.conv3d_transpose", G._compute_from_registry("nn.conv3d_transpose"),
        "schedule_conv3d_transpose_ncdhw")),
    "nn.max_pool3d": _strategy("max_pool3d_strategy", lambda a, i, t, tg: G._one(
        "pool3d", "nn.max_pool3d", G._compute_from_registry("nn.max_pool3d"), "schedule_pool")),
    "nn.avg_pool3d": _strategy("avg_pool3d_strategy", lambda a, i, t, tg: G._one(
        "pool3d", "nn.avg_pool3d", G._compute_from_registry("nn.avg_pool3d"), "schedule_pool")),
    **{f"nn.adaptive_{k}_pool{d}d": _strategy(f"adaptive_{k}_pool{d}d_strategy", lambda a, i, t, tg, k=k, d=d: G._one(
        "adaptive_pool", f"nn.adaptive_{k}_pool{d}d", G._compute_from_registry(f"nn.adaptive_{k}_pool{d}d"),
        "schedule_adaptive_pool")) for k in ("avg", "max") for d in (1, 3)},
    "scatter_elements": _strategy("scatter_elements_strategy", lambda a, i, t, tg: G._one(
        "scatter_elements", "scatter_elements", G._compute_from_registry("scatter_elements"), "schedule_scatter")),
    "cumsum": _strategy("cumsum_strategy", lambda a, i, t, tg: G._one(
        "cumsum", "cumsum", _scan_compute("cumsum"), "schedule_scan")),
    "cumprod": _strategy("cumprod_strategy", lambda a, i, t, tg: G._one(
        "cumprod", "cumprod", _scan_compute("cumprod"), "schedule_scan")),
    "argsort": _strategy("argsort_strategy", lambda a, i, t, tg: G._one(
        "argsort", "argsort", topi_compute("argsort", "argsort", lambda a, i, t: [
            i[0], None, a.axis, a.is_ascend, a.dtype or "int32"]), "schedule_argsort")),
    "sort": _strategy("sort_strategy", lambda a, i, t, tg: G._one(
        "sort", "sort", topi_compute("sort", "sort", lambda a, i, t: [i[0], a.axis, a.is_ascend]), "schedule_sort")),
    "topk": _strategy("topk_strategy", lambda a, i, t, tg: G._one(
        "topk", "topk", _topk_compute, "schedule_topk")),
}


def _no_compute_strategy(op_name: str):
    def fstrategy(attrs, inputs, out_type, target):
        raise OpNotImplemented(f"operator {op_name} has no TOPI compute in kiln yet; it runs in the debug "
                               "interpreter (numpy reference) but cannot be compiled")
    fstrategy.__name__ = f"{op_name}_strategy"
    return fstrategy


def register_all() -> None:
    """Attach computes and strategies (idempotent)."""
    for name, compute in _NN_COMPUTES.items():
        if not Op.get(name).has_attr("FTVMCompute"):
            register_compute(name, compute)
    for name in DEFINED_OPS:
        op = Op.get(name)
        if op.has_attr("FTVMStrategy"):
            continue
        if name in _NN_STRATEGIES:
            register_strategy(name, _NN_STRATEGIES[name])
            continue
        if not op.has_attr("FTVMCompute"):
            register_strategy(name, _no_compute_strategy(name))
            continue
        pattern = op.get_attr("TOpPattern")
        if pattern == OpPattern.COMM_REDUCE:
            register_reduce_schedule(name)
        elif pattern == OpPattern.BROADCAST:
            register_broadcast_schedule(name)
        else:
            register_injective_schedule(name)
