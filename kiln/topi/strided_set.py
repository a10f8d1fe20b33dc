"""``strided_set``: a copy of ``data`` with the strided region ``[begin:end:strides]`` replaced by ``v``
(TVM's ``topi.strided_set``, here with constant begin/end/strides)."""
from __future__ import annotations

from .. import te
from ..error import KilnError
from ..tir import op as T
from . import tag
from .transform import strided_slice_plan
from .utils import get_const_tuple


def strided_set(data: te.Tensor, v: te.Tensor, begin, end, strides=None) -> te.Tensor:
    """``out = data.copy(); out[begin:end:strides] = v`` (numpy slice semantics; ``v`` broadcasts)."""
    shape = get_const_tuple(data.shape)
    plan = strided_slice_plan(shape, begin, end, strides)
    region = [len(range(*p)) for p in plan]
    vshape = get_const_tuple(v.shape)
    if len(vshape) > len(shape):
        raise KilnError(f"strided_set: v has rank {len(vshape)}, more than data's {len(shape)}")
    lead = len(shape) - len(vshape)
    for k, n in enumerate(vshape):
        if n not in (1, region[lead + k]):
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
                vidx.append(0 if n == 1 else T.max(T.min(pos, n - 1), 0))
        cond = T.all(*inside) if inside else True
        return T.if_then_else(cond, v(*vidx).astype(data.dtype), data(*idx))

    return te.compute(data.shape, fcompute, name="T_strided_set", tag=tag.INJECTIVE)
