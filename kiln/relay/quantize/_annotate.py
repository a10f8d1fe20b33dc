"""The annotate pass (TVM's ``relay.quantize.annotate``) and its per-op rules.

Each rule sees a call with rewritten arguments, some of them ``QAnnotateExpr`` (a value plus the kind
of field it is in: INPUT, WEIGHT or ACTIVATION), puts a ``simulated_quantize`` on the arguments that
must be quantized, and returns the kind of its own result. Rules are registered per op under
``FQAnnotateRewrite`` with ``register_annotate_function`` (a user can add one for a new op).
"""
from __future__ import annotations

import warnings

from ...error import RelayError
from ...ir.op import register_op_attr
from ..analysis.vars import free_vars
from ..expr import Function, Tuple, var
from ..transform.function_pass import function_pass
from ._context import quantize_context
from ._ops import SIMULATED_QUANTIZE, simulated_quantize
from ._rewrite import TempExpr, forward_rewrite
from ._util import check_constant, forward_op
from .qconfig import QAnnotateKind, current_qconfig


class QAnnotateExpr(TempExpr):
    """A value annotated with the QAnnotateKind of the field it lives in."""

    def __init__(self, expr, kind: int):
        self.expr = expr
        self.kind = kind

    def realize(self):
        return self.expr


def _get_expr_kind(anno):
    if isinstance(anno, QAnnotateExpr):
        return anno.expr, anno.kind
    return anno, None


def register_annotate_function(op_name: str, frewrite=None, level: int = 10):
    """Register ``frewrite(ref_call, new_args, ctx)`` as ``op_name``'s annotation rule.

    The rule returns a QAnnotateExpr, a plain expression, or None (leave the call as it is). When
    ``debug_enabled_ops`` leaves the op out, the call is forwarded unannotated.
    """
    def default_rewrite(ref_call, new_args, ctx):
        return forward_op(ref_call, [_get_expr_kind(x)[0] for x in new_args])

    def _register(func):
        def frewrite_with_guard(ref_call, new_args, ctx):
            if not current_qconfig().guard(ref_call):
                return default_rewrite(ref_call, new_args, ctx)
            return func(ref_call, new_args, ctx)
        frewrite_with_guard.__name__ = getattr(func, "__name__", "annotate_rule")
        register_op_attr(op_name, "FQAnnotateRewrite", frewrite_with_guard, level)
        return func

    return _register(frewrite) if frewrite is not None else _register


def attach_simulated_quantize(data, kind: int, sign: bool = True, rounding: str = "round"):
    """``simulated_quantize(data)`` of ``kind`` with fresh scale/clip variables (one per value and kind)."""
    if getattr(data, "op", None) is not None and getattr(data.op, "name", None) == SIMULATED_QUANTIZE:
        a = data.attrs
        if a.kind == kind and a.sign == sign and a.rounding == rounding:
            return data
    qctx = quantize_context()
    key = (data, kind, sign, rounding)
    node = qctx.qnode_map.get(key)
    if node is None:
        node = simulated_quantize(data, var("dom_scale", shape=(), dtype="float32"),
                                  var("clip_min", shape=(), dtype="float32"),
                                  var("clip_max", shape=(), dtype="float32"), kind, sign, rounding)
        qctx.qnode_map[key] = node
    return node


def _weighted_rewrite(ref_call, new_args, ctx):
    """conv2d / dense: data into the INPUT field, weight into the WEIGHT field, result ACTIVATION."""
    if quantize_context().check_to_skip(ref_call):
        return None
    lhs, lhs_kind = _get_expr_kind(new_args[0])
    rhs, rhs_kind = _get_expr_kind(new_args[1])
    if rhs_kind is not None or not check_constant(rhs):
        # TVM asserts here; a weight computed at run time cannot be given a weight scale
        return None
    if lhs_kind is None or lhs_kind == QAnnotateKind.ACTIVATION:
        lhs = attach_simulated_quantize(lhs, QAnnotateKind.INPUT)
    rhs = attach_simulated_quantize(rhs, QAnnotateKind.WEIGHT)
    return QAnnotateExpr(forward_op(ref_call, [lhs, rhs]), QAnnotateKind.ACTIVATION)


