"""Automatic differentiation of Relay functions (TVM's ``relay.transform.gradient`` / ``FirstOrderGradient``).

Both modes turn ``fn(p1, ..., pn) { body }`` into a function of the same parameters returning
``(body, (d/dp1, ..., d/dpn))``, where the output's gradient is seeded with ``ones_like`` (so for a tensor
output each gradient is that of ``sum(body)``). Op gradients come from ``FPrimalGradient``
(``kiln/relay/op/_tensor_grad.py``); calls whose outputs are not floating point carry no gradient.

* ``first_order``: dataflow programs only (no closures, ``If`` or references). The backward pass is
  built as a graph over the forward one, so the result is a plain dataflow function that
  ``relay.build`` compiles.
* ``higher_order``: any program of tensors, tuples, closures, ``If`` and references. Every value is
  paired with a reference cell holding its gradient, and each op call prepends its backward step to a
  global backpropagator closure (the construction of TVM's ``gradient.cc``). The result uses closures
  and references, so it runs on the debug interpreter only (the graph executor takes dataflow only).
"""
from __future__ import annotations

import warnings

from ...error import ArgumentError, KilnError, OpNotImplemented
from ...ir.expr import GlobalVar
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.type import FuncType, RelayRefType, TensorType, TupleType
from ...transform.pass_base import ModulePass, register_pass
from ..expr import Call, Constant, Function, If, Let, Tuple, TupleGetItem, Var
from ..ref import RefCreate, RefRead, RefWrite
from ..expr_functor import post_order_visit
from .infer_type import InferType
from .normal_form import ToGraphNormalForm

__all__ = ["gradient", "FirstOrderGradient"]


# -- shared helpers --------------------------------------------------------------------------------------
def _op(name: str) -> Op:
    return Op.get(name)


def _add(a, b):
    return Call(_op("add"), [a, b])


def _zeros_like(e):
    return Call(_op("zeros_like"), [e])


def _ones_like(e):
    return Call(_op("ones_like"), [e])


def _is_float(dtype: str) -> bool:
    return dtype.startswith("float") or dtype.startswith("bfloat")


def _differentiable(ty) -> bool:
    """True if a value of this type carries a gradient (some floating-point tensor inside)."""
    if isinstance(ty, TensorType):
        return _is_float(ty.dtype)
    if isinstance(ty, TupleType):
        return any(_differentiable(f) for f in ty.fields)
    return False


def _op_gradient(op: Op):
    return op.get_attr("FPrimalGradient")


def _check_grads(op: Op, grads, nargs: int) -> list:
    grads = list(grads)
    if len(grads) != nargs:
        raise KilnError(f"the gradient of {op.name} returned {len(grads)} values for {nargs} arguments")
    return grads


def _missing_gradients(func: Function) -> list:
    """Names of ops called with a floating-point result that have no FPrimalGradient."""
    missing: set = set()

    def visit(e):
        if isinstance(e, Call) and isinstance(e.op, Op) and _op_gradient(e.op) is None:
            if _differentiable(getattr(e, "_checked_type_", None)):
                missing.add(e.op.name)
    post_order_visit(func, visit)
    return sorted(missing)


def _typed_function(expr, mod) -> Function:
    """``expr`` (a Function, or a GlobalVar of ``mod``) with types inferred in ``mod``'s context."""
    if isinstance(expr, GlobalVar):
        if mod is None or expr.name_hint not in mod:
            raise ArgumentError(f"gradient: @{expr.name_hint} is not defined in the module given")
        expr = mod[expr.name_hint]
    if not isinstance(expr, Function):
        raise ArgumentError(f"gradient: expected a relay.Function (or a GlobalVar of mod), got "
                            f"{type(expr).__name__}")
    work = IRModule(functions=dict(mod.functions) if mod is not None else {},
                    type_definitions=mod.type_definitions if mod is not None else None)
    gv = GlobalVar("__kiln_grad_entry")
    work[gv] = expr
    work = InferType()(work)
    func = work[gv.name_hint]
    missing = _missing_gradients(func)
    if missing:
        raise OpNotImplemented("gradient: these operators have no gradient registered (FPrimalGradient): "
                               + ", ".join(missing))
    return func


