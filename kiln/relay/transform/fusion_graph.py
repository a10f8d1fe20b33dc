"""The dataflow graph FuseOps partitions, and its post-dominator tree (TVM's IndexedForwardGraph and
DominatorTree).

Each node is one Relay expression of a function (vars, constants, op calls, tuples, field accesses),
numbered in post-DFS order, with its outgoing edges (consumer node, edge pattern). A node used outside
the dataflow region (the function result, a let/if/closure boundary) is ``extern_ref`` and cannot be
fused into anything after it.
"""
from __future__ import annotations

import numpy as np

from ...ir.expr import GlobalVar
from ...ir.op import Op, OpPattern
from ...ir.type import TensorType, TupleType
from ..expr import Call, Constant, Function, If, Let, Tuple, TupleGetItem, Var
from ..expr_functor import ExprVisitor
from ._util import op_pattern, type_of

OPAQUE = int(OpPattern.OPAQUE)
ELEMWISE = int(OpPattern.ELEMWISE)
BROADCAST = int(OpPattern.BROADCAST)
INJECTIVE = int(OpPattern.INJECTIVE)
TUPLE = int(OpPattern.TUPLE)

_SIMPLE_CONST_DTYPES = {"int32", "int64", "float32", "float64", "bool"}


class GraphNode:
    __slots__ = ("ref", "index", "pattern", "extern_ref", "outputs")

    def __init__(self):
        self.ref = None
        self.index = -1
        self.pattern = OPAQUE
        self.extern_ref = False
        self.outputs: list = []  # (GraphNode, edge pattern)

    def __repr__(self) -> str:
        return f"GraphNode({self.index}, {type(self.ref).__name__}, pattern={self.pattern})"


class IndexedForwardGraph:
    """Nodes in post-DFS order and a map expr -> node."""

    def __init__(self):
        self.node_map: dict = {}
        self.post_dfs_order: list = []

    @staticmethod
    def create(body, shapes=None) -> "IndexedForwardGraph":
        """The graph of ``body``; ``shapes`` (a ``SymbolicShapes`` of ``body``) decides broadcast edges between
        shapes with unknown dims (default: one built on demand)."""
        creator = _Creator(body, shapes)
        creator.update(body, None, OPAQUE)
        creator.visit(body)
        return creator.graph


def _is_tensor(t) -> bool:
    return isinstance(t, TensorType)


