"""``te.scan``: a recurrence over the leading (time) axis (TVM's ScanOp).

    s_state = te.placeholder((m, n))
    s_init = te.compute((1, n), lambda _, i: X[0, i])
    s_update = te.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i])
    s_scan = te.scan(s_init, s_update, s_state, inputs=[X])

kiln lowers a scan as one opaque stage (a :class:`ScanOp`, an ExternOp underneath): rows ``[0, len(init))``
copy ``init``; then for each later ``t``, serially, every state's row ``t`` is computed from the update
bodies. The scan body is the computes between the state placeholders and the updates (the stages that read
the state): element-wise ones are substituted into their readers; reductions (a row sum of the previous
state, a matrix-vector product in an RNN cell, or an update that is itself a reduction) are computed row
``t`` at a time into a buffer of the scan, before the updates of the step, as TVM computes its scan body
per time step. Computes that do not read the state are ordinary stages before the scan (its inputs).
Not supported: reductions with several values (argmax-style tuples) in the body. The scan's own loops
cannot be scheduled.
"""
from __future__ import annotations

from ..error import KilnError, OpNotImplemented
from ..tir import expr as E
from ..tir import op as tir_op
from ..tir import stmt as S
from ..tir.buffer import decl_buffer
from ..tir.stmt_functor import StmtExprMutator, substitute
from .tensor import ComputeOp, ExternOp, PlaceholderOp, Tensor, collect_input_tensors


class ScanOp(ExternOp):
    """The operation of ``te.scan``: an ExternOp that also keeps TVM's ScanOp fields."""

    def __init__(self, name, tag, attrs, scan_axis, init, update, state_placeholder, inputs,
                 ext_inputs, in_buffers, out_buffers, body):
        super().__init__(name, tag, attrs, ext_inputs, in_buffers, out_buffers, body)
        self.scan_axis = scan_axis
        self.init = list(init)
        self.update = list(update)
        self.state_placeholder = list(state_placeholder)
        self.scan_inputs = list(inputs)


class _InlineBody(StmtExprMutator):
    """Substitute the element-wise scan-body computes into an expression, recursively. ``keep``: tensors
    read as they are (the states, materialized reductions, and computes that do not read the state)."""

    def __init__(self, keep, name):
        self.keep, self.name = keep, name

    def visit_ProducerLoad(self, node):
        idx = self._mutate_value(node.indices)
        t = node.producer
        op = t.op
        if t in self.keep or not isinstance(op, ComputeOp):
            return node if idx is node.indices else E.ProducerLoad(t, idx)
        body = substitute(op.body[t.value_index], {iv.var: i for iv, i in zip(op.axis, idx)})
        return self.visit(body)


class _ToBuffers(StmtExprMutator):
    def __init__(self, bufs):
        self.bufs = bufs

    def visit_ProducerLoad(self, node):
        idx = self._mutate_value(node.indices)
        return E.BufferLoad(self.bufs[node.producer], list(idx))


def _depends_on(t, states) -> bool:
    seen, stack = set(), [t]
    while stack:
        x = stack.pop()
        if x in states:
            return True
        if id(x.op) in seen:
            continue
        seen.add(id(x.op))
        stack.extend(x.op.input_tensors)
    return False


def _body_stages(update, states):
    """The computes between the states and the updates (those reading the state), producers first, and the
    tensors the scan reads from outside (everything else the updates reach)."""
    order, seen, reads_state = [], set(), {}

    def visit(t):
        if t in states or id(t.op) in seen:
            return
        seen.add(id(t.op))
        for x in t.op.input_tensors:
            visit(x)
        order.append(t.op)

    for u in update:
        for x in u.op.input_tensors:
            visit(x)
    for op in order:
        reads_state[id(op)] = isinstance(op, ComputeOp) and any(
            x in states or reads_state.get(id(x.op), False) for x in op.input_tensors)
    return [op for op in order if reads_state[id(op)]]


def _loop(var, lo, extent, body):
    return S.For(var, lo, extent, S.ForKind.SERIAL, body)


