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

Unknown dims (VM builds): the reshape may also be ``reshape_like`` or ``dyn.reshape`` (what the ONNX importer
leaves for ``(b*s, N) -> (b, s, N)`` when b and s are unknown), or a ``reshape`` whose types hold ``?``. Shapes
are then compared as symbolic shapes (``symbolic_shapes.SymbolicShapes``: one variable per unknown dim of a
parameter, the ops' shape functions traced), never by the ``?`` of the types: an operand is taken as "full" only when
its leading dims are provably the data's (a residual whose batch may be 1 at run time is not), and is
flattened by ``reshape(.., [-1, N])`` (at most one unknown flat dim) or an existing reshape with the same
symbolic shape. The reshape after the exit is the original call (op, shape operand, attributes) on the
flat exit, which has the shape of the original data, so it means what it meant before.

Broadcasting stays the same element for element (operands along the last axis keep their shape, full ones
are reshaped exactly like the data), so the numbers do not change. A graph without the pattern is returned
as it was (same object).
"""
from __future__ import annotations

import heapq

from ...error import InternalError
from ...ir.op import Op, OpPattern
from ...transform.pass_base import register_pass
from ..expr import Call, Function, If, Let, Tuple, TupleGetItem
from ..expr_functor import ExprMutator, post_order_visit
from ._util import is_op, op_call, op_pattern, static_shape, tensor_type, typed_function_pass
from .symbolic_shapes import SymbolicShapes as _Shapes

#: attribute names that tie an op to its operands' rank or layout: such ops are not rebuilt on another shape
_SHAPE_ATTRS = frozenset(("axis", "axes", "shape", "newshape", "layout", "data_layout", "out_layout",
                          "begin", "end", "strides", "indices", "reps", "repeats", "src_layout", "dst_layout"))

_ROOT = object()  # the pseudo-consumer of the function body

#: ops that only change how a tensor's elements are grouped into axes (the data is their first operand)
_RESHAPES = ("reshape", "reshape_like", "dyn.reshape")


def _is_reshape(node) -> bool:
    return isinstance(node, Call) and isinstance(node.op, Op) and node.op.name in _RESHAPES


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
        self.reshapes: dict = {}  # data -> the reshape-like calls of it, in post order

        def visit(node):
            self.order[node] = len(self.order)
            for c in _children(node):
                self.users.setdefault(c, []).append(node)
            if _is_reshape(node):
                self.reshapes.setdefault(node.args[0], []).append(node)
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


def _operand_kind(arg, out_shape: tuple, members: set, shapes: _Shapes, flat_ok: bool = True):
    """How a non-member operand is carried over: 'keep', 'last' (reshape to its last dim), 'full'
    (merge its leading dims like the data), or None (not expressible on the flat shape). A 'keep' or 'last'
    operand has a static shape; a 'full' one has the data's leading dims (provably, when unknown) and a
    static last dim; ``flat_ok`` says whether the flat shape can be written as a reshape target."""
    if arg in members:
        return "member"
    rank = len(out_shape)
    shape = static_shape(arg)
    if shape is not None:
        if len(shape) > rank:
            return None
        if len(shape) <= 1:
            return "keep"
        padded = (1,) * (rank - len(shape)) + tuple(shape)
        if all(d == 1 for d in padded[:-1]):
            return "last"
    else:
        shape = shapes.of(arg)
        if shape is None or not isinstance(shape[-1] if shape else None, int):
            return None
    if len(shape) == rank and flat_ok and shapes.same(tuple(shape[:-1]), tuple(out_shape[:-1])):
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


def _find_region(g: _Graph, r, claimed: set, shapes: _Shapes):
    d = r.args[0]
    if tensor_type(r) is None or tensor_type(d) is None:
        return None
    out_shape, in_shape = shapes.of(r), shapes.of(d)
    if out_shape is None or in_shape is None or not out_shape or not in_shape:
        return None
    last = out_shape[-1]
    if not isinstance(last, int) or not isinstance(in_shape[-1], int) or last != in_shape[-1]:
        return None
    static = all(isinstance(x, int) for x in out_shape + in_shape)
    if static and _prod(out_shape) != _prod(in_shape):
        return None
    if shapes.same(out_shape, in_shape):
        return None
    # a 'full' operand is flattened by a reshape to the flat shape: static, or one unknown dim (-1)
    flat_ok = sum(not isinstance(x, int) for x in in_shape) <= 1
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
        if c in members or c in claimed or not _fusable_op(c) or tensor_type(c) is None or \
                not shapes.same(shapes.of(c), out_shape):
            continue
        kinds = [_operand_kind(a, out_shape, members, shapes, flat_ok) for a in c.args]
        if any(k is None for k in kinds):
            continue
        if any(k == "member" and not shapes.same(shapes.of(a), out_shape) for a, k in zip(c.args, kinds)):
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
    def __init__(self, g: _Graph, regions: list, shapes: _Shapes):
        super().__init__()
        self.g = g
        self.shapes = shapes
        self.exits = {reg.exit: reg for reg in regions}
        self.made: list = []  # (original node, flat shape, new reshape)
        self.flat_exits: dict = {}

    def _reshaped(self, arg, shape: tuple):
        """``arg`` (an original node) on ``shape``: the flat value of a region it exits, the tensor it was
        reshaped from, an existing reshape of it, or a new reshape."""
        same = self.shapes.same
        reg = self.exits.get(arg)
        if reg is not None and same(reg.flat_shape + (reg.out_shape[-1],), shape):
            return self._flat_exit(reg)
        if _is_reshape(arg) and same(self.shapes.of(arg.args[0]), shape):
            return self.visit(arg.args[0])
        for existing in self.g.reshapes.get(arg, ()):
            if existing not in self.exits and same(self.shapes.of(existing), shape):
                return self.visit(existing)
        for orig, flat, new in self.made:
            if orig is arg and same(flat, shape):
                return new
        unknown = [i for i, x in enumerate(shape) if not isinstance(x, int)]
        if len(unknown) > 1:  # _find_region admits 'full' operands only with at most one unknown flat dim
            raise InternalError("SinkReshape: a flat shape with several unknown dims has no reshape target")
        target = [-1 if i in unknown else int(x) for i, x in enumerate(shape)]
        new = op_call("reshape", [self.visit(arg)], newshape=target)
        self.made.append((arg, shape, new))
        return new

    def visit_call(self, call):
        reg = self.exits.get(call)
        if reg is None:
            if _is_reshape(call) and call.args[0] in self.exits:
                return self._reshape_of_exit(call)
            return super().visit_call(call)
        r = reg.reshape  # the original reshape (op, shape operand, attributes) on the flat exit
        return Call(r.op, [self._flat_exit(reg)] + [self.visit(a) for a in r.args[1:]], r.attrs, r.type_args,
                    r.span)

    def _reshape_of_exit(self, call):
        """A reshape of an exit reshapes the exit's flat value directly (no reshape of a reshape) when its
        target is static or the flat shape itself."""
        reg = self.exits[call.args[0]]
        shape = self.shapes.of(call)
        if shape is not None and self.shapes.same(shape, reg.flat_shape + (reg.out_shape[-1],)):
            return self._flat_exit(reg)
        if shape is not None and all(isinstance(x, int) for x in shape):
            return op_call("reshape", [self._flat_exit(reg)], newshape=list(shape))
        return super().visit_call(call)

    def _flat_exit(self, reg):
        if reg in self.flat_exits:
            return self.flat_exits[reg]
        flat = {reg.reshape: self.visit(reg.reshape.args[0])}
        members = set(reg.members)
        for m in reg.members[1:]:
            args = []
            for a in m.args:
                kind = _operand_kind(a, reg.out_shape, members, self.shapes)
                if kind == "member":
                    args.append(flat[a])
                elif kind == "keep":
                    args.append(self.visit(a))
                elif kind == "last":
                    args.append(self._reshaped(a, (static_shape(a)[-1],)))
                else:  # "full"
                    args.append(self._reshaped(a, reg.flat_shape + (self.shapes.of(a)[-1],)))
            flat[m] = Call(m.op, args, m.attrs, m.type_args, m.span)
        self.flat_exits[reg] = flat[reg.exit]
        return flat[reg.exit]


def sink_reshape(func: Function) -> Function:
    """``func`` with each anchor -> reshape -> elementwise chain rewritten (see the module docstring)."""
    g = _Graph(func.body)
    shapes = _Shapes(func.body, func.params)
    regions, claimed = [], set()
    for node in sorted(g.order, key=g.order.get):
        if not _is_reshape(node) or node in claimed:
            continue
        reg = _find_region(g, node, claimed, shapes)
        if reg is None:
            continue
        regions.append(reg)
        claimed.update(reg.members)
    if not regions:
        return func
    body = _Sinker(g, regions, shapes).visit(func.body)
    return Function(func.params, body, None, func.type_params, func.attrs, func.span)


def SinkReshape():  # noqa: N802 (pass factory, TVM's naming style)
    """Move a reshape after a dense / batch_matmul / conv below its elementwise epilogue (opt level 3)."""
    return typed_function_pass(lambda f, mod, ctx: sink_reshape(f), 3, "SinkReshape")


register_pass("SinkReshape", SinkReshape)
