"""FuseOps: group operators into fused primitive functions (TVM's fusion algorithm).

The dataflow graph of each function is partitioned with its post-dominator tree, in three phases:

0. an OUT_ELEMWISE_FUSABLE op (conv2d, dense) absorbs the elementwise/broadcast ops it post-dominates
   through elementwise edges; elementwise/broadcast ops fuse into an injective or reduction consumer
   when every path to it is injective (the sink may be an already-fused out-elemwise group);
1. injective ops (and tuples) fuse into their post-dominator when every path to it is injective;
2. injective ops fuse into an intermediate tuple that itself fused into an injective consumer
   (the inputs of ``concatenate``);
3. (kiln's, not TVM's; opt level 3, each rule of :data:`CONV_PRODUCER_RULES` a PassContext switch, default on) a
   group whose only consumer is an NCHWc conv reading it as data joins the conv's group, the conv staying the
   anchor whose schedule computes the producer per row tile: a depthwise conv into the 1x1 conv after it, a
   stem's input packing into the stem conv.

Opaque ops stay alone, a reduction ends its group (it may absorb injective producers). Each group
becomes ``fn (...) , Primitive=1 { ... }`` called from the original function. With opt level 0 no
two ops fuse: every op call is wrapped alone.
"""
from __future__ import annotations

from ...ir.op import Op, OpPattern
from ...transform.pass_base import ModulePass, register_pass
from ...ir.type import TensorType
from ..expr import Call, Constant, Function, Let, Tuple, TupleGetItem, Var
from ..expr_functor import ExprMutator, post_order_visit, NonPrimitiveMutator
from ._util import infer_module, type_of
from ...topi.x86.conv2d import MAX_TRANSFORM_CHANNELS  # what the x86 conv schedule packs per row tile
from .fusion_graph import (BROADCAST, ELEMWISE, INJECTIVE, OPAQUE, TUPLE, DominatorTree, IndexedForwardGraph,
                           combine_pattern)

COMM_REDUCE = int(OpPattern.COMM_REDUCE)
OUT_EWISE = int(OpPattern.OUT_ELEMWISE_FUSABLE)


class Group:
    """A union-find set of graph nodes fused together."""

    __slots__ = ("parent", "pattern", "root_ref", "anchor_ref", "num_nodes")

    def __init__(self, pattern: int, root_ref):
        self.parent = None
        self.pattern = pattern
        self.root_ref = root_ref
        self.anchor_ref = root_ref if pattern == OUT_EWISE else None
        self.num_nodes = 1

    def find_root(self) -> "Group":
        root = self
        while root.parent is not None:
            root = root.parent
        node = self
        while node is not root:  # path compression
            nxt = node.parent
            node.parent = root
            node = nxt
        return root


