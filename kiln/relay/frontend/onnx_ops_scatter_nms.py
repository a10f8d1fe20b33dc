"""ONNX converters for the scatter ops and NonMaxSuppression (TVM's mappings): ScatterND -> ``scatter_nd``
(indices transposed to TVM's depth-first layout; reduction none/add/mul/min/max), ScatterElements / Scatter ->
``scatter_elements`` (run-time indices checked: one out of range fails the run, as ONNX Runtime), and
NonMaxSuppression -> ``vision.all_class_non_max_suppression`` whose fixed-size result is cut to the selected
count by a ``dyn.strided_slice`` (a length known at run time only: the model runs on the VM). A NonMaxSuppression
whose inputs are all known at import time (the specialized node tests) is folded with the numpy reference.
"""
from __future__ import annotations

import numpy as np

from .. import op as _op
from ..op import dyn as _dyn
from ...topi.testing import all_class_nms_python
from .onnx_common import const, onnx_op
from .onnx_ops_tensor import _checked_indices

_REDUCTIONS = {"none": "update", "add": "add", "mul": "mul", "min": "min", "max": "max"}


def _reduction(ctx, attr, allowed):
    red = attr.get("reduction", "none")
    red = red.decode() if isinstance(red, bytes) else str(red)
    if red not in allowed:
        raise ctx.error(f"reduction must be one of {list(allowed)} at opset {ctx.opset}, got {red!r}")
    return _REDUCTIONS[red]


def _scatter_nd(allowed):
    def convert(inputs, attr, ctx):
        x, idx, upd = inputs
        r = ctx.ndim(idx)
        if r < 1:
            raise ctx.error("indices must have rank >= 1")
        m = ctx.shape(idx, dynamic_ok=True)[-1]
        if not isinstance(m, int):
            raise ctx.unsupported("ScatterND with indices whose last dimension (the index depth) is unknown")
        if m > ctx.ndim(x):
            raise ctx.error(f"indices of depth {m} exceed the rank {ctx.ndim(x)} of data")
        idx = _op.cast(idx, "int64") if ctx.dtype(idx) != "int64" else idx
        idx = _op.transpose(idx, [r - 1] + list(range(r - 1)))  # TVM's layout: the depth first
        return _op.scatter_nd(x, idx, upd, _reduction(ctx, attr, allowed))
    return convert


onnx_op("ScatterND", since=11)(_scatter_nd(("none",)))
onnx_op("ScatterND", since=16)(_scatter_nd(("none", "add", "mul")))
onnx_op("ScatterND", since=18)(_scatter_nd(("none", "add", "mul", "min", "max")))


def _scatter_elements(allowed):
    def convert(inputs, attr, ctx):
        x, idx, upd = inputs
        nd = ctx.ndim(x)
        axis = int(attr.get("axis", 0))
        if not -nd <= axis < nd:
            raise ctx.error(f"axis {axis} is out of range for data of rank {nd}")
        axis %= nd
        dim = ctx.shape(x, dynamic_ok=True)[axis]
        if isinstance(dim, int):  # negative indices counted from the end; out of range fails (ORT raises)
            idx = _checked_indices(ctx, idx, dim)
        else:  # the same check against the axis' run-time size
            dt = ctx.dtype(idx)
            size = _op.take(_op.shape_of(x, dt), const(np.array(axis, dt)), axis=0)
            idx = _op.take(_op.arange(const(np.array(0, dt)), size, const(np.array(1, dt)), dtype=dt), idx, axis=0,
                           mode="raise")
        return _op.scatter_elements(x, idx, upd, axis=axis, reduction=_reduction(ctx, attr, allowed))
    return convert


onnx_op("Scatter", since=9, until=10)(_scatter_elements(("none",)))
onnx_op("ScatterElements", since=11)(_scatter_elements(("none",)))
onnx_op("ScatterElements", since=16)(_scatter_elements(("none", "add", "mul")))
onnx_op("ScatterElements", since=18)(_scatter_elements(("none", "add", "mul", "min", "max")))


def _nms_input(inputs, k):
    return inputs[k] if len(inputs) > k and inputs[k] is not None else None


def _corner_boxes(boxes):
    """[x_center, y_center, width, height] -> two opposite corners (IoU does not care which axis is which)."""
    center = _op.strided_slice(boxes, [0], [2], axes=[2])
    half = _op.divide(_op.strided_slice(boxes, [2], [4], axes=[2]), const(np.float32(2)))
    return _op.concatenate([_op.subtract(center, half), _op.add(center, half)], 2)


@onnx_op("NonMaxSuppression", since=10)
def _nms_static(inputs, attr, ctx):
    """All inputs known at import time: folded with the numpy reference; otherwise the selected count depends on
    the data, so the dynamic converter below takes the node (VM)."""
    given = [_nms_input(inputs, k) for k in range(5)]
    values = [None if e is None else ctx.value(e) for e in given]
    if any(e is not None and v is None for e, v in zip(given, values)):
        err = ctx.unsupported("NonMaxSuppression of run-time boxes or limits (its output length depends on the "
                              "data)")
        err.data_dependent = True  # the dynamic converter builds it for the VM
        raise err
    boxes = np.asarray(values[0], np.float32)
    if int(attr.get("center_point_box", 0)):
        boxes = np.concatenate([boxes[..., :2] - boxes[..., 2:] / 2, boxes[..., :2] + boxes[..., 2:] / 2], -1)
    mx = 0 if values[2] is None else max(int(np.asarray(values[2]).reshape(-1)[0]), 0)
    iou = 0.0 if values[3] is None else float(np.asarray(values[3]).reshape(-1)[0])
    sth = -np.inf if values[4] is None else float(np.asarray(values[4]).reshape(-1)[0])
    return const(all_class_nms_python(boxes, values[1], mx, iou, sth))


@onnx_op("NonMaxSuppression", since=10, dynamic=True)
def _nms_dynamic(inputs, attr, ctx):
    boxes, scores = inputs[0], inputs[1]
    if ctx.ndim(boxes) != 3 or ctx.ndim(scores) != 3:
        raise ctx.error("boxes must be [batch, num_boxes, 4] and scores [batch, num_classes, num_boxes]")
    if int(attr.get("center_point_box", 0)):
        boxes = _corner_boxes(boxes)
    mx, iou, sth = (_nms_input(inputs, k) for k in (2, 3, 4))
    # ONNX Runtime: an absent or negative max_output_boxes_per_class selects nothing
    mx = const(np.zeros(1, "int64")) if mx is None else _op.maximum(
        _op.reshape(_op.cast(mx, "int64"), [1]), const(np.zeros(1, "int64")))
    iou = const(np.zeros(1, "float32")) if iou is None else _op.reshape(_op.cast(iou, "float32"), [1])
    lowest = np.array([np.finfo(np.float32).min], "float32")  # absent: every finite score takes part
    sth = const(lowest) if sth is None else _op.reshape(_op.cast(sth, "float32"), [1])
    out = _op.vision.all_class_non_max_suppression(boxes, scores, mx, iou, sth, output_format="onnx")
    end = _op.concatenate([out[1], const(np.array([3], "int64"))], 0)
    return _dyn.strided_slice(out[0], const(np.zeros(2, "int64")), end, const(np.ones(2, "int64")))
