"""aten searchsorted / bucketize (binary search into sorted boundaries) and multinomial (sampling by the
inverse CDF). kiln has no Relay searchsorted op, so the position is a count of comparisons:
``searchsorted(s, v) = sum(s < v)`` over the last axis (``s <= v`` with ``right=True``), which is exactly the
insertion index for a sorted ``s``."""
from __future__ import annotations

import numpy as np

from ....error import FrontendError
from .math import promote
from .registry import register
from ... import op


def _insertion_index(ctx, boundaries, values, right: bool, out_int32: bool):
    """For each value, how many of the sorted ``boundaries`` (last axis; leading axes match ``values``'
    leading axes, or ``boundaries`` is 1-D) lie before it."""
    b, v = promote(ctx, boundaries, values)
    bs, vs = list(ctx.shape(b)), list(ctx.shape(v))
    if len(bs) > 1 and bs[:-1] != vs[:-1]:
        raise FrontendError(f"aten::{ctx.op_name}: the sorted sequence's leading dims {bs[:-1]} must match "
                            f"the values' {vs[:-1]} (or the sequence must be 1-D)")
    if len(bs) == 1:  # compare every value with the whole sequence
        vv = op.expand_dims(v, len(vs))
        bb = op.reshape(b, [1] * len(vs) + bs)
    else:  # (..., M) against (..., N): (..., N, 1) vs (..., 1, M)
        vv = op.expand_dims(v, len(vs))
        bb = op.expand_dims(b, len(bs) - 1)
    before = op.less_equal(bb, vv) if right else op.less(bb, vv)
    return op.sum(op.cast(before, "int32" if out_int32 else "int64"), axis=[-1])


@register("searchsorted")
def _searchsorted(ctx, args):
    if args["sorter"] is not None:
        raise FrontendError("aten::searchsorted with a sorter is not supported: sort the sequence first")
    side = args["side"]
    right = bool(args.get("right", False)) or side == "right"
    return _insertion_index(ctx, args[0], ctx.as_expr(args[1]), right, bool(args.get("out_int32", False)))


@register("bucketize")
def _bucketize(ctx, args):
    return _insertion_index(ctx, args[1], ctx.as_expr(args[0]), bool(args.get("right", False)),
                            bool(args.get("out_int32", False)))


@register("multinomial")
def _multinomial(ctx, args):
    """Samples drawn with replacement by inverting each row's CDF at uniform numbers fixed when the model
    is imported (kiln has no random-number op; TVM's converter also fixes its random key at import time)."""
    import torch
    probs = args[0]
    n = int(ctx.scalar(args[1], "num_samples"))
    if not bool(args.get("replacement", False)) and n > 1:
        raise FrontendError("aten::multinomial without replacement is not supported (use replacement=True)")
    shape = list(ctx.shape(probs))
    if len(shape) not in (1, 2):
        raise FrontendError(f"aten::multinomial: probabilities must be 1-D or 2-D, got shape {shape}")
    dt = ctx.dtype(probs)
    rows = shape[0] if len(shape) == 2 else 1
    rng = np.random.default_rng(int(torch.initial_seed()) % (2 ** 63))
    u = rng.random((rows, n)).astype(dt)
    p2 = probs if len(shape) == 2 else op.reshape(probs, [1, shape[0]])
    cdf = op.cumsum(p2, axis=1)
    total = op.strided_slice(cdf, [shape[-1] - 1], [shape[-1]], axes=[1])
    target = op.multiply(ctx.const(u, dt), total)  # (rows, n)
    # the sample is the first category whose CDF exceeds the target: count the CDF entries <= target
    below = op.less_equal(op.expand_dims(cdf, 1), op.expand_dims(target, 2))
    idx = op.sum(op.cast(below, "int64"), axis=[2])
    idx = op.minimum(idx, ctx.const(shape[-1] - 1, "int64"))
    return idx if len(shape) == 2 else op.reshape(idx, [n])
