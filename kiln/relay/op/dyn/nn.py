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


#: constant fills; edge repeats the border; reflect mirrors without repeating it; wrap continues periodically
_MODES = ("constant", "edge", "reflect", "wrap")
_NP_MODES = {"edge": "edge", "reflect": "reflect", "wrap": "wrap"}


def _rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    w = tensor_arg(arg_types, 1, "pad_width")
    if len(w.shape) != 2 or w.shape[0] != len(t.shape) or w.shape[1] != 2:
        raise TypeInferenceError(f"dyn.nn.pad: pad_width must have shape ({len(t.shape)}, 2), got {tuple(w.shape)}")
    if attrs.pad_mode not in _MODES:
        raise TypeInferenceError(f"dyn.nn.pad: pad_mode must be one of {_MODES}, got {attrs.pad_mode!r}")
    return TensorType(any_shape(len(t.shape)), t.dtype)


def _ref(attrs, inputs, out_type):
    x, w = inputs[0], np.asarray(inputs[1]).astype(np.int64)
    if attrs.pad_mode in _NP_MODES:  # crop the negative widths, then numpy's pad with the positive ones
        src = tuple(slice(max(-b, 0), d - max(-a, 0)) for d, (b, a) in zip(x.shape, w))
        return np.pad(x[src], [(max(b, 0), max(a, 0)) for b, a in w], mode=_NP_MODES[attrs.pad_mode])
    value = np.asarray(inputs[2]).reshape(-1)[0]
    out = np.full([d + b + a for d, (b, a) in zip(x.shape, w)], value, dtype=x.dtype)
    src = tuple(slice(max(-b, 0), d - max(-a, 0)) for d, (b, a) in zip(x.shape, w))
    dst = tuple(slice(max(b, 0), max(b, 0) + (s.stop - s.start)) for (b, _), s in zip(w, src))
    out[dst] = x[src]
    return out


def _compute(attrs, inputs, out_type):
    data, width, value = inputs
    mode = attrs.pad_mode

    def source(j, dim):
        """The input index an out-of-range ``j`` reads in the edge/reflect/wrap modes."""
        if mode == "edge":
            return tir.min(tir.max(j, 0), dim - 1)
        if mode == "wrap":
            return tir.floormod(j, tir.max(dim, 1))
        # reflect: mirror about 0 and dim-1 (period 2*(dim-1)), so pads wider than the axis work too
        period = tir.max(2 * (dim - 1), 1)
        r = tir.floormod(j, period)
        return tir.min(r, period - r)

    def f(*i):
        if mode != "constant":
            idx = []
            for k, dim in enumerate(data.shape):
                d = index_like(i[k], dim) if not isinstance(dim, int) else dim
                idx.append(source(i[k] - index_like(i[k], width[k, 0]), d))
            return data(*idx)
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
