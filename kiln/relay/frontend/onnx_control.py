"""ONNX control flow: If, Loop and Scan (TVM's ``If``/``Loop``/``Scan`` converters), run on the Relay VM.

- A subgraph (a branch, a loop body) is converted by a child of the graph converter whose name table falls
  back to the enclosing scope (:class:`ScopeTable`), so a body may read any value of an outer graph.
- ``If`` becomes ``relay.If`` over both converted branches; a condition known at import time picks the branch.
- ``Loop`` and ``Scan`` become a recursive local function (``let loop = fn(i, max, cond, states..., scans...,
  outer...) { if (cond && i < max) loop(i + 1, ...) else (i, max, ...) }``): the shape TVM's ``while_loop``
  has. Outer-scope values the body reads that are not constants are extra loop variables (passed unchanged),
  as in TVM. The types of the loop-carried values start from the initial values and are widened (a dim that
  the body changes becomes ``relay.Any()``) until the body keeps them. Per-iteration (scan) outputs are
  accumulated with ``concatenate`` onto an empty ``(0, ...)`` tensor, so they have an ``Any`` leading dim.
"""
from __future__ import annotations

import numpy as np

from ...error import FrontendError
from ...ir.type import TensorType, TupleType
from ...tir.expr import Any
from .. import op as _op
from ..expr import Call, Constant, Function, If, Let, Tuple, TupleGetItem, Var
from .onnx_common import const, onnx_op
from .onnx_sequence import Sequence

__all__ = ["ScopeTable", "convert_subgraph"]

_MAX_TYPE_ROUNDS = 8


class ScopeTable(dict):
    """The ONNX value names of one subgraph; names it does not define come from the enclosing scope.

    With ``capture`` (a loop body, which becomes a function), an outer value that is not a constant is
    replaced by a fresh Var recorded in ``captured`` (the loop passes the outer value in as an extra loop
    variable); without it (If branches) the outer expression is used as is.
    """

    def __init__(self, parent: dict, capture: bool, param_values: dict, types):
        super().__init__()
        self.parent = parent
        self.types = types
        self.capture = capture
        self.param_values = param_values
        self.captured: list = []  # (Var inside the body, the outer expression it stands for)

    def __missing__(self, name):
        outer = self.parent[name]  # KeyError when no scope defines it
        value = self._capture(name, outer) if self.capture else outer
        self[name] = value
        return value

    def __contains__(self, name) -> bool:
        return dict.__contains__(self, name) or name in self.parent

    def all_names(self) -> set:
        up = self.parent.all_names() if isinstance(self.parent, ScopeTable) else set(self.parent)
        return set(self.keys()) | up

    def _capture(self, name: str, outer):
        if outer is None or isinstance(outer, Constant):
            return outer
        if isinstance(outer, Var) and outer.name_hint in self.param_values:
            return outer  # a parameter of @main (freeze_params=False): its value stays known
        if isinstance(outer, Sequence):
            return Sequence([self._capture(f"{name}_{k}", e) for k, e in enumerate(outer)], outer.dtype)
        ty = self.types.type_of(outer)
        v = Var(_var_name(name), ty)
        self.captured.append((v, outer))
        return v


