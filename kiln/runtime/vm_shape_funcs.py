"""Data-dependent shape functions of the ``dyn.*`` ops, run by the VM on the host (TVM's data-dependent
``register_shape_func``).

Each function takes the op's attributes (a JSON dict) and its input tensors as numpy arrays and returns one
output shape per output. They read the *values* of the shape operands (a ``dyn.reshape`` target, slice bounds,
``k`` of a ``dyn.topk``...) and only the shapes of the data operands. They live in the runtime so that a saved
executable runs without the compiler; the compiler registers the same functions as the ops' ``FShapeFunc``
(kiln/relay/op/dyn), so the VM and the type-level rules cannot drift apart.
"""
from __future__ import annotations

import math

import numpy as np

from ..error import KilnError

__all__ = ["DYN_SHAPE_FUNCS", "run_shape_func", "reshape_dims", "slice_dims"]


def _ints(v) -> list:
    return [int(x) for x in np.asarray(v).reshape(-1)]


def reshape_dims(ishape, newshape, allowzero: bool = False) -> tuple:
    """numpy/ONNX/Relay reshape target: 0 copies the input dim (unless ``allowzero``), one -1 is inferred."""
    ishape = [int(d) for d in ishape]
    out, infer_at = [], -1
    for k, v in enumerate(int(x) for x in newshape):
        if v == 0 and not allowzero:
            if k >= len(ishape):
                raise KilnError(f"dyn.reshape: 0 at position {k} has no input dimension to copy "
                                f"(input shape {tuple(ishape)})")
            out.append(ishape[k])
        elif v == -1:
            if infer_at >= 0:
                raise KilnError(f"dyn.reshape: target {tuple(newshape)} has more than one -1")
            infer_at = len(out)
            out.append(1)
        elif v < 0:
            raise KilnError(f"dyn.reshape: invalid target value {v} in {tuple(newshape)}")
        else:
            out.append(v)
    total = math.prod(ishape)
    if infer_at >= 0:
        rest = math.prod(d for j, d in enumerate(out) if j != infer_at)
        if rest == 0 or total % rest:
            raise KilnError(f"dyn.reshape: cannot reshape {tuple(ishape)} to {tuple(newshape)}")
        out[infer_at] = total // rest
    if math.prod(out) != total:
        raise KilnError(f"dyn.reshape: cannot reshape {tuple(ishape)} ({total} elements) to {tuple(out)}")
    return tuple(out)


def slice_dims(shape, begin, end, strides, slice_mode: str = "end") -> list:
    """(begin, end, stride) per axis after numpy-style normalization; the extent is ``len(range(b, e, s))``."""
    shape = [int(d) for d in shape]
    begin, end = _ints(begin), _ints(end)
    strides = _ints(strides) if strides is not None and np.asarray(strides).size else [1]
    plan = []
    for ax, dim in enumerate(shape):
        if ax >= len(begin):
            plan.append((0, dim, 1))
            continue
        s = strides[ax] if ax < len(strides) else strides[-1]
        if slice_mode == "size":
            s = 1
        if s == 0:
            raise KilnError(f"dyn.strided_slice: stride 0 on axis {ax}")
        b = begin[ax]
        e = end[ax] if ax < len(end) else (dim if s > 0 else -dim - 1)
        if slice_mode == "size":
            e = dim if e < 0 else b + e
        plan.append(slice(b, e, s).indices(dim))
    return plan


def _reshape(attrs, inputs):
    return [reshape_dims(inputs[0].shape, _ints(inputs[1]), attrs.get("allowzero", False))]


def _broadcast_to(attrs, inputs):
    target = tuple(_ints(inputs[1]))
    try:
        return [tuple(np.broadcast_shapes(inputs[0].shape, target))]
    except ValueError:
        raise KilnError(f"dyn.broadcast_to: cannot broadcast {inputs[0].shape} to {target}") from None


def _tile(attrs, inputs):
    shape, reps = list(inputs[0].shape), _ints(inputs[1])
    n = max(len(shape), len(reps))
    shape = [1] * (n - len(shape)) + shape
    reps = [1] * (n - len(reps)) + reps
    if any(r < 0 for r in reps):
        raise KilnError(f"dyn.tile: negative repeats {reps}")
    return [tuple(d * r for d, r in zip(shape, reps))]


