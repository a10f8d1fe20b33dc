"""``dyn.topk``: ``k`` is a run-time scalar tensor."""
from __future__ import annotations

import numpy as np

from ....error import TypeInferenceError
from ....ir.type import TensorType, TupleType
from ....tir.expr import Any
from ...expr import TupleWrapper
from ..algorithm import TopKAttrs, _topk_ref
from ..type_relations import normalize_axis, tensor_arg
from ._common import call, define_dyn_op
from ....topi.sort import _cast, _gather, _permutation
from ....topi.utils import get_const_tuple

__all__ = ["topk"]


def _rel(arg_types, attrs):
    t = tensor_arg(arg_types, 0, "data")
    k = tensor_arg(arg_types, 1, "k")
    if k.shape not in ((), (1,)):
        raise TypeInferenceError(f"dyn.topk: k must be a scalar tensor, got shape {tuple(k.shape)}")
    axis = normalize_axis(attrs.axis, len(t.shape), "topk axis")
    shape = t.shape[:axis] + (Any(),) + t.shape[axis + 1:]
    values, indices = TensorType(shape, t.dtype), TensorType(shape, attrs.dtype or "int32")
    return {"both": lambda: TupleType([values, indices]), "values": lambda: values,
            "indices": lambda: indices}[attrs.ret_type]()


def _ref(attrs, inputs, out_type):
    from types import SimpleNamespace
    fields = {f: getattr(attrs, f) for f in TopKAttrs.fields}
    fields["k"] = int(np.asarray(inputs[1]).reshape(-1)[0])
    return _topk_ref(SimpleNamespace(**fields), inputs[:1], out_type)


def _compute(attrs, inputs, out_type):
    data = inputs[0]
    shape = get_const_tuple(data.shape)
    axis = normalize_axis(attrs.axis, len(shape), "topk axis")
    first = out_type.fields[0] if isinstance(out_type, TupleType) else out_type
    perm = _permutation(data, axis, bool(attrs.is_ascend), first.shape[axis])
    values = _gather(data, perm, axis, "T_topk_values")
    indices = _cast(perm, attrs.dtype or "int32", "T_topk_indices")
    return {"both": [values, indices], "values": [values], "indices": [indices]}[attrs.ret_type]


define_dyn_op("dyn.topk", args=("data", "k"), attrs=TopKAttrs, rel=_rel, reference=_ref, compute=_compute)


def topk(data, k, axis=-1, ret_type="both", is_ascend=False, dtype="int32"):
    c = call("dyn.topk", [data, k], k=0, axis=axis, ret_type=ret_type, is_ascend=is_ascend, dtype=dtype)
    return TupleWrapper(c, 2) if ret_type == "both" else c