def _var_name(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "v"


def convert_subgraph(conv, graph, bound: dict, capture: bool):
    """Convert ``graph`` (a GraphProto attribute) inside ``conv``'s scope with its inputs bound to ``bound``
    (name -> expr). Returns (output exprs, captured (var, outer expr) pairs)."""
    from onnx import numpy_helper
    table = ScopeTable(conv.table, capture, conv.param_values, conv.types)
    for init in graph.initializer:
        table[init.name] = const(numpy_helper.to_array(init))
    for vi in graph.input:
        if vi.name not in bound and vi.name not in dict.keys(table):
            raise FrontendError(f"subgraph {graph.name!r}: input {vi.name!r} is not bound")
    table.update(bound)
    conv.flags["control_flow"] = True
    child = conv.child(table)
    child._check_names(graph, table.all_names())
    for node in graph.node:
        child._convert_node(node)
    return [table[o.name] for o in graph.output], table.captured


# -- If ---------------------------------------------------------------------------------------------------------
def _scalar_bool(x, ctx):
    if ctx.ndim(x) != 0:
        x = _op.reshape(x, ())
    if ctx.dtype(x) != "bool":
        x = _op.cast(x, "bool")
    return x


def _pack(outs: list, what: str, ctx):
    """Branch outputs as one Relay value (a sequence becomes a nested tuple)."""
    fields = [Tuple(list(o)) if isinstance(o, Sequence) else o for o in outs]
    if any(f is None for f in fields):
        raise ctx.unsupported(f"an {what} output that is an empty optional")
    return fields[0] if len(fields) == 1 else Tuple(fields)


def _unpack(result, like: list, ctx) -> list:
    items = [result] if len(like) == 1 else [TupleGetItem(result, k) for k in range(len(like))]
    out = []
    for item, ref in zip(items, like):
        out.append(Sequence([TupleGetItem(item, j) for j in range(len(ref))], ref.dtype)
                   if isinstance(ref, Sequence) else item)
    return out


@onnx_op("If", since=1)
def _if(inputs, attr, ctx):
    conv = ctx.graph
    known = ctx.value(inputs[0])
    if known is not None:  # decided at import time: only the branch taken is converted
        if np.asarray(known).size != 1:
            raise ctx.error(f"the condition has {np.asarray(known).size} elements; If needs exactly one")
        branch = attr["then_branch"] if bool(np.asarray(known).reshape(-1)[0]) else attr["else_branch"]
        outs, _ = convert_subgraph(conv, branch, {}, capture=False)
        return outs
    cond = _scalar_bool(inputs[0], ctx)
    then_outs, _ = convert_subgraph(conv, attr["then_branch"], {}, capture=False)
    else_outs, _ = convert_subgraph(conv, attr["else_branch"], {}, capture=False)
    if len(then_outs) != len(else_outs):
        raise ctx.error(f"then_branch has {len(then_outs)} outputs, else_branch {len(else_outs)}")
    for k, (a, b) in enumerate(zip(then_outs, else_outs)):
        if isinstance(a, Sequence) != isinstance(b, Sequence) or (isinstance(a, Sequence) and len(a) != len(b)):
            raise ctx.unsupported(f"output #{k}: branches returning sequences of different lengths (or a sequence "
                                  "and a tensor)")
        if not isinstance(a, Sequence):
            ta, tb = ctx.type_of(a), ctx.type_of(b)
            if isinstance(ta, TensorType) and isinstance(tb, TensorType) and not _same(ta, tb):
                raise ctx.unsupported(f"output #{k}: branches with different types ({_show(ta)} vs {_show(tb)})")
    res = If(cond, _pack(then_outs, "If then_branch", ctx), _pack(else_outs, "If else_branch", ctx))
    return _unpack(res, then_outs, ctx)


# -- loops ------------------------------------------------------------------------------------------------------
def _same(a, b) -> bool:
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        return str(a.dtype) == str(b.dtype) and len(a.shape) == len(b.shape) and all(
            _dim_eq(x, y) for x, y in zip(a.shape, b.shape))
    return False


def _dim_val(d):
    v = getattr(d, "value", d)
    return int(v) if isinstance(v, (int, np.integer)) else None


def _dim_eq(x, y) -> bool:
    vx, vy = _dim_val(x), _dim_val(y)
    return (vx is not None and vx == vy) or (vx is None and vy is None)


def _show(t) -> str:
    return f"{t.dtype}[{', '.join('?' if _dim_val(d) is None else str(_dim_val(d)) for d in t.shape)}]"


def _join(t, new, what: str, ctx):
    """The loop variable type covering both ``t`` and the body's output ``new`` (changing dims -> Any)."""
    if not isinstance(new, TensorType):
        raise ctx.unsupported(f"{what}: a loop-carried value that is not a tensor")
    if str(t.dtype) != str(new.dtype) or len(t.shape) != len(new.shape):
        raise ctx.error(f"{what}: the body turns {_show(t)} into {_show(new)} (the dtype and rank of a "
                        "loop-carried value must not change)")
    return TensorType(tuple(a if _dim_eq(a, b) else Any() for a, b in zip(t.shape, new.shape)), t.dtype)


def _i64(v) -> Constant:
    return const(np.array(v, dtype="int64"))


def _append_row(acc, row, row_type):
    """``acc`` (rows so far) with ``row`` appended. When the row's shape is only known at run time, the
    accumulator starts as (0, 0, ...) and is first reshaped to (rows, *shape(row)) (a no-op after the first
    iteration; zero elements before it)."""
    if any(_dim_val(d) is None for d in row_type.shape):
        rows = _op.strided_slice(_op.shape_of(acc, "int64"), [0], [1])
        acc = _op.reshape(acc, _op.concatenate([rows, _op.shape_of(row, "int64")], 0))
    return _op.concatenate([acc, _op.expand_dims(row, 0)], 0)


def build_loop(ctx, limit, cond0, inits: list, names: list, body_fn):
    """A recursive local function running ``body_fn`` while ``cond and i < limit``.

    ``body_fn(i, cond, states)`` converts the body for the loop variables ``states`` and returns
    ``(cond_out, state_outs, scan_outs, captured)``. Returns (final states, stacked scan outputs)."""
    types = []
    for x, n in zip(inits, names):
        t = ctx.type_of(x)
        if not isinstance(t, TensorType):
            raise ctx.unsupported(f"loop-carried value {n!r} that is not a tensor (a sequence or optional)")
        types.append(t)
    for _ in range(_MAX_TYPE_ROUNDS):
        i = Var("iter", TensorType((), "int64"))
        cond = Var("cond", TensorType((), "bool"))
        states = [Var(_var_name(n), t) for n, t in zip(names, types)]
        cond_out, outs, scans, captured = body_fn(i, cond, states)
        new = [_join(t, ctx.type_of(o), f"loop-carried value {n!r}", ctx) for t, o, n in zip(types, outs, names)]
        if all(_same(a, b) for a, b in zip(types, new)):
            break
        types = new
    else:
        raise ctx.error("the shapes of the loop-carried values do not settle")
    scan_types = []
    for k, s in enumerate(scans):
        t = ctx.type_of(s)
        if not isinstance(t, TensorType):
            raise ctx.unsupported(f"scan output #{k} that is not a tensor")
        scan_types.append(t)
    accs = [Var(f"scan{k}", TensorType((Any(),) + tuple(t.shape), t.dtype)) for k, t in enumerate(scan_types)]
    cap_vars = [v for v, _ in captured]
    m = Var("max_trip", TensorType((), "int64"))
    params = [i, m, cond] + states + accs + cap_vars
    go = cond if limit is None else _op.logical_and(cond, _op.less(i, m))
    nxt_cond = _scalar_bool(cond_out, ctx) if cond_out is not None else cond
    nxt = [_op.add(i, _i64(1)), m, nxt_cond] + list(outs)
    nxt += [_append_row(a, s, t) for a, s, t in zip(accs, scans, scan_types)]
    nxt += cap_vars
    loop = Var("onnx_loop")
    ret = TupleType([p.type_annotation for p in params])
    func = Function(params, If(go, Call(loop, nxt), Tuple(params)), ret)
    init = [_i64(0), limit if limit is not None else _i64(0),
            cond0 if cond0 is not None else const(np.array(True))]
    init += list(inits)
    init += [const(np.zeros((0,) + tuple(_dim_val(d) or 0 for d in t.shape), dtype=str(t.dtype)))
             for t in scan_types]
    init += [o for _, o in captured]
    result = Let(loop, func, Call(loop, init))
    base = 3 + len(states)
    finals = [TupleGetItem(result, 3 + k) for k in range(len(states))]
    stacked = [TupleGetItem(result, base + k) for k in range(len(accs))]
    return finals, stacked


@onnx_op("Loop", since=1)
def _loop(inputs, attr, ctx):
    body = attr["body"]
    m_in, cond_in = inputs[0], inputs[1]
    inits = list(inputs[2:])
    if m_in is None and cond_in is None:
        raise ctx.unsupported("a Loop with neither a trip count nor a condition (an infinite loop)")
    limit = None
    if m_in is not None:
        limit = m_in if ctx.ndim(m_in) == 0 else _op.reshape(m_in, ())
        if ctx.dtype(limit) != "int64":
            limit = _op.cast(limit, "int64")
    cond0 = _scalar_bool(cond_in, ctx) if cond_in is not None else None
    b_in = [vi.name for vi in body.input]
    if len(b_in) != 2 + len(inits):
        raise ctx.error(f"the body takes {len(b_in)} inputs; a Loop with {len(inits)} loop-carried values needs "
                        f"{2 + len(inits)} (iteration number, condition, values)")
    n_out = len(body.output)
    if n_out < 1 + len(inits):
        raise ctx.error(f"the body returns {n_out} outputs; it must return the condition and {len(inits)} "
                        "loop-carried values first")
    if any(x is None for x in inits) or any(isinstance(x, Sequence) for x in inits):
        raise ctx.unsupported("a Loop carrying a sequence or an empty optional")

    def body_fn(i, cond, states):
        bound = {b_in[0]: i, b_in[1]: cond}
        bound.update(zip(b_in[2:], states))
        outs, captured = convert_subgraph(ctx.graph, body, bound, capture=True)
        if any(isinstance(o, Sequence) for o in outs):
            raise ctx.unsupported("a Loop body returning a sequence")
        return outs[0], outs[1:1 + len(states)], outs[1 + len(states):], captured

    finals, scans = build_loop(ctx, limit, cond0, inits, b_in[2:], body_fn)
    return finals + scans


def _move_axis_first(x, axis: int, ndim: int):
    if axis == 0:
        return x
    order = [axis] + [k for k in range(ndim) if k != axis]
    return _op.transpose(x, order)


def _move_first_to(x, axis: int, ndim: int):
    if axis == 0:
        return x
    order = list(range(1, axis + 1)) + [0] + list(range(axis + 1, ndim))
    return _op.transpose(x, order)


@onnx_op("Scan", since=9)
def _scan(inputs, attr, ctx):
    body = attr["body"]
    k_in = int(attr["num_scan_inputs"])
    n_state = len(inputs) - k_in
    if n_state < 0 or k_in < 1:
        raise ctx.error(f"num_scan_inputs={k_in} with {len(inputs)} inputs")
    states0, xs = list(inputs[:n_state]), list(inputs[n_state:])
    in_axes = list(attr.get("scan_input_axes", [0] * k_in))
    in_dirs = list(attr.get("scan_input_directions", [0] * k_in))
    b_in = [vi.name for vi in body.input]
    b_out = len(body.output)
    n_scan_out = b_out - n_state
    out_axes = list(attr.get("scan_output_axes", [0] * n_scan_out))
    out_dirs = list(attr.get("scan_output_directions", [0] * n_scan_out))
    if len(b_in) != n_state + k_in or n_scan_out < 0:
        raise ctx.error(f"the body takes {len(b_in)} inputs and returns {b_out} outputs for {n_state} states and "
                        f"{k_in} scan inputs")
    if len(in_axes) != k_in or len(in_dirs) != k_in or len(out_axes) != n_scan_out or len(out_dirs) != n_scan_out:
        raise ctx.error("scan_input_axes/directions and scan_output_axes/directions must have one entry per scan "
                        "input / output")
    seqs = []
    for x, ax, d in zip(xs, in_axes, in_dirs):
        nd = ctx.ndim(x)
        ax = int(ax) + nd if int(ax) < 0 else int(ax)
        if not 0 <= ax < nd:
            raise ctx.error(f"scan input axis {ax} is out of range for rank {nd}")
        x = _move_axis_first(x, ax, nd)
        seqs.append(_op.reverse(x, 0) if int(d) else x)
    finals, scans = _scan_loop(ctx, body, states0, seqs)
    out = list(finals)
    for s, ax, d in zip(scans, out_axes, out_dirs):
        nd = ctx.ndim(s)
        ax = int(ax) + nd if int(ax) < 0 else int(ax)
        if int(d):
            s = _op.reverse(s, 0)
        out.append(_move_first_to(s, ax, nd))
    return out


def _scan_loop(ctx, body, states0: list, seqs: list):
    """The Scan loop: iteration i binds the body's scan inputs to ``take(seq, i, axis=0)`` (``seqs`` have the
    scanned axis first, already reversed where the direction asks); returns (final states, stacked outputs)."""
    n_state = len(states0)
    b_in = [vi.name for vi in body.input]
    names = b_in[:n_state]
    n = _dim_val(ctx.shape(seqs[0], dynamic_ok=True)[0])
    length = _i64(n) if n is not None else _op.cast(_op.take(_op.shape_of(seqs[0]), _i64(0)), "int64")

    def body_fn(i, cond, states):
        bound = dict(zip(names, states))
        # the scan inputs ride along as extra loop variables (captured), each iteration takes slice i
        sub = ScopeTable({f"__scan_input_{k}": x for k, x in enumerate(seqs)}, True, ctx.graph.param_values,
                         ctx.graph.types)
        elems = [_op.take(sub[f"__scan_input_{k}"], i, axis=0) for k in range(len(seqs))]
        bound.update(zip(b_in[n_state:], elems))
        outs, captured = convert_subgraph(ctx.graph, body, bound, capture=True)
        return None, outs[:n_state], outs[n_state:], sub.captured + captured

    return build_loop(ctx, length, None, states0, names, body_fn)


@onnx_op("Scan", since=8)
def _scan_v8(inputs, attr, ctx):
    """Opset 8: a batch axis first (the body sees one batch entry), the scanned axis second, optional
    ``sequence_lens``. Each batch entry is its own loop (the batch size must be static); the results are stacked."""
    body = attr["body"]
    k_in = int(attr["num_scan_inputs"])
    seq_lens, rest = inputs[0], list(inputs[1:])
    n_state = len(rest) - k_in
    if n_state < 0 or k_in < 1 or len(body.input) != len(rest):
        raise ctx.error(f"num_scan_inputs={k_in} with {len(rest)} state and scan inputs and a body taking "
                        f"{len(body.input)}")
    states0, xs = rest[:n_state], rest[n_state:]
    dirs = list(attr.get("directions", [0] * k_in))
    if len(dirs) != k_in:
        raise ctx.error("directions must have one entry per scan input")
    shape = ctx.shape(xs[0])
    batch, steps = shape[0], shape[1]
    if seq_lens is not None:
        lens = np.asarray(ctx.require_value(seq_lens, "sequence_lens")).reshape(-1)
        if (lens != steps).any():
            raise ctx.unsupported(f"sequence_lens {lens.tolist()} shorter than the scanned axis ({steps})")
    finals, scans = [], []
    for b in range(batch):
        sb = [_op.take(s, _i64(b), axis=0) for s in states0]
        xb = [_op.take(x, _i64(b), axis=0) for x in xs]
        xb = [_op.reverse(x, 0) if int(d) else x for x, d in zip(xb, dirs)]
        f, sc = _scan_loop(ctx, body, sb, xb)
        finals.append(f)
        scans.append(sc)
    out = [_op.stack([f[k] for f in finals], 0) for k in range(n_state)]
    out += [_op.stack([sc[k] for sc in scans], 0) for k in range(len(scans[0]))]
    return out
