"""``scatter_elements`` (TVM's ``relay.scatter_elements``): registration, numpy reference and constructor."""
from __future__ import annotations

import numpy as np

from ...error import TypeInferenceError
from ...ir.attrs import Attrs, Field
from ...ir.op import Op, OpPattern
from ...ir.type import TensorType
from ..expr import Call
from ._define import define_op, topi_compute
from .type_relations import normalize_axis, shape_text, tensor_arg

__all__ = ["scatter_elements"]

_REDUCTIONS = ("update", "add", "mul", "mean", "min", "max")


class ScatterElementsAttrs(Attrs):
    type_key = "relay.attrs.ScatterElementsAttrs"
    fields = {"axis": Field(0, int), "reduction": Field("update", str)}


def _scatter_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    idx = tensor_arg(arg_types, 1, "indices")
    upd = tensor_arg(arg_types, 2, "updates")
    if not str(idx.dtype).startswith(("int", "uint")):
        raise TypeInferenceError(f"scatter_elements: indices must be integers, got {idx.dtype}")
    if tuple(idx.shape) != tuple(upd.shape) or len(idx.shape) != len(data.shape):
        raise TypeInferenceError(f"scatter_elements: indices {shape_text(idx.shape)} and updates "
                                 f"{shape_text(upd.shape)} must have one shape of the rank of data "
                                 f"{shape_text(data.shape)}")
    axis = normalize_axis(attrs.axis, len(data.shape), "scatter_elements axis")
    for d, (i, n) in enumerate(zip(idx.shape, data.shape)):
        if d != axis and i > n:
            raise TypeInferenceError(f"scatter_elements: indices {shape_text(idx.shape)} are larger than data "
                                     f"{shape_text(data.shape)} on axis {d}")
    if attrs.reduction not in _REDUCTIONS:
        raise TypeInferenceError(f"scatter_elements: reduction must be one of {_REDUCTIONS}, got {attrs.reduction!r}")
    if upd.dtype != data.dtype:
        raise TypeInferenceError(f"scatter_elements: updates are {upd.dtype} but data is {data.dtype}")
    return TensorType(data.shape, data.dtype)


def _scatter_ref(attrs, inputs, out_type):
    data, idx, upd = inputs
    axis = attrs.axis % data.ndim
    out = data.copy()
    n = data.shape[axis]
    if attrs.reduction == "mean":
        total, count = out.astype(np.float64), np.ones(data.shape)
    for p in np.ndindex(*idx.shape):
        i = int(idx[p])
        if i < -n or i >= n:
            raise IndexError(f"scatter_elements: index {i} is out of range for axis {axis} of size {n}")
        o = list(p)
        o[axis] = i % n
        o = tuple(o)
        v = upd[p]
        red = attrs.reduction
        if red == "update":
            out[o] = v
        elif red == "add":
            out[o] = out[o] + v
        elif red == "mul":
            out[o] = out[o] * v
        elif red == "min":
            out[o] = min(out[o], v) if not np.isnan(out[o]) else out[o]
        elif red == "max":
            out[o] = max(out[o], v) if not np.isnan(out[o]) else out[o]
        else:
            total[o] += v
            count[o] += 1
    if attrs.reduction == "mean":
        out = total / count
        if data.dtype.kind in "iu":
            out = np.trunc(out)
    return out


define_op("scatter_elements", num_inputs=3, args=("data", "indices", "updates"), attrs=ScatterElementsAttrs,
          rel=_scatter_rel, rel_name="ScatterElements", pattern=OpPattern.OPAQUE, reference=_scatter_ref, level=10,
          compute=topi_compute("scatter_elements", "scatter_elements",
                               lambda a, i, t: [i[0], i[1], i[2], a.axis, a.reduction]))


def scatter_elements(data, indices, updates, axis=0, reduction="update"):
    """Copy of ``data`` with ``updates`` written (or reduced: add, mul, mean, min, max) at ``indices`` along
    ``axis``."""
    op = Op.get("scatter_elements")
    return Call(op, [data, indices, updates], op.make_attrs(axis=int(axis), reduction=reduction))