def _row_stmt(name, op, value_index, body, buf, t_var, label):
    """Row ``t`` of compute ``op`` (its first axis is time) into ``buf``: a store per element, or for a
    reduction the identity then one combine per point of the reduction domain."""
    sp = [E.Var(f"{name}.{label}_{d}", iv.var.dtype) for d, iv in enumerate(op.axis[1:], 1)]
    vmap = {op.axis[0].var: t_var}
    vmap.update({iv.var: v for iv, v in zip(op.axis[1:], sp)})
    body = substitute(body, vmap)
    idx = [t_var] + sp
    if isinstance(body, E.Reduce):
        if len(body.source) != 1:
            raise OpNotImplemented(f"te.scan {name}: the scan body computes '{op.name}', a reduction with "
                                   f"{len(body.source)} values; only single-value reductions are supported")
        comb = body.combiner
        first = body.init[0] if body.init else comb.identity_element[0]
        acc = E.BufferLoad(buf, idx)
        step = S.BufferStore(buf, substitute(comb.result[0], {comb.lhs[0]: acc, comb.rhs[0]: body.source[0]}), idx)
        if body.condition is not None and not (isinstance(body.condition, E.IntImm) and body.condition.value):
            step = S.IfThenElse(body.condition, step, None)
        for iv in reversed(body.axis):
            step = _loop(iv.var, iv.dom.min, iv.dom.extent, step)
        stmt = S.seq(S.BufferStore(buf, first, idx), step)
    else:
        stmt = S.BufferStore(buf, body, idx)
    for v, iv in reversed(list(zip(sp, op.axis[1:]))):
        stmt = _loop(v, iv.dom.min, iv.dom.extent, stmt)
    return stmt


