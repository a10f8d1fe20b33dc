"""Small helpers shared by the graph passes: building op calls by name, matching ops, reading types,
and running a function-level rewrite on a type-checked module."""
from __future__ import annotations

import numpy as np

from ...error import RelayError
from ...ir.module import IRModule
from ...ir.type import TensorType, TupleType
from ...transform.pass_base import ModulePass
from ..expr import Call, Constant, Function
from ...ir.op import Op, _OPS, OpPattern
from ...ir.node import structural_equal
from .type_infer import infer_expr, infer_module as _infer


def get_op(name: str) -> Op:
    """The registered op ``name``; a pass that builds a call to an op nobody registered says which."""
    op = _OPS.get(name)
    if op is None:
        raise RelayError(f"this pass builds calls to the operator {name!r}, which is not registered "
                         "(kiln.relay.op registers it; import kiln.relay)")
    return op


def has_op(name: str) -> bool:
    return name in _OPS


def op_call(name: str, args, **attrs) -> Call:
    """``Call(Op.get(name), args, attrs)`` with attrs built from keyword values (TVM field names)."""
    op = get_op(name)
    return Call(op, list(args), op.make_attrs(**attrs) if (attrs or op.attrs_type is not None) else None)


def is_op(expr, name) -> bool:
    """Whether ``expr`` is a call of the op ``name`` (or of any of the names in a tuple)."""
    if not isinstance(expr, Call) or not isinstance(expr.op, Op):
        return False
    if isinstance(name, str):
        return expr.op.name == name
    return expr.op.name in name


def op_pattern(op: Op) -> int:
    """The op's TOpPattern (OPAQUE when not registered)."""
    pat = op.get_attr("TOpPattern")
    return int(OpPattern.OPAQUE if pat is None else pat)


def type_of(expr):
    """The inferred type of ``expr`` (None when inference has not run on it)."""
    t = getattr(expr, "_checked_type_", None)
    if t is None and isinstance(expr, Constant):
        v = expr.numpy()
        t = TensorType(v.shape, "bool" if v.dtype.kind == "b" else str(v.dtype))
    return t


def tensor_type(expr) -> TensorType | None:
    t = type_of(expr)
    return t if isinstance(t, TensorType) else None


def static_shape(expr):
    """The static shape (a tuple of ints) of a tensor-typed expression, else None."""
    t = tensor_type(expr)
    if t is None or t.is_dynamic():
        return None
    return tuple(int(d) for d in t.shape)


def scalar_const(value, dtype: str) -> Constant:
    return Constant(np.array(value, dtype=dtype))


def const_value(expr):
    """The numpy value of a Constant, else None."""
    return expr.numpy() if isinstance(expr, Constant) else None


def is_scalar_const(expr, value=None) -> bool:
    """A constant holding one value (any shape of size 1 counts if ``value`` matches all of it)."""
    v = const_value(expr)
    if v is None or v.size != 1:
        return False
    return value is None or bool(np.all(v == value))


def attrs_equal(a, b) -> bool:
    return structural_equal(a, b)


def infer(expr, mod: IRModule | None = None):
    """Type-check one expression (free variables must be annotated) and return the annotated copy."""
    return infer_expr(expr, mod)


def infer_module(mod: IRModule) -> IRModule:
    return _infer(mod)


def typed_function_pass(rewrite, opt_level: int, name: str, infer_after: bool = True) -> ModulePass:
    """A module pass that type-checks the module, applies ``rewrite(func, mod, ctx) -> func`` to every
    optimizable Relay function (not primitive, not external), then re-infers types.

    Passes that need shapes (most graph rewrites) are written this way: TVM declares them with
    ``required=["InferType"]``.
    """
    def run(mod: IRModule, ctx) -> IRModule:
        mod = infer_module(mod)
        out = mod.copy()
        changed = False
        for gv, func in mod.functions.items():
            if not isinstance(func, Function):
                continue
            if func.get_attr("Primitive") or func.get_attr("Compiler") or func.get_attr("SkipOptimization"):
                continue
            new = rewrite(func, mod, ctx)
            if new is not func:
                out[gv] = new
                changed = True
        if changed and infer_after:
            out = infer_module(out)
        return out

    return ModulePass(run, opt_level, name)


def out_channels_axis(layout: str) -> int:
    """Index of the output-channel dim ('O') of a kernel layout, or of 'C' in a data layout."""
    for ch in ("O", "C"):
        if ch in layout:
            return layout.index(ch)
    raise RelayError(f"layout {layout!r} has no channel axis")
