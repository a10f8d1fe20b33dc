"""Visitors and mutators over TIR, dispatching on node type in one place.

Subclass :class:`StmtExprVisitor` / :class:`StmtExprMutator` and define ``visit_<ClassName>``
methods (e.g. ``visit_For``, ``visit_Add``); everything else is walked generically through the
node's ``_fields``. Buffers, Vars, IterVars' domains and TE tensors are leaves unless a
``visit_`` method says otherwise. The mutator rebuilds a node only when a child changed, so
unchanged subtrees stay shared.

Expression depth costs bounded interpreter stack: when a walk is more than ``_SPINE_DEPTH`` (16) visits deep
and meets an operator node (arithmetic, comparison, logic, cast, select, call: nodes whose visitors set
up no context for their operands), the operator nodes below it are visited children-first from an
explicit work list and their results kept for the rest of that node's visit, so ``visit_Add`` finds
its operands already done. A 10,000-term left-deep sum or a 600-way if_then_else chain walks with
constant stack. The cache is per operator subtree and is suspended inside any other node (a Let, a
BufferLoad), whose visitor may change context.

Statement depth (and Let-expression depth) costs no interpreter stack either: a ``visit_<Node>`` may be
written as a generator that *yields* a child node where it would call ``self.visit(child)``, and receives
the child's result back (``body = yield s.body``). ``visit`` drives such generators from an explicit stack
(:meth:`StmtExprVisitor._drive`), so 100,000 nested For / IfThenElse / Allocate / AttrStmt statements or
nested Lets walk in a loop. The generic walk of every statement and of Let is such a generator
(:meth:`generic_visit_iter`; ``yield from self.generic_visit_iter(s)`` from a generator ``visit_`` method);
``generic_visit`` stays an ordinary method returning the result; an ordinary ``visit_`` method may end
in ``return self.generic_visit_iter(s)`` (the returned generator is driven the same way). A subclass that wants to intercept
every expression defines ``visit_PrimExpr`` (found through the class hierarchy) rather than overriding
``visit``: an overridden ``visit`` is honoured, but then costs a level of stack per nested statement.
"""
from __future__ import annotations

from types import GeneratorType

from ..ir.node import Node
from .buffer import Buffer
from .expr import BinaryOpExpr, Call, Cast, Not, Select, Var, CommReducer, PrimExpr
from .stmt import LetStmt, Stmt
from . import expr as E
from ..runtime.dtype import parse_dtype
from .op import convert

_LEAF_TYPES = (Var, Buffer, CommReducer)
# operator nodes: their visitors visit the operands in the caller's context
_SPINE = (BinaryOpExpr, Not, Cast, Select, Call)
_SPINE_DEPTH = 16  # a level costs up to ~9 interpreter frames (visit, generic_visit, _mutate_value, a visit_<Node>)
_MISS = object()
# nodes whose generic walk is a generator driven from an explicit stack (they nest without bound)
_NESTING = (Stmt, E.Let)


def _spine_operands(node, kinds=_SPINE):
    out = []
    for f in node._fields:
        v = getattr(node, f)
        if isinstance(v, kinds):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out.extend(x for x in v if isinstance(x, kinds))
    return out


def _dispatch_table(cls):
    table = cls.__dict__.get("_kiln_dispatch")
    if table is None:
        table = {}
        setattr(cls, "_kiln_dispatch", table)
    return table


