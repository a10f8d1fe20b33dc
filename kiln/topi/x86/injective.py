"""Injective, elementwise, pooling and reduction schedules for x86: fused, vectorized, parallel.

Every non-inlined stage gets its leading data-parallel axes fused into one parallel loop (enough chunks for the
cores) and its innermost data-parallel axis split by the SIMD width and vectorized when the width divides it
(reduction axes are moved outside that vector axis, so e.g. a pool over NCHW8c reduces 8 channels at once, and
several output vectors share each reduction step: independent accumulators, :func:`accumulator_count`).
Float reductions along a contiguous axis are split into vector lanes (:func:`lane_split_reduction`). A plain copy
whose input and output innermost axes differ (NCHW <-> NCHW16c) is left to gcc's vectorizer as an interleave group
instead (:func:`_transposing_copy`): whole-vector loads and stores and permutes, where the output-axis vector gathered.
One that transposes two long axes (a 300 x 300 transpose, NCHW -> NHWC with 64 channels, attention's key transpose,
also through inlined reshapes and a scale) is tiled, each tile copied to a local buffer and transposed from there in
the same form (:func:`_tiled_transpose`). An elementwise kernel on one input read through a layout change and a
pad along the input's rows (the int8 input quantize + pad + NCHW -> NCHW4c of a QDQ CNN) computes each row in the
input's layout in whole vectors first, then copies it out in that transposing form (:func:`_padded_relayout`).
"""
from __future__ import annotations

from ... import te
from ...runtime.dtype import parse_dtype
from ...tir import expr as E
from ...tir.stmt_functor import post_order_visit
from ...te.schedule import kInline, kInlinedAlready, kScope
from .. import generic
from ..generic.default import PARALLEL_MIN_ELEMENTS, inline_injective
from .utils import as_list, num_cores, simd_width, size_hint, vector_registers


def _const_extent(iv):
    ext = iv.dom.extent
    return int(ext.value) if isinstance(ext, E.IntImm) else None


def fuse_short_inner(stage, axes, extents, lanes: int):
    """An innermost axis shorter than a vector (the ``4c`` of NCHW4c) is fused with the axes outside it until
    the fused extent is a multiple of ``lanes``, so the stage still vectorizes (the fused index is contiguous in
    the output). Returns the new (axes, extents); unchanged when no such suffix exists."""
    prod = 1
    for k in range(len(axes) - 1, -1, -1):
        prod *= extents[k]
        if prod % lanes == 0:
            if k == len(axes) - 1:
                return axes, extents
            fused = stage.fuse(*axes[k:])
            return axes[:k] + [fused], extents[:k] + [prod]
    return axes, extents


def short_inner_lanes(extents, lanes: int) -> int:
    """The vector width for an innermost axis shorter than a vector: ``lanes``, or a narrower power of two (at least
    8 lanes, a 256-bit float32 vector, and the axis's extent) when that makes the axis and the one outside it a
    whole number of vectors and ``lanes`` would not. Fusing a third axis in can make an inlined input's index
    non-affine in the lanes: each lane divides it by the middle extent (NCHW4c padded to 230 wide: 230 x 4 = 920
    is 57.5 zmm vectors, so the AVX-512 input quantize of an int8 ResNet divided and took the remainder by 230
    lane by lane, 16 times per vector; 920 is 115 ymm vectors). Never below 8 lanes: an elementwise stage reads
    the fused index as is (affine), and halving an AVX2 vector would halve its throughput."""
    if len(extents) < 2 or (extents[-1] * extents[-2]) % lanes == 0:
        return lanes
    w = lanes // 2
    while w >= max(8, extents[-1]):
        if (extents[-1] * extents[-2]) % w == 0:
            return w
        w //= 2
    return lanes


def _uses(e, var) -> bool:
    hit = [False]
    post_order_visit(e, lambda n: hit.__setitem__(0, hit[0] or (isinstance(n, E.Var) and n is var)))
    return hit[0]


def _lane_affine(op, var) -> bool:
    """Whether vectorizing ``op`` along ``var`` (a symbolic innermost axis) gives lane-wise cheap code: no
    division by a run-time value of an index that depends on ``var`` (a reshape/transpose copy over an
    unknown extent: AVX2 has no vector integer division, the lanes would be divided one by one) and no
    ``if_then_else`` choice between a broadcast and a contiguous read made by a run-time dim (a gather per
    vector, slower than the scalar loop; the ``Select`` form, ``(n == 1) ? 0 : i`` of a broadcast between two
    unknown extents, is unswitched by VectorizeLoop instead). Such kernels keep the scalar loop."""
    ok = [True]

    def visit(n):
        if not ok[0]:
            return
        if isinstance(n, (E.Div, E.Mod, E.FloorDiv, E.FloorMod)) and not isinstance(n.b, E.IntImm) \
                and _uses(n.a, var):
            ok[0] = False
        elif isinstance(n, E.Call) and str(getattr(n.op, "name", n.op)) == "tir.if_then_else" and \
                not _uses(n.args[0], var) and any(_uses(a, var) for a in n.args[1:]):
            ok[0] = False
    for b in getattr(op, "body", []) or []:
        post_order_visit(b, visit)
    return ok[0]


