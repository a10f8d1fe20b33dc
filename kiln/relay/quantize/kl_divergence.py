"""The KL-divergence threshold search of TVM's ``kl_divergence`` calibration, in numpy.

The values' histogram (``num_bins`` bins over [-max|x|, max|x|]) is cut at each candidate threshold
``i`` bins either side of zero; outliers are folded into the edge bins (p), and p is squeezed into
``num_quantized_bins`` levels and spread back (q, zero where p is zero). The threshold whose smoothed
q is closest to p in KL divergence wins (the MXNet/TensorRT method TVM uses).
"""
from __future__ import annotations

import numpy as np


def _smooth(p: np.ndarray, zeros: np.ndarray, eps: float = 0.0001):
    """Move ``eps`` of mass onto the empty bins (so log(p/q) is finite); None if p is all zeros."""
    n_zeros = int(np.count_nonzero(zeros))
    n_nonzeros = p.size - n_zeros
    if n_nonzeros == 0:
        return None
    eps1 = eps * n_zeros / n_nonzeros
    if eps1 >= 1.0:
        return p
    out = p - eps1
    out[zeros] = eps
    return out


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    """KL(p || q) of two positive vectors, each normalized to sum 1."""
    p = p / p.sum()
    q = q / q.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.dot(p, np.log(p / q)))


def find_threshold_by_kl(hist: np.ndarray, hist_edges: np.ndarray, num_bins: int, num_quantized_bins: int) -> float:
    """The threshold (a bin edge) minimizing KL(p || q) over candidate cut points."""
    hist = np.asarray(hist, dtype=np.float64)
    csum = np.concatenate([[0.0], np.cumsum(hist)])
    total = csum[-1]
    nonzero = (hist != 0).astype(np.float64)
    zero_bin = num_bins // 2
    half_q = num_quantized_bins // 2
    nq = num_quantized_bins
    best, best_div = float(hist_edges[-1]), np.inf
    for i in range(half_q, zero_bin + 1):
        start, stop = zero_bin - i, zero_bin + i + 1
        sliced = hist[start:stop]
        n = sliced.size
        merged = n // nq
        p = sliced.copy()
        p[0] += csum[start]            # everything left of the window
        p[-1] += total - csum[stop]    # everything right of it
        # level j gathers bins [j*merged, (j+1)*merged); the last one also the remainder
        bounds = np.arange(0, nq * merged, merged)
        qbins = np.add.reduceat(sliced, bounds)
        norms = np.add.reduceat(nonzero[start:stop], bounds)
        with np.errstate(divide="ignore", invalid="ignore"):
            per_level = np.where(norms > 0, qbins / norms, 0.0)
        counts = np.full(nq, merged)
        counts[-1] = n - merged * (nq - 1)
        q = np.repeat(per_level, counts)
        p_zero = p == 0
        q[p_zero] = 0.0
        ps = _smooth(p, p_zero)
        qs = _smooth(q, q == 0)
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
