"""Visitors over Relay expressions: ExprFunctor (dispatch), ExprVisitor (walk once), ExprMutator
(rebuild; memoized so a subgraph used twice is rebuilt once and stays shared).

Dispatch is by node class, in one table (``_METHOD``), to TVM's method names (``visit_call``, ...).

Depth does not cost interpreter stack on dataflow graphs (TVM's MixedModeVisitor): before a call, tuple
or projection is dispatched, its not-yet-visited dataflow operands are visited children-first from an
explicit work list (:func:`post_order_dataflow`), so by the time ``visit_call`` asks for an argument the
answer is memoized. A chain of 100,000 ops visits with constant stack depth; ``visit_*`` methods keep
their natural recursive form. A chain of nested lets is walked in a loop (``ExprVisitor``: when the
visitor keeps the base ``visit_let``; ``ExprMutator``: through the ``visit_let_binding`` /
``visit_let_body`` hooks, which passes override instead of ``visit_let``). Nesting of functions and
ifs, and lets in a let's value, still recurse (one level each).
"""
from __future__ import annotations

from ..error import RelayError
from ..ir.expr import GlobalVar
from ..ir.op import Op
from .expr import Call, Constant, Function, If, Let, Tuple, TupleGetItem, Var


_METHOD = {
    Var: "visit_var",
    GlobalVar: "visit_global_var",
    Constant: "visit_constant",
    Tuple: "visit_tuple",
    TupleGetItem: "visit_tuple_getitem",
    Call: "visit_call",
    Let: "visit_let",
    If: "visit_if",
    Function: "visit_function",
    Op: "visit_op",
}


def register_expr_class(cls, method_name: str) -> None:
    """Let visitors dispatch a new expression class (e.g. ADT nodes) to ``method_name``."""
    _METHOD[cls] = method_name


_DATAFLOW = (Call, Tuple, TupleGetItem)


def dataflow_operands(e):
    """The operands of a dataflow node (call: callee then arguments; tuple: fields; projection: the
    tuple), or None for any other node (its children are visited when it is dispatched)."""
    if isinstance(e, Call):
        return (e.op, *e.args)
    if isinstance(e, Tuple):
        return e.fields
    if isinstance(e, TupleGetItem):
        return (e.tuple_value,)
    return None


def post_order_dataflow(root, done, operands=dataflow_operands):
    """Yield, children first and each once, every dataflow node reachable from ``root`` through
    ``operands`` that is not in ``done`` (``root`` itself excluded). Iterative: no recursion."""
    kids = operands(root)
    if not kids:
        return
    seen = set()
    stack = [(root, iter(kids))]
    while stack:
        node, it = stack[-1]
        for c in it:
            if c in done or c in seen:
                continue
            ck = operands(c)
            if ck is None:
                continue
            seen.add(c)
            stack.append((c, iter(ck)))
            break
        else:
            stack.pop()
            if stack:
                yield node


def memo_post_order(expr, memo: dict, operands, visit1):
    """``memo[expr]``, computing ``memo[n] = visit1(n)`` for ``expr`` and every node reachable through
    ``operands(n)`` (a tuple, possibly empty) that has no entry yet, operands first and in the order a recursive
    walk visits them. Iterative: a graph's depth costs no interpreter stack."""
    hit = memo.get(expr)
    if hit is not None:
        return hit
    stack = [(expr, False)]
    while stack:
        n, ready = stack.pop()
        if n in memo:
            continue
        if ready:
            memo[n] = visit1(n)
            continue
        stack.append((n, True))
        for k in reversed(operands(n)):
            if k not in memo:
                stack.append((k, False))
    return memo[expr]


def _method_name(expr) -> str:
    cls = type(expr)
    name = _METHOD.get(cls)
    if name is None:
        for base, n in _METHOD.items():
            if isinstance(expr, base):
                return n
        raise RelayError(f"no visitor method for Relay node type {cls.__name__}")
    return name


class ExprFunctor:
    """Dispatches ``visit(expr)`` to ``visit_<kind>(expr)``, caching one result per node."""

    def __init__(self):
        self.memo_map: dict = {}

    def visit(self, expr):
        memo = self.memo_map
        if expr in memo:
            return memo[expr]
        if isinstance(expr, _DATAFLOW):
            for node in post_order_dataflow(expr, memo):
                self.visit(node)
        res = getattr(self, _method_name(expr))(expr)
        memo[expr] = res
        return res

    def _unimplemented(self, expr):
        raise NotImplementedError(f"{type(self).__name__} does not handle {type(expr).__name__}")

    visit_var = visit_global_var = visit_constant = visit_tuple = visit_tuple_getitem = _unimplemented
    visit_call = visit_let = visit_if = visit_function = visit_op = _unimplemented
    visit_constructor = visit_match = _unimplemented

    def visit_type(self, t):
        return t


