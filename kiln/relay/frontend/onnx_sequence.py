"""ONNX sequences at import time: a Python list of Relay tensors (TVM lowers them to tuples too).

A :class:`Sequence` lives in the converter's name table like any value; its length and the positions the
sequence ops use must be known at import time (constants, initializers, or inputs the node-test backend binds).
A sequence that reaches a graph output, or an If branch's output, becomes a Relay tuple (nested in the
function's result tuple); the ONNX backend hands it back as a list of arrays. Sequences whose length is decided
at run time (a Loop appending to a sequence, a SplitToSequence by a run-time size) would need the Prelude's
``List``; kiln refuses them with a clear error.
"""
from __future__ import annotations

import numpy as np

from .. import op as _op
from .onnx_common import onnx_dtype, onnx_op

__all__ = ["Sequence"]


class Sequence(list):
    """An ONNX sequence value: its tensors (Relay expressions) in order, and their element dtype."""

    def __init__(self, items=(), dtype: str | None = None):
        super().__init__(items)
        self.dtype = dtype


def _seq(x, ctx, what: str = "input 0") -> Sequence:
    if not isinstance(x, Sequence):
        raise ctx.error(f"{what} must be a sequence")
    return x


def _position(expr, n: int, ctx, insert: bool) -> int:
    pos = int(np.asarray(ctx.require_value(expr, "sequence position")).reshape(-1)[0])
    hi = n if insert else n - 1
    if not -n <= pos <= hi:
        raise ctx.error(f"position {pos} is out of range for a sequence of {n} tensors")
    return pos + n if pos < 0 else pos


@onnx_op("SequenceConstruct", since=11)
def _sequence_construct(inputs, attr, ctx):
    dt = {ctx.dtype(x) for x in inputs}
    if len(dt) > 1:
        raise ctx.error(f"the tensors of a sequence must share one dtype, got {sorted(dt)}")
    return [Sequence(inputs, dt.pop() if dt else None)]


@onnx_op("SequenceEmpty", since=11)
def _sequence_empty(inputs, attr, ctx):
    dtype = onnx_dtype(int(attr["dtype"]), ctx.where) if "dtype" in attr else "float32"
    return [Sequence([], dtype)]


@onnx_op("SequenceLength", since=11)
def _sequence_length(inputs, attr, ctx):
    return ctx.const(len(_seq(inputs[0], ctx)), "int64")


@onnx_op("SequenceAt", since=11)
def _sequence_at(inputs, attr, ctx):
    seq = _seq(inputs[0], ctx)
    return seq[_position(inputs[1], len(seq), ctx, insert=False)]


@onnx_op("SequenceInsert", since=11)
def _sequence_insert(inputs, attr, ctx):
    seq = _seq(inputs[0], ctx)
    x = inputs[1]
    if seq.dtype is not None and ctx.dtype(x) != seq.dtype:
        raise ctx.error(f"inserting a {ctx.dtype(x)} tensor into a sequence of {seq.dtype}")
    pos = len(seq) if len(inputs) < 3 or inputs[2] is None else _position(inputs[2], len(seq), ctx, insert=True)
    items = list(seq)
    items.insert(pos, x)
    return [Sequence(items, ctx.dtype(x))]


@onnx_op("SequenceErase", since=11)
def _sequence_erase(inputs, attr, ctx):
    seq = _seq(inputs[0], ctx)
    if not seq:
        raise ctx.error("erasing from an empty sequence")
    pos = len(seq) - 1 if len(inputs) < 2 or inputs[1] is None else _position(inputs[1], len(seq), ctx, False)
    items = list(seq)
    del items[pos]
    return [Sequence(items, seq.dtype)]


@onnx_op("ConcatFromSequence", since=11)
def _concat_from_sequence(inputs, attr, ctx):
    seq = _seq(inputs[0], ctx)
    if not seq:
        raise ctx.error("concatenating an empty sequence")
    axis = int(attr["axis"])
    new_axis = int(attr.get("new_axis", 0))
    nd = ctx.ndim(seq[0]) + (1 if new_axis else 0)
    if not -nd <= axis < nd:
        raise ctx.error(f"axis {axis} is out of range for rank {nd}")
    axis = axis + nd if axis < 0 else axis
    if new_axis:
        return _op.stack(list(seq), axis)
    return _op.concatenate(list(seq), axis)


@onnx_op("SplitToSequence", since=11)
def _split_to_sequence(inputs, attr, ctx):
    x = inputs[0]
    shape = ctx.shape(x)
    nd = len(shape)
    axis = int(attr.get("axis", 0))
    if not -nd <= axis < nd:
        raise ctx.error(f"axis {axis} is out of range for rank {nd}")
    axis = axis + nd if axis < 0 else axis
    n = shape[axis]
    split = inputs[1] if len(inputs) > 1 else None
    if split is None:
        sizes = [1] * n
        squeeze = int(attr.get("keepdims", 1)) == 0
    else:
        sv = np.asarray(ctx.require_value(split, "split size"))
        squeeze = False
        if sv.ndim == 0:
            step = int(sv)
            if step <= 0:
                raise ctx.error(f"split size {step} must be positive")
            sizes = [step] * (n // step) + ([n % step] if n % step else [])
        else:
            sizes = [int(s) for s in sv.reshape(-1)]
            if any(s < 0 for s in sizes) or sum(sizes) != n:
                raise ctx.error(f"split sizes {sizes} do not add up to the axis length {n}")
    parts = []
    start = 0
    for s in sizes:
        begin = [0] * nd
        end = list(shape)
        begin[axis], end[axis] = start, start + s
        part = _op.strided_slice(x, begin, end)
        parts.append(_op.squeeze(part, [axis]) if squeeze else part)
        start += s
    return [Sequence(parts, ctx.dtype(x))]


# -- optionals: decided at import time (an empty optional is None in the name table) ---------------------------
@onnx_op("Optional", since=15)
def _optional(inputs, attr, ctx):
    return [inputs[0] if inputs else None]


@onnx_op("OptionalHasElement", since=15)
def _optional_has_element(inputs, attr, ctx):
    present = bool(inputs) and inputs[0] is not None
    return ctx.const(present, "bool")


@onnx_op("OptionalGetElement", since=15)
def _optional_get_element(inputs, attr, ctx):
    if not inputs or inputs[0] is None:
        raise ctx.error("OptionalGetElement of an empty optional")
    return [inputs[0]]
