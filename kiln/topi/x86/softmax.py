"""Softmax on x86: a compute whose row reductions are vectorizable, and a row-local schedule that also runs the
elementwise epilogue FuseOps attaches to it (``nn.softmax`` is ``kOutEWiseFusable`` as in TVM v0.13).

Compute (``softmax_x86``; float32, last axis, a static row length ``n`` that the SIMD width ``L`` divides): the
row maximum and the exponentials' sum are taken in three steps: ``L * U`` partial results per row (``U``
independent vector accumulators, :func:`kiln.topi.x86.injective.accumulator_count`: 4 on AVX2 and 8 on
AVX-512 when they divide the row's vectors, two vectors each at least; partial ``p`` takes the elements ``p, p + LU, ...``), the ``U``
accumulators combined lane-wise into one vector, and its ``L`` lanes. The C compiler keeps a scalar
reduction strictly ordered (no -ffast-math), so the one-step form was a chain of ``n`` dependent scalar adds,
and one vector accumulator a chain of ``n / L`` dependent vector adds. The normalization multiplies by the reciprocal of the sum, computed once per row (a vector division
per 8 outputs cost more than the exponentials). The exponential is :func:`kiln.topi.fast_exp_expr`. Other rows
(odd lengths, another axis, symbolic shapes) use :func:`kiln.topi.nn.fast_softmax`.

Schedule (``schedule_softmax``): for a softmax along the last axis the output's row axes are fused into the
parallel loop and every stage of a row (maximum, exponentials, sum, and the fused epilogue: the normalization is
inlined into it) runs inside it, so a row is read from memory once; row-long loops are vectorized.
"""
from __future__ import annotations

from ... import te
from ...tir import expr as E
from ...tir import op as T
from ...te.schedule import kInline, kInlinedAlready
from ..generic.default import inline_injective
from ..math import fast_exp_expr
from ..nn.softmax import fast_softmax
from ..utils import get_const_tuple, normalize_axis
from .injective import accumulator_count
from .utils import as_list, simd_width

# stage names (tests and the schedule find the stages by them)
MAX_LANES, MAX, EXP, SUM_LANES, SUM, RECIP, NORM = ("T_softmax_maxelem_lanes", "T_softmax_maxelem", "T_softmax_exp",
                                                     "T_softmax_expsum_lanes", "T_softmax_expsum",
                                                     "T_softmax_recip", "T_softmax_norm")
# several accumulators (a static row): the accumulators combined lane-wise into one vector
MAX_ACC, SUM_ACC = "T_softmax_maxelem_acc", "T_softmax_expsum_acc"
# a symbolic row: the whole vectors' partials reduced (``*_main``), the last ``n % L`` elements (``*_tail``)
MAX_MAIN, MAX_TAIL, SUM_MAIN, SUM_TAIL = ("T_softmax_maxelem_main", "T_softmax_maxelem_tail",
                                          "T_softmax_expsum_main", "T_softmax_expsum_tail")


def lane_split_applies(shape, axis: int, dtype: str, lanes: int) -> bool:
    """Whether :func:`softmax_x86` uses the lane-split reductions for this input (a static row that the
    lanes divide, or a symbolic row length: see :func:`_softmax_symbolic_row`)."""
    if dtype != "float32" or not shape or axis != len(shape) - 1:
        return False
    n = shape[axis]
    if not isinstance(n, int):
        return True
    return n >= lanes and n % lanes == 0


def _row_max_sum(rows, n, lanes, load, reducer, init, names):
    """The reduction of one row of symbolic length ``n`` (``load(i, k)`` reads element ``k`` of row ``i``):
    ``L`` vector partials over the whole vectors, the partials reduced, the last ``n % L`` elements reduced,
    both combined (order: whole vectors first, as the static lane split; then the tail)."""
    lanes_name, main_name, tail_name, name = names
    nv = T.floordiv(n, lanes)
    ko = te.reduce_axis((0, nv), name="ko")
    part = te.compute(rows + [lanes], lambda *i: reducer(load(i[:-1], ko * lanes + i[-1]), axis=ko), name=lanes_name)
    lr = te.reduce_axis((0, lanes), name="lr")
    main = te.compute(rows, lambda *i: reducer(part[tuple(i) + (lr,)], axis=lr), name=main_name)
    kt = te.reduce_axis((0, n - nv * lanes), name="kt")
    tail = te.compute(rows, lambda *i: reducer(load(i, nv * lanes + kt), axis=kt), name=tail_name)
    if reducer is T.max:
        return te.compute(rows, lambda *i: T.max(main(*i), tail(*i)), name=name)
    return te.compute(rows, lambda *i: main(*i) + tail(*i), name=name)


