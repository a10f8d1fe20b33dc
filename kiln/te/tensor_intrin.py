"""Tensor intrinsics: ``te.decl_tensor_intrin`` and the lowering of ``Stage.tensorize``.

A TensorIntrin describes a small computation (a TE op over placeholder inputs) and the TIR that
replaces it (usually a ``call_extern``/``call_packed`` to a micro-kernel), written over Buffers of the
op's inputs and outputs. ``s[C].tensorize(axis, intrin)`` replaces the loops from ``axis`` inward by
that TIR; each intrinsic buffer is bound to the region of the stage's tensor the replaced loops touch
(an AttrStmt ``buffer_bind_scope`` that :mod:`kiln.te.lower` resolves into a Buffer over the real
tensor's memory with the region's element offset and the tensor's strides).

kiln matches the stage to the intrinsic structurally simply: the replaced loops must cover the
trailing data-parallel axes and the trailing reduction axes of the stage with the intrinsic's extents,
the i-th tensor read by the stage must correspond to the intrinsic's i-th input, and each index must
differ from the intrinsic's by an offset independent of the replaced loops.
"""
from __future__ import annotations

from ..arith import Analyzer
from ..error import KilnError, LoweringError
from ..ir.node import Node
from ..tir import expr as E
from ..tir import op as tir_op
from ..tir import stmt as S
from ..tir.buffer import Buffer, decl_buffer
from ..tir.stmt_functor import post_order_visit, substitute
from .tensor import ComputeOp, Operation, collect_input_tensors


class TensorIntrin(Node):
    """The declaration made by ``te.decl_tensor_intrin``."""

    _is_var = True
    _fields = ()

    def __init__(self, name, op, inputs, buffers, scalar_params, body, reduce_init, reduce_update):
        self.name, self.op, self.inputs, self.buffers = name, op, inputs, buffers
        self.scalar_params = scalar_params
        self.body, self.reduce_init, self.reduce_update = body, reduce_init, reduce_update

    def __call__(self, *args, reduce_axis=None):
        """``intrin(A[i, 0:n], ..., scalars, reduce_axis=k)`` inside ``te.compute`` (TVM's TensorComputeOp)."""
        from .tensor_compute import make_intrin_call
        return make_intrin_call(self, args, reduce_axis)


def _as_stmt(x, what):
    if x is None:
        return None
    if isinstance(x, E.PrimExpr):
        return S.Evaluate(x)
    if isinstance(x, S.Stmt):
        return x
    raise KilnError(f"decl_tensor_intrin: {what} must be a TIR statement or expression, got {x!r}")


def decl_tensor_intrin(op, fcompute, name: str = "tensor_intrin", binds=None, scalar_params=None,
                       default_buffer_params=None) -> TensorIntrin:
    """Declare a tensor intrinsic computing ``op`` (``te.decl_tensor_intrin``).

    ``fcompute(ins, outs)`` gets Buffers for ``op``'s inputs and outputs and returns the replacing
    statement, or a triple ``(body, reduce_reset, reduce_update)`` for reductions tensorized in parts.
    """
    if not isinstance(op, ComputeOp):
        raise KilnError(f"decl_tensor_intrin {name}: op must be the operation of a te.compute, got {op!r}")
    scalar_params = list(scalar_params or [])
    for v in scalar_params:
        if not isinstance(v, E.Var):
            raise KilnError(f"decl_tensor_intrin {name}: scalar_params must be tir.Var (te.var), got {v!r}")
    binds = dict(binds or {})
    params = dict(default_buffer_params or {})
    inputs = collect_input_tensors(op.body)
    bufs = []
    for t in inputs + op.outputs:
        b = binds.get(t)
        if b is None:
            b = decl_buffer(t.shape, t.dtype, name=t.op.name, **params)
        if not isinstance(b, Buffer):
            raise KilnError(f"decl_tensor_intrin {name}: binds[{t.name}] must be a tir.Buffer")
        bufs.append(b)
    if scalar_params:
        res = fcompute(bufs[:len(inputs)], bufs[len(inputs):], scalar_params)
    else:
        res = fcompute(bufs[:len(inputs)], bufs[len(inputs):])
    if isinstance(res, (list, tuple)):
        if len(res) != 3:
            raise KilnError(f"decl_tensor_intrin {name}: fcompute returned {len(res)} values; give one statement "
                            "or (body, reduce_reset, reduce_update)")
        body, init, update = (_as_stmt(r, w) for r, w in zip(res, ("body", "reduce_reset", "reduce_update")))
    else:
        body, init, update = _as_stmt(res, "the body"), None, None
    return TensorIntrin(name, op, inputs, bufs, scalar_params, body, init, update)


