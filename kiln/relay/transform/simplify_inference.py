"""SimplifyInference: rewrite training-time ops into the arithmetic they compute at inference.

- ``nn.batch_norm`` (its output field 0): ``data * scale + shift`` with
  ``scale = gamma / sqrt(moving_var + eps)`` and ``shift = beta - moving_mean * scale``, the per-channel
  vectors expanded to broadcast on ``axis``. The mean/var outputs (fields 1, 2) are left to the op.
- ``nn.dropout``: the identity on its data.
- ``nn.layer_norm``, ``nn.group_norm``, ``nn.instance_norm``: decomposed into mean / variance /
  sqrt / arithmetic as TVM does (so FuseOps can fuse them with their neighbours), and
  ``nn.l2_normalize`` into ``x / sqrt(max(sum(x*x), eps))``.
"""
from __future__ import annotations

import numpy as np

from ...transform.pass_base import register_pass
from ..expr import Call, TupleGetItem
from ..expr_functor import ExprMutator, NonPrimitiveMutator
from ._util import is_op, op_call, scalar_const, tensor_type, typed_function_pass


def expand_to_axis(vec, ndim: int, axis: int):
    """Reshape a 1-d per-channel vector so it broadcasts against an ``ndim`` tensor on ``axis``."""
    pad = ndim - axis - 1
    return op_call("expand_dims", [vec], axis=1, num_newaxis=pad) if pad > 0 else vec


def _axis(axis: int, ndim: int) -> int:
    return axis + ndim if axis < 0 else axis


def batch_norm_to_infer(attrs, data, gamma, beta, mean, var, ttype):
    dtype = ttype.dtype
    eps = scalar_const(float(attrs.epsilon), dtype)
    scale = op_call("divide", [scalar_const(1.0, dtype), op_call("sqrt", [op_call("add", [var, eps])])])
    if attrs.scale:
        scale = op_call("multiply", [scale, gamma])
    shift = op_call("multiply", [op_call("negative", [mean]), scale])
    if attrs.center:
        shift = op_call("add", [shift, beta])
    ndim = len(ttype.shape)
    axis = _axis(int(attrs.axis), ndim)
    scale = expand_to_axis(scale, ndim, axis)
    shift = expand_to_axis(shift, ndim, axis)
    return op_call("add", [op_call("multiply", [data, scale]), shift])


def _normalize(data, mean, axes, eps, dtype):
    var = op_call("variance", [data, mean], axis=axes, keepdims=True, exclude=False, unbiased=False)
    denom = op_call("sqrt", [op_call("add", [var, scalar_const(float(eps), dtype)])])
    return op_call("divide", [op_call("subtract", [data, mean]), denom])


def layer_norm_to_infer(attrs, data, gamma, beta, ttype):
    ndim = len(ttype.shape)
    axis = _axis(int(attrs.axis), ndim)
    mean = op_call("mean", [data], axis=[axis], keepdims=True, exclude=False)
    out = _normalize(data, mean, [axis], attrs.epsilon, ttype.dtype)
    if attrs.scale:
        out = op_call("multiply", [out, expand_to_axis(gamma, ndim, axis)])
    if attrs.center:
        out = op_call("add", [out, expand_to_axis(beta, ndim, axis)])
    return out


def instance_norm_to_infer(attrs, data, gamma, beta, ttype):
    ndim = len(ttype.shape)
    axis = _axis(int(attrs.axis), ndim)
    axes = [i for i in range(1, ndim) if i != axis]
    mean = op_call("mean", [data], axis=axes, keepdims=True, exclude=False)
    out = _normalize(data, mean, axes, attrs.epsilon, ttype.dtype)
    if attrs.scale:
        out = op_call("multiply", [out, expand_to_axis(gamma, ndim, axis)])
    if attrs.center:
        out = op_call("add", [out, expand_to_axis(beta, ndim, axis)])
    return out


def group_norm_to_infer(attrs, data, gamma, beta, ttype):
    shape = [int(d) for d in ttype.shape]
    ndim = len(shape)
    axis = _axis(int(attrs.axis), ndim)
    groups = int(attrs.num_groups)
    channels = shape[axis]
    # (.., C, ..) -> (.., G, C/G, ..); normalize over C/G and everything after the channel axis
    grouped = shape[:axis] + [groups, channels // groups] + shape[axis + 1:]
    x = op_call("reshape", [data], newshape=grouped)
    axes = list(range(axis + 1, len(grouped)))
    mean = op_call("mean", [x], axis=axes, keepdims=True, exclude=False)
    out = _normalize(x, mean, axes, attrs.epsilon, ttype.dtype)
    out = op_call("reshape", [out], newshape=shape)
    if attrs.scale:
        out = op_call("multiply", [out, expand_to_axis(gamma, ndim, axis)])
    if attrs.center:
        out = op_call("add", [out, expand_to_axis(beta, ndim, axis)])
    return out


def l2_normalize_to_infer(attrs, data, ttype):
    sq = op_call("sum", [op_call("multiply", [data, data])], axis=list(attrs.axis), keepdims=True,
                 exclude=False)
    denom = op_call("sqrt", [op_call("maximum", [sq, scalar_const(float(attrs.eps), ttype.dtype)])])
    return op_call("divide", [data, denom])


class InferenceSimplifier(NonPrimitiveMutator):
    def __init__(self):
        super().__init__()
        self.data_types: dict = {}  # new batch_norm data arg -> type of the original

    def visit_tuple_getitem(self, item):
        new = super().visit_tuple_getitem(item)
        tup = new.tuple_value
        if new.index != 0 or not isinstance(tup, Call):
            return new
        if is_op(tup, "nn.batch_norm"):
            ttype = self.data_types.get(tup.args[0])
            if ttype is None:
                return new
            return batch_norm_to_infer(tup.attrs, *tup.args, ttype)
        if is_op(tup, "nn.dropout"):
            return tup.args[0]
        return new

    def visit_call(self, call):
        new = super().visit_call(call)
        if is_op(call, "nn.batch_norm"):
            self.data_types[new.args[0]] = tensor_type(call.args[0])
            return new
        if is_op(call, "nn.dropout") and tensor_type(call) is not None:
            return new.args[0]  # a dropout that returns the tensor itself
        ttype = tensor_type(call.args[0]) if call.args else None
        if ttype is None or ttype.is_dynamic():
            return new
        if is_op(call, "nn.layer_norm"):
            return layer_norm_to_infer(new.attrs, *new.args, ttype)
        if is_op(call, "nn.group_norm"):
            return group_norm_to_infer(new.attrs, *new.args, ttype)
        if is_op(call, "nn.instance_norm"):
            return instance_norm_to_infer(new.attrs, *new.args, ttype)
        if is_op(call, "nn.l2_normalize"):
            return l2_normalize_to_infer(new.attrs, new.args[0], ttype)
        return new


def simplify_inference(expr):
    return InferenceSimplifier().visit(expr)


def SimplifyInference():  # noqa: N802 (TVM's name)
    """Rewrite batch_norm / dropout / layer_norm / group_norm / instance_norm for inference (opt level 0)."""
    return typed_function_pass(lambda f, mod, ctx: simplify_inference(f), 0, "SimplifyInference")


register_pass("SimplifyInference", SimplifyInference)