class ExprVisitor(ExprFunctor):
    """Visits every node reachable from the root once (children before nothing: override to act)."""

    def visit_var(self, var):
        pass

    def visit_global_var(self, gv):
        pass

    def visit_constant(self, c):
        pass

    def visit_op(self, op):
        pass

    def visit_tuple(self, t):
        for f in t.fields:
            self.visit(f)

    def visit_tuple_getitem(self, t):
        self.visit(t.tuple_value)

    def visit_call(self, call):
        self.visit(call.op)
        for a in call.args:
            self.visit(a)

    def visit_let(self, let):
        _visit_let_chain(self, let, ExprVisitor.visit_let)
        self.visit(let.var)
        self.visit(let.value)
        self.visit(let.body)

    def visit_if(self, i):
        self.visit(i.cond)
        self.visit(i.true_branch)
        self.visit(i.false_branch)

    def visit_function(self, fn):
        for p in fn.params:
            self.visit(p)
        self.visit(fn.body)

    # reference cells (kiln/relay/ref.py)
    def visit_ref_create(self, r):
        self.visit(r.value)

    def visit_ref_read(self, r):
        self.visit(r.ref)

    def visit_ref_write(self, r):
        self.visit(r.ref)
        self.visit(r.value)
    def visit_constructor(self, c):
        pass

    def visit_match(self, m):
        from .adt import pattern_vars
        self.visit(m.data)
        for clause in m.clauses:
            for v in pattern_vars(clause.lhs):
                self.visit(v)
            self.visit(clause.rhs)


class ExprMutator(ExprFunctor):
    """Rebuilds an expression bottom-up; unchanged subtrees are returned as they are (same object)."""

    def visit_var(self, var):
        return var

    def visit_global_var(self, gv):
        return gv

    def visit_constant(self, c):
        return c

    def visit_op(self, op):
        return op

    def visit_tuple(self, t):
        fields = [self.visit(f) for f in t.fields]
        if all(a is b for a, b in zip(fields, t.fields)):
            return t
        return Tuple(fields, t.span)

    def visit_tuple_getitem(self, t):
        tup = self.visit(t.tuple_value)
        if tup is t.tuple_value:
            return t
        return TupleGetItem(tup, t.index, t.span)

    def visit_call(self, call):
        op = self.visit(call.op)
        args = [self.visit(a) for a in call.args]
        if op is call.op and all(a is b for a, b in zip(args, call.args)):
            return call
        return Call(op, args, call.attrs, call.type_args, call.span)

    def visit_let(self, let):
        """A chain of nested lets in a loop: each binding through :meth:`visit_let_binding`, outermost
        first, then the innermost body through :meth:`visit_let_body`, then the lets rebuilt inside out
        (each inner let memoized). A subclass that overrides ``visit_let`` itself and calls this gets
        one let (its inner lets dispatch to its override)."""
        memo = self.memo_map
        chain = [let]
        if type(self).visit_let is ExprMutator.visit_let:
            body = let.body
            while isinstance(body, Let) and body not in memo:
                chain.append(body)
                body = body.body
        bindings = [self.visit_let_binding(b) for b in chain]
        new = self.visit_let_body(chain[-1].body)
        for old, bound in zip(reversed(chain), reversed(bindings)):
            if bound is not None:
                v, value = bound
                if not (v is old.var and value is old.value and new is old.body):
                    new = Let(v, value, new, old.span)
                else:
                    new = old
            if old is not let:
                memo[old] = new
        return new

    def visit_let_binding(self, let):
        """One binding of a let chain: ``(var, value)`` rebuilt, or None to drop the binding (the let
        becomes its body). Outer bindings are visited before inner ones, all before the body."""
        return self.visit(let.var), self.visit(let.value)

    def visit_let_body(self, body):
        """The innermost body of a let chain (not a let, or one already visited)."""
        return self.visit(body)

    def visit_if(self, i):
        c, t, f = self.visit(i.cond), self.visit(i.true_branch), self.visit(i.false_branch)
        if c is i.cond and t is i.true_branch and f is i.false_branch:
            return i
        return If(c, t, f, i.span)

    def visit_function(self, fn):
        params = [self.visit(p) for p in fn.params]
        body = self.visit(fn.body)
        if body is fn.body and all(a is b for a, b in zip(params, fn.params)):
            return fn
        return Function(params, body, fn.ret_type, fn.type_params, fn.attrs, fn.span)

    # reference cells (kiln/relay/ref.py)
    def visit_ref_create(self, r):
        value = self.visit(r.value)
        return r if value is r.value else type(r)(value, r.span)

    def visit_ref_read(self, r):
        ref = self.visit(r.ref)
        return r if ref is r.ref else type(r)(ref, r.span)

    def visit_ref_write(self, r):
        ref, value = self.visit(r.ref), self.visit(r.value)
        return r if ref is r.ref and value is r.value else type(r)(ref, value, r.span)
    def visit_constructor(self, c):
        return c

    def visit_pattern(self, p):
        """Rebuild a match pattern; its variables go through ``visit`` (so renamings stay consistent)."""
        from .adt import PatternConstructor, PatternTuple, PatternVar
        if isinstance(p, PatternVar):
            v = self.visit(p.var)
            return p if v is p.var else PatternVar(v)
        if isinstance(p, (PatternConstructor, PatternTuple)):
            subs = [self.visit_pattern(q) for q in p.patterns]
            if all(a is b for a, b in zip(subs, p.patterns)):
                return p
            return PatternConstructor(p.constructor, subs) if isinstance(p, PatternConstructor) else PatternTuple(subs)
        return p

    def visit_match(self, m):
        from .adt import Clause, Match
        data = self.visit(m.data)
        clauses = []
        for c in m.clauses:
            lhs, rhs = self.visit_pattern(c.lhs), self.visit(c.rhs)
            clauses.append(c if lhs is c.lhs and rhs is c.rhs else Clause(lhs, rhs))
        if data is m.data and all(a is b for a, b in zip(clauses, m.clauses)):
            return m
        return Match(data, clauses, m.complete, m.span)


