"""FastMath: replace ``exp``, ``tanh`` and ``erf`` by their fast approximations (``fast_exp``,
``fast_tanh``, ``fast_erf``). Opt level 4, so it runs only when asked for: the approximations trade
a little accuracy for speed."""
from __future__ import annotations

from ...error import OpNotImplemented
from ...transform.pass_base import register_pass
from ..expr import Call
from ..expr_functor import ExprMutator, NonPrimitiveMutator
from ._util import get_op, has_op, is_op, typed_function_pass

FAST_VERSIONS = {"exp": "fast_exp", "tanh": "fast_tanh", "erf": "fast_erf"}


class FastMathMutator(NonPrimitiveMutator):

    def visit_call(self, call):
        new = super().visit_call(call)
        for slow, fast in FAST_VERSIONS.items():
            if is_op(new, slow):
                if not has_op(fast):
                    raise OpNotImplemented(f"FastMath: the operator {fast!r} (fast version of {slow}) is not "
                                           "registered in kiln.relay.op")
                return Call(get_op(fast), new.args, new.attrs, new.type_args, new.span)
        return new


def fast_math(func):
    return FastMathMutator().visit(func)


def FastMath():  # noqa: N802 (TVM's name)
    """Use fast approximations of exp / tanh / erf (opt level 4)."""
    return typed_function_pass(lambda f, mod, ctx: fast_math(f), 4, "FastMath")


register_pass("FastMath", FastMath)
