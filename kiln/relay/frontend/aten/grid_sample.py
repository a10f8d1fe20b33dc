"""aten::grid_sampler (``F.grid_sample``), 2-D and 3-D, composed from Relay ops (kiln has no
``image.grid_sample``): grid coordinates are unnormalized to pixel space, padded (zeros / border /
reflection, PyTorch's ``compute_coordinates``), and the taps are read with ``gather_nd`` on the input moved
to channels-last. Modes: bilinear (trilinear in 3-D), nearest (round half to even, as PyTorch), bicubic
(2-D; PyTorch's cubic convolution with A = -0.75, every tap padded on its own)."""
from __future__ import annotations

import itertools

import numpy as np

from ....error import FrontendError
from ...expr import Constant
from ..common import c_array as _c_array
from .registry import register
from ... import op

_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_PADS = {0: "zeros", 1: "border", 2: "reflection"}
_A = -0.75


def _i32(v):
    """An int32 scalar constant (index arithmetic)."""
    return Constant(_c_array(np.asarray(v, dtype="int32")))


class _Sampler:
    def __init__(self, ctx, data, grid, padding: str, align: bool):
        self.ctx, self.data, self.padding, self.align = ctx, data, padding, align
        shape = list(ctx.shape(data))
        self.n, self.sizes = shape[0], shape[2:]
        self.s = len(self.sizes)
        self.dt = ctx.dtype(data)
        self.out = list(ctx.shape(grid))[1:-1]
        # grid[..., 0] is x (the last spatial axis): coordinate k of axis k comes from channel s-1-k
        self.coords = [op.squeeze(op.strided_slice(grid, [self.s - 1 - k], [self.s - k], axes=[self.s + 1]),
                                  axis=[self.s + 1]) for k in range(self.s)]
        perm = [0] + list(range(2, 2 + self.s)) + [1]
        self.channels_last = op.transpose(data, perm)
        batch = op.arange(_i32(0), _i32(self.n), _i32(1), dtype="int32")
        self.batch_idx = op.broadcast_to(op.reshape(batch, [self.n] + [1] * self.s), [self.n] + self.out)

    def c(self, v):
        return self.ctx.const(v, self.dt)

    def unnormalize(self, g, size):
        if self.align:
            return op.multiply(op.add(g, self.c(1.0)), self.c((size - 1) / 2.0))
        return op.divide(op.subtract(op.multiply(op.add(g, self.c(1.0)), self.c(float(size))), self.c(1.0)),
                         self.c(2.0))

    def _reflect(self, x, twice_low, twice_high):
        if twice_low == twice_high:
            return op.zeros_like(x)
        lo, span = twice_low / 2.0, (twice_high - twice_low) / 2.0
        x = op.abs(op.subtract(x, self.c(lo)))
        flips = op.floor(op.divide(x, self.c(span)))
        extra = op.subtract(x, op.multiply(flips, self.c(span)))
        odd = op.subtract(flips, op.multiply(op.floor(op.divide(flips, self.c(2.0))), self.c(2.0)))
        return op.where(op.equal(odd, self.c(0.0)), op.add(extra, self.c(lo)),
                        op.add(op.subtract(self.c(span), extra), self.c(lo)))

    def pad(self, x, size):
        """PyTorch's compute_coordinates: where a coordinate lands after border / reflection padding."""
        if self.padding == "border":
            return op.clip(x, 0.0, float(size - 1))
        if self.padding == "reflection":
            x = self._reflect(x, 0, 2 * (size - 1)) if self.align else self._reflect(x, -1, 2 * size - 1)
            return op.clip(x, 0.0, float(size - 1))
        return x

    def read(self, idx):
        """input[n, :, idx...] for integer index tensors (one per spatial axis), zero outside the input;
        shape (N, out..., C)."""
        valid = None
        clamped = []
        for i, size in zip(idx, self.sizes):
            ok = op.logical_and(op.greater_equal(i, _i32(0)), op.less(i, _i32(size)))
            valid = ok if valid is None else op.logical_and(valid, ok)
            clamped.append(op.clip(i, 0, size - 1))
        indices = op.stack([self.batch_idx] + clamped, axis=0)
        vals = op.gather_nd(self.channels_last, indices)
        if self.padding == "zeros":
            vals = op.multiply(vals, op.expand_dims(op.cast(valid, self.dt), self.s + 1))
        return vals

    def to_nchw(self, v):
        return op.transpose(v, [0, self.s + 1] + list(range(1, self.s + 1)))


