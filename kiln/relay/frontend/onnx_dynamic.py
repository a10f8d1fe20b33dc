"""ONNX converters for shape operands that are run-time values (TVM's frontend emits ``dyn.*`` ops for them).

The static converters (onnx_ops_*.py) need every shape operand known at import time. When one refuses a node
because a shape operand is computed from graph inputs, or because an input has unknown (``relay.Any``)
dims, the importer looks up the node's run-time-shape variant (registered here with ``@onnx_op(..., dynamic=True)``,
in the same registry as the static converters): Reshape/Expand/Tile/Slice/TopK/ConstantOfShape/Resize become
``dyn.*`` ops and Shape/Size of an unknown shape become ``shape_of`` at run time. The resulting module runs
on the VM; ``DynamicToStatic`` folds back whatever becomes constant. ``from_onnx(...,
convert_config={"use_dyn_ops": False})`` turns this off (the static converters' errors then stand). See docs/onnx.md.
"""
from __future__ import annotations

import numpy as np

from ...error import KilnError
from .. import op as _op
from ..expr import const as _relay_const
from ..op import dyn as _dyn
from .onnx_common import lookup, onnx_op

__all__ = ["convert_dynamic"]

_INT64_MAX = np.iinfo(np.int64).max


def const(value):
    """A constant keeping its numpy dtype (int64 shape pieces stay int64)."""
    value = np.asarray(value)
    return _relay_const(value, str(value.dtype))


def _wants_dynamic(err: KilnError) -> bool:
    return bool(getattr(err, "runtime_inputs", None)) or bool(getattr(err, "dynamic_shape", False))


def convert_dynamic(op_type: str, inputs, attr, ctx, err: KilnError):
    """The dynamic conversion of a node a static converter refused with ``err`` (re-raised when none applies)."""
    if not _wants_dynamic(err) or not ctx.graph.config.get("use_dyn_ops", True):
        raise err
    entry = lookup(op_type, ctx.node.domain)
    fn = entry.get_converter(ctx.opset, dynamic=True) if entry is not None else None
    if fn is None:
        raise err
    return fn(inputs, attr, ctx)


def _i64(x, ctx):
    return x if ctx.dtype(x) == "int64" else _op.cast(x, "int64")


def _length(x, ctx, what: str) -> int:
    shape = ctx.shape(x, dynamic_ok=True)
    n = shape[0] if shape else 1
    if not isinstance(n, int):
        raise ctx.unsupported(f"a {what} operand of unknown length")
    return n


def _ndim(x, ctx) -> int:
    return len(ctx.shape(x, dynamic_ok=True))


def _piece(vec, j: int):
    return _op.strided_slice(vec, [j], [j + 1])


# -- shape queries ---------------------------------------------------------------------------------------------
@onnx_op("Shape", since=1, dynamic=True)
def _shape(inputs, attr, ctx):
    n = _ndim(inputs[0], ctx)
    s = _op.shape_of(inputs[0], "int64")
    start, end = int(attr.get("start", 0)), attr.get("end")
    start = min(max(start + n if start < 0 else start, 0), n)
    end = n if end is None else int(end)
    end = min(max(end + n if end < 0 else end, 0), n)
    return s if (start, end) == (0, n) else _op.strided_slice(s, [start], [end])


@onnx_op("Size", since=1, dynamic=True)
def _size(inputs, attr, ctx):
    return _op.prod(_op.shape_of(inputs[0], "int64"))


# -- shape operands at run time --------------------------------------------------------------------------------
@onnx_op("Reshape", since=5, dynamic=True)
def _reshape(inputs, attr, ctx):
    return _dyn.reshape(inputs[0], _i64(inputs[1], ctx), allowzero=bool(int(attr.get("allowzero", 0))))


@onnx_op("Expand", since=8, dynamic=True)
def _expand(inputs, attr, ctx):
    x, shape = inputs[0], _i64(inputs[1], ctx)
    k, nd = _length(shape, ctx, "shape"), _ndim(x, ctx)
    if k < nd:  # ONNX broadcasts both ways: the target may be shorter than the input
        shape = _op.concatenate([const(np.ones(nd - k, "int64")), shape], 0)
    return _dyn.broadcast_to(x, shape)


@onnx_op("Tile", since=6, dynamic=True)
def _tile(inputs, attr, ctx):
    return _dyn.tile(inputs[0], _i64(inputs[1], ctx))


@onnx_op("ConstantOfShape", since=9, dynamic=True)
def _constant_of_shape(inputs, attr, ctx):
    value = np.asarray(attr.get("value", np.zeros(1, "float32")))
    if value.size != 1:
        raise ctx.error(f"value must hold one element, got {value.size}")
    dt = str(value.dtype)
    return _dyn.full(const(value.reshape(()).astype(dt)), _i64(inputs[0], ctx), dt)