class GraphPartitioner:
    def __init__(self, opt_level: int, max_fuse_depth: int, conv_rules=()):
        self.opt_level = opt_level
        self.max_fuse_depth = max_fuse_depth
        self.conv_rules = tuple(conv_rules)
        self.groups: list = []
        self.visited: set = set()

    def partition(self, graph: IndexedForwardGraph) -> list:
        self.groups = [Group(n.pattern, n.ref) for n in graph.post_dfs_order]
        if self.opt_level == 0:
            return self.groups
        dom = DominatorTree(graph)
        for phase in range(3):
            self.run_fuse(graph, dom, phase)
        if self.conv_rules:
            self.fuse_conv_producers(graph)
        return self.groups

    # -- path checks -------------------------------------------------------------------------------
    def _check_path(self, src, sink, fcond) -> bool:
        if src in self.visited:
            return True
        self.visited.add(src)
        g = self.groups[src.index].find_root()
        if not fcond(g.pattern, src is sink):
            return False
        if src is sink:
            return True
        return all(self._check_path(out, sink, fcond) for out, _ in src.outputs)

    def check_path(self, src, sink, fcond) -> bool:
        """Every path from ``src`` to ``sink`` passes only through groups satisfying ``fcond``."""
        self.visited = set()
        return all(self._check_path(out, sink, fcond) for out, _ in src.outputs)

    # -- merging -----------------------------------------------------------------------------------
    @staticmethod
    def merge_from_to(child: Group, parent: Group, keep_anchor: bool = False) -> None:
        child, parent = child.find_root(), parent.find_root()
        if child is parent:
            return
        parent.num_nodes += child.num_nodes
        child.parent = parent
        if child.anchor_ref is not None and not keep_anchor:
            assert parent.anchor_ref is None, "two out-elemwise-fusable ops in one group"
            parent.anchor_ref = child.anchor_ref
            parent.pattern = combine_pattern(child.pattern, parent.pattern)

    def _commit(self, src, sink, target: Group) -> None:
        if src is sink or src in self.visited:
            return
        self.visited.add(src)
        self.merge_from_to(self.groups[src.index], target)
        for out, _ in src.outputs:
            self._commit(out, sink, target)

    def commit_fuse(self, src, sink) -> None:
        """Merge every node on the paths from ``src`` to ``sink`` into the sink's group."""
        self.visited = set()
        self._commit(src, sink, self.groups[sink.index])

    def _count_upto_sink(self, src, sink) -> int:
        if src is sink or src in self.visited:
            return 0
        self.visited.add(src)
        total = self.groups[src.index].num_nodes
        for out, _ in src.outputs:
            total += self._count_upto_sink(out, sink)
        return total

    def count_fused_with_new_child(self, child, dom_parent) -> int:
        self.visited = set()
        target = self.groups[dom_parent.index].find_root()
        return target.num_nodes + self._count_upto_sink(child, dom_parent)

    # -- the phases --------------------------------------------------------------------------------
    def run_fuse(self, graph, dom: DominatorTree, phase: int) -> None:
        for nid, gnode in enumerate(graph.post_dfs_order):
            dnode = dom.nodes[nid]
            group = self.groups[nid]
            if group.pattern == OPAQUE or dnode.parent is None:
                continue
            sink = dnode.parent.gnode
            parent_group = self.groups[sink.index]
            if self.count_fused_with_new_child(gnode, sink) > self.max_fuse_depth:
                continue
            if phase == 2:
                if group.pattern > INJECTIVE:
                    continue
                root_group = parent_group.find_root()
                if root_group.pattern == TUPLE:
                    continue
                if parent_group.pattern == TUPLE and root_group.pattern <= INJECTIVE:
                    if self.check_path(gnode, sink, lambda k, is_sink: k <= INJECTIVE):
                        self.commit_fuse(gnode, sink)
                continue
            if group.find_root() is parent_group.find_root():
                continue
            if parent_group.pattern == TUPLE:
                continue
            if group.pattern == OUT_EWISE:
                if phase != 0:
                    continue
                if dnode.pattern == ELEMWISE:
                    if self.check_path(gnode, sink, lambda k, is_sink: k <= BROADCAST):
                        self.commit_fuse(gnode, sink)
            elif group.pattern <= BROADCAST:
                if dnode.pattern <= INJECTIVE or dnode.pattern == COMM_REDUCE:
                    def fcond(k, is_sink):
                        if not is_sink:
                            return k <= INJECTIVE
                        return k <= BROADCAST or k in (COMM_REDUCE, INJECTIVE, OUT_EWISE)
                    if self.check_path(gnode, sink, fcond):
                        self.commit_fuse(gnode, sink)
            elif group.pattern in (INJECTIVE, TUPLE):
                if phase != 1:
                    continue
                if self.check_path(gnode, sink, lambda k, is_sink: k <= INJECTIVE):
                    self.commit_fuse(gnode, sink)
            # COMM_REDUCE: a reduction is never fused into what follows it

    def fuse_conv_producers(self, graph) -> None:
        """Phase 3 (kiln's, see :data:`CONV_PRODUCER_RULES`): a group whose only consumer is an NCHWc conv that
        reads it as its data joins that conv's group when one of ``conv_rules`` says so; the conv stays the
        anchor and its schedule computes the producer per row tile, where it is used."""
        for gnode in graph.post_dfs_order:
            group = self.groups[gnode.index].find_root()
            if group.root_ref is not gnode.ref or gnode.extern_ref or len(gnode.outputs) != 1:
                continue
            consumer = gnode.outputs[0][0]
            target = self.groups[consumer.index].find_root()
            if target is group or target.anchor_ref is not consumer.ref:
                continue
            if not any(rule(group, consumer.ref, gnode.ref) for rule in self.conv_rules):
                continue
            if group.num_nodes + target.num_nodes > self.max_fuse_depth:
                continue
            self.merge_from_to(group, target, keep_anchor=True)


