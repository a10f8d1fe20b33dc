"""Sorting and scans (TVM's ``relay.op.algorithm`` and ``cumsum``/``cumprod``): argsort, sort, topk, cumsum."""
from __future__ import annotations

import numpy as np

from ...error import TypeInferenceError
from ...ir.attrs import Attrs, Field
from ...ir.op import Op, OpPattern
from ...ir.type import TensorType, TupleType
from ...runtime.dtype import dtype_str
from ._define import define_op
from .type_relations import normalize_axis, tensor_arg
from ..expr import Call, TupleWrapper, Constant as _Constant, RelayExpr as _RelayExpr

__all__ = ["argsort", "sort", "topk", "cumsum", "cumprod"]


def _dt(v):
    return "" if v in (None, "") else dtype_str(v)


class ArgsortAttrs(Attrs):
    type_key = "relay.attrs.ArgsortAttrs"
    fields = {"axis": Field(-1, int), "is_ascend": Field(True, bool), "dtype": Field("int32", _dt)}


class TopKAttrs(Attrs):
    type_key = "relay.attrs.TopKAttrs"
    fields = {"k": Field(1, int), "axis": Field(-1, int), "ret_type": "both", "is_ascend": Field(False, bool),
              "dtype": Field("int32", _dt)}


class ScanopAttrs(Attrs):
    type_key = "relay.attrs.ScanopAttrs"
    fields = {"axis": Field(None, int), "dtype": Field("", _dt), "exclusive": Field(False, bool)}


def _sorted_indices(x, axis, ascend):
    # stable sort; descending keeps the first of equal elements first, as TVM
    idx = np.argsort(x if ascend else -x if x.dtype.kind == "f" else -x.astype(np.int64), axis=axis, kind="stable")
    return idx


def _argsort_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    normalize_axis(attrs.axis, len(t.shape), "argsort axis")
    return TensorType(t.shape, attrs.dtype or "int32")


define_op("argsort", num_inputs=1, attrs=ArgsortAttrs, rel=_argsort_rel, rel_name="Argsort", pattern=OpPattern.OPAQUE,
          reference=lambda a, i, t: _sorted_indices(i[0], a.axis, a.is_ascend), level=6)


def _sort_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    normalize_axis(attrs.axis, len(t.shape), "sort axis")
    return TensorType(t.shape, t.dtype)


define_op("sort", num_inputs=1, attrs=ArgsortAttrs, rel=_sort_rel, rel_name="Sort", pattern=OpPattern.OPAQUE,
          reference=lambda a, i, t: np.take_along_axis(i[0], _sorted_indices(i[0], a.axis, a.is_ascend), a.axis),
          level=6)


def _topk_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    axis = normalize_axis(attrs.axis, len(t.shape), "topk axis")
    k = attrs.k if attrs.k >= 1 else t.shape[axis]
    if k > t.shape[axis]:
        raise TypeInferenceError(f"topk: k={k} is larger than dimension {axis} of size {t.shape[axis]}")
    shape = t.shape[:axis] + (k,) + t.shape[axis + 1:]
    values, indices = TensorType(shape, t.dtype), TensorType(shape, attrs.dtype or "int32")
    if attrs.ret_type == "both":
        return TupleType([values, indices])
    if attrs.ret_type == "values":
        return values
    if attrs.ret_type == "indices":
        return indices
    raise TypeInferenceError(f"topk: ret_type must be 'both', 'values' or 'indices', got {attrs.ret_type!r}")


def _topk_ref(attrs, inputs, out_type):
    x = inputs[0]
    axis = attrs.axis % x.ndim
    k = attrs.k if attrs.k >= 1 else x.shape[axis]
    idx = np.take(_sorted_indices(x, axis, attrs.is_ascend), np.arange(k), axis=axis)
    vals = np.take_along_axis(x, idx, axis)
    return {"both": (vals, idx), "values": vals, "indices": idx}[attrs.ret_type]


define_op("topk", num_inputs=1, attrs=TopKAttrs, rel=_topk_rel, rel_name="TopK", pattern=OpPattern.OPAQUE,
          reference=_topk_ref, level=6)


def _scan_rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    dtype = attrs.dtype or t.dtype
    if attrs.axis is None:
        n = 1
        for d in t.shape:
            n *= d
        return TensorType((n,), dtype)
    normalize_axis(attrs.axis, len(t.shape), "scan axis")
    return TensorType(t.shape, dtype)


def _scan_ref(fn, identity):
    def ref(attrs, inputs, out_type):
        x = inputs[0].astype(out_type.dtype)
        axis = attrs.axis
        if axis is None:
            x, axis = x.reshape(-1), 0
        out = fn(x, axis=axis)
        if attrs.exclusive:
            out = np.concatenate([np.full_like(np.take(out, [0], axis), identity), np.take(
                out, np.arange(out.shape[axis] - 1), axis)], axis)
        return out
    return ref


define_op("cumsum", num_inputs=1, attrs=ScanopAttrs, rel=_scan_rel, rel_name="Cumsum", pattern=OpPattern.OPAQUE,
          reference=_scan_ref(np.cumsum, 0), level=3)
define_op("cumprod", num_inputs=1, attrs=ScanopAttrs, rel=_scan_rel, rel_name="Cumprod", pattern=OpPattern.OPAQUE,
          reference=_scan_ref(np.cumprod, 1), level=3)


def _call(name, args, **attrs):
    op = Op.get(name)
    return Call(op, list(args), op.make_attrs(**attrs))


def argsort(data, axis=-1, is_ascend=1, dtype="int32"):
    """Indices that sort ``data`` along ``axis``."""
    return _call("argsort", [data], axis=axis, is_ascend=bool(is_ascend), dtype=dtype)


def sort(data, axis=-1, is_ascend=1):
    return _call("sort", [data], axis=axis, is_ascend=bool(is_ascend))


def topk(data, k=1, axis=-1, ret_type="both", is_ascend=False, dtype="int32"):
    """The ``k`` largest (smallest with ``is_ascend``) values and/or indices; a TupleWrapper for "both"
    (``k`` a Relay expression: dyn.topk)."""
    if isinstance(k, _Constant):
        k = int(k.numpy())
    elif isinstance(k, _RelayExpr):
        from .dyn import topk as dyn_topk
        return dyn_topk(data, k, axis, ret_type, is_ascend, dtype)
    call = _call("topk", [data], k=k, axis=axis, ret_type=ret_type, is_ascend=is_ascend, dtype=dtype)
    return TupleWrapper(call, 2) if ret_type == "both" else call


def cumsum(data, axis=None, dtype=None, exclusive=None):
    return _call("cumsum", [data], axis=axis, dtype=dtype or "", exclusive=bool(exclusive))


def cumprod(data, axis=None, dtype=None, exclusive=None):
    return _call("cumprod", [data], axis=axis, dtype=dtype or "", exclusive=bool(exclusive))
