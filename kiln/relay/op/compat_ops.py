"""Relay helpers TVM v0.13 has that older scripts use: ``mean_variance``, ``mean_std`` and ``strided_set``."""
from __future__ import annotations

import numpy as np

from ...error import TypeInferenceError
from ...ir.attrs import Attrs, Field
from ...ir.op import Op, OpPattern
from ...ir.type import TensorType
from ..expr import Call, Constant, Tuple, TupleWrapper
from ._define import define_op, topi_fn
from .type_relations import tensor_arg
from . import reduce as R
from ...topi.transform import strided_slice_plan, plan_slices

__all__ = ["mean_variance", "mean_std", "strided_set"]


def mean_variance(data, axis=None, keepdims=False, exclude=False, unbiased=False) -> TupleWrapper:
    """``(mean, variance)`` of ``data`` over ``axis`` as a 2-tuple (TVM's ``relay.mean_variance``)."""
    m = R.mean(data, axis, keepdims, exclude)
    return TupleWrapper(Tuple([m, R.variance(data, axis, keepdims, exclude, unbiased)]), 2)


def mean_std(data, axis=None, keepdims=False, exclude=False, unbiased=False) -> TupleWrapper:
    """``(mean, standard deviation)`` of ``data`` over ``axis`` as a 2-tuple (TVM's ``relay.mean_std``)."""
    m = R.mean(data, axis, keepdims, exclude)
    return TupleWrapper(Tuple([m, R.std(data, axis, keepdims, exclude, unbiased)]), 2)


def _int_tuple(value):
    return None if value is None else tuple(int(x) for x in value)


class StridedSetAttrs(Attrs):
    type_key = "relay.attrs.StridedSetAttrs"
    fields = {"begin": Field(None, _int_tuple), "end": Field(None, _int_tuple), "strides": Field(None, _int_tuple)}


def _plan(shape, attrs):
    return strided_slice_plan(shape, attrs.begin, attrs.end, attrs.strides)


def _strided_set_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    v = tensor_arg(arg_types, 1, "v")
    try:
        region = [len(range(*p)) for p in _plan([int(d) for d in data.shape], attrs)]
    except TypeInferenceError:
        raise
    except Exception as err:  # KilnError from the slice rule, or a symbolic dimension
        raise TypeInferenceError(f"strided_set: {err}") from None
    vshape = [int(d) for d in v.shape]
    lead = len(region) - len(vshape)
    if lead < 0 or any(n not in (1, region[lead + k]) for k, n in enumerate(vshape)):
        raise TypeInferenceError(f"strided_set: v of shape {tuple(vshape)} does not broadcast to the region "
                                 f"{tuple(region)} that begin={attrs.begin} end={attrs.end} strides={attrs.strides} "
                                 "select")
    return TensorType(data.shape, data.dtype)


def _strided_set_ref(attrs, inputs, out_type):
    out = np.array(inputs[0], copy=True)
    out[plan_slices(_plan(out.shape, attrs))] = inputs[1]
    return out


def _strided_set_compute(attrs, inputs, out_type):
    fn = topi_fn("strided_set.strided_set", "strided_set")
    return [fn(inputs[0], inputs[1], attrs.begin, attrs.end, attrs.strides)]


define_op("strided_set", num_inputs=2, args=("data", "v"), attrs=StridedSetAttrs, rel=_strided_set_rel,
          rel_name="StridedSet", pattern=OpPattern.INJECTIVE, reference=_strided_set_ref,
          compute=_strided_set_compute, level=4)


def _const_ints(value, what: str):
    if value is None:
        return None
    if isinstance(value, Constant):
        return [int(x) for x in value.numpy().reshape(-1)]
    if isinstance(value, (int, np.integer)):
        return [int(value)]
    if isinstance(value, (list, tuple, np.ndarray)):
        return [int(x) for x in np.asarray(value).reshape(-1)]
    raise NotImplementedError(f"strided_set: {what} must be a constant (relay.const or a list of ints); a "
                              f"computed {what} (dynamic strided_set) is not supported in kiln")


def strided_set(data, v, begin, end, strides=None):
    """``data`` with ``data[begin:end:strides]`` replaced by ``v`` (TVM's ``relay.strided_set``)."""
    op = Op.get("strided_set")
    return Call(op, [data, v], op.make_attrs(begin=_const_ints(begin, "begin"), end=_const_ints(end, "end"),
                                             strides=_const_ints(strides, "strides")))