def scan(init, update, state_placeholder, inputs=None, name: str = "scan", tag: str = "", attrs=None):
    """Tensors ``s`` with ``s[t] = init[t]`` for ``t < len(init)`` and ``s[t] = update[t]`` after, where
    ``update`` reads ``state_placeholder[t - 1]`` (or earlier rows) (``te.scan``). Lists give several
    states updated together; the result is then a list of tensors."""
    single = isinstance(init, Tensor)
    init = [init] if single else list(init)
    update = [update] if isinstance(update, Tensor) else list(update)
    states = [state_placeholder] if isinstance(state_placeholder, Tensor) else list(state_placeholder)
    if not (len(init) == len(update) == len(states)) or not init:
        raise KilnError(f"te.scan {name}: give as many init, update and state_placeholder tensors "
                        f"(got {len(init)}, {len(update)}, {len(states)})")
    for k, (ini, upd, st) in enumerate(zip(init, update, states)):
        if not isinstance(st.op, PlaceholderOp):
            raise KilnError(f"te.scan {name}: state_placeholder {k} must be a te.placeholder")
        if not (len(ini.shape) == len(upd.shape) == len(st.shape)) or len(st.shape) < 1:
            raise KilnError(f"te.scan {name}: init, update and state {k} must have the same number of dimensions "
                            "(the first is time)")
        if ini.dtype != st.dtype or upd.dtype != st.dtype:
            raise KilnError(f"te.scan {name}: init/update/state {k} dtypes differ "
                            f"({ini.dtype}, {upd.dtype}, {st.dtype})")
        if not isinstance(upd.op, ComputeOp):
            raise OpNotImplemented(f"te.scan {name}: update {k} must be a te.compute")
        if _depends_on(ini, set(states)):
            raise KilnError(f"te.scan {name}: init {k} must not read the scan state")
    state_set = set(states)
    T = states[0].shape[0]
    body_ops = [op for op in _body_stages(update, state_set) if op not in [u.op for u in update]]
    reductions = [op for op in body_ops if isinstance(op.body[0], E.Reduce)]
    for op in reductions:
        if len(op.axis) < 1 or (isinstance(op.axis[0].dom.extent, E.IntImm) and isinstance(T, E.IntImm)
                                and op.axis[0].dom.extent.value != T.value):
            raise KilnError(f"te.scan {name}: the scan-body reduction '{op.name}' must have the time axis "
                            f"(extent {T}) first")
    red_tensors = [op.output(i) for op in reductions for i in range(op.num_outputs)]
    body_tensors = {op.output(i) for op in body_ops for i in range(op.num_outputs)}
    # tensors kept as loads: states, materialized reductions, and everything not in the scan body
    keep = _KeepSet(state_set, set(red_tensors), body_tensors)
    inline = _InlineBody(keep, name)
    red_bodies = [(op, inline(op.body[0])) for op in reductions]
    bodies = [(upd, inline(upd.op.body[upd.value_index])) for upd in update]
    reads = []
    for t in list(init):
        if t not in reads:
            reads.append(t)
    for b in [b for _, b in red_bodies] + [b for _, b in bodies]:
        for t in collect_input_tensors([b]):
            if t not in state_set and t not in red_tensors and t not in reads:
                reads.append(t)
    in_bufs = [decl_buffer(t.shape, t.dtype, name=t.name) for t in reads]
    out_bufs = [decl_buffer(st.shape, st.dtype, name=f"{name}.v{k}" if len(states) > 1 else name)
                for k, st in enumerate(states)]
    red_bufs = [decl_buffer(t.shape, t.dtype, name=f"{name}.{t.op.name}") for t in red_tensors]
    bmap = dict(zip(reads, in_bufs))
    bmap.update(zip(states, out_bufs))
    bmap.update(zip(red_tensors, red_bufs))
    t_var = E.Var(f"{name}.t", T.dtype)
    # init rows
    stmts = []
    for k, (ini, ob) in enumerate(zip(init, out_bufs)):
        iv = [E.Var(f"{name}.i{d}", s.dtype) for d, s in enumerate(ini.shape)]
        store = S.BufferStore(ob, E.BufferLoad(bmap[ini], list(iv)), list(iv))
        stmts.append(_nest(iv, ini.shape, store))
    # each step: the scan body's reductions (row t), then the updates
    init_len = init[0].shape[0]
    to_buf = _ToBuffers(bmap)
    step = [to_buf(_row_stmt(name, op, 0, b, bmap[op.output(0)], t_var, f"r{k}"))
            for k, (op, b) in enumerate(red_bodies)]
    for k, ((upd, body), ob) in enumerate(zip(bodies, out_bufs)):
        step.append(to_buf(_row_stmt(name, upd.op, upd.value_index, body, ob, t_var, f"s{k}")))
    loop = S.For(t_var, init_len, tir_op.sub(T, init_len), S.ForKind.SERIAL, S.seq(*step))
    body = S.seq(*stmts, loop)
    for buf in red_bufs:  # scratch rows of the body's reductions live inside the scan
        body = S.BufferRealize(buf, [E.Range.from_min_extent(tir_op.const(0, d.dtype), d) for d in buf.shape],
                               tir_op.const(True), body)
    scan_axis = E.IterVar(E.Range.from_min_extent(init_len, tir_op.sub(T, init_len)), t_var, E.IterVar.Ordered)
    op = ScanOp(name, tag, attrs, scan_axis, init, update, states, list(inputs or []), reads, in_bufs, out_bufs,
                body)
    outs = op.outputs
    return outs[0] if single else outs


class _KeepSet:
    """Membership test for _InlineBody: a tensor stays a load unless it is an element-wise scan-body stage."""

    def __init__(self, states, reductions, body_tensors):
        self.states, self.reductions, self.body_tensors = states, reductions, body_tensors

    def __contains__(self, t):
        return t in self.states or t in self.reductions or t not in self.body_tensors


def _nest(vars_, extents, body):
    for v, ext in reversed(list(zip(vars_, extents))):
        body = S.For(v, tir_op.const(0, ext.dtype) if hasattr(ext, "dtype") else 0, ext, S.ForKind.SERIAL, body)
    return body