class BindRegion(Node):
    """``buffer_bind_scope`` payload: intrinsic buffer -> region of a tensor starting at ``mins``."""

    _is_var = True
    _fields = ()

    def __init__(self, buffer, tensor, mins, extents=None):
        self.buffer, self.tensor, self.mins = buffer, tensor, list(mins)
        # the region's extents for the buffer's dimensions: symbolic shape variables of the buffer take them
        self.extents = list(extents) if extents is not None else None


def _uses(expr, vars_) -> bool:
    found = [False]
    ids = {id(v) for v in vars_}

    def f(n):
        if isinstance(n, E.Var) and id(n) in ids:
            found[0] = True
    post_order_visit(expr, f)
    return found[0]


def _loads(expr):
    out = []

    def f(n):
        if isinstance(n, E.ProducerLoad):
            out.append(n)
    post_order_visit(expr, f)
    return out


def _region_mins(stage_name, t_stage, stage_idx_list, intrin_idx, ivars, ana):
    """Per-dimension start of the region of ``t_stage`` read where the intrinsic reads ``intrin_idx``."""
    n_s, n_i = len(t_stage.shape), len(intrin_idx)
    if n_i > n_s:
        raise LoweringError(f"tensorize {stage_name}: tensor {t_stage.name} has fewer dimensions than the "
                            "intrinsic's")
    mins = []
    for stage_idx in stage_idx_list:
        cur = []
        for d in range(n_s):
            e = stage_idx[d]
            if d < n_s - n_i:
                if _uses(e, ivars):
                    raise LoweringError(f"tensorize {stage_name}: index {d} of {t_stage.name} varies inside the "
                                        "tensorized loops but the intrinsic has no such dimension")
                cur.append(ana.simplify(e))
            else:
                off = ana.simplify(tir_op.sub(e, intrin_idx[d - (n_s - n_i)]))
                if _uses(off, ivars):
                    raise LoweringError(f"tensorize {stage_name}: the access {t_stage.name}[{', '.join(map(str, stage_idx))}] "
                                        "does not match the intrinsic's access pattern")
                cur.append(off)
        mins.append(cur)
    return mins[0]


