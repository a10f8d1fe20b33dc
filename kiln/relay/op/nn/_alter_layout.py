"""AlterOpLayout hooks of ``nn.conv2d`` and ``nn.dense`` as generic functions (TVM's
``topi.nn.conv2d_alter_layout`` / ``dense_alter_layout``, registered by ``relay/op/nn/_nn.py``).

The default keeps the call as it is (returns None); a target registers its rewrite for its keys
(``@conv2d_alter_layout.register("cpu")`` in ``relay/op/strategy/x86_alter_op.py``). The generic functions live
on the Relay side, not in TOPI, because a rewrite builds Relay calls and TOPI sits below Relay.
"""
from __future__ import annotations

from ....target.generic_func import generic_func
from ..op import register_alter_op_layout

__all__ = ["conv2d_alter_layout", "dense_alter_layout", "batch_matmul_alter_layout"]


@generic_func
def conv2d_alter_layout(attrs, inputs, tinfos, out_type):
    """The layout one ``nn.conv2d`` call computes in: a new Relay expression, or None to keep it."""
    return None


@generic_func
def dense_alter_layout(attrs, inputs, tinfos, out_type):
    """The layout one ``nn.dense`` call computes in: a new Relay expression, or None to keep it."""
    return None


@generic_func
def batch_matmul_alter_layout(attrs, inputs, tinfos, out_type):
    """The layout one ``nn.batch_matmul`` call computes in (kiln: a constant ``y`` packed once); None keeps it."""
    return None


register_alter_op_layout("nn.conv2d", conv2d_alter_layout)
register_alter_op_layout("nn.dense", dense_alter_layout)
register_alter_op_layout("nn.batch_matmul", batch_matmul_alter_layout)
