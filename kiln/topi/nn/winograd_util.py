"""Winograd minimal-filtering matrices (TVM's ``topi.nn.winograd_util``) for F(m x m, 3 x 3).

With alpha = m + 2, a tile d (alpha x alpha) of the input and a 3x3 kernel g give the m x m outputs
``Y = A^T [(G g G^T) * (B^T d B)] A``. The interpolation points are 0, +-1 (m = 2) and 0, +-1, +-2
(m = 4) plus the point at infinity; m = 4 needs 4x fewer multiplies than the direct conv, m = 2 2.25x
fewer with a smaller rounding error (the transforms of m = 4 have coefficients up to 8 and 1/24).
"""
from __future__ import annotations

from fractions import Fraction as F

import numpy as np

from ... import te
from ...error import KilnError
from ...tir import op as T
from ..utils import get_const_tuple

# B^T, G and A^T as exact fractions (rows of the transposes as usually written)
_BT = {
    2: [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],
    4: [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
        [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]],
}
_G = {
    2: [[1, 0, 0], [F(1, 2), F(1, 2), F(1, 2)], [F(1, 2), F(-1, 2), F(1, 2)], [0, 0, 1]],
    4: [[F(1, 4), 0, 0], [F(-1, 6), F(-1, 6), F(-1, 6)], [F(-1, 6), F(1, 6), F(-1, 6)],
        [F(1, 24), F(1, 12), F(1, 6)], [F(1, 24), F(-1, 12), F(1, 6)], [0, 0, 1]],
}
_AT = {
    2: [[1, 1, 1, 0], [0, 1, -1, -1]],
    4: [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
}


def winograd_matrices(m: int):
    """(A, B, G) of F(m x m, 3 x 3) as float64 arrays: A is alpha x m, B alpha x alpha, G alpha x 3."""
    if m not in _BT:
        raise KilnError(f"winograd_matrices: tile size m must be 2 or 4 (F(2x2,3x3) or F(4x4,3x3)), got {m}")
    a = np.array(_AT[m], dtype=np.float64).T
    b = np.array(_BT[m], dtype=np.float64).T
    g = np.array([[float(x) for x in row] for row in _G[m]], dtype=np.float64)
    return a, b, g


def weighted_sum(coefs, term, dtype: str):
    """``sum_r coefs[r] * term(r)`` over the nonzero coefficients only (+-1 without a multiplication)."""
    out = None
    for r, v in enumerate(coefs):
        if v == 0:
            continue
        t = term(r)
        if v == -1:
            x = -t
        elif v == 1:
            x = t
        else:
            x = T.const(float(v), dtype) * t
        if out is None:
            out = x
        elif v == -1:
            out = out - t
        else:
            out = out + x
    return out if out is not None else T.const(0.0, dtype)


def by_column(mat: np.ndarray, col, term, dtype: str):
    """``sum_r mat[r, col] * term(r)`` for an index expression ``col``: a Select over the column's values whose
    branches hold the nonzero terms of that column; once ``col`` is a constant (unrolled) one branch is left,
    so no product with a zero coefficient reaches the C compiler (which keeps ``x * 0.0f`` without fast-math)."""
    ncol = mat.shape[1]
    expr = weighted_sum(mat[:, ncol - 1], term, dtype)
    for k in range(ncol - 2, -1, -1):
        expr = T.Select(col == k, weighted_sum(mat[:, k], term, dtype), expr)
    return expr


def conv2d_winograd_weight_transform(kernel, tile_size: int):
    """``U = G g G^T`` of an OIHW 3x3 kernel: shape (alpha, alpha, O, I) (TVM's
    ``topi.nn.conv2d_winograd_weight_transform``, the compute of ``contrib_conv2d_winograd_weight_transform``),
    in two separable stages (``g G^T`` rows, then ``G``)."""
    co, ci, kh, kw = get_const_tuple(kernel.shape)
    if (kh, kw) != (3, 3):
        raise KilnError(f"conv2d_winograd_weight_transform: needs a 3x3 kernel, got {kh}x{kw}")
    _, _, g = winograd_matrices(int(tile_size))
    alpha = int(tile_size) + 2
    gt, dt = g.T, kernel.dtype
    rows = te.compute((alpha, 3, co, ci), lambda n, i, o, c: by_column(gt, n, lambda j: kernel[o, c, i, j], dt),
                      name="winograd_weight_rows", tag="winograd_weight_rows")
    return te.compute((alpha, alpha, co, ci), lambda e, n, o, c: by_column(gt, e, lambda i: rows[n, i, o, c], dt),
                      name="winograd_weight", tag="winograd_weight_transform")