def schedule_stage_loops(s, op, vector_row: bool = True) -> None:
    """Parallelize and vectorize one compute stage in place (``vector_row=False``: the innermost axis is
    not split into vector lanes, for the reduction over a row's lane-split partial results)."""
    axes = list(s[op].op.axis)
    if not axes:
        return
    extents = [_const_extent(a) for a in axes]
    symbolic = [e is None for e in extents]
    # a VM kernel's symbolic extents count at their size hint for the decisions below; the loops keep
    # running over the run-time extent (only a static innermost extent is split for the vector lanes)
    extents = [size_hint(a.dom.extent) if e is None else e for a, e in zip(axes, extents)]
    reduce_axes = list(getattr(s[op].op, "reduce_axis", []) or [])
    lanes = simd_width(op.output(0).dtype) if op.output(0).dtype.startswith("float") else simd_width("float32")
    stage = s[op]
    inner = None
    if not reduce_axes and (_transposing_copy(s, stage, axes, extents, symbolic)
                            or _tiled_transpose(s, stage, axes, extents, symbolic)
                            or _padded_relayout(s, stage, axes, extents, symbolic)):
        return
    # a short innermost axis read with a stride (the 3 of an NCHW -> NCHW3c image transform): fused into the
    # vector, every lane would gather and divide its index by the short extent; unrolled, the rows it reads stay
    # contiguous along the next axis, which gcc vectorizes with shuffles (224x224 image: 0.21 -> 0.05 ms)
    strided = None
    if not reduce_axes and not symbolic[-1] and extents[-1] < lanes and _strided_read(s, stage.op, axes[-1].var):
        strided = axes[-1]
    if not reduce_axes and not symbolic[-1] and extents[-1] < lanes and strided is None:
        head = len(axes)
        while head > 0 and not symbolic[head - 1]:
            head -= 1  # only static trailing axes may be fused into the vector axis
        lanes = short_inner_lanes(extents[head:], lanes)
        tail_axes, tail_extents = fuse_short_inner(stage, axes[head:], extents[head:], lanes)
        axes, extents = axes[:head] + tail_axes, extents[:head] + tail_extents
        symbolic = symbolic[:head] + [False] * len(tail_axes)
    if vector_row and not symbolic[-1] and extents[-1] % lanes == 0 and extents[-1] >= lanes:
        outer_last, inner = stage.split(axes[-1], factor=lanes)
        axes = axes[:-1] + [outer_last]
        extents = extents[:-1] + [extents[-1] // lanes]
    elif vector_row and symbolic[-1] and not reduce_axes and _lane_affine(stage.op, axes[-1].var):
        # a VM kernel's unknown row length: split by the lanes all the same; the split guards the last
        # partial vector with likely(i < n), which LoopPartition peels into a guard-free vector main loop
        # and a scalar tail (TVM's split + vectorize over a non-divisible extent)
        outer_last, inner = stage.split(axes[-1], factor=lanes)
        axes = axes[:-1] + [outer_last]
        extents = extents[:-1] + [max(1, -(-extents[-1] // lanes))]
    total = 1
    for e in extents:
        total *= e
    if reduce_axes and inner is not None:
        axes, extents = _interleave_outputs(stage, axes, extents, symbolic, reduce_axes, inner)
    # the outer part of a split symbolic row stays a loop of its own inside the parallel loop: fused into it,
    # the split's tail guard would be inside the fused loop (LoopPartition cannot peel it, the vectorizer sees
    # a guarded body) and every 8 elements would divide the fused index by run-time extents
    fusable = len(axes) - 1 if symbolic[-1] and inner is not None and len(axes) > 1 else len(axes)
    if total * (lanes if inner is not None else 1) >= PARALLEL_MIN_ELEMENTS // 4 and len(axes) >= 1:
        # a symbolic extent may be 1 at run time (batch 1): it counts as 1 here, so the next axes join the
        # parallel loop (dividing the fused index by run-time extents costs once per outer iteration)
        fused, prod = [axes[0]], 1 if symbolic[0] else extents[0]
        divides = False  # whether the fused index is divided by a run-time extent (an inner symbolic axis)
        for ax, e, sym in zip(axes[1:fusable], extents[1:fusable], symbolic[1:fusable]):
            if prod >= 64:
                break
            if divides and not sym and e < 64:
                break  # a short static axis stays an inner loop: the run-time divisions once per its run
            divides = divides or sym
            fused.append(ax)
            prod *= 1 if sym else e
        if len(fused) == len(axes) and reduce_axes and inner is None:
            pass  # keep a serial loop inside when the whole nest would become one fused parallel loop
        par = fused[0] if len(fused) == 1 else stage.fuse(*fused)
        stage.parallel(par)
        if strided is not None and any(ax is strided for ax in fused):
            strided = None
    if inner is not None:
        stage.vectorize(inner)
    if strided is not None:
        stage.unroll(strided)


# the longest interleave group (the unrolled statements of a transposing copy, :func:`_transposing_copy`): gcc's
# vectorizer permutes groups of 2, 3, 4, 8 and 16 elements in registers (16 loads or stores, 4 x 16 permutes)
MAX_INTERLEAVE = 16
# gcc 12 vectorizes no _Float16 code without AVX512-FP16 (kiln keeps it off): a float16 copy unrolled this way stays
# scalar (NCHW16c -> NCHW, 3 x 16 x 61 x 17: 0.010 -> 0.014 ms), so it keeps the vectorized output axis
_INTERLEAVE_DTYPES = ("float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")


def _is_div(e, var, k) -> bool:
    """Whether ``e`` is ``var // k`` (``k`` a constant, None: never)."""
    return k is not None and isinstance(e, (E.FloorDiv, E.Div)) and e.a is var and isinstance(e.b, E.IntImm) \
        and int(e.b.value) == k


def _plain_copy_load(s, op):
    """The one tensor read of a plain copy ``op`` (its value that read of a tensor not inlined into it: a layout
    transform, a transpose), else None. A stage computing on the value (the int8 input quantize, a pad) is not
    one: unrolled, gcc left it scalar (a pad's bounds check in the loop; kiln compiles with if-conversion off);
    :func:`_padded_relayout` takes those."""
    body = list(getattr(op, "body", []) or [])
    if len(body) != 1 or not isinstance(body[0], E.ProducerLoad):
        return None
    src = getattr(body[0].producer, "op", None)
    try:
        if src is not None and s[src].attach_type in (kInline, kInlinedAlready):
            return None
    except (KeyError, ValueError, AttributeError):
        pass  # not a stage of this schedule (a placeholder)
    return body[0]


def _transposing_copy(s, stage, axes, extents, symbolic) -> bool:
    """Schedule a plain copy whose input and output innermost axes differ (NCHW <-> NCHW16c, NHWC <-> NCHW with
    few channels, a transpose with a short side) as a loop that gcc vectorizes with an interleave group: the
    innermost loop runs along an axis contiguous in one tensor and the statements unrolled inside it (at most
    MAX_INTERLEAVE) walk the axis contiguous in the other, so every iteration of ``lanes`` loads whole vectors of
    both tensors and gcc transposes the ``g x lanes`` tile with permutes in registers. Vectorized along the
    output's innermost axis instead, each lane gathered one element (NCHW16c -> NCHW of 64 x 56 x 56 fp32:
    0.113 -> 0.016 ms on two Zen 5 cores). Two forms:

    * store-interleaved: the output's innermost axis ``L`` is short and the input's innermost index is exactly
      the output axis ``R`` just outside it (NCHW -> NCHW{x}c: ``out[.., w, c] = in[.., c, .., w]``): loop
      along ``R``, ``L`` unrolled (``g`` = extent of ``L``);
    * load-interleaved: the input's innermost axis is short (``g`` elements) and indexed by an output axis ``R``
      or by ``R % g`` (NCHW{x}c -> NCHW: ``in[.., w, c % 16]``) while the output's innermost axis ``L`` is the
      input's next axis: ``R`` is split by ``g``, loop along ``L``, the ``g`` part of ``R`` unrolled.

    The loop along the contiguous axis takes in the axes outside it that are contiguous in both tensors (H and W:
    no partial vector after every row), cut into parallel pieces of whole vectors when the loops outside it give the
    cores fewer than 4 chunks each; where no such pieces divide it, it takes in axes only while it is shorter than
    two vectors (7 x 7 images: one loop of 49). Returns whether the stage was scheduled."""
    load = _plain_copy_load(s, stage.op)
    if load is None or len(axes) < 2 or symbolic[-1]:
        return False
    idx = list(load.indices)
    in_shape = [int(x.value) if isinstance(x, E.IntImm) else None for x in load.producer.shape]
    pos = {id(a.var): k for k, a in enumerate(axes)}
    last = axes[-1]
    if _uses(idx[-1], last.var):
        return False  # the output's innermost axis is (part of) the input's: not a transpose
    # the output axis the input's innermost index walks: R itself, or R % g
    r_var, mod = idx[-1], None
    if isinstance(r_var, (E.FloorMod, E.Mod)) and isinstance(r_var.b, E.IntImm):
        r_var, mod = r_var.a, int(r_var.b.value)
    if not isinstance(r_var, E.Var) or id(r_var) not in pos:
        return False
    r = pos[id(r_var)]
    if symbolic[r] or in_shape[-1] is None:
        return False

    def only_in(var, k):  # the axis ``var`` indexes the input at position ``k`` only, as itself
        return idx[k] is var and not any(_uses(e, var) for j, e in enumerate(idx) if j != k)

    dtype = stage.op.output(0).dtype
    if dtype not in _INTERLEAVE_DTYPES:
        return False
    lanes = simd_width(dtype)
    if mod is None and extents[-1] <= MAX_INTERLEAVE and r == len(axes) - 2 and only_in(r_var, len(idx) - 1) \
            and _uses(load, last.var):
        loop, unrolled, group, in_group = r, axes[-1], None, extents[-1]  # store-interleaved
        in_pos = len(idx) - 1
    elif len(idx) >= 2 and in_shape[-1] <= MAX_INTERLEAVE and only_in(last.var, len(idx) - 2) \
            and (extents[r] == in_shape[-1] if mod is None else mod == in_shape[-1] and extents[r] % mod == 0) \
            and all(not _uses(e, r_var) or _is_div(e, r_var, mod) for e in idx[:-1]):
        loop, unrolled, group, in_group = len(axes) - 1, None, mod, in_shape[-1]  # load-interleaved
        in_pos = len(idx) - 2
    else:
        return False
    # the axes outside the vectorized loop that are contiguous in both tensors may join it (one loop over a 56 x 56
    # image instead of 56 rows of 3 vectors and an 8-lane tail); runs[k]: (first axis, extent) of k + 1 axes
    runs, p = [(loop, extents[loop])], in_pos
    while runs[-1][0] > 0 and p > 0 and not symbolic[runs[-1][0] - 1] and runs[-1][0] - 1 != r and \
            only_in(axes[runs[-1][0] - 1].var, p - 1) and in_shape[p] == extents[runs[-1][0]]:
        first = runs[-1][0] - 1
        runs.append((first, runs[-1][1] * extents[first]))
        p -= 1
    size = 1  # output elements
    for e in extents:
        size *= e
    chunks = 4 * num_cores()

    def outside(span):  # iterations of the loops outside a run of ``span``
        return size // (span * in_group)
    first, span = runs[-1]
    piece = None  # the whole run is one loop, or pieces of ``piece`` (a multiple of the lanes) in parallel
    if outside(span) < chunks and size >= PARALLEL_MIN_ELEMENTS:
        piece = next((f for f in range(span // 2, lanes - 1, -1)
                      if span % f == 0 and f % lanes == 0 and outside(span) * (span // f) >= chunks), None)
        if piece is None:  # no even pieces: the run joins axes only while it is short and cores keep chunks
            first, span = runs[0]
            for f_, s_ in runs[1:]:
                if span >= 2 * lanes or outside(s_) < chunks:
                    break
                first, span = f_, s_
    if unrolled is not None:  # store-interleaved: [outer..., loop axes..., L]
        outer, outer_ext, outer_sym = axes[:first], extents[:first], symbolic[:first]
        run = axes[first:loop + 1]
    else:  # load-interleaved: R leaves its place (its outer part stays when split), L's run, then R's g part
        if group is not None:
            r_outer, unrolled = stage.split(axes[r], factor=group)
        else:
            r_outer, unrolled = None, axes[r]
        outer, outer_ext, outer_sym = [], [], []
        for k in range(first):
            if k == r:
                if r_outer is None:
                    continue
                outer.append(r_outer)
                outer_ext.append(extents[r] // group)
            else:
                outer.append(axes[k])
                outer_ext.append(extents[k])
            outer_sym.append(symbolic[k])
        run = axes[first:]
        stage.reorder(*outer, *run, unrolled)
    # the loop gcc vectorizes: the interleave group is its pattern, not kiln's Ramp loads
    vec = run[0] if len(run) == 1 else stage.fuse(*run)
    if piece is not None:
        vec_outer, _ = stage.split(vec, factor=piece)
        stage.parallel(stage.fuse(*outer, vec_outer) if outer else vec_outer)
    elif outer and size >= PARALLEL_MIN_ELEMENTS // 4:
        fused, prod = [outer[0]], 1 if outer_sym[0] else outer_ext[0]
        for ax, e, sym in zip(outer[1:], outer_ext[1:], outer_sym[1:]):
            if prod >= 64 or sym:
                break
            fused.append(ax)
            prod *= e
        stage.parallel(fused[0] if len(fused) == 1 else stage.fuse(*fused))
    stage.unroll(unrolled)
    return True


# a tiled transpose (:func:`_tiled_transpose`): the loop gcc vectorizes along the output's innermost axis runs over
# at most this many vectors per tile (its tile of the input, TILE_VECTORS x lanes x 16 elements, stays in L1)
TILE_VECTORS = 4
# the input rows of a tile (the unrolled group): the first of these that divides the rows (gcc vectorizes interleave
# groups of these sizes); none: not tiled (a guarded partial tile breaks the group and gcc's loop stays scalar)
_TILE_GROUPS = (16, 8, 4, 3, 2)


def _tile_extent(extent: int, lanes: int):
    """The tile of the output's innermost axis in a tiled transpose: the largest multiple of ``lanes`` up to
    TILE_VECTORS vectors that divides ``extent`` (no remainder, no scalar epilogue in gcc's loop); else the divisor
    of ``extent`` from 32 elements (or ``extent`` itself, when shorter) to TILE_VECTORS + 2 vectors (at least 96)
    with the smallest share of its elements left over after whole vectors, the shorter of equals (fp32 300: 50,
    three AVX-512 vectors or six AVX2 vectors and 2 elements for gcc's epilogue: 0.0097 ms on AVX2 against 0.0133
    in tiles of 25; int8 56: 56, gcc vectorizes it with narrower vectors); None when ``extent`` has none (a
    prime)."""
    for k in range(TILE_VECTORS, 0, -1):
        if extent % (k * lanes) == 0:
            return k * lanes
    top = min(extent, max(96, (TILE_VECTORS + 2) * lanes))
    fits = [t for t in range(min(32, extent), top + 1) if extent % t == 0]
    return min(fits, key=lambda t: ((t % lanes) / t, t)) if fits else None


# the operations a tiled transpose may apply to the value it moves (the scale multiplied into attention's key
# transpose): elementwise with constants, which gcc vectorizes in the unrolled statements
_VALUE_OPS = (E.Add, E.Sub, E.Mul, E.Min, E.Max, E.Cast)


def _one_load(e):
    """The one tensor read in ``e`` under elementwise operations with constants; False for a constant, else None."""
    if isinstance(e, E.ProducerLoad):
        return e
    if isinstance(e, (E.IntImm, E.FloatImm)):
        return False
    if isinstance(e, E.Cast):
        return _one_load(e.value)
    if isinstance(e, _VALUE_OPS):
        a, b = _one_load(e.a), _one_load(e.b)
        if a is None or b is None or (a is not False and b is not False):
            return None
        return a if a is not False else b
    return None


def _inlined_value(s, stage):
    """The stage's value with the stages inlined into it substituted, or None for a reduction."""
    from ...te.schedule_dataflow import _Inliner
    body = list(getattr(stage.op, "body", []) or [])
    if len(body) != 1 or isinstance(body[0], E.Reduce):
        return None
    bodies = {}
    inliner = _Inliner(bodies)
    for st in s.stages:
        if st.attach_type in (kInline, kInlinedAlready) and hasattr(st.op, "axis"):
            sb = list(getattr(st.op, "body", []) or [])
            if len(sb) == 1 and not isinstance(sb[0], E.Reduce):
                bodies[st.op.output(0)] = ([iv.var for iv in st.op.axis], inliner(sb[0]))
    return inliner(body[0])


def _inlined_load(s, stage, axes):
    """The stage's value with the stages inlined into it substituted (reshapes, a transpose, a multiply by a
    constant fused with it) and its one tensor read's indices simplified over the stage's axes (a reshape's
    ``((i0 * 64 + i1) * 128 + i2) // 128 % 64`` becomes ``i1``): (value, load), or None when the value is not one
    read under elementwise operations with constants."""
    from ...arith import Analyzer
    body = list(getattr(stage.op, "body", []) or [])
    if len(body) != 1 or isinstance(body[0], E.Reduce):
        return None
    if not isinstance(_one_load(body[0]), E.ProducerLoad):
        return None  # (checked before inlining: an elementwise kernel's several reads cost no inlining here)
    value = _inlined_value(s, stage)
    load = _one_load(value)
    if not isinstance(load, E.ProducerLoad) or getattr(load.producer, "op", None) is None:
        return None
    try:
        if s[load.producer.op].attach_type in (kInline, kInlinedAlready):
            return None
    except (KeyError, ValueError, AttributeError):
        pass  # a placeholder
    ana = Analyzer()
    for a in axes:
        ana.bind(a.var, E.Range.from_min_extent(0, a.dom.extent))
    simple = E.ProducerLoad(load.producer, [ana.canonical_simplify(i) for i in load.indices])
    return value, load, simple


def _fused_axes(index, axes, extents, last: int):
    """``(k, m)`` when ``index`` is the index of output axes ``k..m`` (``m`` before ``last``) fused into one
    (``i0 * 64 + i1`` for a (4, 64, ...) output: a reshape's heads and head size), else None."""
    from ...arith import Analyzer
    ana = Analyzer()
    for m in range(last - 1, -1, -1):
        expr, stride = None, 1
        for k in range(m, -1, -1):
            term = axes[k].var if stride == 1 else axes[k].var * stride
            expr = term if expr is None else term + expr
            stride *= extents[k]
            diff = ana.canonical_simplify(index - expr)
            if isinstance(diff, E.IntImm) and int(diff.value) == 0:
                return k, m
    return None


def _substitute_load(value, old, new):
    """``value`` with the read ``old`` replaced by ``new``."""
    from ...tir.stmt_functor import StmtExprMutator

    class _Swap(StmtExprMutator):
        def visit_ProducerLoad(self, node):
            return new if node is old else node
    return _Swap()(value)


def _rewrite_value(s, stage, value) -> None:
    """Give ``stage`` the value ``value`` (its own value with the stages inlined into it substituted and the read's
    indices simplified): bound inference then sees the tile a loop nest reads (through a reshape's divisions it
    relaxed the tile's buffer to the whole input). The stages that were inlined into it are left unread."""
    from ...te.schedule_dataflow import replace_dataflow
    from ...te.tensor import ComputeOp
    op = stage.op
    new_op = ComputeOp(op.name, op.tag, op.attrs, op.axis, [value])
    vmap = {op.output(0): new_op.output(0)}
    rvmap = {new_op.output(0): op.output(0)}
    stage.op = new_op
    replace_dataflow(s.stages, vmap, rvmap)


def _tiled_transpose(s, stage, axes, extents, symbolic) -> bool:
    """Schedule a copy that transposes two long axes (both over MAX_INTERLEAVE: a 300 x 300 transpose, NCHW -> NHWC
    with 64 channels, attention's key transpose (batch, seq, heads, dim) -> (batch, heads, dim, seq)) in tiles. The
    value is one read of a tensor, through the stages inlined into it (reshapes; the int8 BERT's key transpose
    fuses reshape, transpose, a multiply by the scale and reshape: (128, 256) -> (4, 64, 128)), under elementwise
    operations with constants (:func:`_inlined_load`). The output's innermost axis ``L`` is one of the read's indices
    other than its last, and the read's last index walks output axes ``R`` further out (one axis, or several fused:
    ``h * 64 + d``). ``R`` is split by a group ``g`` of 16, 8, 4, 3 or 2 (the first that divides it) and ``L`` by
    ``t`` (:func:`_tile_extent`); each ``t x g`` tile of the input is first copied into a contiguous local buffer
    (``g`` whole elements per row: a vector load and store each), and the tile's loop along ``L`` then reads it with
    ``R``'s ``g`` part unrolled inside: the load-interleaved form of :func:`_transposing_copy` with a stride of
    exactly ``g``, which gcc vectorizes with register permutes and whole-vector stores to the output. Straight from
    the input (a stride of the whole row) gcc left the tile scalar. ``L``'s tile divides it with the fewest elements
    left after whole vectors (gcc's loop ends in a scalar epilogue for those); where no group or tile divides (an odd
    side of 301 or 65) the copy is not tiled (a partial tile's guards kept gcc's loop scalar, slower than the
    gathered vector). The stage takes the inlined and simplified value as its own (:func:`_rewrite_value`), and the
    tile loops outside are fused into the parallel loop. Returns whether the stage was scheduled."""
    if len(axes) < 2 or any(symbolic):
        return False
    dtype = stage.op.output(0).dtype
    if dtype not in _INTERLEAVE_DTYPES or extents[-1] <= MAX_INTERLEAVE:
        return False
    found = _inlined_load(s, stage, axes)
    if found is None:
        return False
    value, orig_load, load = found
    idx = list(load.indices)
    last = axes[-1]
    run = _fused_axes(idx[-1], axes, extents, len(axes) - 1)
    if run is None:
        return False
    k0, k1 = run

    def only_in(var, k):
        return (idx[k] is var or k == len(idx) - 1) and not any(_uses(e, var) for j, e in enumerate(idx) if j != k)

    if not all(only_in(axes[k].var, len(idx) - 1) for k in range(k0, k1 + 1)) or \
            not any(idx[k] is last.var and only_in(last.var, k) for k in range(len(idx) - 1)):
        return False
    r_extent = 1
    for e in extents[k0:k1 + 1]:
        r_extent *= e
    if extents[-1] <= MAX_INTERLEAVE or r_extent <= MAX_INTERLEAVE:
        return False  # a short side: _transposing_copy's forms (or nothing to tile)
    lanes = simd_width(dtype)
    # R: the output axes k0..k1 the input's innermost index walks (several: a reshape's heads and head size). The
    # group comes from the innermost of them where one divides it (the others stay loops of their own: bound
    # inference of the tile's buffer is exact), else from them fused
    group = next((g for g in _TILE_GROUPS if extents[k1] % g == 0), None)
    if group is None and k0 < k1:
        group = next((g for g in _TILE_GROUPS if r_extent % g == 0), None)
        fuse_run = True
    else:
        fuse_run = False
    if group is None:
        return False  # a guarded last tile kept gcc's loop scalar: 301 x 301 ran 0.029 ms against 0.012 gathered
    tile = _tile_extent(extents[-1], lanes)
    if tile is None:
        return False
    _rewrite_value(s, stage, _substitute_load(value, orig_load, load))
    if fuse_run:
        axes = axes[:k0] + [stage.fuse(*axes[k0:k1 + 1])] + axes[k1 + 1:]
        extents = extents[:k0] + [r_extent] + extents[k1 + 1:]
        r = k0
    else:
        r = k1
    r_outer, r_inner = stage.split(axes[r], factor=group)
    l_outer, l_inner = stage.split(last, factor=tile)
    outer = [r_outer if k == r else a for k, a in enumerate(axes[:-1])] + [l_outer]
    outer_ext = [e // group if k == r else e for k, e in enumerate(extents[:-1])] + [extents[-1] // tile]
    stage.reorder(*outer, l_inner, r_inner)
    stage.unroll(r_inner)
    # the loops outside the tile: fused into one parallel loop while the cores lack chunks (the tile's buffer is
    # allocated inside it, one per thread); those left serial stay inside
    size = 1
    for e in extents:
        size *= e
    attach = outer[-1]
    if size >= PARALLEL_MIN_ELEMENTS // 4:
        fused, prod = [outer[0]], outer_ext[0]
        for ax, e in zip(outer[1:], outer_ext[1:]):
            if prod >= 4 * num_cores() * 4:
                break
            fused.append(ax)
            prod *= e
        par = fused[0] if len(fused) == 1 else stage.fuse(*fused)
        stage.parallel(par)
        if len(fused) == len(outer):
            attach = par
    cache = s.cache_read(load.producer, "local", [stage.op])
    s[cache].compute_at(stage, attach)
    if group & (group - 1) == 0 and group * parse_dtype(dtype).itemsize >= 8:
        # the tile's rows as kiln's vector copies (an 8-byte to 64-byte row): left to gcc, its loop peeled the last
        # row into element loads and inserts
        s[cache].vectorize(s[cache].op.axis[-1])
    return True


# a padded relayout (:func:`_padded_relayout`): rows of at least this many elements, a row buffer (on the stack) of at
# most this many bytes
_MIN_ROW = 8
_MAX_ROW_BYTES = 1 << 16


def _tensor_reads(value):
    """The tensor reads in ``value`` whose indices are not all constants (a pad value's ``p[]`` is left out)."""
    reads = []

    def visit(n):
        if isinstance(n, E.ProducerLoad) and not all(isinstance(i, E.IntImm) for i in n.indices):
            reads.append(n)
    post_order_visit(value, visit)
    return reads


def _drop_proved(value, ana):
    """``value`` with every comparison that ``ana`` proves true or false replaced by that constant (the pad's bounds
    checks along the row: true inside the unpadded row, false in the pad), simplified."""
    from ...tir.stmt_functor import StmtExprMutator
    from ...tir import op as tir_op

    class _Drop(StmtExprMutator):
        def _cmp(self, n):
            n = self.generic_visit(n)
            if ana.can_prove(n):
                return tir_op.const(True, "bool")
            if ana.can_prove(E.Not(n)):
                return tir_op.const(False, "bool")
            return n
        visit_LT = visit_LE = visit_GT = visit_GE = _cmp
    return ana.simplify(_Drop()(value))


def _padded_relayout(s, stage, axes, extents, symbolic) -> bool:
    """Schedule an elementwise kernel whose value is computed from ONE tensor read through a layout change and a pad
    along the input's contiguous axis (the input of an int8 QDQ CNN: ``qnn.quantize`` canonicalized to divide, round,
    add, clip, cast, then ``nn.pad`` with the zero point and NCHW -> NCHW4c, in one kernel) row by row. The output's
    last two axes are ``R`` (the padded W) and ``L`` (the short inner ``c``); the read's last index is ``R - lo``
    (``lo`` >= 0: the pad before the row), ``R`` indexes nothing else and ``L`` indexes the read elsewhere (a layout
    change). For each row of the output (the axes but the last two, fused; in parallel when the kernel is big
    enough) the value is first computed into a local ``L x J`` buffer in the input's layout, ``J`` a whole number of
    vectors with the unpadded row starting at the second vector (position ``R + lanes - lo``):

    * the vectors that lie inside the unpadded row take the value with the pad's bounds checks along ``R`` dropped
      (provably true there): whole-vector loads of each input plane, the arithmetic in full vectors;
    * the others take the value at their position clamped into the output's row, its checks kept (they fold to the
      pad value where a vector lies wholly in the pad; a vector holding both reads lane by lane);

    the choice between them is made per vector (the same for its lanes). The output row is then a store-interleaved
    transposing copy out of that buffer (``L`` unrolled inside the loop along ``R``, :func:`_transposing_copy`'s
    form), which gcc vectorizes with register permutes. Vectorized along the output's fused ``R x L`` instead (the
    default), each vector read its ``L`` input planes lane by lane (224 x 224 image: 120 -> 14 us on one Zen 5 core,
    docs/qnn.md). The vectors are the widest (from the float32 SIMD width down to 8 lanes) that divide the unpadded
    row. Returns whether the stage was scheduled."""
    from ...arith import Analyzer
    from ...te.schedule import Stage
    from ...tir import op as tir_op
    from ...tir.stmt_functor import substitute
    if len(axes) < 3 or any(symbolic):
        return False
    dtype = stage.op.output(0).dtype
    if dtype not in _INTERLEAVE_DTYPES or extents[-1] > MAX_INTERLEAVE:
        return False
    value = _inlined_value(s, stage)
    if value is None or isinstance(value, E.ProducerLoad):
        return False  # a plain copy: _transposing_copy's
    reads = _tensor_reads(value)
    if len(reads) != 1 or getattr(reads[0].producer, "op", None) is None:
        return False
    load = reads[0]
    try:
        if s[load.producer.op].attach_type in (kInline, kInlinedAlready, kScope):
            return False  # computed inside another stage's loops already
    except (KeyError, ValueError, AttributeError):
        pass  # a placeholder
    in_shape = [int(x.value) if isinstance(x, E.IntImm) else None for x in load.producer.shape]
    if not in_shape or in_shape[-1] is None:
        return False
    r_ax, l_ax = axes[-2], axes[-1]
    ana = Analyzer()
    for a in axes:
        ana.bind(a.var, E.Range.from_min_extent(0, a.dom.extent))
    idx = [ana.canonical_simplify(i) for i in load.indices]
    off = ana.canonical_simplify(idx[-1] - r_ax.var)
    if not isinstance(off, E.IntImm) or any(_uses(i, r_ax.var) for i in idx[:-1]) or _uses(idx[-1], l_ax.var) \
            or not any(_uses(i, l_ax.var) for i in idx[:-1]):
        return False
    width, lo = in_shape[-1], -int(off.value)
    if lo < 0 or lo + width > extents[-2] or width < _MIN_ROW:
        return False
    lead = [a.var for a in axes[:-2]]
    g, wp = extents[-1], extents[-2]
    # the row's vectors: the widest (down to 8 lanes) that divides the unpadded row, so no vector holds both pad
    # and row positions (such a vector reads lane by lane); else the full width
    lanes = next((v for v in (simd_width("float32"), 8) if width % v == 0), simd_width("float32"))
    if lo > lanes or width < lanes:
        return False
    shift = lanes - lo  # row position j = w + shift: the unpadded row starts at the second vector
    blocks = -(-(wp + shift) // lanes)
    full = width // lanes  # the vectors 1..full lie inside the unpadded row
    if g * blocks * lanes * parse_dtype(dtype).itemsize > _MAX_ROW_BYTES:
        return False

    def row_value(*i):
        jo, ji = i[-2], i[-1]
        w = jo * lanes + ji - shift
        vmap = {**{a: x for a, x in zip(lead, i[:-3])}, l_ax.var: i[-3]}
        clamped = tir_op.max(tir_op.min(w, wp - 1), 0)

        def part(first, end, pos):  # the value on the vectors first..end - 1 at output position ``pos``
            if first >= end:  # no such vectors (no pad after a row of whole vectors): never taken, kept as it was
                return substitute(value, {**vmap, r_ax.var: clamped})
            a2 = Analyzer()
            for x, e in zip(i[:-3], extents[:-2]):
                a2.bind(x, E.Range.from_min_extent(0, e))
            a2.bind(i[-3], E.Range.from_min_extent(0, g))
            a2.bind(jo, E.Range.from_min_extent(first, end - first))
            a2.bind(ji, E.Range.from_min_extent(0, lanes))
            return _drop_proved(substitute(value, {**vmap, r_ax.var: pos}), a2)
        # the vectors 1..full: inside the unpadded row (the pad checks along it dropped, contiguous reads); the
        # others: the value as it was, at the position clamped into the output's row (the positions outside it are
        # computed, never read); where they lie wholly in the pad, the checks fold to the pad value
        return tir_op.if_then_else(jo < 1, part(0, 1, clamped),
                                   tir_op.if_then_else(jo <= full, part(1, full + 1, w),
                                                       part(full + 1, blocks, clamped)))
    rows = te.compute(extents[:-2] + [g, blocks, lanes], row_value, name=stage.op.name + ".rows")
    pos = next(k for k, st in enumerate(s.stages) if st is stage)
    st = Stage(rows.op, s)
    st.scope = "local"
    s.stages.insert(pos, st)
    s.stage_map[rows.op] = st
    st.group = stage.group
    j = r_ax.var + shift
    _rewrite_value(s, stage, rows(*lead, l_ax.var, tir_op.floordiv(j, lanes), tir_op.floormod(j, lanes)))
    # the output: the rows (the leading axes, fused) in parallel when the kernel is big enough
    size = 1
    for e in extents:
        size *= e
    row = axes[0] if len(axes) == 3 else stage.fuse(*axes[:-2])
    if size >= PARALLEL_MIN_ELEMENTS // 4:
        stage.parallel(row)
    stage.unroll(l_ax)
    s[rows].compute_at(stage, row)
    s[rows].vectorize(s[rows].op.axis[-1])
    return True


def _strided_read(s, op, var) -> bool:
    """Whether ``op`` is a plain copy (its value one read of a tensor that is not inlined into it: a layout
    transform, a transpose) that indexes with ``var`` anywhere but in its last index (the output's innermost
    axis is a strided walk through the input). Only copies: a stage computing on the value (the int8 input
    quantize, pad and NCHW4c transform in one) runs no faster unrolled than as the gathered vector
    (:func:`_padded_relayout` takes it when it can)."""
    load = _plain_copy_load(s, op)
    return load is not None and any(_uses(i, var) for i in list(load.indices)[:-1])


def _interleave_outputs(stage, axes, extents, symbolic, reduce_axes, inner):
    """A reduction whose output row is vectorized (a pool over NCHW8c, a sum over a leading axis) reduces ``U``
    output vectors at once: the innermost data-parallel axis with a static extent of 2 or more (only unit axes
    inside it) is split by ``U`` (:func:`accumulator_count`) and its inner part is unrolled inside the
    reduction loops, next to the vector lanes, so ``U`` independent accumulators overlap instead of one chain
    of dependent adds per output vector (reductions of 16 steps or more). Returns the new (axes, extents); the reduction loops are moved
    inside the data-parallel ones either way."""
    k = len(axes) - 1
    while k >= 0 and not symbolic[k] and extents[k] == 1:
        k -= 1
    steps = 1
    for iv in reduce_axes:
        steps *= _const_extent(iv) or 1 << 20
    # a short reduction (a 3x3 pooling window) is left alone: the CPU overlaps consecutive outputs' short chains
    # by itself, and the unrolled window's padding checks cost more (3x3 max pool: 28.8 against 31.3 us)
    acc = accumulator_count(extents[k]) if k >= 0 and not symbolic[k] and steps >= 16 else 1
    if acc == 1:
        stage.reorder(*axes, *reduce_axes, inner)
        return axes, extents
    outer, part = stage.split(axes[k], factor=acc)
    axes = axes[:k] + [outer] + axes[k + 1:]
    extents = extents[:k] + [extents[k] // acc] + extents[k + 1:]
    stage.reorder(*axes, *reduce_axes, part, inner)
    stage.unroll(part)
    return axes, extents


def schedule_injective_from_existing(sch, out):
    """Add the x86 loop schedule of ``out`` to an existing schedule."""
    schedule_stage_loops(sch, out.op)
    return sch


def schedule_injective(outs):
    """Injective / elementwise / broadcast groups: producers inlined, output parallel + vectorized."""
    outs = as_list(outs)
    s = te.create_schedule([o.op for o in outs])
    inline_injective(s, outs)
    for o in outs:
        if hasattr(o.op, "axis"):
            schedule_stage_loops(s, o.op)
    return s


def _reads_along(expr, var) -> bool:
    """Whether every tensor read in ``expr`` that depends on ``var`` has exactly ``var`` as its last index
    (consecutive reduction steps read consecutive elements), and at least one read does."""
    found, ok = [False], [True]

    def visit(n):
        if isinstance(n, E.ProducerLoad) and n.indices:
            if n.indices[-1] is var and not any(_uses(i, var) for i in n.indices[:-1]):
                found[0] = True
            elif any(_uses(i, var) for i in n.indices):
                ok[0] = False
    post_order_visit(expr, visit)
    return found[0] and ok[0]


def lane_split_reduction(s, op):
    """Split a float sum / max / min along a contiguous reduction axis into ``lanes`` partial results
    (``rfactor``): one vector accumulator instead of a chain of dependent scalar steps (the C compiler keeps a
    scalar float reduction in order; layer norm's mean and variance over 768 channels were a chain of 768
    adds per row). The partial results are ``lanes * U`` (``U`` independent vector accumulators,
    :func:`reduction_accumulators`), so consecutive vector steps do not wait for each other either; the
    schedule combines them as a tree (:func:`combine_partials`). Returns (the rfactor stage's tensor, its
    vectors' lanes: the SIMD width, or half or a quarter of it where the row is whole vectors of those only),
    or None when the stage is not such a reduction (a symbolic or short reduction extent, one that is not
    whole vectors of 4 lanes or more, an index that is not the reduction variable itself, a reduction with an
    ``init`` value, which ``rfactor`` would drop). With several
    reduction axes the innermost one is split."""
    body = getattr(op, "body", None)
    red = list(getattr(op, "reduce_axis", []) or [])
    if not body or len(body) != 1 or not isinstance(body[0], E.Reduce) or not red:
        return None
    # several reduction axes (a min / max / sum over a whole tensor, DynamicQuantizeLinear's range): the lanes
    # split the innermost one, which must read consecutive elements
    red = red[-1:]
    r = body[0]
    dtype = str(r.dtype)
    if not dtype.startswith("float") or len(r.source) != 1 or r.condition is not None and \
            not (isinstance(r.condition, E.IntImm) and int(r.condition.value) == 1):
        return None
    if r.init:  # ``rfactor`` drops a reduction's ``init`` (its stages start from the identity): keep it whole
        return None
    n = _const_extent(red[0])
    if n is None:
        return None  # (symbolic output extents are fine: a VM kernel's rows; the reduction itself is static)
    # a row that is not whole machine vectors may be whole half (or quarter) vectors: 56 floats on AVX-512 are
    # 7 ymm (a global pool over NCHW 56x56: 41 -> 4.6-5.5 us, one Zen 5 thread), 1000 floats 125 ymm (sum over
    # (128, 1000): 39 -> 2.5 us); a row of 2 xmm is not split (max over (4096, 8), AVX2: 3.9 us gathering 8
    # rows at a time, 6.9 us split), one of 3 is (sum over (4096, 12): 6.0 -> 4.9 us)
    lanes = simd_width(dtype)
    while lanes > 4 and (n % lanes or n < 2 * lanes):
        lanes //= 2
    if n % lanes or n < (3 if lanes == 4 and lanes < simd_width(dtype) else 2) * lanes:
        return None
    # an output row of whole vectors does not matter: reduced along the contiguous axis, its vector would
    # gather ``lanes`` rows' elements at every step (max over (128, 1024) without keepdims: 239 us, 4.8 us
    # lane-split on Zen 5); the reduction over the partials then stays one row at a time (vector_row=False)
    if not _reads_along(r.source[0], red[0].var):
        return None
    total = n // lanes
    for iv in s[op].op.reduce_axis[:-1]:
        total *= _const_extent(iv) or 1 << 20
    acc = reduction_accumulators(n // lanes, total)
    _, ki = s[op].split(s[op].op.reduce_axis[-1], factor=lanes * acc)
    return s.rfactor(op.output(0), ki), lanes


def accumulator_count(vectors: int, min_steps: int = 1, top: int | None = None) -> int:
    """How many independent vector accumulators a lane-split reduction over ``vectors`` whole vectors keeps:
    the largest count up to ``top`` (default a quarter of the target's vector registers, 4 on AVX2's 16, 8 on
    AVX-512's 32: enough to cover the add latency (3-4 cycles) at two adds per cycle, with registers left for
    the loads and the addresses) that divides ``vectors``, so the accumulators split the row evenly (1: one
    accumulator), and leaves each accumulator at least ``min_steps`` vectors."""
    if top is None:
        top = max(1, vector_registers() // 4)
    for u in range(min(top, vectors), 1, -1):
        if vectors % u == 0 and vectors // u >= min_steps:
            return u
    return 1


def reduction_accumulators(vectors: int, total_vectors: int) -> int:
    """The accumulator count of a lane-split reduction whose innermost axis is ``vectors`` whole vectors and
    which reduces ``total_vectors`` per output (outer reduction axes included): up to 8, or 16 where a long
    reduction (256 vectors or more per output: a whole-tensor min / max) has fewer outputs to combine the
    accumulators of, at most half the vector registers (8 on AVX2's 16). A float max / min step (max, and the
    NaN test and blend that keep NaN) is a longer chain than an add, so 4 accumulators (a quarter of AVX2's
    registers) left the whole-tensor max of 128 x 1024 floats latency-bound: 5.1 us, 8: 3.9 us (AVX2 code on
    Zen 5, one thread); on AVX-512, 8 -> 16: 2.5 -> 2.1 us; rows of 1024 lost with 16 (4.3 -> 5.2 us, the
    longer combining tree per row)."""
    return accumulator_count(vectors, top=min(16 if total_vectors >= 256 else 8, max(1, vector_registers() // 2)))


def schedule_lane_partials(s, rf, lanes: int) -> None:
    """Loop order of a lane-split reduction's partial results ``rf`` (``lanes * U`` of them, axis 0, U >= 1):
    the reduction loop outside, the ``U`` accumulators unrolled inside it (independent adds, none waits for
    the previous one) and each accumulator's ``lanes`` vectorized. The C compiler does not merge them back
    (kiln compiles without -ffast-math, so float adds are not reassociated)."""
    part = s[rf].op.axis[0]
    width = int(part.dom.extent.value)
    red = list(s[rf].op.reduce_axis)
    # the innermost reduction loop stays a loop in C (``#pragma GCC unroll 1``): gcc unrolled a short one (6
    # steps of 8 accumulators over a 768-float row) into one straight run of 48 loads per row, which ran
    # 1.45x slower on Zen 5 (2.9 against 2.0 us for 128 rows; the same in hand-written C; why is not
    # established: the prefetchers may track a load instruction that strides better than 48 that run once)
    s[rf].pragma(red[-1], "gcc_unroll", 1)
    if width == lanes:
        s[rf].reorder(*red, part)
        s[rf].vectorize(part)
        return
    acc, lane = s[rf].split(part, factor=lanes)
    s[rf].reorder(*red, acc, lane)
    s[rf].unroll(acc)
    s[rf].vectorize(lane)


def _partials_of(s, t):
    """The op of schedule ``s`` that reads tensor ``t`` (the reduction an ``rfactor`` left over it)."""
    return next(st.op for st in s.stages if t in list(getattr(st.op, "input_tensors", []) or []))


def combine_partials(s, op, lanes: int):
    """The reduction ``op`` over a lane-split reduction's ``lanes * U`` partial results becomes a tree: each
    level (an ``rfactor`` by half the width) combines the first half of the partials with the second,
    element-wise (one vector op per vector of the half, every level whole vectors while U is even; an odd U is
    first added into one vector, U - 1 steps), down to a few lanes, which ``op`` combines one at a time. Before,
    the U vectors were added in a chain and then all ``lanes`` one at a time: for a 768-float row (48 vector
    loads) that serial epilogue was about as long as the row's own chains, and a max's scalar steps branch.
    Each level also starts from the reduction's identity (an rfactor stage initializes its buffer): one extra
    op per level. Returns (the levels' tensors in order, the op that reduces what is left)."""
    levels = []
    # a 16-lane vector is halved down to 4 lanes (one xmm), an 8-lane one (AVX2's ymm) not at all: its lanes
    # go to ``op`` one at a time as before (AVX2 max over (128, 1024) rows: 5.4 us stopping at 8 lanes, 5.6 at 4,
    # 6.1 at 2; AVX-512: 4.2 at 4, 4.4 at 2, 5.0 at 8 and 16, Zen 5)
    floor = 4 if lanes > 8 else lanes
    while True:
        red = s[op].op.reduce_axis[-1]
        width = int(red.dom.extent.value)
        if width <= floor:
            return levels, op
        if width > lanes:  # U vectors: halved while U is even (every level whole vectors), else added into one
            part = width // 2 if width % (2 * lanes) == 0 else lanes
        elif width % 2 == 0:
            part = width // 2
        else:
            return levels, op  # an odd number of lanes (not an x86 SIMD width): reduced serially by ``op``
        _, inner = s[op].split(red, factor=part)
        t = s.rfactor(op.output(0), inner)
        levels.append(t)
        op = _partials_of(s, t)
        axis, steps = s[t].op.axis[0], list(s[t].op.reduce_axis)
        s[t].reorder(*steps, axis)
        for k in steps:
            s[t].unroll(k)
        if part > lanes and part % lanes == 0:
            outer, vec = s[t].split(axis, factor=lanes)
            s[t].unroll(outer)
            s[t].vectorize(vec)
        else:
            s[t].vectorize(axis)


def _schedule_all_stages(outs):
    """Every remaining (non-inlined) compute stage gets the loop schedule (for reductions, pools, softmax);
    a float reduction along a contiguous axis accumulates in ``U`` vectors first (:func:`lane_split_reduction`),
    which are combined as a tree (:func:`combine_partials`), one output at a time."""
    outs = as_list(outs)
    s = te.create_schedule([o.op for o in outs])
    inline_injective(s, outs)
    for stage in list(s.stages):
        op = stage.op
        if not hasattr(op, "axis") or not op.input_tensors:
            continue
        if stage.attach_type in (kInline, kInlinedAlready):
            continue
        split = lane_split_reduction(s, op)
        rf, levels = None, []
        if split is not None:  # rfactor gave the stage a new op (the reduction over the partial results)
            rf, lanes = split
            levels, op = combine_partials(s, _partials_of(s, rf), lanes)
        schedule_stage_loops(s, op, vector_row=rf is None)
        if rf is not None:
            at = [iv for iv in s[op].leaf_iter_vars if iv.iter_type == 0]
            for t in (rf, *levels):
                if at:
                    s[t].compute_at(s[op], at[-1])
            schedule_lane_partials(s, rf, lanes)
    return s


schedule_elemwise = schedule_injective
schedule_broadcast = schedule_injective
schedule_concatenate = schedule_injective
schedule_reduce = _schedule_all_stages
schedule_pool = _schedule_all_stages
schedule_adaptive_pool = _schedule_all_stages
schedule_global_pool = _schedule_all_stages
from .softmax import schedule_softmax  # noqa: E402 - it uses _schedule_all_stages

schedule_log_softmax = _schedule_all_stages
schedule_layer_norm = _schedule_all_stages


# -- registrations: these are topi.generic's schedules on targets with the "cpu" key ------------------------------
for _generic, _x86 in ((generic.schedule_injective, schedule_injective),
                       (generic.schedule_injective_from_existing, schedule_injective_from_existing),
                       (generic.schedule_elemwise, schedule_elemwise),
                       (generic.schedule_broadcast, schedule_broadcast),
                       (generic.schedule_concatenate, schedule_concatenate),
                       (generic.schedule_reduce, schedule_reduce),
                       (generic.schedule_pool, schedule_pool),
                       (generic.schedule_adaptive_pool, schedule_adaptive_pool),
                       (generic.schedule_global_pool, schedule_global_pool),
                       (generic.schedule_softmax, schedule_softmax),
                       (generic.schedule_log_softmax, schedule_log_softmax),
                       (generic.schedule_layer_norm, schedule_layer_norm)):
    _generic.register("cpu", _x86)