@register_annotate_function("nn.contrib_conv2d_NCHWc")
def conv2d_nchwc_rewrite(ref_call, new_args, ctx):
    warnings.warn("NCHWc layout Conv2D detected: quantize before AlterOpLayout (a lower opt_level); "
                  "quantization has no effect on this call")
    return None


register_annotate_function("nn.conv2d", _weighted_rewrite)
register_annotate_function("nn.conv1d", _weighted_rewrite)


@register_annotate_function("nn.dense")
def dense_rewrite(ref_call, new_args, ctx):
    if current_qconfig().skip_dense_layer:
        return None
    return _weighted_rewrite(ref_call, new_args, ctx)


@register_annotate_function("multiply")
def multiply_rewrite(ref_call, new_args, ctx):
    if quantize_context().check_to_skip(ref_call):
        return None
    lhs, lhs_kind = _get_expr_kind(new_args[0])
    rhs, rhs_kind = _get_expr_kind(new_args[1])
    if lhs_kind is None and rhs_kind is None:
        return None
    if lhs_kind in (QAnnotateKind.ACTIVATION, QAnnotateKind.INPUT) and rhs_kind is None:
        if lhs_kind == QAnnotateKind.ACTIVATION:
            lhs = attach_simulated_quantize(lhs, QAnnotateKind.INPUT)
        rkind = QAnnotateKind.WEIGHT if check_constant(rhs) else QAnnotateKind.INPUT
        rhs = attach_simulated_quantize(rhs, rkind)
        return QAnnotateExpr(forward_op(ref_call, [lhs, rhs]), QAnnotateKind.ACTIVATION)
    # TVM raises ValueError for the other combinations; kiln leaves such a multiply in float
    return None


@register_annotate_function("add")
def add_rewrite(ref_call, new_args, ctx):
    if quantize_context().check_to_skip(ref_call):
        return None
    lhs, lhs_kind = _get_expr_kind(new_args[0])
    rhs, rhs_kind = _get_expr_kind(new_args[1])
    I, A, W = QAnnotateKind.INPUT, QAnnotateKind.ACTIVATION, QAnnotateKind.WEIGHT
    if lhs_kind is None and rhs_kind is None:
        return None
    if lhs_kind is None:
        if rhs_kind not in (I, A):
            return None
        lhs = attach_simulated_quantize(lhs, I)
        return QAnnotateExpr(forward_op(ref_call, [lhs, rhs]), I)
    if rhs_kind is None:
        rhs = attach_simulated_quantize(rhs, W if check_constant(rhs) else I)
        return QAnnotateExpr(forward_op(ref_call, [lhs, rhs]), A)
    if lhs_kind == I and rhs_kind == I:
        return QAnnotateExpr(forward_op(ref_call, [lhs, rhs]), I)
    if lhs_kind == A and rhs_kind == A:
        rhs = attach_simulated_quantize(rhs, I)
        return QAnnotateExpr(forward_op(ref_call, [lhs, rhs]), A)
    if {lhs_kind, rhs_kind} == {A, I}:
        return QAnnotateExpr(forward_op(ref_call, [lhs, rhs]), A)
    raise RelayError(f"relay.quantize annotate: add of fields {lhs_kind} and {rhs_kind} is not supported")


def identity_rewrite(ref_call, new_args, ctx):
    """Ops that keep their input's field (relu, reshape, clip, avg_pool2d, ...)."""
    if quantize_context().check_to_skip(ref_call):
        return None
    x, kind = _get_expr_kind(new_args[0])
    if kind is None:
        return None
    return QAnnotateExpr(forward_op(ref_call, [x] + list(new_args[1:])), kind)


for _name in ("reshape", "clip", "nn.relu", "strided_slice", "nn.avg_pool2d", "nn.batch_flatten", "transpose",
              "annotation.stop_fusion"):
    register_annotate_function(_name, identity_rewrite)