@onnx_op("Slice", since=10, dynamic=True)
def _slice(inputs, attr, ctx):
    x = inputs[0]
    nd = _ndim(x, ctx)
    starts, ends = _i64(inputs[1], ctx), _i64(inputs[2], ctx)
    k = _length(starts, ctx, "starts")
    axes = inputs[3] if len(inputs) > 3 and inputs[3] is not None else None
    steps = inputs[4] if len(inputs) > 4 and inputs[4] is not None else None
    if axes is None:
        axes = list(range(k))
    else:
        axes = [int(a) for a in np.asarray(ctx.require_value(axes, "axes")).reshape(-1)]
    axes = [a + nd if a < 0 else a for a in axes]
    if sorted(set(axes)) != sorted(axes) or any(not 0 <= a < nd for a in axes):
        raise ctx.error(f"axes {axes} are not distinct axes of a rank-{nd} input")
    steps = _i64(steps, ctx) if steps is not None else None
    begin, end, stride = [], [], []
    for a in range(nd):
        if a in axes:
            j = axes.index(a)
            begin.append(_piece(starts, j))
            end.append(_piece(ends, j))
            stride.append(_piece(steps, j) if steps is not None else const(np.ones(1, "int64")))
        else:
            begin.append(const(np.zeros(1, "int64")))
            end.append(const(np.array([_INT64_MAX], "int64")))
            stride.append(const(np.ones(1, "int64")))
    return _dyn.strided_slice(x, _op.concatenate(begin, 0), _op.concatenate(end, 0), _op.concatenate(stride, 0))


@onnx_op("TopK", since=10, dynamic=True)
def _topk(inputs, attr, ctx):
    x = inputs[0]
    nd = _ndim(x, ctx)
    axis = int(attr.get("axis", -1))
    axis = axis + nd if axis < 0 else axis
    largest = bool(int(attr.get("largest", 1)))
    k = _op.reshape(_i64(inputs[1], ctx), [])
    values, indices = _dyn.topk(x, k, axis=axis, ret_type="both", is_ascend=not largest, dtype="int64")
    return [values, indices]


_RESIZE_METHODS = {"nearest": "nearest_neighbor", "linear": "linear", "cubic": "cubic"}


@onnx_op("Resize", since=11, dynamic=True)
def _resize(inputs, attr, ctx):
    """Resize of a 4-D NCHW tensor to run-time ``sizes`` (or ``floor(shape * scales)``) over H and W."""
    x = inputs[0]
    if _ndim(x, ctx) != 4:
        raise ctx.unsupported("Resize with run-time sizes of a tensor that is not 4-D")
    if int(attr.get("antialias", 0)) or attr.get("axes") is not None:
        raise ctx.unsupported("Resize with run-time sizes and antialias/axes")
    method = _RESIZE_METHODS.get(attr.get("mode", "nearest"))
    coord = attr.get("coordinate_transformation_mode", "half_pixel")
    if coord in ("tf_crop_and_resize", "half_pixel_symmetric"):
        raise ctx.unsupported(f"coordinate_transformation_mode {coord!r}")
    scales = inputs[2] if len(inputs) > 2 else None
    sizes = inputs[3] if len(inputs) > 3 else None
    if sizes is not None and _length(sizes, ctx, "sizes") > 0:
        hw = _op.strided_slice(_i64(sizes, ctx), [2], [4])
    elif scales is not None:
        shape = _op.cast(_op.shape_of(x, "int64"), "float32")
        full = _op.cast(_op.floor(_op.multiply(shape, _op.cast(scales, "float32"))), "int64")
        hw = _op.strided_slice(full, [2], [4])
    else:
        raise ctx.error("Resize needs scales or sizes")
    rounding = attr.get("nearest_mode", "round_prefer_floor") if method == "nearest_neighbor" else ""
    return _dyn.image.resize2d(x, hw, layout="NCHW", method=method, coordinate_transformation_mode=coord,
                               rounding_method=rounding, cubic_alpha=float(attr.get("cubic_coeff_a", -0.75)),
                               cubic_exclude=int(attr.get("exclude_outside", 0)),
                               extrapolation_value=float(attr.get("extrapolation_value", 0.0)))




@onnx_op("Pad", since=11, dynamic=True)
def _pad(inputs, attr, ctx):
    """Constant-mode Pad with run-time ``pads`` ([b0, b1, ..., e0, e1, ...]) and optional constant value."""
    x = inputs[0]
    nd = _ndim(x, ctx)
    if attr.get("mode", "constant") != "constant":
        raise ctx.unsupported(f"Pad mode {attr.get('mode')!r} with run-time pads")
    if len(inputs) > 3 and inputs[3] is not None:
        raise ctx.unsupported("Pad with run-time pads and an axes input")
    pads = _i64(inputs[1], ctx)
    if _length(pads, ctx, "pads") != 2 * nd:
        raise ctx.error(f"pads must hold {2 * nd} values for a rank-{nd} input")
    width = _op.transpose(_op.reshape(pads, [2, nd]), [1, 0])
    value = inputs[2] if len(inputs) > 2 and inputs[2] is not None else const(np.zeros((), ctx.dtype(x)))
    return _dyn.nn.pad(x, width, _op.reshape(value, []))
