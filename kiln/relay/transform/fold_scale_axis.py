"""FoldScaleAxis: fold a constant per-channel multiply into the weights of a conv2d or dense.

- Backward: ``multiply(conv2d(x, w), s)`` (optionally through ``add``/``subtract`` of a per-channel
  constant bias, ``(conv2d(x, w) + b) * s``) where ``s`` varies only along the output-channel axis
  becomes ``conv2d(x, w * s') (+ b * s)``, ``s'`` laid out along the kernel's 'O' axis. For dense the
  axis is the last one and the weight's axis 0.
- Forward: ``conv2d(multiply(x, s), w)`` with ``s`` per input channel (optionally through ``nn.relu``
  when every scale is positive, or through ``add``/``subtract`` of a constant ``b`` rewritten as
  ``(x + b / s) * s`` when no scale is zero) becomes ``conv2d(x, w * s')`` along the kernel's 'I' axis (groups=1);
  ``dense(multiply(x, s), w)`` with ``s`` along the last axis becomes ``dense(x, w * s)``.

Nothing happens when the scale is not a constant, varies along another axis, or an intermediate
value has other users. The scaled weights are ``multiply`` calls that FoldConstant evaluates when the
weights are constants (``FoldScaleAxis`` runs it unless ``relay.FoldScaleAxis.fold_constant`` is off).
"""
from __future__ import annotations

import numpy as np

from ...transform.pass_base import ModulePass, Sequential, register_pass
from ..analysis.graph import edge_counts
from ..expr import Constant
from ..expr_functor import ExprMutator, NonPrimitiveMutator
from ._util import is_op, op_call, static_shape, tensor_type, typed_function_pass
from .fold_constant import FoldConstant


def per_channel(scale, ndim: int, axis: int, channels: int):
    """The scale as a vector of ``channels`` values when it varies only along ``axis`` of an ``ndim``
    tensor (a scalar counts as uniform); None otherwise."""
    if not isinstance(scale, Constant):
        return None
    v = scale.numpy()
    if v.ndim > ndim:
        return None
    shape = (1,) * (ndim - v.ndim) + v.shape
    for i, d in enumerate(shape):
        if d != 1 and i != axis:
            return None
    if shape[axis] not in (1, channels):
        return None
    return np.broadcast_to(v.reshape(-1) if v.size > 1 else v.reshape(1), (channels,)).copy()


def _vector_along(vec: np.ndarray, ndim: int, axis: int, dtype) -> Constant:
    shape = [1] * ndim
    shape[axis] = vec.size
    return Constant(vec.astype(dtype).reshape(shape))


def _conv_axes(call):
    """(data channel axis, kernel out axis, kernel in axis) of a conv2d call."""
    a = call.attrs
    data_layout = a.data_layout
    kernel_layout = a.kernel_layout
    if len(data_layout) != 4 or len(kernel_layout) != 4 or "C" not in data_layout:
        return None
    if "O" not in kernel_layout or "I" not in kernel_layout:
        return None
    out_layout = a.out_layout or data_layout
    if out_layout != data_layout:
        return None
    return data_layout.index("C"), kernel_layout.index("O"), kernel_layout.index("I")


def _weight_dtype(w):
    t = tensor_type(w)
    return t.dtype if t is not None else "float32"


class BackwardFolder(NonPrimitiveMutator):
    def __init__(self, counts: dict):
        super().__init__()
        self.counts = counts

    def single_use(self, e) -> bool:
        return self.counts.get(e, 0) <= 1

    def visit_call(self, call):
        if is_op(call, "multiply"):
            for data_idx in (0, 1):
                folded = self.fold(call, call.args[data_idx], call.args[1 - data_idx])
                if folded is not None:
                    return folded
        return super().visit_call(call)

    def fold(self, mul, producer, scale):
        out_shape = static_shape(mul)
        pshape = static_shape(producer)
        if out_shape is None or pshape is None or out_shape != pshape or not self.single_use(producer):
            return None
        return self.push(producer, scale, len(out_shape))

    def push(self, e, scale, ndim):
        """``e * scale`` with the scale moved into the weights, or None when it cannot be."""
        if is_op(e, ("add", "subtract")):
            lhs, bias = e.args
            if is_op(e, "add") and isinstance(lhs, Constant) and not isinstance(bias, Constant):
                lhs, bias = bias, lhs
            bt = tensor_type(bias)
            if not isinstance(bias, Constant) or not self.single_use(lhs) or static_shape(lhs) != static_shape(e):
                return None
            inner = self.push(lhs, scale, ndim)
            if inner is None:
                return None
            # the bias is scaled along the same axis: broadcast the scale against it
            new_bias = Constant((bias.numpy() * scale.numpy()).astype(bt.dtype))
            return op_call(e.op.name, [inner, new_bias])
        if is_op(e, "nn.conv2d"):
            axes = _conv_axes(e)
            shape = static_shape(e)
            if axes is None or shape is None:
                return None
            c_axis, o_axis, _ = axes
            vec = per_channel(scale, ndim, c_axis, shape[c_axis])
            if vec is None:
                return None
            x, w = e.args
            w_scaled = op_call("multiply", [self.visit(w), _vector_along(vec, 4, o_axis, _weight_dtype(w))])
            return op_call("nn.conv2d", [self.visit(x), w_scaled], **dict(e.attrs.items()))
        if is_op(e, "nn.dense"):
            shape = static_shape(e)
            if shape is None:
                return None
            vec = per_channel(scale, ndim, ndim - 1, shape[-1])
            if vec is None:
                return None
            x, w = e.args
            w_scaled = op_call("multiply", [self.visit(w), _vector_along(vec, 2, 0, _weight_dtype(w))])
            return op_call("nn.dense", [self.visit(x), w_scaled], **dict(e.attrs.items()))
        return None