# -- first order ---------------------------------------------------------------------------------------
def _post_order_by(root, kids_of) -> list:
    """Nodes reachable from ``root`` through ``kids_of``, operands before users, each once (iterative)."""
    order, seen = [], set()
    stack = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for k in reversed(kids_of(node)):
            if id(k) not in seen:
                stack.append((k, False))
    return order


def _dataflow_kids(node) -> tuple:
    if isinstance(node, Call):
        return tuple(node.args)
    if isinstance(node, Tuple):
        return tuple(node.fields)
    if isinstance(node, TupleGetItem):
        return (node.tuple_value,)
    return ()


def _post_order(root) -> list:
    """Nodes of a dataflow expression, operands before users (iterative)."""
    return _post_order_by(root, _dataflow_kids)


def _check_dataflow(func: Function) -> None:
    bad: set = set()

    def visit(e):
        if isinstance(e, (If, Function, RefCreate, RefRead, RefWrite, GlobalVar)) and e is not func:
            bad.add(type(e).__name__)
        elif isinstance(e, Call) and not isinstance(e.op, Op):
            bad.add("a call of a non-operator")
        elif type(e).__name__ in ("Match", "Constructor"):
            bad.add(type(e).__name__)
    post_order_visit(func, visit)
    if bad:
        raise OpNotImplemented("gradient(mode='first_order') differentiates dataflow programs only; this one has "
                               + ", ".join(sorted(bad)) + " (use mode='higher_order')")


def _split_tuple_grad(g, n: int) -> list:
    """A tuple-valued gradient as a list of field gradients."""
    if isinstance(g, Tuple):
        return list(g.fields)
    if isinstance(g, list):
        return g
    return [TupleGetItem(g, i) for i in range(n)]


class _Adjoints:
    """Accumulated gradients per forward node: an Expr for tensors, a list (per field) for tuples."""

    def __init__(self):
        self.table: dict = {}

    def get(self, node):
        hit = self.table.get(id(node))
        return None if hit is None else hit[1]

    def add(self, node, grad) -> None:
        if grad is None:
            return
        ty = node.checked_type
        old = self.get(node)
        self.table[id(node)] = (node, _merge(old, grad, ty))


def _merge(old, new, ty):
    if new is None:
        return old
    if isinstance(ty, TupleType):
        new = _split_tuple_grad(new, len(ty.fields))
        old = old or [None] * len(ty.fields)
        return [_merge(o, n, t) for o, n, t in zip(old, new, ty.fields)]
    if not _differentiable(ty):
        return old
    return new if old is None else _add(old, new)


def _materialize(grad, node_expr, ty):
    """A gradient value as an expression, zeros where nothing flowed (``node_expr`` gives the shapes)."""
    if isinstance(ty, TupleType):
        fields = grad if isinstance(grad, list) else [None] * len(ty.fields)
        return Tuple([_materialize(g, TupleGetItem(node_expr, i), t)
                      for i, (g, t) in enumerate(zip(fields, ty.fields))])
    return _zeros_like(node_expr) if grad is None else grad


def _seed(ty, node_expr):
    if isinstance(ty, TupleType):
        return [_seed(t, TupleGetItem(node_expr, i)) for i, t in enumerate(ty.fields)]
    return _ones_like(node_expr) if _differentiable(ty) else None


def first_order_gradient(func: Function, mod=None) -> Function:
    """Reverse-mode AD of a dataflow function; see the module docstring."""
    func = _typed_function(func, mod)
    _check_dataflow(func)
    graph_mod = InferType()(ToGraphNormalForm()(IRModule.from_expr(func)))
    func = graph_mod["main"]
    body = func.body
    adj = _Adjoints()
    adj.add(body, _seed(body.checked_type, body))
    for node in reversed(_post_order(body)):
        grad = adj.get(node)
        if grad is None:
            continue
        if isinstance(node, Call):
            if not _differentiable(node.checked_type):
                continue
            fgrad = _op_gradient(node.op)
            out_grad = _materialize(grad, node, node.checked_type)
            grads = _check_grads(node.op, fgrad(node, out_grad), len(node.args))
            for arg, g in zip(node.args, grads):
                adj.add(arg, g)
        elif isinstance(node, Tuple):
            for field, g in zip(node.fields, grad):
                adj.add(field, g)
        elif isinstance(node, TupleGetItem):
            n = len(node.tuple_value.checked_type.fields)
            parts = [None] * n
            parts[node.index] = grad
            adj.add(node.tuple_value, parts)
    grads = [_materialize(adj.get(p), p, p.checked_type) for p in func.params]
    out = Function(func.params, Tuple([body, Tuple(grads)]), None, func.type_params, func.attrs)
    return InferType()(IRModule.from_expr(out))["main"]


