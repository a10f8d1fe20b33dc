"""SimplifyExpr: local algebraic rewrites that remove work, run to a fixed point.

- reshape chains (``reshape`` / ``contrib_reverse_reshape`` of a reshape) become one reshape to the
  final static shape; a reshape to the input's own shape disappears;
- transposes: consecutive ones compose, and one that permutes nothing disappears; a
  ``layout_transform`` undone by the next one disappears;
- casts: a cast to the operand's own dtype disappears; ``cast(cast(x, a), b)`` becomes ``cast(x, b)``
  when the first cast loses nothing (or nothing at all when ``b`` is x's dtype);
- identities ``x + 0``, ``0 + x``, ``x - 0``, ``x * 1``, ``1 * x``, ``x / 1`` (the 0/1 a constant or a
  zeros/ones(_like) call) become ``x``, only when the result has exactly x's shape and dtype;
- ``*_like`` ops whose reference has a static type become their static form (``zeros_like`` ->
  ``zeros``, ``reshape_like`` -> ``reshape``, ``cast_like`` -> ``cast``, ...);
- ``(x * c1) * c2`` and ``(x + c1) + c2`` with scalar constants combine the constants.
"""
from __future__ import annotations

import numpy as np

from ...ir.op import Op
from ...ir.type import TensorType
from ...transform.pass_base import register_pass
from ..expr import Call, Constant
from ..expr_functor import ExprMutator, NonPrimitiveMutator
from ._util import (infer, is_op, op_call, scalar_const, static_shape, tensor_type, type_of,
                    typed_function_pass)

_RESHAPES = ("reshape", "contrib_reverse_reshape")


def _same_type(a: TensorType | None, b: TensorType | None) -> bool:
    return (a is not None and b is not None and not a.is_dynamic() and not b.is_dynamic()
            and tuple(a.shape) == tuple(b.shape) and a.dtype == b.dtype)


def _broadcast_keeps(x_t: TensorType | None, c_t: TensorType | None, out_t: TensorType | None) -> bool:
    """Whether ``x (op) c`` has ``x``'s shape and dtype at every run-time size: ``c``'s dims, aligned to the
    right, are each 1 or a static size equal to ``x``'s (``(?, ?, 256) + (256,)`` keeps ``(?, ?, 256)``, so
    adding zeros is ``x`` itself even when ``x``'s shape is only known at run time)."""
    if _same_type(x_t, out_t):
        return True
    if x_t is None or c_t is None or out_t is None or x_t.dtype != out_t.dtype or len(c_t.shape) > len(x_t.shape):
        return False
    if len(out_t.shape) != len(x_t.shape):
        return False
    tail = x_t.shape[len(x_t.shape) - len(c_t.shape):]
    return all(isinstance(cd, int) and (cd == 1 or (isinstance(xd, int) and xd == cd))
               for xd, cd in zip(tail, c_t.shape))


def _is_const_value(expr, value) -> bool:
    """A constant filled with ``value``, or a zeros/ones(_like) call giving it."""
    if isinstance(expr, Constant):
        v = expr.numpy()
        return v.size > 0 and bool(np.all(v == value))
    if value == 0 and is_op(expr, ("zeros", "zeros_like")):
        return True
    if value == 1 and is_op(expr, ("ones", "ones_like")):
        return True
    if is_op(expr, ("full", "full_like")):
        fill = expr.args[0] if expr.op.name == "full" else expr.args[1]
        return isinstance(fill, Constant) and bool(np.all(fill.numpy() == value))
    return False


class ExprSimplifier(NonPrimitiveMutator):
    def __init__(self):
        super().__init__()
        self.changed = False

    def visit(self, expr):
        res = super().visit(expr)
        if res is not expr and getattr(res, "_checked_type_", None) is None:
            t = getattr(expr, "_checked_type_", None)
            if t is not None:
                res._checked_type_ = t  # rewrites keep the type of what they replace
        return res

    def visit_call(self, call):
        new = super().visit_call(call)
        if not isinstance(new.op, Op):
            return new
        out_t = tensor_type(call)
        rule = _RULES.get(new.op.name)
        if rule is None:
            return new
        res = rule(new, out_t)
        if res is None or res is new:
            return new
        self.changed = True
        if getattr(res, "_checked_type_", None) is None and out_t is not None:
            res._checked_type_ = out_t
        return res


def _reshape(call, out_t):
    x = call.args[0]
    shape = static_shape(call) if out_t is not None else None
    if shape is None:
        return None
    if is_op(x, _RESHAPES):
        inner = x.args[0]
        if _same_type(tensor_type(inner), out_t):
            return inner
        return op_call("reshape", [inner], newshape=list(shape))
    if _same_type(tensor_type(x), out_t):
        return x
    return None


def _transpose_perm(call, ndim: int):
    axes = call.attrs.axes if call.attrs is not None else None
    if axes is None or len(axes) == 0:
        return list(range(ndim - 1, -1, -1))
    return [int(a) + ndim if int(a) < 0 else int(a) for a in axes]