def _static_dims(expr):
    ty = type_of(expr)
    if not isinstance(ty, TensorType):
        return None
    dims = [getattr(d, "value", d) for d in ty.shape]
    return dims if all(isinstance(d, int) for d in dims) else None


def depthwise_feeds_pointwise(group, consumer, value) -> bool:
    """Whether the group of a depthwise conv (``value``: the conv or the end of its elementwise epilogue)
    fuses into ``consumer``, which reads ``value``: fp32 ``nn.contrib_depthwise_conv2d_NCHWc`` into an
    fp32 1x1, stride-1, unpadded ``nn.contrib_conv2d_NCHWc`` with static shapes, whose output has at least
    ``MIN_FUSED_ROWS`` rows (the fused kernel runs in parallel over output rows only). The pointwise conv
    then reads each depthwise output row from the cache right after it is computed, instead of from a
    tensor written through memory by another kernel."""
    producer = group.anchor_ref
    if not (isinstance(producer, Call) and isinstance(producer.op, Op) and isinstance(consumer, Call)
            and isinstance(consumer.op, Op)):
        return False
    if producer.op.name != "nn.contrib_depthwise_conv2d_NCHWc" or consumer.op.name != "nn.contrib_conv2d_NCHWc":
        return False
    if len(consumer.args) != 2 or consumer.args[0] is not value:
        return False
    a = consumer.attrs
    if tuple(int(v) for v in a.strides) != (1, 1) or any(int(v) for v in a.padding) \
            or tuple(int(v) for v in a.dilation) != (1, 1) or int(a.groups) != 1:
        return False
    kernel, out, dw_in = _static_dims(consumer.args[1]), _static_dims(consumer), _static_dims(producer.args[0])
    if kernel is None or out is None or dw_in is None or len(kernel) != 6 or len(out) != 5:
        return False
    if kernel[2:4] != [1, 1] or out[2] < MIN_FUSED_ROWS:
        return False
    return all(getattr(type_of(e), "dtype", None) == "float32"
               for e in (producer.args[0], producer.args[1], value, consumer.args[1], consumer))


#: the fewest output rows a fused depthwise + pointwise kernel has (its parallel loop runs over them)
MIN_FUSED_ROWS = 28

_TRANSFORM_OPS = ("layout_transform", "nn.pad")


def input_transform_feeds_conv(group, consumer, value) -> bool:
    """Whether a group of only ``layout_transform`` / ``nn.pad`` calls (``value`` its result) fuses into
    ``consumer``, an fp32 ``nn.contrib_conv2d_NCHWc`` with static shapes reading it as data that has at most
    :data:`MAX_TRANSFORM_CHANNELS` channels: a network's stem, whose input comes in NCHW and is packed (and padded)
    for it. Fused, the conv packs the input rows each row tile needs (the kernel window's overlap again: a few
    copies next to the hundreds of multiply-adds per output pixel), in parallel and beside its own work, instead
    of a serial kernel passing over the whole input first."""
    if group.anchor_ref is not None or group.pattern > INJECTIVE or not isinstance(consumer, Call) \
            or not isinstance(consumer.op, Op) or consumer.op.name != "nn.contrib_conv2d_NCHWc":
        return False
    if len(consumer.args) != 2 or consumer.args[0] is not value:
        return False
    calls, consts, node = 0, 0, value
    while isinstance(node, Call) and isinstance(node.op, Op) and node.op.name in _TRANSFORM_OPS:
        if not all(isinstance(a, Constant) for a in node.args[1:]):  # nn.pad's pad value
            return False
        calls += 1
        consts += len(node.args) - 1
        node = node.args[0]
    if not calls <= group.num_nodes <= calls + consts:  # the group is this chain (its constants may be in it)
        return False
    data, out = _static_dims(value), _static_dims(consumer)
    if data is None or out is None or len(data) != 5 or data[1] * data[4] > MAX_TRANSFORM_CHANNELS:
        return False
    return all(getattr(type_of(e), "dtype", None) == "float32" for e in (value, consumer.args[1], consumer))


#: kiln's phase-3 rules (PassContext config key -> predicate): which producer groups join the conv they feed
CONV_PRODUCER_RULES = {"relay.FuseOps.depthwise_pointwise": depthwise_feeds_pointwise,
                       "relay.FuseOps.input_transform": input_transform_feeds_conv}