def make_tensorize_stmt(stage, dom_map, pos, intrin, nest_fn, if_fn, merge_nest, mp):
    """The statement of ``stage`` whose loops from leaf ``pos`` inward are replaced by ``intrin``."""
    op, iop = stage.op, intrin.op
    leaves = stage.leaf_iter_vars
    ana = Analyzer()
    for iv in leaves[pos:]:
        d = dom_map[iv]
        ana.bind(iv.var, d)
    # loops outside the tensorized region
    main_vmap = {}
    main_nest = nest_fn(stage, dom_map, 0, False, set(), main_vmap)
    # root axis values at the start of the region: inner leaves at their minimum
    start = {iv: main_vmap[iv] for iv in leaves[:pos]}
    for iv in leaves[pos:]:
        start[iv] = dom_map[iv].min
    mp.pass_up_index(stage, dom_map, start)
    n_dp, n_red = len(iop.axis), len(iop.reduce_axis)
    if n_dp > len(op.axis) or n_red > len(op.reduce_axis):
        raise LoweringError(f"tensorize {op.name}: the intrinsic has more axes than the stage")
    s_dp = op.axis[len(op.axis) - n_dp:]
    s_red = op.reduce_axis[len(op.reduce_axis) - n_red:]
    ivars = [iv.var for iv in iop.axis] + [iv.var for iv in iop.reduce_axis]
    # every replaced loop must belong to those axes, with the intrinsic's extents
    inner_touch = {iv: 1 for iv in leaves[pos:]}
    mp.pass_up_bitmask_or(stage, inner_touch, allow_missing=True)
    for s_iv, i_iv in zip(list(s_dp) + list(s_red), list(iop.axis) + list(iop.reduce_axis)):
        if s_iv not in inner_touch:
            raise LoweringError(f"tensorize {op.name}: axis '{s_iv.var.name}' of the stage is not inside the "
                                f"tensorized loops but matches the intrinsic's axis '{i_iv.var.name}'")
    for iv in op.axis[:len(op.axis) - n_dp] + op.reduce_axis[:len(op.reduce_axis) - n_red]:
        if iv in inner_touch:
            raise LoweringError(f"tensorize {op.name}: the tensorized loops cover axis '{iv.var.name}', which the "
                                "intrinsic does not have")
    vsub = {iv.var: start[iv] for iv in op.axis + op.reduce_axis if iv in start}
    for s_iv, i_iv in zip(list(s_dp) + list(s_red), list(iop.axis) + list(iop.reduce_axis)):
        vsub[s_iv.var] = tir_op.add(start[s_iv], i_iv.var)
        if not ana.can_prove_equal(_tile_extent(stage, dom_map, s_iv, leaves[pos:], mp), i_iv.dom.extent):
            raise LoweringError(f"tensorize {op.name}: the tensorized loops cover a different extent of axis "
                                f"'{s_iv.var.name}' than the intrinsic's {i_iv.dom.extent}")
    # inputs: i-th tensor read by the stage <-> i-th intrinsic input
    s_inputs = collect_input_tensors(op.body)
    if len(s_inputs) != len(intrin.inputs):
        raise LoweringError(f"tensorize {op.name}: the stage reads {len(s_inputs)} tensors, the intrinsic "
                            f"{len(intrin.inputs)}")
    s_loads = _loads(op.body[0].source[0] if isinstance(op.body[0], E.Reduce) else op.body[0])
    i_loads = _loads(iop.body[0].source[0] if isinstance(iop.body[0], E.Reduce) else iop.body[0])
    binds = []
    for k, (ts, ti) in enumerate(zip(s_inputs, intrin.inputs)):
        sl = [[substitute(i, vsub) for i in l.indices] for l in s_loads if l.producer == ts]
        il = [l.indices for l in i_loads if l.producer == ti]
        if not sl or not il:
            raise LoweringError(f"tensorize {op.name}: cannot match input {ts.name} to the intrinsic's {ti.name}")
        binds.append(BindRegion(intrin.buffers[k], ts, _region_mins(op.name, ts, sl, il[0], ivars, ana)))
    n_in = len(intrin.inputs)
    out_idx = [tir_op.add(start[iv], 0) if iv not in s_dp else None for iv in op.axis]
    for k, t in enumerate(op.outputs):
        idx = [vsub[iv.var] for iv in op.axis]
        mins = _region_mins(op.name, t, [idx], [iv.var for iv in iop.axis], ivars, ana)
        binds.append(BindRegion(intrin.buffers[n_in + k], t, mins))
    del out_idx

    scalar_map = _match_scalar_params(op, iop, intrin.scalar_params, vsub, ivars)
    if scalar_map:
        intrin = _with_scalars(intrin, scalar_map)

    def bind(stmt, which):
        for b in reversed(which):
            stmt = S.AttrStmt(b, "buffer_bind_scope", tir_op.const(0, "int32"), stmt)
        return stmt

    raw_preds = mp.make_bound_check(stage, dom_map, main_vmap, False, set())
    inner_vars = [iv.var for iv in leaves[pos:]]
    for p in raw_preds:
        if _uses(p, inner_vars):
            raise LoweringError(f"tensorize {op.name}: the tensorized loops need the bound check `{p}`: a tile at the "
                                "end of an axis is partial and the intrinsic would run past the tensor; split by a "
                                "factor that divides the axis (or pad the tensor to a multiple of the tile)")
    preds = [tir_op.likely(p) for p in raw_preds]
    reduces_outside = [iv for iv in leaves[:pos] if iv.iter_type == E.IterVar.CommReduce or
                       _touches_reduce(stage, iv, mp)]
    from .schedule_ops import substitute_ivs
    if not reduces_outside:
        body = bind(intrin.body, binds)
        nest = main_nest[:pos + 1] + [if_fn(preds)]
        return substitute_ivs(merge_nest(nest, body), main_vmap)
    if intrin.reduce_update is None:
        raise LoweringError(f"tensorize {op.name}: reduction loops stay outside the tensorized region, so the "
                            "intrinsic must give (body, reduce_reset, reduce_update)")
    first_red = min(leaves.index(iv) for iv in reduces_outside)
    if intrin.reduce_init is None:
        # no reset (TVM: (body, None, update)): the body runs at the first step of the outer reduction loops, the
        # update at the others
        if intrin.body is None:
            raise LoweringError(f"tensorize {op.name}: the intrinsic gives neither a reset nor a body")
        first = [tir_op.equal(iv.var, dom_map[iv].min) for iv in reduces_outside]
        cond = first[0]
        for c in first[1:]:
            cond = tir_op.logical_and(cond, c)
        step = S.IfThenElse(cond, bind(intrin.body, binds), bind(intrin.reduce_update, binds))
        return substitute_ivs(merge_nest(main_nest[:pos + 1] + [if_fn(preds)], step), main_vmap)
    skip = set()
    update_state = {iv: 2 for iv in op.reduce_axis}
    for iv in op.axis:
        update_state[iv] = 1
    mp.pass_down_bitmask_or(stage, update_state)
    skip = {iv for iv, f in update_state.items() if f == 2}
    init_vmap = {iv: main_vmap[iv] for iv in leaves[:first_red]}
    init_nest = nest_fn(stage, dom_map, first_red, True, skip, init_vmap)
    out_binds = binds[n_in:]
    init_start = dict(init_vmap)
    for iv in leaves[first_red:]:
        if iv not in init_start:
            init_start[iv] = dom_map[iv].min
    init_start = {iv: v for iv, v in init_start.items() if iv in leaves}
    for iv in leaves[:first_red]:
        init_start[iv] = main_vmap[iv]
    mp.pass_up_index(stage, dom_map, init_start, allow_missing=True)
    # the regions' mins are written over the main nest's leaf variables: inside the init nest, a leaf from the
    # first reduction inward is the init loop's variable (data-parallel) or its minimum (reduction)
    leaf_sub = {}
    for iv in leaves[first_red:]:
        if iv in skip or iv.iter_type == E.IterVar.CommReduce:
            leaf_sub[iv.var] = dom_map[iv].min
        elif iv in init_vmap and init_vmap[iv] is not iv.var:
            leaf_sub[iv.var] = init_vmap[iv]
    ibinds = []
    for b in out_binds:
        ivsub = {iv.var: init_start.get(iv, iv.var) for iv in op.axis}
        ibinds.append(BindRegion(b.buffer, b.tensor, [substitute(substitute(m, ivsub), leaf_sub) for m in b.mins]))
    init_levels = [lvl for i, lvl in enumerate(init_nest[:pos + 1]) if i > first_red]
    init = merge_nest(init_levels, bind(intrin.reduce_init, ibinds))
    init = substitute_ivs(init, init_vmap)
    update = merge_nest(main_nest[first_red + 1:pos + 1] + [if_fn(preds)], bind(intrin.reduce_update, binds))
    body = merge_nest(main_nest[:first_red + 1], S.seq(init, update))
    return substitute_ivs(body, main_vmap)