def _nearest(sp, coords):
    idx = [op.cast(_round_half_even(sp, x), "int32") for x in coords]
    return sp.read(idx)


def _round_half_even(sp, x):
    r = op.floor(op.add(x, sp.c(0.5)))
    tie = op.equal(op.subtract(r, x), sp.c(0.5))
    odd = op.not_equal(op.subtract(r, op.multiply(op.floor(op.divide(r, sp.c(2.0))), sp.c(2.0))), sp.c(0.0))
    return op.where(op.logical_and(tie, odd), op.subtract(r, sp.c(1.0)), r)


def _linear(sp, coords):
    base = [op.floor(x) for x in coords]
    frac = [op.subtract(x, b) for x, b in zip(coords, base)]
    total = None
    for corner in itertools.product((0, 1), repeat=sp.s):
        w = None
        idx = []
        for k, bit in enumerate(corner):
            wk = frac[k] if bit else op.subtract(sp.c(1.0), frac[k])
            w = wk if w is None else op.multiply(w, wk)
            idx.append(op.add(op.cast(base[k], "int32"), _i32(bit)))
        term = op.multiply(sp.read(idx), op.expand_dims(w, sp.s + 1))
        total = term if total is None else op.add(total, term)
    return total


def _cubic_weights(sp, t):
    def near(x):  # |x| <= 1
        return op.add(op.multiply(op.multiply(op.subtract(op.multiply(sp.c(_A + 2), x), sp.c(_A + 3)), x), x),
                      sp.c(1.0))

    def far(x):  # 1 < |x| < 2
        inner = op.add(op.multiply(op.subtract(op.multiply(sp.c(_A), x), sp.c(5 * _A)), x), sp.c(8 * _A))
        return op.subtract(op.multiply(inner, x), sp.c(4 * _A))
    one = sp.c(1.0)
    return [far(op.add(t, one)), near(t), near(op.subtract(one, t)), far(op.subtract(sp.c(2.0), t))]


def _bicubic(sp, raw):
    base = [op.floor(x) for x in raw]
    weights = [_cubic_weights(sp, op.subtract(x, b)) for x, b in zip(raw, base)]
    total = None
    for taps in itertools.product(range(4), repeat=sp.s):
        idx, w = [], None
        for k, t in enumerate(taps):
            pos = sp.pad(op.add(base[k], sp.c(float(t - 1))), sp.sizes[k])
            idx.append(op.cast(pos, "int32"))
            w = weights[k][t] if w is None else op.multiply(w, weights[k][t])
        term = op.multiply(sp.read(idx), op.expand_dims(w, sp.s + 1))
        total = term if total is None else op.add(total, term)
    return total


@register("grid_sampler", "grid_sampler_2d", "grid_sampler_3d")
def _grid_sampler(ctx, args):
    data, grid = args[0], args[1]
    mode = _MODES.get(int(args[2]))
    padding = _PADS.get(int(args[3]))
    align = bool(args[4])
    if mode is None or padding is None:
        raise FrontendError(f"aten::grid_sampler: unknown interpolation mode {args[2]} or padding mode {args[3]}")
    nd = ctx.ndim(data)
    if nd not in (4, 5) or ctx.ndim(grid) != nd or ctx.shape(grid)[-1] != nd - 2:
        raise FrontendError(f"aten::grid_sampler: expected input (N, C, H, W) with grid (N, H', W', 2) or "
                            f"(N, C, D, H, W) with grid (N, D', H', W', 3); got {ctx.shape(data)} and "
                            f"{ctx.shape(grid)}")
    if mode == "bicubic" and nd == 5:
        raise FrontendError("aten::grid_sampler: bicubic interpolation is 2-D only (as in PyTorch)")
    if not ctx.dtype(data).startswith("float"):
        raise FrontendError(f"aten::grid_sampler: the input must be floating point, got {ctx.dtype(data)}")
    grid = ctx.cast(grid, ctx.dtype(data))
    sp = _Sampler(ctx, data, grid, padding, align)
    raw = [sp.unnormalize(g, size) for g, size in zip(sp.coords, sp.sizes)]
    if mode == "bicubic":
        return sp.to_nchw(_bicubic(sp, raw))
    coords = [sp.pad(x, size) for x, size in zip(raw, sp.sizes)]
    return sp.to_nchw(_nearest(sp, coords) if mode == "nearest" else _linear(sp, coords))
