"""The integer arithmetic of quantized tensors, on numpy arrays: one definition shared by the op references
(debug interpreter, FoldConstant) and, through ``fixed_point_multiplier_shift``, by the Relay lowering.

Requantization follows TVM's definition exactly: the real multiplier ``m = s_in / s_out`` (float64 of the
float32 scales) is ``q * 2**(shift - 31)`` with ``q`` a 31-bit integer (``frexp``, mantissa rounded half away
from zero); the product ``x * q`` is computed in int64, a rounding constant is added and the sum shifted right
by ``31 - shift``. ``UPWARD`` adds ``2**(n-1)`` (ties toward +inf); ``TONEAREST`` adds ``2**(n-1) - 1`` for
negative products (ties away from zero).
"""
from __future__ import annotations

import math

import numpy as np

ROUNDINGS = ("UPWARD", "TONEAREST")

DTYPE_RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535),
               "int32": (-2 ** 31, 2 ** 31 - 1)}


def qrange(dtype: str) -> tuple:
    return DTYPE_RANGE[dtype]


def fixed_point_multiplier_shift(multiplier: float) -> tuple:
    """(q, shift) with ``multiplier ~= q * 2**(shift - 31)``, ``2**30 <= q < 2**31`` (q = 0 for 0)."""
    multiplier = float(multiplier)
    if multiplier == 0.0:
        return 0, 0
    significand, exponent = math.frexp(multiplier)
    scaled = significand * (1 << 31)
    q = int(math.floor(abs(scaled) + 0.5)) * (1 if scaled >= 0 else -1)  # std::round: half away from zero
    if q == (1 << 31):
        q //= 2
        exponent += 1
    return q, exponent


def _per_channel(values, ndim: int, axis: int):
    """A scalar stays a scalar; a 1-D per-channel vector is shaped to broadcast on ``axis``."""
    arr = np.asarray(values)
    if arr.ndim == 0 or arr.size == 1 and ndim == 0:
        return arr.reshape(())
    if arr.ndim == 1 and arr.size == 1:
        return arr.reshape(())
    shape = [1] * ndim
    shape[axis % ndim] = arr.size
    return arr.reshape(shape)


def fixed_point_multiply(x, multipliers, rounding: str, ndim: int, axis: int):
    """``round(x * m)`` in TVM's fixed-point arithmetic; ``x`` int32-valued, ``m`` a scalar or per-channel."""
    mults = np.atleast_1d(np.asarray(multipliers, dtype=np.float64))
    qs, shifts = zip(*(fixed_point_multiplier_shift(m) for m in mults))
    q = np.array(qs, dtype=np.int64)
    shift = np.array(shifts, dtype=np.int64)
    left = np.maximum(shift, 0)
    total_right = np.maximum(-shift, 0) + 31
    tiny = total_right > 62  # |m| < 2**-32: every int32 product rounds to 0
    q = np.where(tiny, 0, q)
    total_right = np.where(tiny, 31, total_right)
    q, left, total_right = (_per_channel(v, ndim, axis) for v in (q, left, total_right))
    x = np.asarray(x, dtype=np.int64)
    prod = (x << left) * q
    half = np.int64(1) << (total_right - 1)
    if rounding == "UPWARD":
        rnd = half
    elif rounding == "TONEAREST":
        rnd = np.where(prod >= 0, half, half - 1)
    else:
        raise ValueError(f"rounding must be UPWARD or TONEAREST, got {rounding!r}")
    return ((prod + rnd) >> total_right).astype(np.int64)


def requantize(x, in_scale, in_zp, out_scale, out_zp, out_dtype: str, rounding: str = "UPWARD", axis: int = -1):
    """TVM's qnn.requantize on numpy values."""
    x = np.asarray(x)
    ndim = x.ndim
    in_scale = np.asarray(in_scale, dtype=np.float32).astype(np.float64)
    out_scale = np.asarray(out_scale, dtype=np.float32).astype(np.float64)
    shifted = x.astype(np.int64) - _per_channel(np.asarray(in_zp, np.int64), ndim, axis)
    mult = np.broadcast_to(in_scale / out_scale, np.broadcast_shapes(in_scale.shape, out_scale.shape)) \
        if (in_scale.size > 1 or out_scale.size > 1) else in_scale.reshape(()) / out_scale.reshape(())
    if np.all(np.asarray(mult) == 1.0):
        scaled = shifted
    else:
        scaled = fixed_point_multiply(shifted.astype(np.int32).astype(np.int64), np.ravel(mult), rounding, ndim, axis)
    out = scaled + _per_channel(np.asarray(out_zp, np.int64), ndim, axis)
    lo, hi = qrange(out_dtype)
    return np.clip(out, lo, hi).astype(out_dtype)


def quantize(x, scale, zp, out_dtype: str, axis: int = -1):
    """``saturate(round_half_even(x / scale) + zp)`` in float32 (ONNX QuantizeLinear, TVM qnn.quantize)."""
    x = np.asarray(x, dtype=np.float32)
    ndim = x.ndim
    s = _per_channel(np.asarray(scale, np.float32), ndim, axis)
    z = _per_channel(np.asarray(zp, np.int64), ndim, axis).astype(np.float32)
    with np.errstate(all="ignore"):
        v = np.round(x / s) + z
    lo, hi = qrange(out_dtype)
    return np.clip(v, np.float32(lo), np.float32(hi)).astype(out_dtype)


def dequantize(x, scale, zp, axis: int = -1):
    """``(x - zp) * scale`` in float32."""
    x = np.asarray(x)
    ndim = x.ndim
    s = _per_channel(np.asarray(scale, np.float32), ndim, axis)
    z = _per_channel(np.asarray(zp, np.int64), ndim, axis)
    return ((x.astype(np.int64) - z).astype(np.int32).astype(np.float32) * s).astype(np.float32)
