"""Reductions (TVM's ``relay.op.reduce``): sum, mean, max, min, prod, all, any, argmax, argmin, variance, std."""
from __future__ import annotations

import builtins

import numpy as np

from ...ir.op import Op, OpPattern
from . import op_attrs as A
from .type_relations import reduce_axes
from ._define import define_op, topi_compute, topi_fn
from ..expr import Call

__all__: list = []


def _axes(attrs, x) -> tuple:
    return tuple(reduce_axes(x.ndim, attrs.axis, attrs.exclude))


def _np_reduce(fn):
    def ref(attrs, inputs, out_type):
        x = inputs[0]
        return fn(x, axis=_axes(attrs, x), keepdims=attrs.keepdims)
    return ref


def _mean(x, axis, keepdims):
    if np.asarray(x).dtype.kind in "iu":  # TVM divides the integer sum by the count (truncating)
        s = np.sum(x, axis=axis, keepdims=keepdims)
        n = int(np.prod([x.shape[a] for a in axis])) if axis else 1
        return s // n
    return np.mean(x, axis=axis, keepdims=keepdims)


def _reduce_args(attrs, inputs, out_type):
    # Relay's axes (an empty list is every axis, TVM's GetReduceAxes) resolved here: TOPI reads an
    # empty list as no axis at all
    return [inputs[0], list(_axes(attrs, inputs[0])), attrs.keepdims, False]


_REDUCE = {"sum": np.sum, "mean": _mean, "max": np.max, "min": np.min, "prod": np.prod, "all": np.all,
           "any": np.any}
for _name, _fn in _REDUCE.items():
    define_op(_name, num_inputs=1, attrs=A.ReduceAttrs, rel="Reduce", pattern=OpPattern.COMM_REDUCE,
              reference=_np_reduce(_fn), compute=topi_compute(_name, _name, _reduce_args), level=4)


def _arg_reduce_ref(is_max: bool):
    def ref(attrs, inputs, out_type):
        x = inputs[0]
        axes = _axes(attrs, x)
        keep = [d for d in range(x.ndim) if d not in axes]
        moved = np.transpose(x, keep + list(axes))
        flat = moved.reshape(moved.shape[:len(keep)] + (-1,))
        if attrs.select_last_index:
            flipped = flat[..., ::-1]
            idx = flat.shape[-1] - 1 - (np.argmax(flipped, -1) if is_max else np.argmin(flipped, -1))
        else:
            idx = np.argmax(flat, -1) if is_max else np.argmin(flat, -1)
        if attrs.keepdims:
            idx = idx.reshape(tuple(1 if d in axes else n for d, n in enumerate(x.shape)))
        return idx
    return ref


def _arg_args(attrs, inputs, out_type):
    axis = list(attrs.axis) if attrs.axis is not None else None
    return [inputs[0], axis, attrs.keepdims, attrs.select_last_index, attrs.exclude]


for _name, _is_max in (("argmax", True), ("argmin", False)):
    define_op(_name, num_inputs=1, attrs=A.ArgReduceAttrs, rel="ArgReduce", pattern=OpPattern.COMM_REDUCE,
              reference=_arg_reduce_ref(_is_max), compute=topi_compute(_name, _name, _arg_args), level=4)


def _variance_ref(attrs, inputs, out_type):
    x, m = inputs
    axes = _axes(attrs, x)
    n = int(np.prod([x.shape[a] for a in axes])) if axes else 1
    sq = np.sum(np.square(x - m), axis=axes, keepdims=attrs.keepdims)
    return sq / builtins.max(n - (1 if attrs.unbiased else 0), 1)


def _variance_compute(attrs, inputs, out_type):
    fn = topi_fn("variance", "variance")
    axis = list(attrs.axis) if attrs.axis is not None else None
    return [fn(inputs[0], axis, attrs.keepdims, attrs.exclude, attrs.unbiased, inputs[1])]


define_op("variance", num_inputs=2, args=("data", "mean"), attrs=A.VarianceAttrs, rel="Variance",
          pattern=OpPattern.COMM_REDUCE, reference=_variance_ref, compute=_variance_compute, level=4)


def _axis(axis):
    return [axis] if isinstance(axis, int) else (list(axis) if axis is not None else None)


def _make_reduce(name):
    def ctor(data, axis=None, keepdims=False, exclude=False):
        op = Op.get(name)
        return _call(op, [data], op.make_attrs(axis=_axis(axis), keepdims=keepdims, exclude=exclude))
    ctor.__name__ = name
    ctor.__doc__ = f"``{name}`` over ``axis`` (all axes when None; the other axes when ``exclude``)."
    return ctor


def _call(op, args, attrs):
    return Call(op, args, attrs)


for _name in _REDUCE:
    globals()[_name] = _make_reduce(_name)
    __all__.append(_name)


def argmax(data, axis=None, keepdims=False, exclude=False, select_last_index=False):
    """Index of the maximum over ``axis`` (int32)."""
    op = Op.get("argmax")
    return _call(op, [data], op.make_attrs(axis=_axis(axis), keepdims=keepdims, exclude=exclude,
                                           select_last_index=select_last_index))


def argmin(data, axis=None, keepdims=False, exclude=False, select_last_index=False):
    """Index of the minimum over ``axis`` (int32)."""
    op = Op.get("argmin")
    return _call(op, [data], op.make_attrs(axis=_axis(axis), keepdims=keepdims, exclude=exclude,
                                           select_last_index=select_last_index))


def _variance(data, axis, keepdims, exclude, unbiased):
    m = globals()["mean"](data, axis, True, exclude)
    op = Op.get("variance")
    return _call(op, [data, m], op.make_attrs(axis=_axis(axis), keepdims=keepdims, exclude=exclude,
                                              unbiased=unbiased))


def variance(data, axis=None, keepdims=False, exclude=False, unbiased=False):
    """Variance over ``axis``: ``variance(data, mean(data, axis, keepdims=True))``."""
    return _variance(data, axis, keepdims, exclude, unbiased)


def std(data, axis=None, keepdims=False, exclude=False, unbiased=False):
    """Standard deviation over ``axis``: ``sqrt(variance(...))``."""
    return _call(Op.get("sqrt"), [_variance(data, axis, keepdims, exclude, unbiased)], None)


def logsumexp(data, axis=None, keepdims=False):
    """``log(sum(exp(x - max)))+max`` over ``axis`` (composite, as TVM)."""
    mx = globals()["max"](data, axis, True)
    s = globals()["sum"](_call(Op.get("exp"), [_call(Op.get("subtract"), [data, mx], None)], None), axis, keepdims)
    s = _call(Op.get("log"), [s], None)
    if not keepdims:
        mx = _call(Op.get("squeeze"), [mx], Op.get("squeeze").make_attrs(axis=_axis(axis)))
    return _call(Op.get("add"), [s, mx], None)


__all__ += ["argmax", "argmin", "variance", "std", "logsumexp"]
del _name, _fn, _is_max