def _transpose(call, out_t):
    x = call.args[0]
    xt = tensor_type(x)
    if xt is None:
        return None
    ndim = len(xt.shape)
    perm = _transpose_perm(call, ndim)
    if is_op(x, "transpose"):
        inner = x.args[0]
        inner_perm = _transpose_perm(x, ndim)
        composed = [inner_perm[p] for p in perm]
        if composed == list(range(ndim)):
            return inner
        return op_call("transpose", [inner], axes=composed)
    if perm == list(range(ndim)):
        return x
    return None


def _layout_transform(call, out_t):
    x = call.args[0]
    a = call.attrs
    if a.src_layout == a.dst_layout:
        return x
    if is_op(x, "layout_transform") and x.attrs.src_layout == a.dst_layout and x.attrs.dst_layout == a.src_layout:
        return x.args[0]
    if is_op(x, "layout_transform") and x.attrs.dst_layout == a.src_layout:
        return op_call("layout_transform", [x.args[0]], src_layout=x.attrs.src_layout, dst_layout=a.dst_layout)
    return None


def _lossless(src: str, dst: str) -> bool:
    try:
        return bool(np.can_cast(np.dtype(src), np.dtype(dst), casting="safe"))
    except TypeError:
        return False


def _cast(call, out_t):
    x = call.args[0]
    xt = tensor_type(x)
    dtype = call.attrs.dtype
    if xt is not None and xt.dtype == dtype:
        return x
    if is_op(x, "cast"):
        inner = x.args[0]
        it = tensor_type(inner)
        if it is not None and _lossless(it.dtype, x.attrs.dtype):
            if it.dtype == dtype:
                return inner
            return op_call("cast", [inner], dtype=dtype)
    return None


def _identity(value_left, value_right):
    def rule(call, out_t):
        lhs, rhs = call.args
        if value_right is not None and _is_const_value(rhs, value_right) and \
                _broadcast_keeps(tensor_type(lhs), tensor_type(rhs), out_t):
            return lhs
        if value_left is not None and _is_const_value(lhs, value_left) and \
                _broadcast_keeps(tensor_type(rhs), tensor_type(lhs), out_t):
            return rhs
        return None
    return rule


def _adjacent(op_name, combine):
    identity = _identity(0, 0) if op_name == "add" else _identity(1, 1)

    def rule(call, out_t):
        res = identity(call, out_t)
        if res is not None:
            return res
        x, c2 = call.args
        if not (isinstance(c2, Constant) and c2.numpy().ndim == 0) or not is_op(x, op_name):
            return None
        inner, c1 = x.args
        if not (isinstance(c1, Constant) and c1.numpy().ndim == 0) or c1.numpy().dtype != c2.numpy().dtype:
            return None
        value = combine(c1.numpy(), c2.numpy()).astype(c1.numpy().dtype)
        return op_call(op_name, [inner, Constant(value)])
    return rule


def _like(static_name, build):
    def rule(call, out_t):
        if out_t is None or out_t.is_dynamic():
            return None
        return build(call, out_t)
    return rule


def _concrete_full_like(call, t):
    return op_call("full", [call.args[1]], shape=list(t.shape), dtype=t.dtype)


_RULES = {
    "reshape": _reshape,
    "contrib_reverse_reshape": _reshape,
    "transpose": _transpose,
    "layout_transform": _layout_transform,
    "cast": _cast,
    "add": _adjacent("add", np.add),
    "multiply": _adjacent("multiply", np.multiply),
    "subtract": _identity(None, 0),
    "divide": _identity(None, 1),
    "zeros_like": _like("zeros", lambda c, t: op_call("zeros", [], shape=list(t.shape), dtype=t.dtype)),
    "ones_like": _like("ones", lambda c, t: op_call("ones", [], shape=list(t.shape), dtype=t.dtype)),
    "full_like": _like("full", _concrete_full_like),
    "reshape_like": _like("reshape", lambda c, t: op_call("reshape", [c.args[0]], newshape=list(t.shape))),
    "cast_like": _like("cast", lambda c, t: op_call("cast", [c.args[0]], dtype=t.dtype)),
    "broadcast_to_like": _like("broadcast_to",
                               lambda c, t: op_call("broadcast_to", [c.args[0]], shape=list(t.shape))),
}


def simplify_expr(func, mod=None, max_iterations: int = 8):
    """Rewrite ``func`` (type-checked) until no rule applies."""
    for _ in range(max_iterations):
        s = ExprSimplifier()
        new = s.visit(func)
        if not s.changed:
            return new
        func = infer(new, mod)
    return func


def SimplifyExpr():  # noqa: N802 (TVM's name)
    """Simplify reshape/transpose/cast chains, arithmetic identities and *_like ops (opt level 0)."""
    return typed_function_pass(lambda f, mod, ctx: simplify_expr(f, mod), 0, "SimplifyExpr")


register_pass("SimplifyExpr", SimplifyExpr)
