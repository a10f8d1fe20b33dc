"""Helpers shared by the x86 schedules: SIMD width, core count, inlining, and fallback tile sizes."""
from __future__ import annotations

from ... import te
from ...tir import expr as E
from .. import tag as _tag
from ..utils import get_const_tuple
from ...target.x86 import get_simd_width, get_vector_registers, get_num_cores
from ...target import Target
from ...error import KilnError


def simd_width(dtype: str = "float32") -> int:
    """SIMD lanes of ``dtype`` on the current target (``-mcpu`` / detected features); 8 fp32 lanes for AVX2."""
    return max(1, int(get_simd_width(Target.current(allow_none=True), dtype)))


def vector_registers() -> int:
    """SIMD registers of the current target (32 with AVX-512, else 16)."""
    return int(get_vector_registers(Target.current(allow_none=True)))


def scaled_registers(avx2_count: int) -> int:
    """A register count measured on AVX2's 16 vector registers, scaled to the current target's register
    file (x2 on AVX-512's 32): accumulator budgets of the register-tiled micro-kernels."""
    return avx2_count * vector_registers() // 16


def num_cores() -> int:
    try:
        return max(1, int(get_num_cores(Target.current(allow_none=True))))
    except Exception:  # noqa: BLE001 - a target without core information
        import os
        return os.cpu_count() or 1


def as_list(outs) -> list:
    return list(outs) if isinstance(outs, (list, tuple)) else [outs]


def extent(iv) -> int:
    ext = iv.dom.extent
    if not isinstance(ext, E.IntImm):
        raise ValueError(f"axis {iv} has a symbolic extent; x86 schedules need static shapes")
    return int(ext.value)


def traverse_inline(s, final_op, callback) -> None:
    """Inline every injective stage reachable from ``final_op`` (stopping at non-injective ones) and call
    ``callback(op)`` on each op visited, outputs included (TVM's ``topi.utils.traverse_inline``)."""
    visited = set()

    def visit(op):
        if op in visited:
            return
        visited.add(op)
        if _tag.is_injective(getattr(op, "tag", "")) and hasattr(op, "axis"):
            if op not in s.outputs:
                s[op].compute_inline()
            for t in op.input_tensors:
                if hasattr(t.op, "axis") or hasattr(t.op, "body"):
                    visit(t.op)
        callback(op)
    visit(final_op)


def schedule_anchored(outs, anchor_tag: str, schedule_anchor):
    """The schedule of a template whose anchor op is tagged ``anchor_tag``: fused injective stages inlined,
    then ``schedule_anchor(s, anchor_output, final_op)`` (the final op is the anchor itself, a fused
    epilogue, or an unpack)."""
    outs = as_list(outs)
    s = te.create_schedule([o.op for o in outs])

    def callback(op):
        if op.tag == anchor_tag:
            schedule_anchor(s, op.output(0), outs[0].op)
    traverse_inline(s, outs[0].op, callback)
    return s


def divisor_at_most(n: int, limit: int) -> int:
    """The largest divisor of ``n`` that is at most ``limit`` (>= 1)."""
    best = 1
    for d in range(1, min(n, max(1, limit)) + 1):
        if n % d == 0:
            best = d
    return best


def split_vector(stage, axis, n: int, lanes: int):
    """Split ``axis`` (extent ``n``) by the SIMD width and vectorize the inner part when that leaves no tail;
    returns the outer axis (or ``axis`` itself when nothing was split)."""
    if n <= 1:
        return axis
    if n % lanes == 0:
        outer, inner = stage.split(axis, factor=lanes)
        stage.vectorize(inner)
        return outer
    if n <= 2 * lanes:
        stage.vectorize(axis)
        return None
    return axis


def parallel_outer(stage, axes, extents, min_chunks: int | None = None) -> None:
    """Fuse the leading ``axes`` until there is enough parallel work for the cores and parallelize them."""
    if not axes:
        return
    want = min_chunks or num_cores()
    fused = [axes[0]]
    total = extents[0]
    for ax, e in zip(axes[1:], extents[1:]):
        if total >= 4 * want:
            break
        fused.append(ax)
        total *= e
    if total <= 1:
        return
    outer = fused[0] if len(fused) == 1 else stage.fuse(*fused)
    stage.parallel(outer)
    return outer


#: the size an x86 schedule assumes for an extent known only at run time (a VM kernel's symbolic dim): the
#: config space, the fallback register blocks, the layout choices of AlterOpLayout and the flop count are
#: computed for it, while the loops still run over the symbolic extent (guarded tails); docs/vm.md
SYMBOLIC_SIZE_HINT = 64