class StmtExprVisitor:
    """Walks statements and expressions; override ``visit_<Node>`` and call ``self.generic_visit``."""

    _walk_depth = 0
    _spine_memo = None

    def visit(self, node):
        r = self._step(node)
        if r.__class__ is GeneratorType:
            memo = self._spine_memo
            self._spine_memo = None  # a statement or Let: the operator cache is suspended inside it
            try:
                return self._drive(r)
            finally:
                self._spine_memo = memo
        return r

    def _step(self, node):
        """Dispatch ``node`` to its ``visit_`` method; a generator method comes back undriven."""
        table = _dispatch_table(type(self))
        meth = table.get(type(node))
        if meth is None:
            meth = self._find(type(node))
            table[type(node)] = meth
        memo = self._spine_memo
        if isinstance(node, _SPINE):
            if memo is not None:
                hit = memo.get(id(node), _MISS)
                if hit is not _MISS:
                    return hit
            elif self._walk_depth > _SPINE_DEPTH:
                return self._visit_spine(node, meth)
        elif memo is not None:
            self._spine_memo = None  # another kind of node may set up context for its children
        self._walk_depth += 1
        try:
            return meth(self, node)
        finally:
            self._walk_depth -= 1
            self._spine_memo = memo

    def _drive(self, gen):
        """Run generator ``visit_`` methods: each yielded node is stepped; a generator answer is pushed on
        the stack, any other answer is sent back to the generator that yielded the node. An exception is
        thrown into the generators below it in turn (their ``finally`` / ``with`` blocks run)."""
        step = self.visit if _overrides_visit(type(self)) else self._step
        stack = [gen]
        value, exc = None, None
        while True:
            top = stack[-1]
            try:
                if exc is None:
                    child = top.send(value)
                else:
                    child, exc = top.throw(exc), None
            except StopIteration as stop:
                stack.pop()
                if not stack:
                    return stop.value
                value = stop.value
                continue
            except BaseException as e:  # noqa: BLE001 - handed to the generator below, or raised
                stack.pop()
                if not stack:
                    raise
                exc = e
                continue
            try:
                value = step(child)
            except BaseException as e:  # noqa: BLE001
                exc = e
                continue
            if value.__class__ is GeneratorType:
                stack.append(value)
                value = None

    def _visit_spine(self, root, meth):
        """Visit the operator nodes below ``root`` children-first from a work list, then ``root``."""
        memo: dict = {}
        self._spine_memo = memo
        try:
            stack = [(root, iter(_spine_operands(root)))]
            while stack:
                node, it = stack[-1]
                for c in it:
                    if id(c) not in memo:
                        memo[id(c)] = _MISS  # a shared operand is walked once
                        stack.append((c, iter(_spine_operands(c))))
                        break
                else:
                    stack.pop()
                    if stack:
                        del memo[id(node)]
                        memo[id(node)] = self.visit(node)
            return meth(self, root)
        finally:
            self._spine_memo = None

    # a subclass whose ``visit`` override only intercepts expressions sets this, so LetStmt chains
    # still walk in a loop
    _visit_passes_statements = False

    @classmethod
    def _find(cls, node_type):
        for klass in node_type.__mro__:
            m = getattr(cls, "visit_" + klass.__name__, None)
            if m is not None:
                return m
        # a LetStmt the walker handles generically: a chain of them in a loop, unless the walker
        # overrides generic_visit (it acts on every node: post_order_visit) or visit on statements
        if node_type is LetStmt and cls.generic_visit in _BASE_GENERIC and (
                cls.visit is StmtExprVisitor.visit or cls._visit_passes_statements):
            return cls._let_chain
        if cls.generic_visit_iter not in _BASE_GENERIC_ITER or (
                issubclass(node_type, _NESTING) and cls.generic_visit in _BASE_GENERIC):
            return cls.generic_visit_iter
        return cls.generic_visit

    def generic_visit(self, node):
        if isinstance(node, _LEAF_TYPES) or not isinstance(node, Node):
            return
        for f in node._fields:
            self._visit_value(getattr(node, f))

    def generic_visit_iter(self, node):
        """``generic_visit`` as a generator: yields each child node (the driver visits it)."""
        for c in _children(node):
            yield c

    def _let_chain(self, s):
        """A chain of LetStmts in a loop: each let's var and value, outermost first, then the innermost
        body (the order ``generic_visit`` has). Dispatched only where it is equivalent (see ``_find``)."""
        while isinstance(s, LetStmt):
            self.visit(s.var)
            self.visit(s.value)
            s = s.body
        self.visit(s)

    def _visit_value(self, v):
        if isinstance(v, Node):
            self.visit(v)
        elif isinstance(v, (list, tuple)):
            for x in v:
                self._visit_value(x)
        elif isinstance(v, dict):
            for x in v.values():
                self._visit_value(x)

    def __call__(self, node):
        return self.visit(node)


