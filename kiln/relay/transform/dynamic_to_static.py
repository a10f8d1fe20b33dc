"""DynamicToStatic (TVM's ``relay.transform.DynamicToStatic``): ``dyn.*`` calls whose shape operands are
constants become the static ops.

Shape operands are often computed (``concatenate(shape_of(x), [-1])``); when the tensors they read have static
shapes, FoldConstant turns them into constants. So the pass alternates type inference, constant folding and
the rewrite until nothing changes: a chain ``dyn.reshape -> shape_of -> dyn.broadcast_to`` becomes static in
one pass.
"""
from __future__ import annotations

import numpy as np

from ...ir.module import IRModule
from ...transform.pass_base import ModulePass, register_pass
from ...ir.type import TensorType
from ..expr import Call, Constant, Function, Var
from ._util import infer_module
from .. import op as O
from ..expr_functor import ExprMutator, post_order_visit, NonPrimitiveMutator
from .fold_constant import fold_constant
from .symbolic_reshape import symbolic_reshapes


def _vals(c: Constant) -> list:
    return [int(v) for v in c.numpy().reshape(-1)]


def _const_args(call: Call, idx) -> bool:
    return all(isinstance(call.args[i], Constant) for i in idx)


def _dynamic_data(expr) -> bool:
    """Whether ``expr`` is known to have Any dims (static strided_slice's kernel needs static input dims; a
    slice of a tensor that grows in a loop keeps dyn.strided_slice, whose kernel reads the shape at run time)."""
    ty = getattr(expr, "_checked_type_", None)
    if ty is None and isinstance(expr, Var):
        ty = expr.type_annotation
    return isinstance(ty, TensorType) and ty.is_dynamic()


def _static(call: Call):
    """The static equivalent of a dyn.* call whose shape operands are constants, or None."""
    name, a, attrs = call.op.name, call.args, call.attrs
    if name == "dyn.reshape" and _const_args(call, [1]):
        return O.reshape(a[0], _vals(a[1]), allowzero=bool(attrs.allowzero))
    if name == "dyn.broadcast_to" and _const_args(call, [1]):
        return O.broadcast_to(a[0], _vals(a[1]))
    if name == "dyn.tile" and _const_args(call, [1]):
        return O.tile(a[0], _vals(a[1]))
    if name == "dyn.strided_slice" and _const_args(call, [1, 2, 3]) and not _dynamic_data(call.args[0]):
        return O.strided_slice(a[0], _vals(a[1]), _vals(a[2]), _vals(a[3]), slice_mode=attrs.slice_mode)
    if name == "dyn.expand_dims" and _const_args(call, [1]):
        return O.expand_dims(a[0], _vals(a[1])[0], attrs.num_newaxis)
    if name == "dyn.squeeze" and _const_args(call, [1]):
        return O.squeeze(a[0], _vals(a[1]))
    if name == "dyn.full" and _const_args(call, [1]):
        return O.full(a[0], _vals(a[1]), attrs.dtype)
    if name in ("dyn.zeros", "dyn.ones") and _const_args(call, [0]):
        return (O.zeros if name == "dyn.zeros" else O.ones)(_vals(a[0]), attrs.dtype or "float32")
    if name == "dyn.topk" and _const_args(call, [1]):
        return O.topk(a[0], _vals(a[1])[0], attrs.axis, attrs.ret_type, attrs.is_ascend, attrs.dtype).astuple() \
            if attrs.ret_type == "both" else O.topk(a[0], _vals(a[1])[0], attrs.axis, attrs.ret_type,
                                                   attrs.is_ascend, attrs.dtype)
    if name == "dyn.nn.pad" and _const_args(call, [1]):
        width = np.asarray(a[1].numpy()).reshape(-1, 2).astype(int).tolist()
        # nn.pad has no wrap mode, no negative (cropping) widths, and checks reflect widths: those stay dynamic
        if attrs.pad_mode in ("constant", "edge") and min(min(w) for w in width) >= 0:
            return O.nn.pad(a[0], width, a[2], attrs.pad_mode)
    if name == "dyn.image.resize2d" and _const_args(call, [1]):
        roi = a[2].numpy().reshape(-1).tolist() if isinstance(a[2], Constant) else None
        return O.image.resize2d(a[0], _vals(a[1]), roi, attrs.layout, attrs.method,
                                attrs.coordinate_transformation_mode, attrs.rounding_method, attrs.cubic_alpha,
                                attrs.cubic_exclude, attrs.extrapolation_value, attrs.out_dtype or None)
    return None


class _DynToStatic(NonPrimitiveMutator):
    def __init__(self):
        super().__init__()
        self.changed = False

    def visit_call(self, call):
        new = super().visit_call(call)
        op = getattr(new, "op", None)
        if isinstance(new, Call) and getattr(op, "name", "").startswith("dyn."):
            static = _static(new)
            if static is not None:
                self.changed = True
                return static
        return new


def has_dyn_ops(mod: IRModule) -> bool:
    """Whether any function of ``mod`` calls a dyn.* op (so relay.build / the VM run the pass only then)."""
    found = []

    def visit(e):
        if isinstance(e, Call) and getattr(e.op, "name", "").startswith("dyn."):
            found.append(e)
    for func in mod.functions.values():
        if isinstance(func, Function) and not found:
            post_order_visit(func, visit)
    return bool(found)


def dynamic_to_static(mod: IRModule, max_rounds: int = 16) -> IRModule:
    for _ in range(max_rounds):
        mod = infer_module(mod)
        out = mod.copy()
        changed = False
        for gv, func in mod.functions.items():
            if not isinstance(func, Function) or func.get_attr("Primitive"):
                continue
            rewriter = _DynToStatic()
            folded = fold_constant(func, mod)
            new = rewriter.visit(folded)
            if rewriter.changed or (folded is not func and has_dyn_ops(IRModule.from_expr(func))):
                if isinstance(new, Function) and new.ret_type is not None and new.ret_type.is_dynamic():
                    new = Function(new.params, new.body, None, new.type_params, new.attrs)  # re-inferred
                out[gv] = new
                changed = True
        if not changed:  # nothing folds to constants: make reshapes over computed shapes static
            for gv, func in mod.functions.items():
                if isinstance(func, Function) and not func.get_attr("Primitive"):
                    new = symbolic_reshapes(func)
                    if new is not func:
                        if isinstance(new, Function) and new.ret_type is not None and new.ret_type.is_dynamic():
                            new = Function(new.params, new.body, None, new.type_params, new.attrs)
                        out[gv] = new
                        changed = True
        mod = out
        if not changed:
            break
    return infer_module(mod)


def DynamicToStatic():  # noqa: N802 (TVM's name)
    """Rewrite dyn.* calls with constant shape operands into static ops (opt level 3 in TVM; runs at 0 here:
    it never makes a program slower)."""
    return ModulePass(lambda mod, ctx: dynamic_to_static(mod), 0, "DynamicToStatic")


register_pass("DynamicToStatic", DynamicToStatic)
