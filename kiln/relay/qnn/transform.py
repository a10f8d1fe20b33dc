"""QNN passes (TVM's ``relay.qnn.transform``): lower every QNN op to integer Relay ops.

``CanonicalizeOps`` rewrites each ``qnn.*`` call through the op's ``FTVMQnnCanonicalize`` hook
(``fn(attrs, args, arg_types) -> Expr``); ``Legalize`` first applies target legalizations
(``FTVMQnnLegalize``: the x86 int8 forms of ``qnn.conv2d`` and ``qnn.dense``, ``x86_legalize.py``) and then canonicalizes. ``relay.build`` runs ``Legalize``
before its optimization passes, as TVM does, so QNN graphs compile with the ordinary kernels.
"""
from __future__ import annotations

from ...ir.op import Op
from ...transform.config import register_pass_config
from ...transform.pass_base import ModulePass, register_pass
from ..expr_functor import ExprMutator, post_order_visit, NonPrimitiveMutator
from ..transform._util import type_of, typed_function_pass
from . import op as _op  # noqa: F401 (registers the ops)
from ..expr import Call, Function
from ...transform import Sequential

register_pass_config("relay.qnn.default_rounding", str, default="UPWARD",
                     doc="requantize rounding when an op says rounding='None': UPWARD or TONEAREST")


class _QnnRewriter(NonPrimitiveMutator):
    """Rewrite each call whose op has ``attr_key`` (arguments first, so nested QNN calls lower too)."""

    def __init__(self, attr_key: str):
        super().__init__()
        self.attr_key = attr_key

    def visit_call(self, call):
        new = super().visit_call(call)
        if isinstance(new.op, Op):
            hook = new.op.get_attr(self.attr_key)
            if hook is not None:
                out = hook(new.attrs, list(new.args), [type_of(a) for a in call.args])
                if out is not None:
                    return out
        return new


def _has_qnn(func) -> bool:
    found = []

    def visit(e):
        if not found and isinstance(e, Call) and isinstance(e.op, Op) and e.op.name.startswith("qnn."):
            found.append(e)
    post_order_visit(func, visit)
    return bool(found)


def _rewrite_pass(attr_key: str, name: str):
    def rewrite(func, mod, ctx):
        if not _has_qnn(func):
            return func
        return _QnnRewriter(attr_key).visit(func)
    typed = typed_function_pass(rewrite, 0, name)

    def run(mod, ctx):
        # relay.build runs this on every model: skip type inference when there is no QNN call at all
        if not any(isinstance(f, Function) and _has_qnn(f) for f in mod.functions.values()):
            return mod
        return typed(mod)
    return ModulePass(run, 0, name)


def CanonicalizeOps():  # noqa: N802 (TVM's name)
    """Lower the QNN ops to integer Relay ops (``FTVMQnnCanonicalize``)."""
    return _rewrite_pass("FTVMQnnCanonicalize", "QnnCanonicalizeOps")


def Legalize():  # noqa: N802 (TVM's name)
    """Target legalization of QNN ops (``FTVMQnnLegalize``), then CanonicalizeOps."""
    return Sequential([_rewrite_pass("FTVMQnnLegalize", "QnnLegalize"), CanonicalizeOps()], opt_level=0,
                      name="QnnLegalize")


register_pass("QnnCanonicalizeOps", CanonicalizeOps)
register_pass("QnnLegalize", Legalize)