def FirstOrderGradient():  # noqa: N802 (TVM's name)
    """Replace every global function by its first-order gradient function (TVM's module pass)."""
    def run(mod, ctx):
        new = mod.copy()
        for gv, f in mod.functions.items():
            if isinstance(f, Function) and not f.get_attr("Primitive"):
                new[gv] = first_order_gradient(f, mod)
        return new
    return ModulePass(run, 0, "FirstOrderGradient")


register_pass("FirstOrderGradient", FirstOrderGradient)


# -- higher order --------------------------------------------------------------------------------------
def _lift_type(ty):
    """The type of a value paired with its gradient cells."""
    if isinstance(ty, TensorType):
        return TupleType([ty, RelayRefType(ty)])
    if isinstance(ty, TupleType):
        return TupleType([_lift_type(f) for f in ty.fields])
    if isinstance(ty, FuncType):
        return FuncType([_lift_type(a) for a in ty.arg_types], _lift_type(ty.ret_type), ty.type_params,
                        ty.type_constraints)
    if isinstance(ty, RelayRefType):
        return RelayRefType(_lift_type(ty.value))
    raise OpNotImplemented(f"gradient(mode='higher_order'): values of type {ty} are not supported")


class _Scope:
    def __init__(self):
        self.bindings: list = []

    def push(self, value, name: str = "t", ty=None) -> Var:
        v = Var(name, ty)
        self.bindings.append((v, value))
        return v

    def close(self, result):
        for var, value in reversed(self.bindings):
            result = Let(var, value, result)
        return result


