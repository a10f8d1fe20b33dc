"""SinkReshape: move a ``reshape`` that follows a fusable anchor (dense, batch_matmul, conv) below the
elementwise / broadcast ops after it, so FuseOps can fuse them into the anchor's kernel.

Frontends (ONNX / PyTorch MatMul on 3-D data) emit ``dense`` on ``[b*s, K]`` followed by ``reshape`` back to
``[b, s, N]`` and then the epilogue (bias add, dequantize cast / scale, GELU, residual add). FuseOps (as
TVM's) fuses only elementwise / broadcast consumers into an out-elementwise-fusable anchor, so the
injective ``reshape`` cuts the epilogue off into a kernel of its own that re-reads the anchor's output.

The rewrite, for ``r = reshape(d)`` where ``r`` is the only use of ``d``, ``d`` is an out-elementwise-fusable
call or ends a chain of elementwise / broadcast ops after one (e.g. PyTorch's dense + bias add), and the
reshape keeps the last axis and only merges / splits the leading ones:

- the region grows from ``r`` through consumers that are elementwise / broadcast ops (no axis, shape or
  layout attributes) whose output has ``r``'s shape and whose other operands either broadcast along the
  last axis only (rank <= 1, or all leading dims 1) or have the full output shape (their leading dims are
  then merged the same way: a reshape of that operand, free in the graph executor, or the tensor it was
  itself reshaped from);
- it is cut at the last member that every earlier member flows into (a single exit), so the whole
  region can become one kernel with the anchor;
- the members are rebuilt on the anchor's shape and one ``reshape`` to the old shape follows the exit.

Broadcasting stays the same element for element (operands along the last axis keep their shape, full ones
are reshaped exactly like the data), so the numbers do not change. A graph without the pattern is returned
as it was (same object).
"""
from __future__ import annotations

import heapq

from ...ir.op import Op, OpPattern
from ...transform.pass_base import register_pass
from ..expr import Call, Function, If, Let, Tuple, TupleGetItem
from ..expr_functor import ExprMutator, post_order_visit
from ._util import is_op, op_call, op_pattern, static_shape, typed_function_pass

#: attribute names that tie an op to its operands' rank or layout: such ops are not rebuilt on another shape
_SHAPE_ATTRS = frozenset(("axis", "axes", "shape", "newshape", "layout", "data_layout", "out_layout",
                          "begin", "end", "strides", "indices", "reps", "repeats", "src_layout", "dst_layout"))

_ROOT = object()  # the pseudo-consumer of the function body


def _children(node) -> tuple:
    if isinstance(node, Call):
        return tuple(node.args) if isinstance(node.op, Op) else (node.op, *node.args)
    if isinstance(node, Tuple):
        return tuple(node.fields)
    if isinstance(node, TupleGetItem):
        return (node.tuple_value,)
    if isinstance(node, Let):
        return (node.value, node.body)
    if isinstance(node, If):
        return (node.cond, node.true_branch, node.false_branch)
    if isinstance(node, Function):
        return (node.body,)
    return ()


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= int(x)
    return out


class _Graph:
    """Post order (topological index) and consumer lists of every node under a function body."""

    def __init__(self, body):
        self.order: dict = {}
        self.users: dict = {}
        self.reshapes: dict = {}  # (data, static out shape) -> an existing reshape call

        def visit(node):
            self.order[node] = len(self.order)
            for c in _children(node):
                self.users.setdefault(c, []).append(node)
            if is_op(node, "reshape"):
                out = static_shape(node)
                if out is not None:
                    self.reshapes.setdefault((node.args[0], out), node)
        post_order_visit(body, visit)
        self.users.setdefault(body, []).append(_ROOT)


def _fusable_op(call) -> bool:
    """An elementwise / broadcast op that can be rebuilt on operands of another rank."""
    if not isinstance(call, Call) or not isinstance(call.op, Op):
        return False
    if op_pattern(call.op) > OpPattern.BROADCAST:
        return False
    attrs = call.attrs
    return attrs is None or not (_SHAPE_ATTRS & set(attrs.keys()))


def _operand_kind(arg, out_shape: tuple, members: set):
    """How a non-member operand is carried over: 'keep', 'last' (reshape to its last dim), 'full'
    (merge its leading dims like the data), or None (not expressible on the flat shape)."""
    if arg in members:
        return "member"
    shape = static_shape(arg)
    if shape is None:
        return None
    rank = len(out_shape)
    if len(shape) > rank:
        return None
    if len(shape) <= 1:
        return "keep"
    padded = (1,) * (rank - len(shape)) + tuple(shape)
    if all(d == 1 for d in padded[:-1]):
        return "last"
    if padded[:-1] == tuple(out_shape[:-1]) and len(shape) == rank:
        return "full"
    return None


def _ends_anchor_chain(g: _Graph, d) -> bool:
    """Whether ``d`` is an out-elementwise-fusable call (dense, batch_matmul, conv) or the end of an
    elementwise / broadcast chain after one, each link used once: what FuseOps puts in the anchor's kernel."""
    stack, seen = [d], set()
    while stack:
        n = stack.pop()
        if n in seen or not isinstance(n, Call) or not isinstance(n.op, Op):
            continue
        seen.add(n)
        if n is not d and len(g.users.get(n, ())) != 1:
            continue
        pat = op_pattern(n.op)
        if pat == OpPattern.OUT_ELEMWISE_FUSABLE:
            return True
        if pat <= OpPattern.BROADCAST:
            stack.extend(n.args)
    return False