def _visit_let_chain(functor, let, base_visit_let) -> None:
    """A chain of nested lets without recursion: visit every binding's var and value in order, then each
    inner let from the innermost out, so the caller finds its body memoized. Only when the functor keeps
    the base ``visit_let`` (an override may act around the recursion)."""
    if type(functor).visit_let is not base_visit_let:
        return
    memo = functor.memo_map
    chain = []
    body = let.body
    while isinstance(body, Let) and body not in memo:
        chain.append(body)
        body = body.body
    if not chain:
        return
    functor.visit(let.var)
    functor.visit(let.value)
    for inner in chain:
        functor.visit(inner.var)
        functor.visit(inner.value)
    for inner in reversed(chain):
        functor.visit(inner)


def post_order_visit(expr, fvisit) -> None:
    """Call ``fvisit(node)`` on every node reachable from ``expr``, children first, each node once."""

    class _PostOrder(ExprVisitor):
        def visit(self, e):
            if e in self.memo_map:
                return
            super().visit(e)
            fvisit(e)

    _PostOrder().visit(expr)


class _Binder(ExprMutator):
    def __init__(self, binds: dict):
        super().__init__()
        self.binds = binds

    def visit_var(self, var):
        return self.binds.get(var, var)

    def visit_function(self, fn):
        params = [p for p in fn.params if p not in self.binds]
        body = self.visit(fn.body)
        if len(params) == len(fn.params) and body is fn.body:
            return fn
        return Function(params, body, fn.ret_type, fn.type_params, fn.attrs, fn.span)


def bind_vars(expr, binds: dict):
    """Replace variables by expressions; bound parameters of a top-level Function are removed."""
    for k in binds:
        if not isinstance(k, Var):
            raise RelayError(f"bind: keys must be relay.Var, got {type(k).__name__}")
    return _Binder(dict(binds)).visit(expr)


class NonPrimitiveMutator(ExprMutator):
    """An ExprMutator that leaves fused (``Primitive``) functions as they are: the rewrites of the Relay
    passes apply to the program, not to the bodies FuseOps already handed to the TE compiler."""

    def visit_function(self, fn):
        if fn.get_attr("Primitive"):
            return fn
        return self.visit_non_primitive_function(fn)

    def visit_non_primitive_function(self, fn):
        """Rewrite a function that is not Primitive (a pass with its own function rule overrides this)."""
        return super().visit_function(fn)


class Substituter(ExprMutator):
    """Replaces the expressions that are keys of ``subst`` (by identity) with their values."""

    def __init__(self, subst: dict):
        super().__init__()
        self.subst = subst

    def visit(self, expr):
        if expr in self.subst:
            return self.subst[expr]
        return super().visit(expr)