def _body_expr(op):
    b = op.body[0]
    return b.source[0] if isinstance(b, E.Reduce) else b


def _match_scalar_params(op, iop, params, vsub, ivars) -> dict:
    """Bind each scalar parameter of the intrinsic to the expression the stage has at its place (a walk over
    both bodies in step); the stage's expression, at the start of the tensorized region, must not vary inside it."""
    if not params:
        return {}
    ids = {id(v): v for v in params}
    found: dict = {}
    stack = [(_body_expr(iop), _body_expr(op))]
    while stack:
        a, b = stack.pop()
        if isinstance(a, E.Var) and id(a) in ids:
            val = Analyzer().simplify(substitute(b, vsub))
            if _uses(val, ivars):
                raise LoweringError(f"tensorize {op.name}: the stage's value `{b}` for the intrinsic's scalar "
                                    f"parameter {a.name} varies inside the tensorized loops")
            prev = found.get(id(a))
            if prev is not None and not Analyzer().can_prove_equal(prev, val):
                raise LoweringError(f"tensorize {op.name}: scalar parameter {a.name} stands for both `{prev}` and "
                                    f"`{val}` in the stage")
            found[id(a)] = val
            continue
        if isinstance(a, (E.ProducerLoad, E.Var, E.IntImm, E.FloatImm, E.StringImm)):
            continue
        if type(a) is not type(b):
            raise LoweringError(f"tensorize {op.name}: cannot bind the intrinsic's scalar parameters: its body has "
                                f"`{a}` where the stage has `{b}`")
        for f in a._fields:
            x, y = getattr(a, f, None), getattr(b, f, None)
            if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)) and len(x) == len(y):
                stack.extend((u, w) for u, w in zip(x, y) if isinstance(u, E.PrimExpr))
            elif isinstance(x, E.PrimExpr) and isinstance(y, E.PrimExpr):
                stack.append((x, y))
    missing = [v.name for v in params if id(v) not in found]
    if missing:
        raise LoweringError(f"tensorize {op.name}: the intrinsic's scalar parameters {missing} do not appear in its "
                            "compute body, so the stage gives them no value")
    return {ids[k]: v for k, v in found.items()}


