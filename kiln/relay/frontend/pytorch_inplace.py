"""In-place writes through views in traced TorchScript graphs (``x[:5, 0] = y``, ``x[2:].add_(1)``).

TorchScript records ``x[:5, 0, 5:] = v`` as a chain of view ops (``slice``, ``select``) ending in
``aten::copy_``, and then reads ``x`` again: PyTorch changed ``x``'s storage through the view. Relay values are
immutable, so the importer remembers, for each value made by a view op, its base value and where in the
base it lies; an in-place op on a view then rebuilds every base up the chain (a ``scatter_elements`` of the
new view into its base, or a reshape back to the base's shape) and rebinds the base's name, so later reads of
``x`` see the write, as TVM's frontend does for this pattern.
"""
from __future__ import annotations

import numpy as np

from .. import op as _op
from ..expr import Constant
from .common import c_array as _c_array

# aten view ops whose result shares storage with their first input, and that write-back understands
VIEW_OPS = ("slice", "select", "narrow", "view", "reshape", "_reshape_alias", "unsqueeze", "squeeze",
            "flatten", "expand_as")


def _axis(d, n):
    d = int(d)
    return d + n if d < 0 else d


def view_spec(ctx, name: str, args, base_shape: tuple):
    """Where a view lies in its base: ``("slice", dim, start, step)``, ``("select", dim, index)``,
    ``("reshape",)``; None for a view write-back does not handle (the write then stays local)."""
    n_dims = len(base_shape)
    if name == "slice":
        dim = _axis(args.get("dim", 0), n_dims)
        n = base_shape[dim]
        start = args["start"]
        start = 0 if start is None else int(ctx.scalar(start))
        start = max(0, min(n, start + n if start < 0 else start))
        return ("slice", dim, start, int(args.get("step", 1)))
    if name == "narrow":
        dim = _axis(args[1], n_dims)
        start = int(ctx.scalar(args[2]))
        return ("slice", dim, start + base_shape[dim] if start < 0 else start, 1)
    if name == "select":
        dim = _axis(args[1], n_dims)
        idx = int(ctx.scalar(args[2], "index"))
        return ("select", dim, idx + base_shape[dim] if idx < 0 else idx)
    if name in ("view", "reshape", "_reshape_alias", "unsqueeze", "squeeze", "flatten"):
        return ("reshape",)
    return None


def write_into(ctx, base, spec, value):
    """``base`` with the region that ``spec`` describes replaced by ``value`` (the new contents of the view)."""
    base_shape = list(ctx.shape(base))
    dtype = ctx.dtype(base)
    value = ctx.cast(value, dtype)
    if spec[0] == "reshape":
        return _op.reshape(value, base_shape)
    if spec[0] == "select":
        _, dim, idx = spec
        value = _op.expand_dims(value, dim)
        start, step = idx, 1
    else:
        _, dim, start, step = spec
    vshape = list(ctx.shape(value))
    if int(np.prod(vshape)) == 0:
        return base
    if step == 1 and vshape == base_shape:
        return value
    pos = start + step * np.arange(vshape[dim], dtype="int64")
    view = [1] * len(vshape)
    view[dim] = vshape[dim]
    index = np.broadcast_to(pos.reshape(view), vshape).copy()
    return _op.scatter_elements(base, Constant(_c_array(index)), value, axis=dim)
