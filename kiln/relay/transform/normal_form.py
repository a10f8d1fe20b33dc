"""ToANormalForm / ToGraphNormalForm: convert between dataflow-graph form and let-bound A-normal form."""
from __future__ import annotations

from ...ir.expr import GlobalVar
from ...ir.op import Op
from ...transform.pass_base import register_pass
from ..expr import Call, Constant, Function, If, Let, Tuple, TupleGetItem, Var
from ..expr_functor import ExprMutator
from ..analysis.graph import edge_counts as _edge_counts
from .function_pass import FunctionPass
from ..analysis import free_vars

_ATOMS = (Var, GlobalVar, Op, Constant)


class _ToANF:
    """Binds every compound sub-expression to a let variable in the scope where it is first needed.

    A node shared between an inner scope (an if branch, a nested function) and an outer one is
    bound where it is first reached, so it may be bound again (recomputed) in the outer scope.
    """

    def __init__(self, root):
        self.scopes: list = []  # each: (bindings list, memo dict, edge counts within the scope or None)
        self.counter = 0
        self.total = _edge_counts(root)

    def convert_scope(self, expr, local: bool = False):
        self.scopes.append(([], {}, _edge_counts(expr) if local else None))
        try:
            result = self.atomize(expr)
            bindings = self.scopes[-1][0]
        finally:
            self.scopes.pop()
        for var, value in reversed(bindings):
            result = Let(var, value, result)
        return result

    def target_scope(self, e):
        """The innermost open scope that contains every use of ``e`` (so it can be bound there)."""
        total = self.total.get(e, 1)
        for scope in reversed(self.scopes):
            within = scope[2]
            if within is None or within.get(e, 0) >= total:
                return scope
        return self.scopes[0]

    def lookup(self, e):
        for _, memo, _ in reversed(self.scopes):
            v = memo.get(e)
            if v is not None:
                return v
        return None

    def atomize(self, e):
        while True:
            if isinstance(e, _ATOMS):
                return e
            found = self.lookup(e)
            if found is not None:
                return found
            if not isinstance(e, Let):
                break
            # a let chain in a loop
            value = self.compound(e.value)
            self.scopes[-1][0].append((e.var, value))
            self.scopes[-1][1][e.value] = e.var
            e = e.body
        if _dataflow_operands(e) is not None:
            return self._atomize_dataflow(e)
        scope, inner = self._narrow(e)
        try:
            node = self.compound(e)
        finally:
            self.scopes += inner
        return self._bind(scope, e, node)

    def _narrow(self, e):
        """Close the scopes inside the one ``e`` is bound in (while its operands are bound)."""
        scope = self.target_scope(e)
        depth = self.scopes.index(scope)
        inner, self.scopes = self.scopes[depth + 1:], self.scopes[:depth + 1]
        return scope, inner

    def _bind(self, scope, e, node):
        v = Var(f"x_{self.counter}")
        self.counter += 1
        scope[0].append((v, node))
        scope[1][e] = v
        return v

    def _atomize_dataflow(self, e):
        """``atomize`` of an operator call, tuple or projection with an explicit stack of frames (one per
        node whose operands are being bound), so graph depth costs no interpreter stack. Bindings come
        out in the order the recursive walk gives."""
        frames: list = []   # [node, scope, closed inner scopes, operands, next operand, atoms]

        def enter(n):
            scope, inner = self._narrow(n)
            frames.append([n, scope, inner, _dataflow_operands(n), 0, []])

        enter(e)
        try:
            while True:
                f = frames[-1]
                n, scope, inner, ops, i, atoms = f
                if i < len(ops):
                    f[4] = i + 1
                    a = ops[i]
                    found = a if isinstance(a, _ATOMS) else self.lookup(a)
                    if found is not None:
                        atoms.append(found)
                    elif _dataflow_operands(a) is not None:
                        enter(a)
                    else:
                        atoms.append(self.atomize(a))
                    continue
                if isinstance(n, Call):
                    node = Call(n.op, atoms, n.attrs, n.type_args, n.span)
                elif isinstance(n, Tuple):
                    node = Tuple(atoms, n.span)
                else:
                    node = TupleGetItem(atoms[0], n.index, n.span)
                frames.pop()
                self.scopes += inner
                v = self._bind(scope, n, node)
                if not frames:
                    return v
                frames[-1][5].append(v)
        except BaseException:
            for f in reversed(frames):   # reopen the closed scopes, as the recursive walk's finally did
                self.scopes += f[2]
            raise

    def compound(self, e):
        """The node itself with atomic operands (operand bindings go to the current scope)."""
        if isinstance(e, _ATOMS):
            return e
        if isinstance(e, Call):
            op = e.op if isinstance(e.op, Op) else self.atomize(e.op)
            return Call(op, [self.atomize(a) for a in e.args], e.attrs, e.type_args, e.span)
        if isinstance(e, Tuple):
            return Tuple([self.atomize(f) for f in e.fields], e.span)
        if isinstance(e, TupleGetItem):
            return TupleGetItem(self.atomize(e.tuple_value), e.index, e.span)
        if isinstance(e, If):
            return If(self.atomize(e.cond), self.convert_scope(e.true_branch, True),
                      self.convert_scope(e.false_branch, True), e.span)
        if isinstance(e, Function):
            return Function(e.params, self.convert_scope(e.body, True), e.ret_type, e.type_params, e.attrs,
                            e.span)
        if isinstance(e, Let):
            return self.convert_scope(e)
        raise NotImplementedError(f"ToANormalForm does not handle {type(e).__name__}")


def _dataflow_operands(e):
    """Operands `_ToANF` binds from its explicit stack (operator calls, tuples, projections), else None."""
    if isinstance(e, Call):
        return e.args if isinstance(e.op, Op) else None
    if isinstance(e, Tuple):
        return e.fields
    if isinstance(e, TupleGetItem):
        return (e.tuple_value,)
    return None


def to_a_normal_form(expr):
    """A-normal form of one expression."""
    if isinstance(expr, Function):
        return Function(expr.params, _ToANF(expr.body).convert_scope(expr.body), expr.ret_type,
                        expr.type_params, expr.attrs, expr.span)
    return _ToANF(expr).convert_scope(expr)


def ToANormalForm():  # noqa: N802
    """Turn dataflow graphs into let-bound A-normal form (every intermediate value named by a let)."""
    return FunctionPass(lambda f, mod, ctx: to_a_normal_form(f), 1, "ToANormalForm")


def ToANormalFormExpr(e):  # noqa: N802
    return to_a_normal_form(e)


class _ToGraph(ExprMutator):
    def __init__(self):
        super().__init__()
        self.subst: dict = {}

    def visit_var(self, var):
        return self.subst.get(var, var)

    def visit_let_binding(self, let):
        value = self.visit(let.value)
        if isinstance(value, Function) and _refers_to(value, let.var):
            return let.var, value  # a recursive local function stays let-bound
        self.subst[let.var] = value
        return None


def _refers_to(expr, var) -> bool:
    return var in free_vars(expr)


def ToGraphNormalForm():  # noqa: N802
    """Replace let bindings by dataflow edges (the inverse of ToANormalForm)."""
    return FunctionPass(lambda f, mod, ctx: _ToGraph().visit(f), 1, "ToGraphNormalForm")


register_pass("ToANormalForm", ToANormalForm)
register_pass("ToGraphNormalForm", ToGraphNormalForm)
