"""The KL-divergence threshold search of TVM's ``kl_divergence`` calibration, in numpy.

The values' histogram (``num_bins`` bins over [-max|x|, max|x|]) is cut at each candidate threshold
``i`` bins either side of zero; outliers are folded into the edge bins (p), and p is squeezed into
``num_quantized_bins`` levels and spread back (q, zero where p is zero). The threshold whose smoothed
q is closest to p in KL divergence wins (the MXNet/TensorRT method TVM uses).
"""
from __future__ import annotations

import numpy as np


def _smooth(p: np.ndarray, eps: float = 0.0001):
    """Move ``eps`` of mass onto the empty bins (so log(p/q) is finite); None if p is all zeros."""
    zeros = p == 0
    n_zeros = int(zeros.sum())
    n_nonzeros = p.size - n_zeros
    if n_nonzeros == 0:
        return None
    eps1 = eps * n_zeros / n_nonzeros
    if eps1 >= 1.0:
        return p.astype(np.float64)
    return p + np.where(zeros, eps, -eps1)


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    p = p / p.sum()
    q = q / q.sum()
    mask = p > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = p[mask] * np.log(p[mask] / q[mask])
    return float(np.sum(terms))


def find_threshold_by_kl(hist: np.ndarray, hist_edges: np.ndarray, num_bins: int, num_quantized_bins: int) -> float:
    """The threshold (a bin edge) minimizing KL(p || q) over candidate cut points."""
    hist = np.asarray(hist, dtype=np.float64)
    zero_bin = num_bins // 2
    half_q = num_quantized_bins // 2
    best, best_div = float(hist_edges[-1]), np.inf
    for i in range(half_q, zero_bin + 1):
        start, stop = zero_bin - i, zero_bin + i + 1
        sliced = hist[start:stop].copy()
        p = sliced.copy()
        p[0] += hist[:start].sum()
        p[-1] += hist[stop:].sum()
        n = sliced.size
        merged = n // num_quantized_bins
        # level j gathers bins [j*merged, (j+1)*merged); the last one also the remainder
        bounds = np.arange(num_quantized_bins) * merged
        qbins = np.add.reduceat(sliced, bounds)
        nonzero = (sliced != 0).astype(np.float64)
        norms = np.add.reduceat(nonzero, bounds)
        level = np.minimum(np.arange(n) // merged, num_quantized_bins - 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            per_bin = np.where(norms[level] > 0, qbins[level] / norms[level], 0.0)
        q = np.where(p != 0, per_bin, 0.0)
        ps, qs = _smooth(p), _smooth(q)
        if ps is None or qs is None:
            continue
        div = _kl(ps, qs)
        if div < best_div:
            best_div, best = div, float(hist_edges[stop])
    return best


def _find_scale_by_kl(arr: np.ndarray, quantized_dtype: str = "int8", num_bins: int = 8001,
                      num_quantized_bins: int = 255) -> float:
    """The clipping threshold of ``arr`` for ``quantized_dtype`` that keeps its distribution best."""
    arr = np.asarray(arr, dtype=np.float64).reshape(-1)
    arr = arr[np.isfinite(arr)]
    if arr.size == 0:
        return 1.0
    min_val, max_val = float(arr.min()), float(arr.max())
    thres = max(abs(min_val), abs(max_val))
    if thres == 0:
        return 1.0
    if min_val >= 0 and quantized_dtype in ("uint8",):
        num_quantized_bins = num_quantized_bins * 2 + 1
    hist, edges = np.histogram(arr, bins=num_bins, range=(-thres, thres))
    return find_threshold_by_kl(hist, edges, num_bins, num_quantized_bins)