def _full(attrs, inputs):
    shape = tuple(_ints(inputs[-1]))
    if any(d < 0 for d in shape):
        raise KilnError(f"dyn.full: negative dimension in shape {shape}")
    return [shape]


def _strided_slice(attrs, inputs):
    plan = slice_dims(inputs[0].shape, inputs[1], inputs[2], inputs[3] if len(inputs) > 3 else None,
                      attrs.get("slice_mode", "end"))
    return [tuple(len(range(*p)) for p in plan)]


def _topk(attrs, inputs):
    shape = list(inputs[0].shape)
    axis = int(attrs.get("axis", -1)) % len(shape)
    k = _ints(inputs[1])[0]
    if k < 1:
        k = shape[axis]
    if k > shape[axis]:
        raise KilnError(f"dyn.topk: k={k} is larger than axis {axis} of shape {tuple(shape)}")
    out = tuple(shape[:axis] + [k] + shape[axis + 1:])
    ret = attrs.get("ret_type", "both")
    return [out, out] if ret == "both" else [out]


def _pad(attrs, inputs):
    pads = np.asarray(inputs[1]).reshape(-1, 2)
    shape = inputs[0].shape
    if pads.shape[0] != len(shape):
        raise KilnError(f"dyn.nn.pad: pad_width has {pads.shape[0]} rows for a rank-{len(shape)} input")
    out = tuple(int(d + b + a) for d, (b, a) in zip(shape, pads))
    if any(d < 0 for d in out):
        raise KilnError(f"dyn.nn.pad: padding {pads.tolist()} of shape {tuple(shape)} gives a negative size")
    return [out]


def _resize2d(attrs, inputs):
    shape = list(inputs[0].shape)
    size = _ints(inputs[1])
    if len(size) != 2 or min(size) < 1:
        raise KilnError(f"dyn.image.resize2d: size must hold two positive values, got {size}")
    layout = attrs.get("layout", "NCHW")
    shape[layout.index("H")], shape[layout.index("W")] = size
    return [tuple(shape)]


def _expand_dims(attrs, inputs):
    shape = list(inputs[0].shape)
    axis = _ints(inputs[1])[0]
    n = int(attrs.get("num_newaxis", 1))
    if axis < 0:
        axis += len(shape) + 1
    if not 0 <= axis <= len(shape):
        raise KilnError(f"dyn.expand_dims: axis {axis} out of range for rank {len(shape)}")
    return [tuple(shape[:axis] + [1] * n + shape[axis:])]


def _squeeze(attrs, inputs):
    shape = list(inputs[0].shape)
    axes = {a % len(shape) for a in _ints(inputs[1])}
    for a in axes:
        if shape[a] != 1:
            raise KilnError(f"dyn.squeeze: axis {a} of shape {tuple(shape)} is not 1")
    return [tuple(d for k, d in enumerate(shape) if k not in axes)]


def _arange(attrs, inputs):
    start, stop, step = (float(np.asarray(v).reshape(-1)[0]) for v in inputs)
    if step == 0:
        raise KilnError("arange: step must not be 0")
    return [(max(int(math.ceil((stop - start) / step)), 0),)]


DYN_SHAPE_FUNCS = {
    "dyn.reshape": _reshape, "dyn.broadcast_to": _broadcast_to, "dyn.tile": _tile, "dyn.full": _full,
    "dyn.zeros": _full, "dyn.ones": _full, "dyn.strided_slice": _strided_slice, "dyn.topk": _topk,
    "dyn.nn.pad": _pad, "dyn.image.resize2d": _resize2d, "dyn.expand_dims": _expand_dims,
    "dyn.squeeze": _squeeze, "arange": _arange,
}


def run_shape_func(name: str, attrs: dict, inputs: list) -> list:
    """Output shapes of data-dependent op ``name`` for these input arrays."""
    fn = DYN_SHAPE_FUNCS.get(name)
    if fn is None:
        raise KilnError(f"VM: no run-time shape function for operator {name}")
    return fn(attrs, inputs)