def pool2d_rewrite(ref_call, new_args, ctx):
    """max pooling works on the quantized input itself: its input goes into the INPUT field."""
    if quantize_context().check_to_skip(ref_call):
        return None
    x, kind = _get_expr_kind(new_args[0])
    if kind is None:
        return None
    if kind == QAnnotateKind.ACTIVATION:
        x = attach_simulated_quantize(x, QAnnotateKind.INPUT)
    return QAnnotateExpr(forward_op(ref_call, [x]), QAnnotateKind.INPUT)


register_annotate_function("nn.max_pool2d", pool2d_rewrite)
register_annotate_function("nn.max_pool1d", pool2d_rewrite)


@register_annotate_function("annotation.cast_hint")
def cast_hint_rewrite(ref_call, new_args, ctx):
    x, kind = _get_expr_kind(new_args[0])
    if quantize_context().check_to_skip(ref_call):
        return x
    if kind is None:
        return new_args[0]
    if kind == QAnnotateKind.ACTIVATION:
        x = attach_simulated_quantize(x, QAnnotateKind.INPUT)
    return QAnnotateExpr(forward_op(ref_call, [x]), QAnnotateKind.INPUT)


@register_annotate_function("concatenate")
def concatenate_rewrite(ref_call, new_args, ctx):
    if quantize_context().check_to_skip(ref_call):
        return None
    tup = new_args[0]
    if not isinstance(tup, Tuple):
        return None
    exprs = [_get_expr_kind(x)[0] for x in tup.fields]
    kinds = [_get_expr_kind(x)[1] for x in tup.fields]
    if all(k is None for k in kinds):
        return None
    exprs = [attach_simulated_quantize(e, QAnnotateKind.ACTIVATION) if k is None else e
             for e, k in zip(exprs, kinds)]
    return QAnnotateExpr(forward_op(ref_call, [Tuple(exprs)]), QAnnotateKind.ACTIVATION)


@register_annotate_function("nn.global_avg_pool2d")
def global_avg_pool2d_rewrite(ref_call, new_args, ctx):
    """The average pool takes the quantized value; everything after it stays in float (TVM's rule)."""
    if quantize_context().check_to_skip(ref_call):
        return None
    x, kind = _get_expr_kind(new_args[0])
    if kind is None:
        return None
    quantize_context().stop_quantize()
    return forward_op(ref_call, [x])


@register_annotate_function("nn.batch_matmul")
def batch_matmul_rewrite(ref_call, new_args, ctx):
    if quantize_context().check_to_skip(ref_call):
        return None
    out = []
    for a in new_args[:2]:
        e, kind = _get_expr_kind(a)
        if kind is None or kind == QAnnotateKind.ACTIVATION:
            e = attach_simulated_quantize(e, QAnnotateKind.WEIGHT if check_constant(e) else QAnnotateKind.INPUT)
        out.append(e)
    return QAnnotateExpr(forward_op(ref_call, out), QAnnotateKind.ACTIVATION)


def _multi_ref(e):
    """A field used by several consumers is quantized to INPUT once, before it is shared."""
    if isinstance(e, QAnnotateExpr):
        return QAnnotateExpr(attach_simulated_quantize(e.expr, QAnnotateKind.INPUT), QAnnotateKind.INPUT)
    return e


def annotate():
    """The QuantizeAnnotate function pass: inserts simulated_quantize; its scale and clip variables
    become extra parameters of the function (calibrate binds them)."""
    def transform(func, mod, ctx):
        new = forward_rewrite(func, "FQAnnotateRewrite", None, _multi_ref)
        extra = [v for v in free_vars(new) if v not in new.params]
        if not extra:
            return new
        return Function(list(new.params) + extra, new.body, new.ret_type, new.type_params, new.attrs, new.span)
    return function_pass(transform, opt_level=1, name="QuantizeAnnotate", required=["InferType"])