class _Creator(ExprVisitor):
    def __init__(self, body=None, shapes=None):
        super().__init__()
        self.graph = IndexedForwardGraph()
        self._body = body
        self._shapes = shapes

    def _same_shape(self, arg, call, atype, rtype) -> bool:
        """Whether a broadcast operand has the result's shape (the edge is then elementwise). With unknown
        dims the types' ``?`` say nothing (two ``?`` may be different sizes at run time), so the shapes are
        compared symbolically: a dense's ``(?, 256)`` output and a residual ``(?, 256)`` are the same shape
        when both are ``b * s`` rows of the same inputs, and the residual add fuses into the dense's kernel.
        FuseOps records such equalities on the primitive function (``kiln.same_dims``) for the VM's lowering."""
        if tuple(atype.shape) == tuple(rtype.shape):
            return True
        if len(atype.shape) != len(rtype.shape) or not (atype.is_dynamic() or rtype.is_dynamic()):
            return False
        if self._shapes is None:
            if self._body is None:
                return False
            from .symbolic_shapes import SymbolicShapes
            self._shapes = SymbolicShapes(self._body)
        return self._shapes.same(self._shapes.of(arg), self._shapes.of(call))

    def node(self, expr) -> GraphNode:
        n = self.graph.node_map.get(expr)
        if n is None:
            n = self.graph.node_map[expr] = GraphNode()
        return n

    def update(self, expr, parent, pattern: int) -> None:
        if isinstance(expr, Op):
            return
        n = self.node(expr)
        if parent is not None:
            n.outputs.append((parent, pattern))
        else:
            n.extern_ref = True

    def add_node(self, expr) -> None:
        n = self.node(expr)
        n.ref = expr
        n.index = len(self.graph.post_dfs_order)
        self.graph.post_dfs_order.append(n)

    def visit_function(self, fn):
        if fn.get_attr("Compiler"):
            return
        for p in fn.params:
            self.update(p, None, OPAQUE)
        self.update(fn.body, None, OPAQUE)
        super().visit_function(fn)
        self.add_node(fn)

    def visit_constant(self, c):
        self.add_node(c)
        v = c.numpy()
        dtype = "bool" if v.dtype.kind == "b" else str(v.dtype)
        # only scalar constants of simple types are inlined into fused functions
        self.node(c).pattern = ELEMWISE if (v.ndim == 0 and dtype in _SIMPLE_CONST_DTYPES) else OPAQUE

    def visit_var(self, v):
        self.add_node(v)

    def visit_global_var(self, gv):
        self.add_node(gv)

    def visit_call(self, call):
        n = self.node(call)
        if isinstance(call.op, Op):
            pattern = op_pattern(call.op)
        else:
            pattern = OPAQUE
            self.update(call.op, n, OPAQUE)
        n.pattern = pattern
        rtype = type_of(call)
        for arg in call.args:
            atype = type_of(arg)
            edge = pattern
            if (edge == BROADCAST and _is_tensor(atype) and _is_tensor(rtype)
                    and self._same_shape(arg, call, atype, rtype)):
                edge = ELEMWISE
            self.update(arg, n, edge)
        super().visit_call(call)
        self.add_node(call)

    def visit_tuple(self, tup):
        n = self.node(tup)
        n.pattern = TUPLE
        for f in tup.fields:
            if _is_tensor(type_of(f)):
                self.update(f, n, INJECTIVE)
            else:
                self.update(f, None, OPAQUE)
        super().visit_tuple(tup)
        self.add_node(tup)

    def visit_tuple_getitem(self, item):
        ttype = type_of(item.tuple_value)
        if not isinstance(ttype, TupleType) or any(not _is_tensor(f) for f in ttype.fields):
            self.update(item.tuple_value, None, OPAQUE)
        else:
            n = self.node(item)
            n.pattern = INJECTIVE
            self.update(item.tuple_value, n, INJECTIVE)
        super().visit_tuple_getitem(item)
        self.add_node(item)

    def visit_let(self, let):
        # nothing fuses across a let binding. A chain of lets in a loop, in the order the recursive walk
        # had (bindings outermost first, then the body, then the lets innermost first)
        memo = self.memo_map
        chain = [let]
        body = let.body
        while isinstance(body, Let) and body not in memo:
            chain.append(body)
            body = body.body
        for b in chain:
            self.update(b.var, None, OPAQUE)
            self.update(b.value, None, OPAQUE)
            self.update(b.body, None, OPAQUE)
            self.visit(b.var)
            self.visit(b.value)
        self.visit(body)
        for b in reversed(chain):
            self.add_node(b)
            if b is not let:
                memo[b] = None

    def visit_if(self, i):
        self.update(i.cond, None, OPAQUE)
        self.update(i.true_branch, None, OPAQUE)
        self.update(i.false_branch, None, OPAQUE)
        super().visit_if(i)
        self.add_node(i)

    def visit_constructor(self, c):
        self.add_node(c)

    def visit_match(self, m):
        # nothing fuses across a match: its data and each clause's result are boundaries
        self.update(m.data, None, OPAQUE)
        for clause in m.clauses:
            self.update(clause.rhs, None, OPAQUE)
        super().visit_match(m)
        self.add_node(m)


def combine_pattern(a: int, b: int) -> int:
    return a if a > b else b


class DomNode:
    __slots__ = ("gnode", "parent", "depth", "pattern")

    def __init__(self, gnode):
        self.gnode = gnode
        self.parent = None
        self.depth = 0
        self.pattern = OPAQUE


class DominatorTree:
    """Post-dominator tree: a node's parent is the nearest node every path from it to the output passes
    through; ``pattern`` is the strongest edge pattern on the way."""

    def __init__(self, graph: IndexedForwardGraph):
        self.nodes: list = [None] * len(graph.post_dfs_order)
        for i in range(len(graph.post_dfs_order) - 1, -1, -1):
            self.nodes[i] = self._make(graph.post_dfs_order[i])

    def _make(self, gnode: GraphNode) -> DomNode:
        t = DomNode(gnode)
        if gnode.extern_ref:
            t.depth = 1
            t.parent = None
            t.pattern = OPAQUE
            return t
        parent, pattern = self._lca_of_outputs(gnode.outputs)
        t.depth = parent.depth + 1 if parent is not None else 1
        t.parent = parent
        t.pattern = pattern
        return t

    def _lca_of_outputs(self, outputs):
        pattern = ELEMWISE
        if not outputs:
            return None, pattern
        parent = None
        for i, (onode, edge) in enumerate(outputs):
            tnode = self.nodes[onode.index]
            if i == 0:
                parent = tnode
            else:
                parent, pattern = self._lca(parent, tnode, pattern)
            pattern = combine_pattern(pattern, edge)
        return parent, pattern

    @staticmethod
    def _lca(lhs, rhs, pattern):
        while lhs is not rhs:
            if lhs is None or rhs is None:
                return None, pattern
            if lhs.depth < rhs.depth:
                pattern = combine_pattern(pattern, rhs.pattern)
                rhs = rhs.parent
            elif rhs.depth < lhs.depth:
                pattern = combine_pattern(pattern, lhs.pattern)
                lhs = lhs.parent
            else:
                pattern = combine_pattern(pattern, lhs.pattern)
                pattern = combine_pattern(pattern, rhs.pattern)
                lhs = lhs.parent
                rhs = rhs.parent
        return lhs, pattern