def _with_scalars(intrin, smap):
    """A copy of ``intrin`` whose statements use the stage's values for its scalar parameters."""
    sub = (lambda st: None if st is None else substitute(st, smap))
    return TensorIntrin(intrin.name, intrin.op, intrin.inputs, intrin.buffers, [], sub(intrin.body),
                        sub(intrin.reduce_init), sub(intrin.reduce_update))


def _touches_reduce(stage, iv, mp) -> bool:
    state = {iv: 1}
    mp.pass_up_bitmask_or(stage, state, allow_missing=True)
    return any(x in state for x in stage.op.reduce_axis)


def _tile_extent(stage, dom_map, root_iv, inner_leaves, mp):
    """The extent of ``root_iv`` covered when only ``inner_leaves`` vary (the others fixed)."""
    val = {iv: dom_map[iv].min for iv in stage.leaf_iter_vars}
    lo = dict(val)
    hi = dict(val)
    for iv in inner_leaves:
        hi[iv] = tir_op.add(dom_map[iv].min, tir_op.sub(dom_map[iv].extent, 1))
    mp.pass_up_index(stage, dom_map, lo, allow_missing=True)
    mp.pass_up_index(stage, dom_map, hi, allow_missing=True)
    return Analyzer().simplify(tir_op.add(tir_op.sub(hi[root_iv], lo[root_iv]), 1))


__all__ = ["TensorIntrin", "decl_tensor_intrin", "BindRegion", "make_tensorize_stmt", "Operation"]
