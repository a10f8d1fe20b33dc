"""The partition pass (TVM's ``relay.quantize.partition``): marks where a quantized section ends with
``stop_fusion(cast_hint(x, dtype_input))``, so realize stores activations between kernels in the input
dtype (int8) and FuseOps keeps each conv2d with its epilogue."""
from __future__ import annotations

from ...ir.op import register_op_attr
from ..transform.function_pass import function_pass
from ._ops import cast_hint, stop_fusion
from ._rewrite import TempExpr, forward_rewrite
from ._util import check_constant, forward_op
from .qconfig import current_qconfig


class QPartitionExpr(TempExpr):
    """A value inside a quantizable section; realized as the end of the section."""

    def __init__(self, expr):
        self.expr = expr

    def realize(self):
        return stop_fusion(cast_hint(self.expr, current_qconfig().dtype_input))


def register_partition_function(op_name: str, frewrite=None, level: int = 10):
    """Register ``frewrite(ref_call, new_args, ctx)`` as ``op_name``'s partition rule."""
    return register_op_attr(op_name, "FQPartitionRewrite", frewrite, level)


def partition_expr_check(expr):
    if isinstance(expr, QPartitionExpr):
        return True, expr.expr
    return False, expr


@register_partition_function("nn.conv2d")
def conv2d_partition_function(ref_call, new_args, ctx):
    data_cond, data = partition_expr_check(new_args[0])
    _, kernel = partition_expr_check(new_args[1])
    if data_cond:
        data = new_args[0].realize()
    return QPartitionExpr(forward_op(ref_call, [data, kernel]))


def identity_partition_function(ref_call, new_args, ctx):
    cond, expr = partition_expr_check(new_args[0])
    if cond:
        return QPartitionExpr(forward_op(ref_call, [expr]))
    return None


for _name in ("clip", "nn.relu", "nn.max_pool2d"):
    register_partition_function(_name, identity_partition_function)


@register_partition_function("add")
def add_partition_function(ref_call, new_args, ctx):
    lhs_cond, lhs = partition_expr_check(new_args[0])
    rhs_cond, rhs = partition_expr_check(new_args[1])
    if lhs_cond and rhs_cond:  # a residual join of two sections: both end here
        return QPartitionExpr(forward_op(ref_call, [new_args[0].realize(), new_args[1].realize()]))
    if not lhs_cond and rhs_cond:  # residual: the right section ends, the sum is plain
        return forward_op(ref_call, [lhs, new_args[1].realize()])
    if lhs_cond and not rhs_cond:
        if check_constant(rhs):  # a bias (from batch_norm or bias_add): stays in the section
            return QPartitionExpr(forward_op(ref_call, [lhs, rhs]))
        return forward_op(ref_call, [new_args[0].realize(), rhs])
    return None


@register_partition_function("multiply")
def multiply_partition_function(ref_call, new_args, ctx):
    lhs_cond, lhs = partition_expr_check(new_args[0])
    rhs_cond, rhs = partition_expr_check(new_args[1])
    if lhs_cond:
        return QPartitionExpr(forward_op(ref_call, [new_args[0].realize(), rhs]))
    if rhs_cond:
        return QPartitionExpr(forward_op(ref_call, [lhs, new_args[1].realize()]))
    return None


@register_partition_function("nn.global_avg_pool2d")
def global_avg_pool2d_partition_function(ref_call, new_args, ctx):
    cond, expr = partition_expr_check(new_args[0])
    expr = new_args[0].realize() if cond else QPartitionExpr(new_args[0]).realize()
    return forward_op(ref_call, [expr])


def partition():
    """The QuantizePartition function pass."""
    def transform(func, mod, ctx):
        return forward_rewrite(func, "FQPartitionRewrite")
    return function_pass(transform, opt_level=1, name="QuantizePartition")
