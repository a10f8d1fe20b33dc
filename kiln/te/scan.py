"""``te.scan``: a recurrence over the leading (time) axis (TVM's ScanOp).

    s_state = te.placeholder((m, n))
    s_init = te.compute((1, n), lambda _, i: X[0, i])
    s_update = te.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i])
    s_scan = te.scan(s_init, s_update, s_state, inputs=[X])

kiln lowers a scan as one opaque stage (a :class:`ScanOp`, an ExternOp underneath): rows ``[0, len(init))``
copy ``init``; then for each later ``t``, serially, every state's row ``t`` is computed from the update
bodies. Element-wise computes between the state placeholders and the updates (TVM's multi-stage scan) are
substituted into the update bodies, so they are evaluated per time step as TVM's scan body would; a
reduction there is not supported (a clear error says so). The scan's own loops cannot be scheduled.
"""
from __future__ import annotations

from ..error import KilnError, OpNotImplemented
from ..tir import expr as E
from ..tir import op as tir_op
from ..tir import stmt as S
from ..tir.buffer import decl_buffer
from ..tir.stmt_functor import StmtExprMutator, substitute
from .tensor import ComputeOp, ExternOp, PlaceholderOp, Tensor


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
    """Substitute element-wise computes (other than stop tensors) into an expression, recursively."""

    def __init__(self, stop, name):
        self.stop, self.name = stop, name

    def visit_ProducerLoad(self, node):
        idx = self._mutate_value(node.indices)
        t = node.producer
        op = t.op
        if t in self.stop or not isinstance(op, ComputeOp):
            return node if idx is node.indices else E.ProducerLoad(t, idx)
        if isinstance(op.body[0], E.Reduce):
            raise OpNotImplemented(
                f"te.scan {self.name}: the update reads '{op.name}', a reduction computed from the scan state; "
                "kiln's scan evaluates the scan body per time step by substitution, which needs element-wise "
                "stages (compute the reduction into the update itself or outside the scan)")
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
        if not isinstance(upd.op, ComputeOp) or isinstance(upd.op.body[0], E.Reduce):
            raise OpNotImplemented(f"te.scan {name}: update {k} must be an element-wise te.compute")
        if _depends_on(ini, set(states)):
            raise KilnError(f"te.scan {name}: init {k} must not read the scan state")
    state_set = set(states)
    # update bodies with the scan body's element-wise stages substituted
    bodies = []
    for upd in update:
        b = upd.op.body[upd.value_index]
        bodies.append((upd, _InlineBody(state_set, name)(b)))
    reads = []
    for t in list(init):
        if t not in reads:
            reads.append(t)
    from .tensor import collect_input_tensors
    for _, b in bodies:
        for t in collect_input_tensors([b]):
            if t not in state_set and t not in reads:
                reads.append(t)
    in_bufs = [decl_buffer(t.shape, t.dtype, name=t.name) for t in reads]
    out_bufs = [decl_buffer(st.shape, st.dtype, name=f"{name}.v{k}" if len(states) > 1 else name)
                for k, st in enumerate(states)]
    bmap = dict(zip(reads, in_bufs))
    bmap.update(zip(states, out_bufs))
    T = states[0].shape[0]
    t_var = E.Var(f"{name}.t", T.dtype)
    # init rows
    stmts = []
    for k, (ini, ob) in enumerate(zip(init, out_bufs)):
        iv = [E.Var(f"{name}.i{d}", s.dtype) for d, s in enumerate(ini.shape)]
        store = S.BufferStore(ob, E.BufferLoad(bmap[ini], list(iv)), list(iv))
        stmts.append(_nest(iv, ini.shape, store))
    # updates, row by row after the init rows
    init_len = init[0].shape[0]
    step = []
    to_buf = _ToBuffers(bmap)
    for k, ((upd, body), ob) in enumerate(zip(bodies, out_bufs)):
        sp = [E.Var(f"{name}.s{k}_{d}", iv.var.dtype) for d, iv in enumerate(upd.op.axis[1:], 1)]
        vmap = {upd.op.axis[0].var: t_var}
        vmap.update({iv.var: v for iv, v in zip(upd.op.axis[1:], sp)})
        value = to_buf(substitute(body, vmap))
        store = S.BufferStore(ob, value, [t_var] + sp)
        step.append(_nest(sp, [iv.dom.extent for iv in upd.op.axis[1:]], store))
    loop = S.For(t_var, init_len, tir_op.sub(T, init_len), S.ForKind.SERIAL, S.seq(*step))
    body = S.seq(*stmts, loop)
    scan_axis = E.IterVar(E.Range.from_min_extent(init_len, tir_op.sub(T, init_len)), t_var, E.IterVar.Ordered)
    op = ScanOp(name, tag, attrs, scan_axis, init, update, states, list(inputs or []), reads, in_bufs, out_bufs,
                body)
    outs = op.outputs
    return outs[0] if single else outs


def _nest(vars_, extents, body):
    for v, ext in reversed(list(zip(vars_, extents))):
        body = S.For(v, tir_op.const(0, ext.dtype) if hasattr(ext, "dtype") else 0, ext, S.ForKind.SERIAL, body)
    return body