class _HigherOrder:
    """Rewrites a typed program into one over (value, gradient cell) pairs; see the module docstring."""

    def __init__(self, bp: Var):
        self.bp = bp  # Ref(fn() -> ()): the backpropagator built so far
        self.env: dict = {}  # original Var -> lifted Var
        self.scopes: list = []
        self.memos: list = []

    # scopes
    def in_scope(self, expr):
        self.scopes.append(_Scope())
        self.memos.append({})
        try:
            result = self.lift(expr)
            return self.scopes[-1].close(result)
        finally:
            self.scopes.pop()
            self.memos.pop()

    def push(self, value, name="t", ty=None) -> Var:
        return self.scopes[-1].push(value, name, ty)

    def memo_get(self, e):
        for memo in reversed(self.memos):
            hit = memo.get(id(e))
            if hit is not None:
                return hit[1]
        return None

    # value <-> pair
    def wrap(self, expr, ty):
        """A primal value as a lifted one with zero gradient cells."""
        if isinstance(ty, TensorType):
            return Tuple([expr, RefCreate(_zeros_like(expr))])
        if isinstance(ty, TupleType):
            return Tuple([self.wrap(TupleGetItem(expr, i), t) for i, t in enumerate(ty.fields)])
        raise OpNotImplemented(f"gradient(mode='higher_order'): an operator value of type {ty}")

    @staticmethod
    def primal(lifted, ty):
        if isinstance(ty, TensorType):
            return TupleGetItem(lifted, 0)
        if isinstance(ty, TupleType):
            return Tuple([_HigherOrder.primal(TupleGetItem(lifted, i), t) for i, t in enumerate(ty.fields)])
        raise OpNotImplemented(f"gradient(mode='higher_order'): an operator argument of type {ty}")

    @staticmethod
    def read_grad(lifted, ty):
        if isinstance(ty, TensorType):
            return RefRead(TupleGetItem(lifted, 1))
        return Tuple([_HigherOrder.read_grad(TupleGetItem(lifted, i), t) for i, t in enumerate(ty.fields)])

    @staticmethod
    def updates(lifted, grad, ty) -> list:
        """RefWrites adding ``grad`` into the cells of ``lifted``."""
        if isinstance(ty, TensorType):
            if not _differentiable(ty):
                return []
            cell = TupleGetItem(lifted, 1)
            return [RefWrite(cell, _add(RefRead(cell), grad))]
        out = []
        parts = _split_tuple_grad(grad, len(ty.fields))
        for i, (g, t) in enumerate(zip(parts, ty.fields)):
            out += _HigherOrder.updates(TupleGetItem(lifted, i), g, t)
        return out

    # the rewrite
    def lift(self, e):
        """The lifted form of ``e`` as an atom, emitting let bindings into the current scope."""
        while isinstance(e, Let):
            if isinstance(e.value, Function):  # bound first so a recursive function sees itself
                nv = Var(e.var.name_hint, _lift_type(e.var.checked_type))
                self.env[e.var] = nv
                self.scopes[-1].bindings.append((nv, self.lift_function(e.value)))
            else:
                self.env[e.var] = self.lift(e.value)
            e = e.body
        for node in _post_order_effects(e):
            if self.memo_get(node) is None:
                self.memos[-1][id(node)] = (node, self.lift_node(node))
        return self.memo_get(e)

    def atom(self, e):
        hit = self.memo_get(e)
        return hit if hit is not None else self.lift(e)

    def lift_node(self, e):
        if isinstance(e, Var):
            try:
                return self.env[e]
            except KeyError:
                raise KilnError(f"gradient: the variable %{e.name_hint} is unbound") from None
        if isinstance(e, Constant):
            return self.push(self.wrap(e, e.checked_type), "const")
        if isinstance(e, Call) and isinstance(e.op, Op):
            return self.lift_op_call(e)
        if isinstance(e, Call):
            fn = self.atom(e.op)
            args = [self.atom(a) for a in e.args]
            return self.push(Call(fn, args), "ret")
        if isinstance(e, Tuple):
            return self.push(Tuple([self.atom(f) for f in e.fields]), "tup")
        if isinstance(e, TupleGetItem):
            return self.push(TupleGetItem(self.atom(e.tuple_value), e.index), "field")
        if isinstance(e, Function):
            return self.push(self.lift_function(e), "fn")
        if isinstance(e, If):
            cond = TupleGetItem(self.atom(e.cond), 0)
            return self.push(If(cond, self.in_scope(e.true_branch), self.in_scope(e.false_branch)), "if")
        if isinstance(e, Let):
            return self.lift(e)
        if isinstance(e, RefCreate):
            return self.push(RefCreate(self.atom(e.value)), "ref")
        if isinstance(e, RefRead):
            return self.push(RefRead(self.atom(e.ref)), "read")
        if isinstance(e, RefWrite):
            return self.push(RefWrite(self.atom(e.ref), self.atom(e.value)), "write")
        if isinstance(e, GlobalVar):
            raise OpNotImplemented(f"gradient(mode='higher_order'): calls of global functions (@{e.name_hint}) are "
                                   "not supported; inline them first")
        if isinstance(e, Op):
            raise OpNotImplemented(f"gradient: operator {e.name} used as a value (not called)")
        raise OpNotImplemented(f"gradient(mode='higher_order') does not support {type(e).__name__} nodes")

    def lift_function(self, f: Function) -> Function:
        params = []
        for p in f.params:
            nv = Var(p.name_hint, _lift_type(p.checked_type))
            self.env[p] = nv
            params.append(nv)
        return Function(params, self.in_scope(f.body))

    def lift_op_call(self, call: Call):
        """``op(args)`` forward, and its backward step prepended to the backpropagator."""
        out_ty = call.checked_type
        lifted_args = [self.atom(a) for a in call.args]
        fwd_args = []
        for a, la in zip(call.args, lifted_args):
            v = self.push(self.primal(la, a.checked_type), "x")
            v._checked_type_ = a.checked_type
            fwd_args.append(v)
        orig = Call(call.op, fwd_args, call.attrs, call.type_args)
        orig._checked_type_ = out_ty
        out = self.push(orig, "y")
        out._checked_type_ = out_ty
        result = self.push(self.wrap(out, out_ty), "ad")
        if not _differentiable(out_ty):
            return result
        prev = self.push(RefRead(self.bp), "bp_prev")
        back = _Scope()
        g = back.push(self.read_grad(result, out_ty), "g")
        grads = _check_grads(call.op, _op_gradient(call.op)(orig, g), len(call.args))
        for a, la, dg in zip(call.args, lifted_args, grads):
            for write in self.updates(la, dg, a.checked_type):
                back.push(write, "_")
        backward = Function([], back.close(Call(prev, [])))
        self.push(RefWrite(self.bp, backward), "_")
        return result