def size_hint(d) -> int:
    """``d`` as an int: its value when static, else :data:`SYMBOLIC_SIZE_HINT` (the one mechanism for 'how big
    is a symbolic dim' in the x86 schedules and layout choices)."""
    v = getattr(d, "value", d)
    try:
        return int(v)
    except (TypeError, ValueError):
        return SYMBOLIC_SIZE_HINT


def is_static(d) -> bool:
    """Whether an extent is a known integer (not a VM kernel's symbolic dim)."""
    v = getattr(d, "value", d)
    try:
        int(v)
    except (TypeError, ValueError):
        return False
    return True


# Below this many flops a kernel runs on the calling thread: starting an OpenMP team (a few microseconds)
# costs more than it saves (e.g. batch-1 MLP layers of ~10k flops).
MIN_PARALLEL_FLOPS = 200_000


def worth_parallel(flops: float) -> bool:
    """Whether a kernel of ``flops`` work should get a parallel loop at all (a symbolic count, from a VM
    kernel over unknown dims, is taken as large: the kernel serves big sizes too)."""
    if not isinstance(flops, (int, float)):
        return num_cores() > 1
    return flops >= MIN_PARALLEL_FLOPS and num_cores() > 1


def reduction_flops(C) -> int:
    """2 x output elements x reduction length of a multiply-accumulate compute such as a GEMM or a conv."""
    out = 1
    for d in get_const_tuple(C.shape):
        out *= size_hint(d)
    red = 1
    for iv in C.op.reduce_axis:
        red *= size_hint(iv.dom.extent)  # a symbolic extent (VM kernel) counts at its size hint
    return 2 * out * red


def shape_of(t) -> tuple:
    return get_const_tuple(t.shape)


# Weights of at least this many bytes are prefetched ahead by the conv schedules (prefetch_weights): in a
# network they come from memory (resnet18's 47 MB and resnet50's 100 MB do not stay in a 32 MB L3). Below it a
# layer's weights fit a core's L2 with room to spare, and the requests only cost issue slots (measured on AMD
# Zen 5, 1 MB L2: 256 KB gained less than 1 MB on resnet18).
PREFETCH_WEIGHT_BYTES = 1 << 20


def prefetch_weights(s, stage, weights, par, parts: int, spread_over) -> bool:
    """Request the weights the task ``parts`` iterations later in the parallel loop ``par`` of ``stage`` reads,
    spread over the loop ``spread_over`` of the tasks before it (``Stage.prefetch(..., spread_over=)``), where
    ``weights`` is a constant of the graph (a placeholder) of at least :data:`PREFETCH_WEIGHT_BYTES`. A parallel
    task that starts a new block of weights otherwise waits on memory for all of it while the core idles: the
    convs of a parallel loop over (output-channel chunk, row tile) read each chunk's weights from memory in the
    chunk's first row tile and from L2 in the others. Not when the network being compiled keeps its weights in
    the last-level cache (``topi.utils.weights_stream_from_memory`` False): the requests then find the data
    in cache and only cost issue slots (the MLP's 1.6 MB dense at batch 1 ran 1.24x slower with them); a kernel
    built alone (no network) takes the size rule. Returns whether it applied."""
    from ..utils import weights_stream_from_memory
    if not isinstance(weights.op, te.PlaceholderOp) or parts < 1 or weights_stream_from_memory() is False:
        return False
    from ...runtime.dtype import nbytes
    size = nbytes(weights.shape, weights.dtype)
    if size is None or size < PREFETCH_WEIGHT_BYTES:
        return False
    s[stage].prefetch(weights, par, parts, spread_over=spread_over)
    return True


__all__ = ["simd_width", "vector_registers", "scaled_registers", "num_cores", "as_list", "extent", "traverse_inline", "divisor_at_most", "split_vector",
           "parallel_outer", "shape_of", "worth_parallel", "reduction_flops", "MIN_PARALLEL_FLOPS", "te",
           "SYMBOLIC_SIZE_HINT", "size_hint", "is_static", "PREFETCH_WEIGHT_BYTES", "prefetch_weights"]


def nchwc_output_axes(s, out, block: int, what: str) -> list:
    """``[batch, channel chunk, y, x, channel block]`` loops of a conv schedule's output stage: the axes of a
    5-D NCHW{block}c output, or a 4-D NCHW one (a conv computed in blocks, then unpacked) split by
    ``block``."""
    axes = list(s[out].op.axis)
    if len(axes) == 5:
        return axes
    if len(axes) == 4:
        b, c, y, x = axes
        co, cb = s[out].split(c, factor=block)
        return [b, co, y, x, cb]
    raise KilnError(f"{what} schedule: unexpected output rank {len(axes)} (expects NCHW{{x}}c or NCHW)")
