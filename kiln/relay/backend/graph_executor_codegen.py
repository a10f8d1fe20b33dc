"""Graph executor codegen: a fused Relay ``main`` -> graph JSON (TVM's format) + kernels + params.

Every call of a primitive function becomes a ``tvm_op`` node calling the kernel the TE compiler made
for it; ``main``'s parameters become ``null`` input nodes, constants become ``null`` parameter nodes
named ``p0, p1, ...`` whose values go to the params dict (never into the JSON).

Memory planning gives each node output a storage id: walking the nodes in execution order, an output
takes a free storage block (best fit by size, growing the largest free block if none fits) and a block
is freed when the last node reading its tensor has run. Inputs, parameters and graph outputs keep
storage of their own, so they survive ``run()``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from ...error import LoweringError
from ...ir.expr import GlobalVar
from ...ir.op import Op
from ...ir.type import TensorType, TupleType
from ...runtime.abi import C_PRELUDE
from ...runtime.dtype import nbytes
from ...runtime.graph_executor import PLAN_RUNNER_SYMBOL  # one home: the executor looks the runner up by it
from ...target.c_module import create_c_module
from ...target.flags import target_cflags
from ..expr import Call, Constant, Function, If, Let, Tuple, TupleGetItem, Var
from ..expr_functor import memo_post_order
from .te_compiler import TECompiler, _static_shape, _type_of, flatten_type

# Do not hand a block to a tensor this many times smaller than it (TVM's match range).
MATCH_RANGE = 16


@dataclass
class MemoryPlan:
    """What the planner decided: bytes of the shared intermediate blocks vs. one block per tensor."""

    planned_bytes: int = 0            # sum of the intermediate storage blocks
    intermediate_bytes: int = 0       # sum of all intermediate tensors (what no reuse would need)
    io_bytes: int = 0                 # inputs, parameters and outputs (never shared)
    num_intermediate_storage: int = 0
    num_intermediate_tensors: int = 0

    @property
    def total_bytes(self) -> int:
        return self.planned_bytes + self.io_bytes

    @property
    def saving(self) -> float:
        return 1.0 - self.planned_bytes / self.intermediate_bytes if self.intermediate_bytes else 0.0

    def __str__(self) -> str:
        return (f"memory plan: {self.num_intermediate_tensors} intermediate tensors "
                f"({self.intermediate_bytes / 1e6:.3f} MB) in {self.num_intermediate_storage} buffers "
                f"({self.planned_bytes / 1e6:.3f} MB, {self.saving:.0%} saved); inputs/params/outputs "
                f"{self.io_bytes / 1e6:.3f} MB")


@dataclass
class _Node:
    op: str
    name: str
    inputs: list = field(default_factory=list)        # [(node_id, index)]
    attrs: dict = field(default_factory=dict)
    types: list = field(default_factory=list)          # TensorType per output


class GraphExecutorCodegen:
    """Turns one fused, type-checked ``main`` into graph JSON, using a TECompiler for the kernels."""

    def __init__(self, te_compiler: TECompiler):
        self.compiler = te_compiler
        self.nodes: list = []
        self.params: dict = {}
        self.memo: dict = {}
        self.var_entries: dict = {}
        self._names: dict = {}
        self._issued: set = set()
        self._const_nodes: dict = {}

    # -- nodes ---------------------------------------------------------------------------------
    def _unique(self, name: str) -> str:
        # "f_1" (the second call of f) must not collide with a function itself named "f_1"
        count = self._names.get(name, 0)
        candidate = name if count == 0 else f"{name}_{count}"
        while candidate in self._issued:
            count += 1
            candidate = f"{name}_{count}"
        self._names[name] = count + 1
        self._issued.add(candidate)
        return candidate

    def _add(self, node: _Node) -> list:
        self.nodes.append(node)
        nid = len(self.nodes) - 1
        return [(nid, i) for i in range(len(node.types))]

    def _param_node(self, value: np.ndarray) -> list:
        name = self._unique(f"p{len(self.params)}")
        while name in self.params:
            name = self._unique(f"p{len(self.params)}")
        self.params[name] = value
        dtype = "bool" if value.dtype == np.bool_ else str(value.dtype)
        return self._add(_Node("null", name, types=[TensorType(value.shape, dtype)]))

    # -- visiting ------------------------------------------------------------------------------
    def codegen(self, func: Function) -> dict:
        """Build the graph of ``func``; returns {"graph_json", "params", "memory_plan", "lowered"}."""
        for p in func.params:
            ty = _type_of(p)
            if not isinstance(ty, TensorType):
                raise LoweringError(f"graph executor: input %{p.name_hint} has type {ty}; graph inputs must be "
                                    "tensors (tuple inputs need the 'vm' executor)")
            _static_shape(ty, f"input %{p.name_hint}")
            name = self._unique(p.name_hint)
            self.var_entries[p] = self._add(_Node("null", name, types=[ty]))
        heads = self.visit(func.body)
        return self._finish(heads)

    def visit(self, expr) -> list:
        """Node entries of ``expr``, operands first (iteratively: graph depth costs no interpreter stack)."""
        return memo_post_order(expr, self.memo, _operands, self._visit)

    def _visit(self, expr) -> list:
        if isinstance(expr, Var):
            entries = self.var_entries.get(expr)
            if entries is None:
                raise LoweringError(f"graph executor: free variable %{expr.name_hint}")
            return entries
        if isinstance(expr, Constant):
            return self._param_node(np.array(expr.numpy(), order="C"))
        if isinstance(expr, Tuple):
            out = []
            for f in expr.fields:
                out.extend(self.visit(f))
            return out
        if isinstance(expr, TupleGetItem):
            entries = self.visit(expr.tuple_value)
            ty = _type_of(expr.tuple_value)
            if not isinstance(ty, TupleType):
                raise LoweringError("graph executor: TupleGetItem of a value that is not a tuple")
            start = sum(len(flatten_type(f)) for f in ty.fields[:expr.index])
            return entries[start:start + len(flatten_type(ty.fields[expr.index]))]
        if isinstance(expr, Let):
            while isinstance(expr, Let):   # a let chain in a loop
                self.var_entries[expr.var] = self.visit(expr.value)
                expr = expr.body
            return self.visit(expr)
        if isinstance(expr, Call):
            return self.visit_call(expr)
        if isinstance(expr, If):
            raise LoweringError("the graph executor runs dataflow graphs only; this program has control flow "
                                "(relay If): build it for the 'vm' executor instead")
        if isinstance(expr, (Function, GlobalVar)):
            raise LoweringError("the graph executor cannot return or pass functions (closures, or the recursive "
                                "functions loops become, e.g. a scripted PyTorch loop); build this program for the "
                                "'vm' executor instead (relay.vm.compile / relay.create_executor('vm', ...))")
        if type(expr).__name__ in ("RefCreate", "RefRead", "RefWrite"):
            from .vm.compiler import REF_LIMITATION
            raise LoweringError(f"graph executor: cannot generate code for {type(expr).__name__}: " + REF_LIMITATION)
        raise LoweringError(f"graph executor: cannot generate code for {type(expr).__name__}")

    def visit_call(self, call: Call) -> list:
        func = call.op
        if isinstance(func, Op):
            raise LoweringError(f"graph executor: operator {func.name} is called outside a fused primitive function; "
                                "run FuseOps first (relay.build does)")
        if not isinstance(func, Function) or not func.get_attr("Primitive"):
            raise LoweringError("the graph executor calls fused primitive functions only; calls of global or local "
                                "functions need the 'vm' executor")
        ty = _type_of(call)
        out_types = flatten_type(ty)
        for t in out_types:
            _static_shape(t, "an operator result")
        inputs = []
        for a in call.args:
            inputs.extend(self.visit(a))
        if len(inputs) == 1 and len(out_types) == 1 and _is_reshape_only(func):
            # TVM's rule: a reshape moves no data; the node runs nothing and its output shares the
            # input's storage (plan_memory aliases "__nop" outputs)
            attrs = {"func_name": "__nop", "num_inputs": "1", "num_outputs": "1", "flatten_data": "0"}
            return self._add(_Node("tvm_op", self._unique("reshape_nop"), inputs, attrs, out_types))
        cached = self.compiler.lower(func)
        for k, (_, value) in enumerate(cached.const_inputs):
            key = (cached.func_name, k)
            if key not in self._const_nodes:
                self._const_nodes[key] = self._param_node(np.array(value, order="C"))
            inputs.extend(self._const_nodes[key])
        attrs = {"func_name": cached.func_name, "num_inputs": str(len(inputs)),
                 "num_outputs": str(len(out_types)), "flatten_data": "0"}
        return self._add(_Node("tvm_op", self._unique(cached.func_name), inputs, attrs, out_types))

    # -- JSON and memory plan ------------------------------------------------------------------
    def _finish(self, heads: list) -> dict:
        row_ptr = [0]
        for n in self.nodes:
            row_ptr.append(row_ptr[-1] + len(n.types))
        shapes, dtypes = [], []
        for n in self.nodes:
            for t in n.types:
                shapes.append(list(_static_shape(t, n.name)))
                dtypes.append(str(t.dtype))
        head_eids = [row_ptr[nid] + idx for nid, idx in heads]
        storage_ids, plan = plan_memory(self.nodes, row_ptr, shapes, dtypes, head_eids)
        nodes_json = []
        for n in self.nodes:
            d = {"op": n.op, "name": n.name, "inputs": [[nid, idx, 0] for nid, idx in n.inputs]}
            if n.op == "tvm_op":
                d["attrs"] = dict(n.attrs)
            nodes_json.append(d)
        graph = {
            "nodes": nodes_json,
            "arg_nodes": [i for i, n in enumerate(self.nodes) if n.op == "null"],
            "heads": [[nid, idx, 0] for nid, idx in heads],
            "attrs": {
                "dltype": ["list_str", dtypes],
                "device_index": ["list_int", [1] * len(dtypes)],
                "storage_id": ["list_int", storage_ids],
                "shape": ["list_shape", shapes],
            },
            "node_row_ptr": row_ptr,
        }
        return {"graph_json": json.dumps(graph), "params": self.params, "memory_plan": plan,
                "lowered": list(self.compiler.lowered)}


def _operands(expr) -> tuple:
    """The dataflow operands ``GraphCodegen._visit`` reads before ``expr`` itself."""
    if isinstance(expr, Call):
        return tuple(expr.args) if isinstance(expr.op, Function) else ()
    if isinstance(expr, Tuple):
        return tuple(expr.fields)
    if isinstance(expr, TupleGetItem):
        return (expr.tuple_value,)
    return ()


_RESHAPE_OPS = frozenset({"reshape", "squeeze", "expand_dims", "reshape_like", "contrib_reverse_reshape",
                          "nn.batch_flatten"})


def _is_reshape_only(func: Function) -> bool:
    """A fused function that only reshapes its one tensor parameter (same dtype, same element count)."""
    if len(func.params) != 1:
        return False
    e = func.body
    while isinstance(e, Call) and isinstance(e.op, Op) and e.op.name in _RESHAPE_OPS and e.args:
        e = e.args[0]
    if e is not func.params[0] or e is func.body:
        return False
    pt, rt = _type_of(func.params[0]), _type_of(func.body)
    return (isinstance(pt, TensorType) and isinstance(rt, TensorType) and pt.dtype == rt.dtype
            and nbytes(_static_shape(pt, "a reshape input"), pt.dtype)
            == nbytes(_static_shape(rt, "a reshape result"), rt.dtype))


def plan_memory(nodes: list, row_ptr: list, shapes: list, dtypes: list, head_eids: list) -> tuple:
    """Storage id per node output (liveness-based reuse for intermediates) and the MemoryPlan."""
    num_entries = row_ptr[-1]
    sizes = [nbytes(shapes[e], dtypes[e]) for e in range(num_entries)]
    heads = set(head_eids)
    refs = [0] * num_entries
    for n in nodes:
        for nid, idx in n.inputs:
            refs[row_ptr[nid] + idx] += 1
    storage = [-1] * num_entries
    block_size: dict = {}
    free: list = []  # storage ids of free intermediate blocks
    shared: set = set()
    plan = MemoryPlan()

    def new_block(size: int) -> int:
        sid = len(block_size)
        block_size[sid] = size
        return sid

    def alloc(size: int) -> int:
        bigger = [s for s in free if size <= block_size[s] <= max(size, 1) * MATCH_RANGE]
        smaller = [s for s in free if block_size[s] < size and block_size[s] * MATCH_RANGE >= size]
        if bigger:
            sid = min(bigger, key=lambda s: block_size[s])  # best fit
        elif smaller:
            sid = max(smaller, key=lambda s: block_size[s])  # grow the largest free block
        else:
            sid = new_block(size)
            shared.add(sid)
            return sid
        free.remove(sid)
        block_size[sid] = max(block_size[sid], size)
        return sid

    root = list(range(num_entries))  # the entry whose block a "__nop" (reshape) output shares
    for nid, n in enumerate(nodes):
        eids = list(range(row_ptr[nid], row_ptr[nid + 1]))
        if n.op == "tvm_op" and n.attrs.get("func_name") == "__nop":
            pnid, idx = n.inputs[0]
            src = root[row_ptr[pnid] + idx]
            root[eids[0]] = src
            storage[eids[0]] = storage[src]
            refs[src] += refs[eids[0]] - 1  # the block stays live while the alias is read; minus this read
            if eids[0] in heads and storage[src] in shared:  # a graph output: its block is never reused
                shared.discard(storage[src])
                plan.io_bytes += block_size[storage[src]]
            elif refs[src] == 0 and src not in heads and storage[src] in shared and storage[src] not in free:
                free.append(storage[src])
            continue
        if n.op == "null":
            for e in eids:
                storage[e] = new_block(sizes[e])
                plan.io_bytes += sizes[e]
            continue
        for e in eids:  # outputs first: a kernel never writes where it reads
            if e in heads:
                storage[e] = new_block(sizes[e])
                plan.io_bytes += sizes[e]
            else:
                storage[e] = alloc(sizes[e])
                plan.intermediate_bytes += sizes[e]
                plan.num_intermediate_tensors += 1
        for pnid, idx in n.inputs:
            e = root[row_ptr[pnid] + idx]
            refs[e] -= 1
            if refs[e] == 0 and storage[e] in shared and e not in heads and storage[e] not in free:
                free.append(storage[e])
        for e in eids:  # outputs nobody reads
            if refs[e] == 0 and e not in heads and storage[e] in shared and storage[e] not in free:
                free.append(storage[e])
    plan.planned_bytes = sum(block_size[s] for s in shared)
    plan.num_intermediate_storage = len(shared)
    return storage, plan


def verify_memory_plan(graph_json: str) -> None:
    """Raise AssertionError if two tensors that are live at the same time share a storage id.

    A tensor is live from the node that writes it to the last node that reads it (inputs from the
    start, graph outputs to the end); a node's inputs and outputs are live together."""
    g = json.loads(graph_json)
    row_ptr = g["node_row_ptr"]
    sids = g["attrs"]["storage_id"][1]
    end = len(g["nodes"]) + 1
    live = {}
    root = list(range(row_ptr[-1]))  # a "__nop" (reshape) output is its input's tensor under another shape
    for nid, n in enumerate(g["nodes"]):
        if n.get("attrs", {}).get("func_name") == "__nop":
            pnid, idx, _ = n["inputs"][0]
            src = root[row_ptr[pnid] + idx]
            root[row_ptr[nid]] = src
            live[src][1] = max(live[src][1], nid)
            if sids[row_ptr[nid]] != sids[src]:
                raise AssertionError(f"reshape node {n['name']!r} does not share its input's storage")
            continue
        for e in range(row_ptr[nid], row_ptr[nid + 1]):
            live[e] = [-1 if n["op"] == "null" else nid, -1 if n["op"] == "null" else nid]
        for pnid, idx, _ in n["inputs"]:
            e = root[row_ptr[pnid] + idx]
            live[e][1] = max(live[e][1], nid)
    for nid, idx, _ in g["heads"]:
        live[root[row_ptr[nid] + idx]][1] = end
    for nid, n in enumerate(g["nodes"]):
        if n["op"] == "null":
            e = row_ptr[nid]
            live[e][1] = end
    by_sid: dict = {}
    for e, (a, b) in live.items():
        by_sid.setdefault(sids[e], []).append((a, b, e))
    for sid, intervals in by_sid.items():
        intervals.sort()
        prev = None
        for a2, b2, e2 in intervals:
            if prev is not None and a2 <= prev[1]:
                raise AssertionError(f"storage {sid} is shared by entries {prev[2]} (live {prev[0]}..{prev[1]}) and "
                                     f"{e2} (live {a2}..{b2}) which are live at the same time")
            if prev is None or b2 > prev[1]:
                prev = (a2, b2, e2)


