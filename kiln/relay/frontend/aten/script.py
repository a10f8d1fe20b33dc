"""aten converters for values known only at run time in scripted models (``torch.jit.script``).

These wrap the converters of traced graphs: when an argument is a run-time list (``DynList``, a Prelude
List built by a loop) or a run-time number (a 0-d Relay tensor: a loop counter, ``int(x.sum())``), the op
is built for the VM; otherwise the traced-graph converter runs unchanged. ``ctx.importer`` is the
TorchScript importer (``pytorch.py`` + ``pytorch_script.py``), which owns the Prelude.
"""
from __future__ import annotations

import numpy as np

from ....error import FrontendError
from ...expr import Constant, Expr
from .registry import ATEN_CONVERTERS, register
from ... import op
from ..pytorch_script import DynList


def _op():
    return op


def _dyn_list_cls():
    return DynList


def _importer(ctx):
    imp = getattr(ctx, "importer", None)
    if imp is None or not hasattr(imp, "list_getitem"):
        raise FrontendError(f"aten::{ctx.op_name} on a run-time list needs the TorchScript importer")
    return imp


def _wrap(names, make):
    """Register ``make(previous converter)`` under each name (the traced converter stays the fallback)."""
    for n in names:
        ATEN_CONVERTERS[n] = make(ATEN_CONVERTERS.get(n))


def _getitem(prev):
    def convert(ctx, args):
        seq, i = args[0], args[1]
        DynList = _dyn_list_cls()
        if isinstance(seq, DynList):
            return _importer(ctx).list_getitem(seq, i)
        if isinstance(seq, (list, tuple)) and isinstance(i, Expr) and not isinstance(i, Constant):
            imp = _importer(ctx)
            return imp.list_getitem(imp.to_dyn_list(list(seq)), i)
        return prev(ctx, args)
    return convert


def _len(prev):
    def convert(ctx, args):
        if isinstance(args[0], _dyn_list_cls()):
            return _importer(ctx).list_len(args[0])
        return prev(ctx, args)
    return convert


def _join(prev, concat: bool):
    def convert(ctx, args):
        if isinstance(args[0], _dyn_list_cls()):
            dim = int(args.get("dim", 0))
            return _importer(ctx).list_stack(args[0], dim, concat)
        return prev(ctx, args)
    return convert


def _select(prev):
    def convert(ctx, args):
        x, dim, idx = args[0], args[1], args[2]
        if isinstance(idx, Expr) and not isinstance(idx, Constant):
            ndim = ctx.ndim(x)
            axis = int(dim) + ndim if int(dim) < 0 else int(dim)
            i = ctx.cast(idx, "int64")
            # a negative index counts from the end (wrap); torch rejects out-of-range ones, kiln wraps them too
            return _op().take(x, i, axis=axis, mode="wrap")
        return prev(ctx, args)
    return convert


def _number(prev, dtype):
    def convert(ctx, args):
        v = args[0]
        if isinstance(v, Expr) and ctx.value(v) is None:
            if ctx.shape(v) != ():
                v = _op().reshape(v, ())
            if dtype == "bool":
                src = ctx.dtype(v)
                return v if src == "bool" else _op().not_equal(v, ctx.const(0, src))
            return ctx.cast(v, dtype) if dtype is not None else v
        return prev(ctx, args)
    return convert


def _size(prev):
    def convert(ctx, args):
        x = args[0]
        shape = ctx.shape(x)
        if len(args) > 1 and args[1] is not None:
            d = int(args[1])
            d = d + len(shape) if d < 0 else d
            if not isinstance(getattr(shape[d], "value", shape[d]), (int, np.integer)):
                return _op().take(_op().shape_of(x, "int64"), ctx.const(d, "int64"))
        return prev(ctx, args)
    return convert


def _list_add(prev):
    def convert(ctx, args):
        a, b = args[0], args[1]
        DynList = _dyn_list_cls()
        if isinstance(a, DynList) or isinstance(b, DynList):
            imp = _importer(ctx)
            da, db = imp.to_dyn_list(a), imp.to_dyn_list(b)
            if da.elem_type is None:  # always empty (or not known yet in a loop's first type pass)
                return db
            if db.elem_type is None:
                return da
            return DynList(imp.prelude.concat(da.expr, db.expr), da.elem_type)
        return prev(ctx, args)
    return convert


@register("__is__")
def _is(ctx, args):
    a, b = args[0], args[1]
    if a is None or b is None:
        return a is b
    raise FrontendError("aten::__is__ between two values that are not None is not supported")


@register("__isnot__")
def _isnot(ctx, args):
    return not _is(ctx, args)


def _i64(ctx, v):
    return ctx.cast(v, "int64") if isinstance(v, Expr) else ctx.const(int(v), "int64")


@register("__range_length")
def _range_length(ctx, args):
    """``len(range(lo, hi, step))`` (TorchScript's lowering of ``for i in range(lo, hi, step)``)."""
    lo, hi, step = args[0], args[1], args[2]
    if not any(isinstance(v, Expr) for v in (lo, hi, step)):
        return len(range(int(lo), int(hi), int(step)))
    if isinstance(step, Expr):
        raise FrontendError("range() with a run-time step is not supported")
    step = int(step)
    op = _op()
    span = op.subtract(_i64(ctx, hi), _i64(ctx, lo)) if step > 0 else op.subtract(_i64(ctx, lo), _i64(ctx, hi))
    k = abs(step)
    n = op.floor_divide(op.add(span, ctx.const(k - 1, "int64")), ctx.const(k, "int64"))
    return op.maximum(n, ctx.const(0, "int64"))


@register("__derive_index")
def _derive_index(ctx, args):
    """The loop variable of ``range(lo, hi, step)`` at iteration ``index``: ``lo + index * step``."""
    index, start, step = args[0], args[1], args[2]
    if not any(isinstance(v, Expr) for v in (index, start, step)):
        return int(start) + int(index) * int(step)
    op = _op()
    return op.add(_i64(ctx, start), op.multiply(_i64(ctx, index), _i64(ctx, step)))


@register("__not__")
def _not(ctx, args):
    v = args[0]
    if isinstance(v, Expr):
        return _op().logical_not(_op().cast(v, "bool") if ctx.dtype(v) != "bool" else v)
    return not v


_wrap(("__getitem__", "getitem"), _getitem)
_wrap(("len",), _len)
_wrap(("add",), _list_add)
_wrap(("stack",), lambda prev: _join(prev, False))
_wrap(("cat", "concat", "concatenate"), lambda prev: _join(prev, True))
_wrap(("select",), _select)
_wrap(("Int", "IntImplicit"), lambda prev: _number(prev, "int64"))
_wrap(("Float", "FloatImplicit"), lambda prev: _number(prev, "float64"))
_wrap(("Bool", "BoolImplicit", "is_nonzero"), lambda prev: _number(prev, "bool"))
_wrap(("ScalarImplicit", "item", "_local_scalar_dense"), lambda prev: _number(prev, None))
_wrap(("size",), _size)
