"""CanonicalizeOps: rewrite ops into simpler ones the later passes and kernels handle uniformly.

``nn.bias_add(x, b, axis)`` becomes ``add(x, expand_dims(b, axis=1, num_newaxis=ndim-axis-1))`` (no
expand_dims when the axis is the last one), so the bias add is an ordinary broadcast that fuses into
the producer. An op may also register ``FTVMCanonicalize`` (``fn(attrs, args, arg_types) -> Expr or
None``) to be rewritten here.
"""
from __future__ import annotations

from ...ir.op import Op
from ...transform.pass_base import register_pass
from ..expr_functor import ExprMutator, NonPrimitiveMutator
from ._util import is_op, op_call, tensor_type, type_of, typed_function_pass
from .simplify_inference import expand_to_axis


class Canonicalizer(NonPrimitiveMutator):

    def visit_call(self, call):
        new = super().visit_call(call)
        if is_op(call, "nn.bias_add"):
            ttype = tensor_type(call.args[0])
            if ttype is None:
                return new
            ndim = len(ttype.shape)
            axis = int(new.attrs.axis)
            axis = axis + ndim if axis < 0 else axis
            return op_call("add", [new.args[0], expand_to_axis(new.args[1], ndim, axis)])
        if isinstance(new.op, Op):
            fcanon = new.op.get_attr("FTVMCanonicalize")
            if fcanon is not None:
                out = fcanon(new.attrs, list(new.args), [type_of(a) for a in call.args])
                if out is not None:
                    return out
        return new


def canonicalize_ops(expr):
    return Canonicalizer().visit(expr)


def CanonicalizeOps():  # noqa: N802 (TVM's name)
    """Canonicalize special ops (bias_add -> expand_dims + add) (opt level 3)."""
    return typed_function_pass(lambda f, mod, ctx: canonicalize_ops(f), 3, "CanonicalizeOps")


register_pass("CanonicalizeOps", CanonicalizeOps)