class ForwardFolder(NonPrimitiveMutator):
    def __init__(self, counts: dict):
        super().__init__()
        self.counts = counts

    def scaled_input(self, e, ndim, axis, channels):
        """(x', vector) when ``e`` equals ``x' * s`` with s a constant along ``axis``: ``e`` is ``x * s``,
        ``x * s + b``, or a relu of those when every scale is positive."""
        if is_op(e, "nn.relu"):
            if self.counts.get(e.args[0], 0) > 1:
                return None
            found = self.scaled_linear(e.args[0], ndim, axis, channels)
            if found is None or not np.all(found[1] > 0):
                return None
            return op_call("nn.relu", [found[0]]), found[1]
        return self.scaled_linear(e, ndim, axis, channels)

    def scaled_linear(self, e, ndim, axis, channels):
        if is_op(e, ("add", "subtract")):
            return self.scaled_shifted_input(e, ndim, axis, channels)
        if not is_op(e, "multiply"):
            return None
        for data_idx in (0, 1):
            x, s = e.args[data_idx], e.args[1 - data_idx]
            if static_shape(x) != static_shape(e):
                continue
            vec = per_channel(s, ndim, axis, channels)
            if vec is not None:
                return self.visit(x), vec
        return None

    def scaled_shifted_input(self, e, ndim, axis, channels):
        """``x * s + b`` (or ``- b``) with constant b and non-zero s is ``(x + b / s) * s``."""
        m, b = e.args
        if is_op(e, "add") and isinstance(m, Constant):
            m, b = b, m
        if not isinstance(b, Constant) or self.counts.get(m, 0) > 1 or static_shape(m) != static_shape(e):
            return None
        found = self.scaled_linear(m, ndim, axis, channels)
        if found is None or not np.all(found[1] != 0):
            return None
        x, vec = found
        shape = [1] * ndim
        shape[axis] = channels
        new_b = (b.numpy() / vec.reshape(shape)).astype(b.numpy().dtype)
        if np.broadcast_shapes(new_b.shape, static_shape(e)) != static_shape(e):
            return None
        return op_call(e.op.name, [x, Constant(new_b)]), vec

    def visit_call(self, call):
        if is_op(call, "nn.conv2d") and int(call.attrs.groups) == 1:
            axes = _conv_axes(call)
            data, w = call.args
            dshape = static_shape(data)
            if axes is not None and dshape is not None and self.counts.get(data, 0) <= 1:
                c_axis, _, i_axis = axes
                found = self.scaled_input(data, 4, c_axis, dshape[c_axis])
                if found is not None:
                    x, vec = found
                    w_scaled = op_call("multiply", [self.visit(w), _vector_along(vec, 4, i_axis, _weight_dtype(w))])
                    return op_call("nn.conv2d", [x, w_scaled], **dict(call.attrs.items()))
        if is_op(call, "nn.dense"):
            data, w = call.args
            dshape = static_shape(data)
            if dshape is not None and self.counts.get(data, 0) <= 1:
                found = self.scaled_input(data, len(dshape), len(dshape) - 1, dshape[-1])
                if found is not None:
                    x, vec = found
                    w_scaled = op_call("multiply", [self.visit(w), _vector_along(vec, 2, 1, _weight_dtype(w))])
                    return op_call("nn.dense", [x, w_scaled], **dict(call.attrs.items()))
        return super().visit_call(call)


def backward_fold_scale_axis(func):
    return BackwardFolder(edge_counts(func)).visit(func)


def forward_fold_scale_axis(func):
    return ForwardFolder(edge_counts(func)).visit(func)


def BackwardFoldScaleAxis():  # noqa: N802 (TVM's name)
    """Fold a per-output-channel scale after conv2d/dense into the weights (opt level 3)."""
    return typed_function_pass(lambda f, mod, ctx: backward_fold_scale_axis(f), 3, "BackwardFoldScaleAxis")


def ForwardFoldScaleAxis():  # noqa: N802 (TVM's name)
    """Fold a per-input-channel scale before conv2d/dense into the weights (opt level 3)."""
    return typed_function_pass(lambda f, mod, ctx: forward_fold_scale_axis(f), 3, "ForwardFoldScaleAxis")


def FoldScaleAxis():  # noqa: N802 (TVM's name)
    """Backward then forward scale folding, then FoldConstant on the scaled weights (opt level 3)."""
    backward, forward, fold = BackwardFoldScaleAxis(), ForwardFoldScaleAxis(), FoldConstant()

    def run(mod, ctx):
        mod = forward(backward(mod))
        if ctx.get_config("relay.FoldScaleAxis.fold_constant", True):
            mod = fold(mod)
        return mod

    return ModulePass(run, 3, "FoldScaleAxis")


register_pass("FoldScaleAxis", FoldScaleAxis)
register_pass("ForwardFoldScaleAxis", ForwardFoldScaleAxis)
register_pass("BackwardFoldScaleAxis", BackwardFoldScaleAxis)