class StmtExprMutator(StmtExprVisitor):
    """Rewrites statements and expressions; ``visit_<Node>`` returns the replacement node."""

    def generic_visit(self, node):
        if isinstance(node, _LEAF_TYPES) or not isinstance(node, Node):
            return node
        return _with_fields(node, [self._mutate_value(getattr(node, f)) for f in node._fields])

    def generic_visit_iter(self, node):
        """``generic_visit`` as a generator: yields each child node and gets its replacement back."""
        if isinstance(node, _LEAF_TYPES) or not isinstance(node, Node):
            return node
        new = []
        for f in node._fields:
            old = getattr(node, f)
            new.append((yield old) if isinstance(old, Node) else (yield from self._mutate_value_iter(old)))
        return _with_fields(node, new)

    def _mutate_value_iter(self, v):
        if isinstance(v, Node):
            return (yield v)
        if isinstance(v, (list, tuple)):
            out = []
            for x in v:
                out.append((yield from self._mutate_value_iter(x)))
            if all(a is b for a, b in zip(out, v)):
                return v
            return out if isinstance(v, list) else tuple(out)
        if isinstance(v, dict):
            out = {}
            for k, x in v.items():
                out[k] = yield from self._mutate_value_iter(x)
            return v if all(out[k] is v[k] for k in v) else out
        return v

    def _let_chain(self, s):
        """A chain of LetStmts in a loop (see :meth:`StmtExprVisitor._let_chain`), rebuilt inside out as
        ``generic_visit`` would; unchanged lets stay the same objects."""
        chain = []
        while isinstance(s, LetStmt):
            chain.append((s, self.visit(s.var), self.visit(s.value)))
            s = s.body
        body = self.visit(s)
        for let, var, value in reversed(chain):
            if not (var is let.var and value is let.value and body is let.body):
                let = _rebuild(let, {"var": var, "value": value, "body": body})
            body = let
        return body

    def _mutate_value(self, v):
        if isinstance(v, Node):
            return self.visit(v)
        if isinstance(v, list):
            out = [self._mutate_value(x) for x in v]
            return v if all(a is b for a, b in zip(out, v)) else out
        if isinstance(v, tuple):
            out = tuple(self._mutate_value(x) for x in v)
            return v if all(a is b for a, b in zip(out, v)) else out
        if isinstance(v, dict):
            out = {k: self._mutate_value(x) for k, x in v.items()}
            return v if all(out[k] is v[k] for k in v) else out
        return v


def _with_fields(node, values):
    """``node`` with its fields set to ``values`` (in ``_fields`` order); the same node when none changed."""
    changes = None
    for f, new in zip(node._fields, values):
        if new is not getattr(node, f):
            if changes is None:
                changes = {}
            changes[f] = new
    return node if changes is None else _rebuild(node, changes)


def _rebuild(node, changes):
    """Copy ``node`` with ``changes``, re-deriving dtypes where they depend on children."""
    new = node.with_fields(**changes)
    if isinstance(new, PrimExpr):
        _refresh_dtype(new)
    return new


def _refresh_dtype(e):
    if isinstance(e, E.CmpExpr):
        lanes = parse_dtype(e.a.dtype).lanes
        e.dtype = "bool" if lanes == 1 else f"boolx{lanes}"
    elif isinstance(e, E.BinaryOpExpr):
        e.dtype = e.a.dtype
    elif isinstance(e, (E.Select,)):
        e.dtype = e.true_value.dtype
    elif isinstance(e, E.Let):
        e.dtype = e.body.dtype
    elif isinstance(e, E.Not):
        e.dtype = e.a.dtype
    elif isinstance(e, E.Ramp):
        e.dtype = str(parse_dtype(e.base.dtype).with_lanes(e.lanes))
    elif isinstance(e, E.Broadcast):
        e.dtype = str(parse_dtype(e.value.dtype).with_lanes(e.lanes))
    elif isinstance(e, E.BufferLoad):
        lanes = 1
        for idx in e.indices:
            lanes = max(lanes, parse_dtype(idx.dtype).lanes)
        e.dtype = e.buffer.dtype if lanes == 1 else str(parse_dtype(e.buffer.dtype).with_lanes(lanes))
    elif isinstance(e, E.Reduce):
        e.dtype = e.source[e.value_index].dtype


