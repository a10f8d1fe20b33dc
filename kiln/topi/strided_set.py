"""``strided_set``: a copy of ``data`` with the strided region ``[begin:end:strides]`` replaced by ``v``
(TVM's ``topi.strided_set``, here with constant begin/end/strides)."""
from __future__ import annotations

from .. import te
from ..error import KilnError, OpNotImplemented
from ..tir import op as T
from . import tag
from .transform import strided_slice_plan
from .utils import get_const_tuple


_END = 2 ** 31 - 1


def _symbolic_bounds(n, k, begin, end, strides):
    """(start, stop, step) of axis ``k`` over an unknown (relay.Any) extent ``n``: numpy's clamping as
    expressions; a negative step over an unknown extent is refused."""
    begin, end, strides = list(begin or ()), list(end or ()), list(strides or ())
    step = int(strides[k]) if k < len(strides) else 1
    if step <= 0:
        raise OpNotImplemented(f"strided_set: a stride of {step} on axis {k}, whose extent is unknown (relay.Any), "
                               "is not supported (positive strides only)")
    b = int(begin[k]) if k < len(begin) and begin[k] is not None else 0
    e = int(end[k]) if k < len(end) and end[k] is not None else None
    start = T.max(n + b, 0) if b < 0 else T.min(b, n) if b else 0
    stop = n if e is None or e >= _END else T.max(n + e, 0) if e < 0 else T.min(e, n)
    return start, stop, step


def strided_set(data: te.Tensor, v: te.Tensor, begin, end, strides=None) -> te.Tensor:
    """``out = data.copy(); out[begin:end:strides] = v`` (numpy slice semantics; ``v`` broadcasts)."""
    shape = get_const_tuple(data.shape)
    static = [n if isinstance(n, int) else 1 for n in shape]
    plan = strided_slice_plan(static, begin, end, strides)
    region = [len(range(*p)) if isinstance(n, int) else None for p, n in zip(plan, shape)]
    plan = [p if isinstance(n, int) else _symbolic_bounds(n, k, begin, end, strides)
            for k, (p, n) in enumerate(zip(plan, shape))]
    vshape = get_const_tuple(v.shape)
    if len(vshape) > len(shape):
        raise KilnError(f"strided_set: v has rank {len(vshape)}, more than data's {len(shape)}")
    lead = len(shape) - len(vshape)
    for k, n in enumerate(vshape):
        if isinstance(n, int) and region[lead + k] is not None and n not in (1, region[lead + k]):
            raise KilnError(f"strided_set: v of shape {vshape} does not broadcast to the region {tuple(region)}")

    def fcompute(*idx):
        inside = []
        vidx = []
        for ax, (i, (start, stop, step)) in enumerate(zip(idx, plan)):
            if step > 0:
                inside.append(T.all(i >= start, i < stop, T.floormod(i - start, step) == 0))
                pos = T.floordiv(i - start, step)
            else:
                inside.append(T.all(i <= start, i > stop, T.floormod(start - i, -step) == 0))
                pos = T.floordiv(start - i, -step)
            if ax >= lead:
                n = vshape[ax - lead]
                # clamped so the read stays in bounds even where the value is not selected
                vidx.append(0 if isinstance(n, int) and n == 1 else T.max(T.min(pos, n - 1), 0))
        cond = T.all(*inside) if inside else True
        return T.if_then_else(cond, v(*vidx).astype(data.dtype), data(*idx))

    return te.compute(data.shape, fcompute, name="T_strided_set", tag=tag.INJECTIVE)