class _GroupInfo:
    def __init__(self):
        self.params: list = []
        self.arguments: list = []
        self.originals: list = []  # the arguments before the rewrite (the symbolic shapes know those nodes)

    def add(self, arg, ty, original=None) -> Var:
        """The parameter for ``arg``: one per distinct argument expression (TVM's GetOrAllocParam), so
        a value used several times inside a group is passed once."""
        for i, known in enumerate(self.arguments):
            if known is arg:
                return self.params[i]
        v = Var(f"p{len(self.params)}", ty)
        self.params.append(v)
        self.arguments.append(arg)
        self.originals.append(original)
        return v


#: anchors whose fused kernels get FuseOps' proven dim equalities (``kiln.same_dims``)
_DENSE_ANCHORS = frozenset(("nn.dense", "nn.contrib_dense_pack", "nn.matmul"))


def _same_dims(shapes, gi: _GroupInfo):
    """``"k.j=k.j,..."``: classes of provably equal unknown dims of the group's parameters (parameter k, axis
    j), or None. The VM's lowering gives each class one variable, so a residual fused into a dense over
    ``b*s`` rows indexes like the dense's output instead of broadcasting two extents (docs/vm.md)."""
    dims = []
    for k, (p, orig) in enumerate(zip(gi.params, gi.originals)):
        ty = p.type_annotation
        if orig is None or not isinstance(ty, TensorType) or not ty.is_dynamic():
            continue
        s = shapes.of(orig)
        if s is None:
            continue
        dims.extend(((k, j), s[j]) for j, d in enumerate(ty.shape) if not isinstance(getattr(d, "value", d), int))
    if len(dims) < 2:
        return None
    classes: list = []
    for key, d in dims:
        for c in classes:
            if shapes.same((c[0][1],), (d,)):
                c.append((key, d))
                break
        else:
            classes.append([(key, d)])
    out = ["=".join(f"{k}.{j}" for (k, j), _ in c) for c in classes if len(c) > 1]
    return ",".join(out) or None


class FuseMutator(NonPrimitiveMutator):
    """Rewrites a function so each group becomes a call of a new primitive function."""

    def __init__(self, fuse_opt_level: int, max_fuse_depth: int, link_params: bool = False, conv_rules=()):
        super().__init__()
        self.fuse_opt_level = fuse_opt_level
        self.max_fuse_depth = max_fuse_depth
        self.link_params = link_params
        self.conv_rules = conv_rules
        self.gmap: dict = {}
        self.ginfo: dict = {}

    def transform(self, body):
        from .symbolic_shapes import SymbolicShapes
        self.shapes = SymbolicShapes(body)  # built only if a type with unknown dims is asked about
        graph = IndexedForwardGraph.create(body, self.shapes)
        groups = GraphPartitioner(self.fuse_opt_level, self.max_fuse_depth, self.conv_rules).partition(graph)
        for node, group in zip(graph.post_dfs_order, groups):
            self.gmap[node.ref] = group
        return self.visit(body)

    def info(self, group) -> _GroupInfo:
        gi = self.ginfo.get(group)
        if gi is None:
            gi = self.ginfo[group] = _GroupInfo()
        return gi

    def new_arguments(self, args, group) -> list:
        out = []
        for arg in args:
            arg_group = self.gmap[arg].find_root() if arg in self.gmap else None
            new_arg = self.visit(arg)
            if arg_group is not group and not (self.link_params and isinstance(new_arg, Constant)):
                out.append(self.info(group).add(new_arg, type_of(arg), arg))
            else:
                out.append(new_arg)
        return out

    def make_function(self, group, ret_type, body):
        gi = self.info(group)
        has_call = [False]

        def visit(n):
            if isinstance(n, Call):
                has_call[0] = True
        post_order_visit(body, visit)
        func = Function(gi.params, body, ret_type, attrs={"Primitive": int(has_call[0])})
        if has_call[0] and _reshape_only(body):
            func = func.with_attr("relay.reshape_only", 1)
        # only kernels of a dense and its epilogue (a residual over b*s rows must index like the dense's
        # output); other kernels keep the VM's own dim classes
        shapes = getattr(self, "shapes", None)
        anchor = getattr(getattr(group, "anchor_ref", None), "op", None)
        same = _same_dims(shapes, gi) if has_call[0] and shapes is not None and \
            getattr(anchor, "name", None) in _DENSE_ANCHORS else None
        if same:
            func = func.with_attr("kiln.same_dims", same)
        return Call(func, gi.arguments)

    def visit_call(self, call):
        if not isinstance(call.op, Op) or call.op.get_attr("TNonComputational"):
            return super().visit_call(call)
        group = self.gmap[call].find_root()
        new_call = Call(call.op, self.new_arguments(call.args, group), call.attrs, call.type_args, call.span)
        if group.root_ref is call:
            return self.make_function(group, type_of(call), new_call)
        return new_call

    def visit_tuple(self, tup):
        group = self.gmap[tup].find_root()
        if group.root_ref is tup:
            return super().visit_tuple(tup)
        return Tuple(self.new_arguments(tup.fields, group), tup.span)

    def visit_tuple_getitem(self, item):
        if item not in self.gmap:
            return super().visit_tuple_getitem(item)
        group = self.gmap[item].find_root()
        new_tuple = self.new_arguments([item.tuple_value], group)[0]
        new_item = TupleGetItem(new_tuple, item.index, item.span)
        if group.root_ref is item:
            src = self.gmap.get(item.tuple_value)
            if src is None or src.find_root() is not group:
                # the tuple comes from an opaque op: the field access stays outside any function
                return super().visit_tuple_getitem(item)
            return self.make_function(group, type_of(item), new_item)
        return new_item