class _Region:
    def __init__(self, reshape, members: list, flat_shape: tuple, out_shape: tuple):
        self.reshape = reshape
        self.members = members  # in topological order, members[0] is the reshape
        self.flat_shape = flat_shape
        self.out_shape = out_shape

    @property
    def exit(self):
        return self.members[-1]


def _find_region(g: _Graph, r, claimed: set):
    out_shape = static_shape(r)
    d = r.args[0]
    in_shape = static_shape(d)
    if out_shape is None or in_shape is None or not out_shape or not in_shape:
        return None
    if out_shape[-1] != in_shape[-1] or _prod(out_shape) != _prod(in_shape) or out_shape == in_shape:
        return None
    if g.users.get(d) != [r] or not _ends_anchor_chain(g, d):
        return None
    members = {r}
    grown = [r]
    heap = []

    def push_users(node):
        for u in g.users.get(node, ()):
            if u is not _ROOT and u not in members:
                heapq.heappush(heap, (g.order[u], id(u), u))
    push_users(r)
    while heap:
        _, _, c = heapq.heappop(heap)
        if c in members or c in claimed or not _fusable_op(c) or static_shape(c) != out_shape:
            continue
        kinds = [_operand_kind(a, out_shape, members) for a in c.args]
        if any(k is None for k in kinds):
            continue
        if any(k == "member" and static_shape(a) != out_shape for a, k in zip(c.args, kinds)):
            continue
        members.add(c)
        grown.append(c)
        push_users(c)
    grown.sort(key=lambda n: g.order[n])
    # cut at the last member that every earlier member flows into: a prefix closed under consumers
    best = 0
    inside: set = set()
    for i, m in enumerate(grown):
        inside.add(m)
        if i > 0 and all(u in inside for p in grown[:i] for u in g.users.get(p, ())):
            best = i
    if best == 0:
        return None
    return _Region(r, grown[:best + 1], tuple(in_shape[:-1]), tuple(out_shape))


class _Sinker(ExprMutator):
    def __init__(self, g: _Graph, regions: list):
        super().__init__()
        self.g = g
        self.exits = {reg.exit: reg for reg in regions}
        self.made: dict = {}
        self.flat_exits: dict = {}

    def _reshaped(self, arg, shape: tuple):
        """``arg`` (an original node) on ``shape``: the tensor it was reshaped from, an existing reshape of
        it, or a new reshape."""
        if is_op(arg, "reshape") and static_shape(arg.args[0]) == shape:
            return self.visit(arg.args[0])
        existing = self.g.reshapes.get((arg, shape))
        if existing is not None:
            return self.visit(existing)
        key = (arg, shape)
        if key not in self.made:
            self.made[key] = op_call("reshape", [self.visit(arg)], newshape=list(shape))
        return self.made[key]

    def visit_call(self, call):
        reg = self.exits.get(call)
        if reg is None:
            if is_op(call, "reshape") and call.args[0] in self.exits:
                return self._reshape_of_exit(call)
            return super().visit_call(call)
        return op_call("reshape", [self._flat_exit(reg)], newshape=list(reg.out_shape))

    def _reshape_of_exit(self, call):
        """A reshape of an exit reshapes the exit's flat value directly (no reshape of a reshape)."""
        reg = self.exits[call.args[0]]
        flat = self._flat_exit(reg)
        shape = static_shape(call)
        if shape is None:
            return super().visit_call(call)
        if shape == reg.flat_shape + (reg.out_shape[-1],):
            return flat
        return op_call("reshape", [flat], newshape=list(shape))

    def _flat_exit(self, reg):
        if reg in self.flat_exits:
            return self.flat_exits[reg]
        flat = {reg.reshape: self.visit(reg.reshape.args[0])}
        members = set(reg.members)
        for m in reg.members[1:]:
            args = []
            for a in m.args:
                kind = _operand_kind(a, reg.out_shape, members)
                if kind == "member":
                    args.append(flat[a])
                elif kind == "keep":
                    args.append(self.visit(a))
                elif kind == "last":
                    args.append(self._reshaped(a, (static_shape(a)[-1],)))
                else:  # "full"
                    args.append(self._reshaped(a, reg.flat_shape + (static_shape(a)[-1],)))
            flat[m] = Call(m.op, args, m.attrs, m.type_args, m.span)
        self.flat_exits[reg] = flat[reg.exit]
        return flat[reg.exit]


def sink_reshape(func: Function) -> Function:
    """``func`` with each anchor -> reshape -> elementwise chain rewritten (see the module docstring)."""
    g = _Graph(func.body)
    regions, claimed = [], set()
    for node in sorted(g.order, key=g.order.get):
        if not is_op(node, "reshape") or node in claimed:
            continue
        reg = _find_region(g, node, claimed)
        if reg is None:
            continue
        regions.append(reg)
        claimed.update(reg.members)
    if not regions:
        return func
    body = _Sinker(g, regions).visit(func.body)
    return Function(func.params, body, None, func.type_params, func.attrs, func.span)


def SinkReshape():  # noqa: N802 (pass factory, TVM's naming style)
    """Move a reshape after a dense / batch_matmul / conv below its elementwise epilogue (opt level 3)."""
    return typed_function_pass(lambda f, mod, ctx: sink_reshape(f), 3, "SinkReshape")


register_pass("SinkReshape", SinkReshape)