def _effect_kids(node) -> tuple:
    if isinstance(node, Call):
        return ((node.op,) if not isinstance(node.op, Op) else ()) + tuple(node.args)
    if isinstance(node, Tuple):
        return tuple(node.fields)
    if isinstance(node, TupleGetItem):
        return (node.tuple_value,)
    if isinstance(node, RefRead):
        return (node.ref,)
    if isinstance(node, RefCreate):
        return (node.value,)
    if isinstance(node, RefWrite):
        return (node.ref, node.value)
    if isinstance(node, If):
        return (node.cond,)
    return ()  # Var, Constant, Function, Let: lifted on their own


def _post_order_effects(root) -> list:
    """Nodes to lift for ``root``, operands first in evaluation order; scopes (Let, If, Function) and
    effectful nodes are lifted as units by ``lift_node``."""
    return _post_order_by(root, _effect_kids)


def higher_order_gradient(expr, mod=None) -> Function:
    """Reverse-mode AD with reference cells and closures; see the module docstring."""
    func = _typed_function(expr, mod)
    for p in func.params:
        if not isinstance(p.checked_type, (TensorType, TupleType)):
            raise OpNotImplemented(f"gradient: parameter %{p.name_hint} has type {p.checked_type}; only tensors "
                                   "and tuples of tensors can be differentiated")
    bp = Var("bp")
    ad = _HigherOrder(bp)
    ad.scopes.append(_Scope())
    ad.memos.append({})
    top = ad.scopes[-1]
    top.bindings.append((bp, RefCreate(Function([], Tuple([])))))
    params = [Var(p.name_hint, p.checked_type) for p in func.params]
    for p, np_ in zip(func.params, params):
        ad.env[p] = top.push(ad.wrap(np_, p.checked_type), p.name_hint + "_ad")
    result = ad.lift(func.body)
    out_ty = func.body.checked_type
    for write in ad.updates(result, _seed_expr(ad.primal(result, out_ty), out_ty), out_ty):
        top.push(write, "_")
    top.push(Call(RefRead(bp), []), "_")
    grads = Tuple([ad.read_grad(ad.env[p], p.checked_type) for p in func.params])
    body = top.close(Tuple([ad.primal(result, out_ty), grads]))
    return InferType()(IRModule.from_expr(Function(params, body)))["main"]


def _seed_expr(primal, ty):
    if isinstance(ty, TupleType):
        return Tuple([_seed_expr(TupleGetItem(primal, i), t) for i, t in enumerate(ty.fields)])
    if isinstance(ty, TensorType):
        return _ones_like(primal)
    raise OpNotImplemented(f"gradient: the function returns a value of type {ty}; expected tensors")


# -- entry point ---------------------------------------------------------------------------------------
def gradient(expr, mod=None, mode: str = "higher_order") -> Function:
    """A function computing ``expr``'s result paired with the gradients of its inputs (TVM's
    ``relay.transform.gradient``). ``mode``: ``"higher_order"`` (any program; closures and references, runs
    on the debug interpreter) or ``"first_order"`` (dataflow programs; compiles with ``relay.build``)."""
    if mode == "first_order":
        warnings.warn("using transform.gradient for first-order AD is deprecated, please use the "
                      "FirstOrderGradient module pass", DeprecationWarning, stacklevel=2)
        if mod is not None:
            raise KilnError("to run first-order AD on a module, use the FirstOrderGradient module pass")
        return first_order_gradient(expr)
    if mode == "higher_order":
        return higher_order_gradient(expr, mod)
    raise ArgumentError(f"gradient: unknown mode {mode!r}; expected 'higher_order' or 'first_order'")