def _static_row_reduce(rows, n, lanes, acc, load, reducer, names, tag):
    """The reduction of a static row of ``n`` elements (``lanes * acc`` divides it; ``load(i, k)`` reads element
    ``k`` of row ``i``) in three steps: ``acc`` independent vector accumulators of ``lanes`` partials each (the
    element ``k`` goes to partial ``k % (lanes * acc)``), the accumulators combined lane-wise into one vector
    (skipped when ``acc`` is 1), and its ``lanes`` reduced. Several accumulators let consecutive vector steps
    overlap instead of each waiting for the previous add or max."""
    lanes_name, acc_name, name = names
    width = lanes * acc
    ko = te.reduce_axis((0, n // width), name="ko" + tag)
    part = te.compute(rows + [width], lambda *i: reducer(load(i[:-1], ko * width + i[-1]), axis=ko),
                      name=lanes_name)
    if acc > 1:
        u = te.reduce_axis((0, acc), name="u" + tag)
        part = te.compute(rows + [lanes], lambda *i: reducer(part[tuple(i[:-1]) + (u * lanes + i[-1],)], axis=u),
                          name=acc_name)
    lr = te.reduce_axis((0, lanes), name="l" + tag)
    return te.compute(rows, lambda *i: reducer(part[tuple(i) + (lr,)], axis=lr), name=name)


def _softmax_symbolic_row(x, shape):
    """Softmax along a symbolic last axis (a VM kernel over an unknown sequence): the lane-split reductions of
    :func:`softmax_x86` over the whole vectors of the row plus a scalar tail, and the reciprocal of the sum
    (before: a scalar max and sum over the row and a vector division per 8 outputs, 4x the static kernel)."""
    lanes = simd_width(x.dtype)
    n = x.shape[-1]
    rows = list(x.shape[:-1])
    mx = _row_max_sum(rows, n, lanes, lambda i, k: x[tuple(i) + (k,)], T.max, None,
                      (MAX_LANES, MAX_MAIN, MAX_TAIL, MAX))
    ex = te.compute(x.shape, lambda *i: fast_exp_expr(x(*i) - mx(*i[:-1])), name=EXP)
    sm = _row_max_sum(rows, n, lanes, lambda i, k: ex[tuple(i) + (k,)], T.sum, None,
                      (SUM_LANES, SUM_MAIN, SUM_TAIL, SUM))
    rc = te.compute(rows, lambda *i: T.const(1.0, x.dtype) / sm(*i), name=RECIP)
    return te.compute(x.shape, lambda *i: ex(*i) * rc(*i[:-1]), name=NORM, tag="softmax_output",
                      attrs={"axis": len(shape) - 1})


def softmax_x86(x, axis: int = -1):
    """Softmax of float32 ``x`` along ``axis`` with lane-split row reductions (see the module docstring);
    falls back to :func:`kiln.topi.nn.fast_softmax` where they do not apply."""
    shape = get_const_tuple(x.shape)
    axis = normalize_axis(axis, len(shape), "softmax axis")
    lanes = simd_width(x.dtype)
    if not lane_split_applies(shape, axis, x.dtype, lanes):
        return fast_softmax(x, axis)
    if not isinstance(shape[-1], int):
        return _softmax_symbolic_row(x, shape)
    n = shape[-1]
    rows = list(shape[:-1])
    # at least two vectors per accumulator: a row of two or three vectors (16 or 24 floats) keeps one, the
    # combining stage cost more there than the chain it shortens (64x16: 2.7 us against 2.8)
    acc = accumulator_count(n // lanes, min_steps=2)
    mx = _static_row_reduce(rows, n, lanes, acc, lambda i, k: x[tuple(i) + (k,)], T.max,
                            (MAX_LANES, MAX_ACC, MAX), "1")
    ex = te.compute(shape, lambda *i: fast_exp_expr(x(*i) - mx(*i[:-1])), name=EXP)
    sm = _static_row_reduce(rows, n, lanes, acc, lambda i, k: ex[tuple(i) + (k,)], T.sum,
                            (SUM_LANES, SUM_ACC, SUM), "2")
    rc = te.compute(rows, lambda *i: T.const(1.0, x.dtype) / sm(*i), name=RECIP)
    return te.compute(shape, lambda *i: ex(*i) * rc(*i[:-1]), name=NORM, tag="softmax_output",
                      attrs={"axis": axis})


def _const(ext):
    return int(ext.value) if isinstance(ext, E.IntImm) else None


def _find_softmax(outs):
    """The ``softmax_output`` op under the (fused) output, or None."""
    seen, stack = set(), [o.op for o in outs]
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        if getattr(op, "tag", "") == "softmax_output":
            return op
        stack.extend(t.op for t in getattr(op, "input_tensors", []) or [])
    return None


def _row_stages(norm):
    """The softmax's stages below ``norm`` by name (both computes' names)."""
    found, seen, stack = {}, set(), list(norm.input_tensors)
    while stack:
        t = stack.pop()
        op = t.op
        if op in seen or not hasattr(op, "axis") or not op.input_tensors:
            continue
        seen.add(op)
        if op.name.startswith("T_softmax_") or op.name == RECIP:
            found[op.name] = op
            stack.extend(op.input_tensors)
    return found


def _vectorize_last(s, op, lanes: int, keep_outer_reduction: bool = False) -> None:
    """Split the last data-parallel axis of ``op`` by ``lanes`` and vectorize the inner part (reduction axes
    moved outside it); a last axis of exactly ``lanes`` is vectorized whole."""
    axis = s[op].op.axis[-1]
    n = _const(axis.dom.extent)
    if n is None or n % lanes:
        return
    red = list(getattr(s[op].op, "reduce_axis", []) or [])
    if n == lanes:
        if red:
            s[op].reorder(*red, axis)
        s[op].vectorize(axis)
        return
    outer, inner = s[op].split(axis, factor=lanes)
    if red:
        s[op].reorder(outer, *red, inner)
    s[op].vectorize(inner)


def _vectorize_partials(s, op, lanes: int) -> None:
    """Loops of a row's partial results (last axis ``lanes * U``): the reduction outside, the ``U`` vector
    accumulators unrolled inside it, each one's ``lanes`` vectorized (see
    :func:`kiln.topi.x86.injective.schedule_lane_partials`); a last axis that is not whole vectors is left."""
    axis = s[op].op.axis[-1]
    n = _const(axis.dom.extent)
    if n is None or n % lanes or n == lanes:
        _vectorize_last(s, op, lanes)
        return
    red = list(s[op].op.reduce_axis)
    acc, lane = s[op].split(axis, factor=lanes)
    s[op].reorder(*red, acc, lane)
    s[op].unroll(acc)
    s[op].vectorize(lane)


def schedule_softmax(outs):
    """Row-local schedule of softmax (and a fused elementwise epilogue) along the last axis; other axes get
    every stage scheduled on its own (see :func:`kiln.topi.x86.injective.schedule_stage_loops`)."""
    from .injective import _schedule_all_stages
    outs = as_list(outs)
    norm = _find_softmax(outs)
    out = outs[0].op
    if len(outs) != 1 or norm is None or len(norm.axis) < 2:
        return _schedule_all_stages(outs)
    ndim = len(norm.axis)
    axis = int(norm.attrs["axis"]) if "axis" in (norm.attrs or {}) else -1
    if axis % ndim != ndim - 1 or len(out.axis) != ndim or \
            [_const(a.dom.extent) for a in out.axis] != [_const(a.dom.extent) for a in norm.axis]:
        return _schedule_all_stages(outs)
    stages = _row_stages(norm)
    if MAX not in stages or EXP not in stages or SUM not in stages:
        return _schedule_all_stages(outs)
    s = te.create_schedule([out])
    inline_injective(s, outs)
    if norm is not out:
        s[norm].compute_inline()
    stage = s[out]
    *rows, col = list(stage.op.axis)
    row = rows[0] if len(rows) == 1 else stage.fuse(*rows)
    stage.parallel(row)
    lanes = simd_width(norm.output(0).dtype)
    for name in (MAX_LANES, MAX_ACC, MAX_MAIN, MAX_TAIL, MAX, EXP, SUM_LANES, SUM_ACC, SUM_MAIN, SUM_TAIL, SUM,
                 RECIP):
        op = stages.get(name)
        if op is not None and s[op].attach_type not in (kInline, kInlinedAlready):
            s[op].compute_at(stage, row)
    n = _const(col.dom.extent)
    if n is None or n % lanes == 0:
        # a symbolic row length (a VM kernel) is split too: LoopPartition peels the guarded last vector
        _, vi = stage.split(col, factor=lanes)
        stage.vectorize(vi)
        if n is None:
            ex = stages[EXP]
            _, evi = s[ex].split(s[ex].op.axis[-1], factor=lanes)
            s[ex].vectorize(evi)
        else:
            _vectorize_last(s, stages[EXP], lanes)
        for name in (MAX_LANES, SUM_LANES):
            if name in stages:
                _vectorize_partials(s, stages[name], lanes)
        for name in (MAX_ACC, SUM_ACC):
            if name in stages:
                _vectorize_last(s, stages[name], lanes)
    return s