_RESHAPE_OPS = ("reshape", "contrib_reverse_reshape", "dyn.reshape", "squeeze", "expand_dims")


def _reshape_only(body) -> bool:
    ok = [True]

    def visit(n):
        if isinstance(n, Call) and not (isinstance(n.op, Op) and n.op.name in _RESHAPE_OPS):
            ok[0] = False
    post_order_visit(body, visit)
    return ok[0]


def fuse_ops(func: Function, fuse_opt_level: int, max_fuse_depth: int = 256, link_params: bool = False,
             conv_rules=()) -> Function:
    """Fuse one type-checked function. With ``link_params`` a constant argument of a fused group stays in
    the primitive function's body (compiled into the kernel) instead of becoming one of its parameters;
    ``conv_rules``: predicates of :data:`CONV_PRODUCER_RULES` whose producers join the conv they feed (phase 3)."""
    return FuseMutator(fuse_opt_level, max_fuse_depth, link_params, conv_rules).transform(func)


def FuseOps(fuse_opt_level: int = -1):  # noqa: N802 (TVM's name)
    """Fuse operators into primitive functions. ``fuse_opt_level=-1`` uses the PassContext's opt level;
    ``relay.FuseOps.max_depth`` (config, default 256) bounds the number of ops in one group;
    ``relay.FuseOps.link_params`` (config; default: the module's executor's ``link-params``, else False) keeps
    constants inside the fused functions, as TVM (the Relay graph; kiln's lowering still hands a non-scalar
    constant to its kernel as an input, so ``relay.build``'s params are the same either way).

    Not implemented: TVM's ``max_function_args`` limit (a target attribute of GPU targets such as Metal, which
    splits a group whose function would take too many arguments); no kiln target has that attribute."""

    def run(mod, ctx):
        level = ctx.opt_level if fuse_opt_level == -1 else fuse_opt_level
        max_depth = int(ctx.get_config("relay.FuseOps.max_depth", 256) or 256)
        rules = [rule for key, rule in CONV_PRODUCER_RULES.items() if ctx.get_config(key, True)] \
            if level >= 3 else []
        link = ctx.get_config("relay.FuseOps.link_params", None)
        if link is None:
            executor = mod.get_attr("executor")
            link = bool(dict(getattr(executor, "options", None) or {}).get("link-params", False))
        mod = infer_module(mod)
        out = mod.copy()
        for gv, func in mod.functions.items():
            if isinstance(func, Function) and not func.get_attr("Primitive") and not func.get_attr("Compiler"):
                out[gv] = fuse_ops(func, level, max_depth, bool(link), rules)
        return infer_module(out)

    return ModulePass(run, 0, "FuseOps")


register_pass("FuseOps", FuseOps)
