"""``dyn.nn.pad``: padding widths (and the pad value) are run-time tensors."""
from __future__ import annotations

import numpy as np

from ....error import TypeInferenceError
from ....ir.type import TensorType
from .. import op_attrs as A
from ..type_relations import tensor_arg
from ._common import any_shape, call, define_dyn_op, index_like
from .... import te, tir
from ...expr import RelayExpr, const

__all__ = ["pad"]


def _rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    w = tensor_arg(arg_types, 1, "pad_width")
    if len(w.shape) != 2 or w.shape[0] != len(t.shape) or w.shape[1] != 2:
        raise TypeInferenceError(f"dyn.nn.pad: pad_width must have shape ({len(t.shape)}, 2), got {tuple(w.shape)}")
    if attrs.pad_mode != "constant":
        raise TypeInferenceError(f"dyn.nn.pad: pad_mode {attrs.pad_mode!r} is not supported (constant only)")
    return TensorType(any_shape(len(t.shape)), t.dtype)


def _ref(attrs, inputs, out_type):
    x, w = inputs[0], np.asarray(inputs[1]).astype(np.int64)
    value = np.asarray(inputs[2]).reshape(-1)[0]
    out = np.full([d + b + a for d, (b, a) in zip(x.shape, w)], value, dtype=x.dtype)
    src = tuple(slice(max(-b, 0), d - max(-a, 0)) for d, (b, a) in zip(x.shape, w))
    dst = tuple(slice(max(b, 0), max(b, 0) + (s.stop - s.start)) for (b, _), s in zip(w, src))
    out[dst] = x[src]
    return out


def _compute(attrs, inputs, out_type):
    data, width, value = inputs

    def f(*i):
        idx, inside = [], None
        for k, dim in enumerate(data.shape):
            j = i[k] - index_like(i[k], width[k, 0])
            ok = tir.all(j >= 0, j < index_like(i[k], dim) if not isinstance(dim, int) else j < dim)
            inside = ok if inside is None else tir.all(inside, ok)
            idx.append(tir.min(tir.max(j, 0), (index_like(i[k], dim) if not isinstance(dim, int) else dim) - 1))
        v = value(*([0] * len(value.shape)))
        v = tir.cast(v, data.dtype) if v.dtype != data.dtype else v
        return v if inside is None else tir.Select(inside, data(*idx), v)
    return [te.compute(list(out_type.shape), f, name="T_dyn_pad")]


define_dyn_op("dyn.nn.pad", args=("data", "pad_width", "pad_value"), attrs=A.PadAttrs, rel=_rel, reference=_ref,
              compute=_compute)


def pad(data, pad_width, pad_value=0.0, pad_mode="constant"):
    if not isinstance(pad_value, RelayExpr):
        pad_value = const(pad_value)
    return call("dyn.nn.pad", [data, pad_width, pad_value], pad_width=(), pad_mode=pad_mode)