class _Substitute(StmtExprMutator):
    def __init__(self, vmap):
        self.vmap = vmap

    def visit_Var(self, v):
        return self.vmap.get(v, v)


def substitute(node, vmap):
    """Replace variables by expressions: ``vmap`` maps Var → PrimExpr (or a callable Var → expr|None)."""
    if callable(vmap) and not isinstance(vmap, dict):
        fn = vmap

        class _F(StmtExprMutator):
            def visit_Var(self, v):
                r = fn(v)
                return v if r is None else r
        return _F()(node)
    if not vmap:
        return node
    vmap = {k: convert(v) for k, v in vmap.items()}
    return _Substitute(vmap)(node)


def _children(n) -> list:
    """The nodes ``generic_visit`` would visit below ``n``, in its order (none below a leaf)."""
    if isinstance(n, _LEAF_TYPES) or not isinstance(n, Node):
        return []
    out: list = []
    todo = [iter([getattr(n, f) for f in n._fields])]
    while todo:
        for v in todo[-1]:
            if isinstance(v, Node):
                out.append(v)
            elif isinstance(v, (list, tuple)):
                todo.append(iter(v))
                break
            elif isinstance(v, dict):
                todo.append(iter(v.values()))
                break
        else:
            todo.pop()
    return out


def post_order_visit(node, fvisit):
    """Call ``fvisit`` on every node, children first (TVM's ``tir.stmt_functor.post_order_visit``).
    Each node object once, as TVM (a shared subexpression is not walked again: a deep DAG stays
    linear). Explicit stack: any depth."""
    seen = {id(node)}
    stack = [(node, iter(_children(node)))]
    while stack:
        n, it = stack[-1]
        for c in it:
            if id(c) not in seen:
                seen.add(id(c))
                stack.append((c, iter(_children(c))))
                break
        else:
            stack.pop()
            fvisit(n)


def pre_order_visit(node, fvisit):
    """Call ``fvisit`` on every node, parents first, each node object once (as TVM); stop descending
    where it returns False. Explicit stack: any depth."""
    seen: set = set()
    stack = [iter([node])]
    while stack:
        n = next(stack[-1], _MISS)
        if n is _MISS:
            stack.pop()
        elif id(n) not in seen:
            seen.add(id(n))
            if fvisit(n) is not False:
                stack.append(iter(_children(n)))


def ir_transform(stmt, preorder, postorder, only_enable=None):
    """TVM's ``ir_transform``: ``preorder`` may replace a node before its children are visited;
    ``postorder`` after. ``only_enable`` restricts callbacks to those node type names."""
    names = set(only_enable) if only_enable else None

    class _T(StmtExprMutator):
        def generic_visit_iter(self, n):
            enabled = names is None or type(n).__name__ in names or ("tir." + type(n).__name__) in names
            if enabled and preorder is not None:
                r = preorder(n)
                if r is not None:
                    return r
            n2 = yield from StmtExprMutator.generic_visit_iter(self, n)
            if enabled and postorder is not None:
                r = postorder(n2)
                if r is not None:
                    return r
            return n2

        def generic_visit(self, n):
            return self._drive(self.generic_visit_iter(n))

    return _T()(stmt)


def uses_var(node, pred) -> bool:
    """Whether any Var in ``node`` satisfies ``pred`` (or is the given Var)."""
    if isinstance(pred, Var):
        target = pred
        pred = lambda v: v is target  # noqa: E731
    found = []

    class _V(StmtExprVisitor):
        def visit_Var(self, v):
            if pred(v):
                found.append(v)

    _V()(node)
    return bool(found)


_BASE_GENERIC = (StmtExprVisitor.generic_visit, StmtExprMutator.generic_visit)
_BASE_GENERIC_ITER = (StmtExprVisitor.generic_visit_iter, StmtExprMutator.generic_visit_iter)


def _overrides_visit(cls) -> bool:
    """Whether ``cls`` overrides ``visit`` (the driver must then go through it, at a stack level a node)."""
    flag = cls.__dict__.get("_kiln_overrides_visit")
    if flag is None:
        flag = cls.visit is not StmtExprVisitor.visit
        setattr(cls, "_kiln_overrides_visit", flag)
    return flag
