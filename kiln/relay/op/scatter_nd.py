"""``scatter_nd`` (TVM's ``relay.scatter_nd`` / ``relay.op.transform.scatter_nd``): registration, type relation,
shape function, numpy reference and constructor. The TOPI kernel is ``kiln.topi.scatter_nd``."""
from __future__ import annotations

import numpy as np

from ...error import KilnError, TypeInferenceError
from ...ir.attrs import Attrs, Field
from ...ir.op import Op, OpPattern
from ...ir.type import TensorType
from ..expr import Call
from ._define import define_op, topi_compute
from .op import register_shape_func
from .type_relations import dims_compatible, shape_text, tensor_arg

__all__ = ["scatter_nd"]

MODES = ("update", "add", "mul", "min", "max")


class ScatterNDAttrs(Attrs):
    type_key = "relay.attrs.ScatterNDAttrs"
    fields = {"mode": Field("update", str)}


def _rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    idx = tensor_arg(arg_types, 1, "indices")
    upd = tensor_arg(arg_types, 2, "updates")
    if attrs.mode not in MODES:
        raise TypeInferenceError(f"scatter_nd: mode must be one of {MODES}, got {attrs.mode!r}")
    if not str(idx.dtype).startswith(("int", "uint")):
        raise TypeInferenceError(f"scatter_nd: indices must be integers, got {idx.dtype}")
    if upd.dtype != data.dtype:
        raise TypeInferenceError(f"scatter_nd: updates are {upd.dtype} but data is {data.dtype}")
    if len(idx.shape) < 1 or not isinstance(idx.shape[0], int):
        raise TypeInferenceError(f"scatter_nd: indices {shape_text(idx.shape)} must have a static first dimension "
                                 f"(the index depth M)")
    m = idx.shape[0]
    want = tuple(idx.shape[1:]) + tuple(data.shape[m:])
    if m > len(data.shape) or len(upd.shape) != len(want) or not all(
            dims_compatible(a, b) for a, b in zip(upd.shape, want)):
        raise TypeInferenceError(f"scatter_nd: updates {shape_text(upd.shape)} must be indices.shape[1:] + "
                                 f"data.shape[M:] = {shape_text(want)} (indices {shape_text(idx.shape)}, data "
                                 f"{shape_text(data.shape)}, M = {m} <= rank of data)")
    return TensorType(tuple(data.shape), data.dtype)


def scatter_nd_python(data, indices, updates, mode="update"):
    """numpy reference (TVM's layout: indices [M, Y...]); negative coordinates count from the end."""
    out = np.array(data, copy=True)
    m = indices.shape[0]
    pos = indices.reshape(m, -1).astype(np.int64)
    upd = updates.reshape((pos.shape[1],) + data.shape[m:])
    for y in range(pos.shape[1]):
        coord = []
        for k in range(m):
            v = int(pos[k, y])
            if not -data.shape[k] <= v < data.shape[k]:
                raise KilnError(f"scatter_nd: index {v} on axis {k} is out of range for data of shape {data.shape}")
            coord.append(v % data.shape[k])
        c = tuple(coord)
        if mode == "update":
            out[c] = upd[y]
        elif mode == "add":
            out[c] = out[c] + upd[y]
        elif mode == "mul":
            out[c] = out[c] * upd[y]
        elif mode == "min":
            out[c] = np.minimum(out[c], upd[y])
        else:
            out[c] = np.maximum(out[c], upd[y])
    return out


define_op("scatter_nd", num_inputs=3, args=("data", "indices", "updates"), attrs=ScatterNDAttrs, rel=_rel,
          rel_name="ScatterND", pattern=OpPattern.OPAQUE, level=3,
          reference=lambda a, i, t: scatter_nd_python(i[0], i[1], i[2], a.mode),
          compute=topi_compute("scatter_nd", "scatter_nd", lambda a, i, t: [i[0], i[1], i[2], a.mode]))


def _shape_func(attrs, inputs, out_ndims):
    """The output has data's shape."""
    return [tuple(inputs[0])]


register_shape_func("scatter_nd", False, _shape_func)


def scatter_nd(data, indices, updates, mode="update"):
    """Copy of ``data`` with ``updates`` [Y..., X_M...] written (mode "update") or reduced ("add", "mul", "min",
    "max") at the coordinates ``indices`` [M, Y...] holds (index depth first, as TVM)."""
    op = Op.get("scatter_nd")
    return Call(op, [data, indices, updates], op.make_attrs(mode=str(mode)))
