"""Argument-type inference for parameters whose type is not annotated (TVM relations "assign" these).

TVM scripts often write ``relay.var("weight")`` with no shape and let ``nn.conv2d``'s relation work the
weight's type out from the data, ``channels`` and ``kernel_size``. Each hook here is the op attribute
``FInferArgTypes``: ``fn(arg_types, attrs) -> {arg index: Type}``, where ``arg_types`` holds the known
argument types and ``None`` for unknown ones; it returns the types it can determine (possibly none).
Type inference can call it before the op's relation when some argument types are still unknown.
"""
from __future__ import annotations

from ...ir.op import register_op_attr
from ...ir.type import TensorType
from ._layout import from_primal, to_primal


def _hook(*op_names):
    def register(fn):
        for name in op_names:
            register_op_attr(name, "FInferArgTypes", fn)
        return fn
    return register


def _pair(v):
    v = tuple(v)
    return v * 2 if len(v) == 1 else v


@_hook("nn.conv2d", "nn.contrib_conv2d_NCHWc", "nn.contrib_depthwise_conv2d_NCHWc")
def conv2d_arg_types(arg_types, attrs) -> dict:
    data, weight = arg_types
    if data is None or weight is not None or attrs.channels is None or attrs.kernel_size is None:
        return {}
    c = to_primal(data.shape, attrs.data_layout)["C"]
    kh, kw = _pair(attrs.kernel_size)
    shape = from_primal({"O": attrs.channels, "I": c // attrs.groups, "H": kh, "W": kw}, attrs.kernel_layout)
    return {1: TensorType(shape, data.dtype)}


@_hook("nn.conv2d_transpose")
def conv2d_transpose_arg_types(arg_types, attrs) -> dict:
    data, weight = arg_types
    if data is None or weight is not None or attrs.channels is None or attrs.kernel_size is None:
        return {}
    c = to_primal(data.shape, attrs.data_layout)["C"]
    kh, kw = _pair(attrs.kernel_size)
    dims = {"I": c, "O": attrs.channels // attrs.groups, "H": kh, "W": kw}
    if sorted(attrs.kernel_layout) != sorted("OIHW"):
        return {}
    return {1: TensorType(tuple(dims[a] for a in attrs.kernel_layout), data.dtype)}


@_hook("nn.conv1d")
def conv1d_arg_types(arg_types, attrs) -> dict:
    data, weight = arg_types
    if data is None or weight is not None or attrs.channels is None or attrs.kernel_size is None:
        return {}
    return {1: TensorType((attrs.channels, data.shape[1] // attrs.groups, attrs.kernel_size[0]), data.dtype)}


@_hook("nn.dense")
def dense_arg_types(arg_types, attrs) -> dict:
    data, weight = arg_types
    if data is None or weight is not None or attrs.units is None:
        return {}
    return {1: TensorType((attrs.units, data.shape[-1]), data.dtype)}


@_hook("nn.matmul")
def matmul_arg_types(arg_types, attrs) -> dict:
    a, b = arg_types
    if a is None or b is not None or attrs.units is None:
        return {}
    k = a.shape[-2] if attrs.transpose_a else a.shape[-1]
    shape = (attrs.units, k) if attrs.transpose_b else (k, attrs.units)
    return {1: TensorType(shape, a.dtype)}


def _channel_hook(axis_of, first_vector: int = 1):
    def hook(arg_types, attrs) -> dict:
        data = arg_types[0]
        if data is None:
            return {}
        axis = axis_of(attrs) % len(data.shape)
        vec = TensorType((data.shape[axis],), data.dtype)
        return {i: vec for i in range(first_vector, len(arg_types)) if arg_types[i] is None}
    return hook


for _name in ("nn.bias_add", "nn.batch_norm", "nn.layer_norm", "nn.group_norm", "nn.instance_norm", "nn.prelu"):
    register_op_attr(_name, "FInferArgTypes", _channel_hook(lambda attrs: attrs.axis))