# -- the native plan runner ------------------------------------------------------------------------
# PLAN_RUNNER_SYMBOL (runtime.graph_executor) names the function that runs a prepared plan in one native call.
PLAN_RUNNER_SOURCE = r"""
/* kiln graph executor: run a prepared plan (kernel pointer, packed arguments, count) per step. */
typedef int32_t (*kiln_graph_kernel_t)(KilnValue* args, int32_t num_args);
typedef struct {
  kiln_graph_kernel_t fn;
  KilnValue* args;
  int64_t num_args;
} kiln_graph_step;

/* args[0]: kiln_graph_step*, args[1]: number of steps. Returns 0, or 1 + the index of the failed step. */
int32_t __kiln_graph_run(KilnValue* args, int32_t num_args) {
  if (num_args < 2) {
    return -1;
  }
  kiln_graph_step* steps = (kiln_graph_step*)args[0].v_handle;
  int64_t count = args[1].v_int64;
  for (int64_t i = 0; i < count; ++i) {
    if (steps[i].fn(steps[i].args, (int32_t)steps[i].num_args) != 0) {
      return (int32_t)(i + 1);
    }
  }
  return 0;
}
"""


def plan_runner_module(target):
    """A tiny code module exporting ``__kiln_graph_run`` (linked with the kernels when exported), so
    the executor runs every kernel of the graph with a single call from Python."""
    meta = [{"name": PLAN_RUNNER_SYMBOL, "args": [{"name": "steps", "kind": "handle"},
                                                  {"name": "count", "kind": "scalar", "dtype": "int64"}],
             "shape_vars": []}]
    return create_c_module(C_PRELUDE + PLAN_RUNNER_SOURCE, meta, None, target_cflags(target),
                           type_key=target.kind.name, target=target)
