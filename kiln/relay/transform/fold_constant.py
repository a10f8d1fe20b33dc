"""FoldConstant: evaluate the parts of a program that depend only on constants.

A call of a primitive op whose arguments are all constants (or tuples of constants) is evaluated with
the op's numpy reference (``FReference``) and replaced by the resulting Constant (a Tuple of Constants
for tuple-valued ops). The result keeps the dtype and shape the type relation gives. Stateful or random
ops (``TOpIsStateful``, ``random.*``, ``nn.dropout``) and ops without a reference are never folded.
``shape_of`` / ``ndarray_size`` of a tensor with a static shape fold too. Let-bound constants are
propagated (so are let-bound variables), a field of a literal tuple is replaced by the field, and an
``If`` whose condition folds to a constant is replaced by the branch it takes (TVM's rules).
"""
from __future__ import annotations

import numpy as np

from ...error import RelayError
from ...ir.op import Op
from ...ir.type import TensorType, TupleType
from ...transform.pass_base import register_pass
from ..expr import Call, Constant, Function, Tuple, TupleGetItem, Var
from ..expr_functor import ExprMutator
from ._util import infer, static_shape, type_of, typed_function_pass

_NEVER_FOLD = {"nn.dropout", "on_device", "device_copy", "annotation.stop_fusion", "annotation.checkpoint",
               "vm.alloc_storage", "vm.alloc_tensor", "memory.alloc_storage", "memory.alloc_tensor"}


def is_complex_constant(expr) -> bool:
    """A Constant, or a Tuple whose fields are all complex constants."""
    if isinstance(expr, Constant):
        return True
    if isinstance(expr, Tuple):
        return all(is_complex_constant(f) for f in expr.fields)
    return False


def _foldable(op: Op) -> bool:
    name = op.name
    if name in _NEVER_FOLD or name.startswith("random.") or name.startswith("qnn."):
        return False
    if op.get_attr("TOpIsStateful") or op.get_attr("TNonComputational"):
        return False
    return op.get_attr("FReference") is not None


def _value(expr):
    if isinstance(expr, Constant):
        return expr.numpy()
    return tuple(_value(f) for f in expr.fields)


def _to_expr(value, ty):
    """A numpy result as a Constant of the inferred type (a Tuple of them for a tuple type)."""
    if isinstance(ty, TupleType):
        if not isinstance(value, (tuple, list)) or len(value) != len(ty.fields):
            raise RelayError(f"reference returned {type(value).__name__} for a tuple of {len(ty.fields)} fields")
        return Tuple([_to_expr(v, t) for v, t in zip(value, ty.fields)])
    arr = np.asarray(value)
    if isinstance(ty, TensorType):
        dtype = "bool" if ty.dtype == "bool" else ty.dtype
        arr = arr.astype(dtype, copy=False)
        if not ty.is_dynamic() and tuple(arr.shape) != tuple(ty.shape):
            if arr.size != int(np.prod(ty.shape, dtype=np.int64)):
                raise RelayError(f"reference produced shape {arr.shape}, the type relation says {ty.shape}")
            arr = arr.reshape(ty.shape)
    return Constant(np.array(arr, order="C"))  # keeps 0-d results 0-d (ascontiguousarray makes them 1-d)


def evaluate_call(call: Call):
    """Evaluate an op call whose arguments are constants; returns the folded expression."""
    typed = infer(call)
    ty = type_of(typed)
    ref = call.op.get_attr("FReference")
    result = ref(call.attrs, [_value(a) for a in call.args], ty)
    return _to_expr(result, ty)


class ConstantFolder(ExprMutator):
    def __init__(self):
        super().__init__()
        self.let_consts: dict = {}

    def visit_let_binding(self, let):
        value = self.visit(let.value)
        if isinstance(value, (Constant, Var)):
            self.let_consts[let.var] = value
            return None  # propagated: the binding goes
        return let.var, value

    def visit_if(self, node):
        new = super().visit_if(node)
        if isinstance(new.cond, Constant):
            flag = np.asarray(new.cond.numpy())
            if flag.size != 1:
                raise RelayError(f"If condition must be a scalar, got a constant of shape {flag.shape}")
            return new.true_branch if bool(flag.reshape(())) else new.false_branch
        return new

    def visit_var(self, v):
        return self.let_consts.get(v, v)

    def visit_function(self, fn):
        if fn.get_attr("Primitive"):
            return fn  # already lowered-to-be: leave fused functions alone
        return super().visit_function(fn)

    def visit_tuple_getitem(self, item):
        new = super().visit_tuple_getitem(item)
        if isinstance(new.tuple_value, Tuple):
            return new.tuple_value.fields[new.index]
        return new

    def visit_call(self, call):
        new = super().visit_call(call)
        if not isinstance(new.op, Op):
            return new
        op = new.op
        if op.name in ("shape_of", "vm.shape_of", "ndarray_size"):
            return self.fold_shape(call, new)
        if not new.args or not _foldable(op):
            return new
        if not all(is_complex_constant(a) for a in new.args):
            return new
        return evaluate_call(new)

    @staticmethod
    def fold_shape(orig: Call, new: Call):
        shape = static_shape(orig.args[0]) if type_of(orig.args[0]) is not None else None
        if shape is None and isinstance(new.args[0], Constant):
            shape = new.args[0].numpy().shape
        if shape is None:
            return new
        dtype = getattr(new.attrs, "dtype", "int32") if new.attrs is not None else "int32"
        if new.op.name == "ndarray_size":
            return Constant(np.array(int(np.prod(shape, dtype=np.int64)), dtype=dtype))
        return Constant(np.array(shape, dtype=dtype))


def fold_constant(expr, mod=None, fold_qnn: bool = False):
    """Fold the constant subexpressions of ``expr`` (TVM's ``relay.transform.FoldConstantExpr``)."""
    return ConstantFolder().visit(expr)


FoldConstantExpr = fold_constant


def FoldConstant(fold_qnn: bool = False):  # noqa: N802 (TVM's name)
    """Evaluate constant subgraphs at compile time (opt level 2)."""
    return typed_function_pass(lambda f, mod, ctx: fold_constant(f, mod, fold_qnn), 2, "FoldConstant")


register_pass("FoldConstant", FoldConstant)
