"""Helpers shared by the QNN op definitions: checking quantization-parameter types, reading constant
parameters, and building the integer Relay expressions the ops lower to."""
from __future__ import annotations

import numpy as np

from ....error import TypeInferenceError
from ....ir.type import TensorType
from ...expr import Constant, Call
from ...transform._util import op_call
from . import arith
from ...op.type_relations import shape_text, type_text
from ...analysis import free_vars
from ...transform.fold_constant import fold_constant
from ....transform import PassContext

QUANTIZED_DTYPES = ("int8", "uint8", "int16", "uint16", "int32")


def check_dtype(op: str, what: str, t: TensorType, allowed) -> None:
    if t.dtype not in allowed:
        raise TypeInferenceError(f"{op}: {what} must have dtype {' or '.join(allowed)}, got {t.dtype}")


def check_qparam(op: str, arg_types, i: int, name: str, dtype: str, channels=None) -> TensorType:
    """A scale (float32) or zero point (int32): a scalar, or a 1-D vector of ``channels`` values."""
    t = arg_types[i]
    if not isinstance(t, TensorType):
        raise TypeInferenceError(f"{op}: {name} (argument {i}) must be a tensor, got {type_text(t)}")
    if t.dtype != dtype:
        raise TypeInferenceError(f"{op}: {name} must be a {dtype} scalar or 1-D tensor, got dtype {t.dtype}")
    if len(t.shape) > 1:
        raise TypeInferenceError(f"{op}: {name} must be a scalar (per tensor) or a 1-D tensor (per channel), "
                                 f"got shape {shape_text(t.shape)}")
    if len(t.shape) == 1 and channels is not None and isinstance(t.shape[0], int) and isinstance(channels, int) \
            and t.shape[0] not in (1, channels):
        raise TypeInferenceError(f"{op}: {name} has {t.shape[0]} values but the quantized axis has {channels} "
                                 "channels (expected a scalar or one value per channel)")
    return t


def axis_of(op: str, axis: int, ndim: int) -> int:
    if ndim == 0:
        return 0
    if not -ndim <= axis < ndim:
        raise TypeInferenceError(f"{op}: axis {axis} is out of range for a tensor of rank {ndim}")
    return axis % ndim


def channels_on(t: TensorType, axis: int):
    return t.shape[axis] if len(t.shape) else 1


# -- constant parameters --------------------------------------------------------------------------------
def const_value(expr):
    """The numpy value of ``expr`` when it is a constant (or an expression of constants only), else None."""
    if isinstance(expr, Constant):
        return expr.numpy()
    if isinstance(expr, Call):
        if free_vars(expr):
            return None
        folded = fold_constant(expr)
        if isinstance(folded, Constant):
            return folded.numpy()
    return None


def is_const_zero(expr) -> bool:
    v = const_value(expr)
    return v is not None and bool(np.all(v == 0))


# -- Relay builders --------------------------------------------------------------------------------------
def expand(param, ptype: TensorType, ndim: int, axis: int):
    """A scalar or per-channel parameter shaped to broadcast against an ``ndim`` tensor on ``axis``."""
    if len(ptype.shape) == 0 or ndim == 0:
        return param
    if ptype.shape[0] == 1:
        return op_call("reshape", [param], newshape=())
    pad = ndim - axis - 1
    return op_call("expand_dims", [param], axis=1, num_newaxis=pad) if pad > 0 else param


def shift_zp(x, xtype: TensorType, zp, zptype: TensorType, axis: int = -1):
    """``cast(x, int32) - zp`` (no subtraction for a constant zero zero point)."""
    out = x if xtype.dtype == "int32" else op_call("cast", [x], dtype="int32")
    if is_const_zero(zp):
        return out
    ndim = len(xtype.shape)
    return op_call("subtract", [out, expand(zp, zptype, ndim, axis_of("qnn", axis, ndim) if ndim else 0)])


def saturate_cast(x, dtype: str):
    """clip to ``dtype``'s range and cast (int32 input)."""
    if dtype != "int32":
        lo, hi = arith.qrange(dtype)
        x = op_call("clip", [x], a_min=float(lo), a_max=float(hi))
        x = op_call("cast", [x], dtype=dtype)
    return x


def _i64(value):
    return Constant(np.asarray(value, dtype=np.int64))


def _fused_fixed_point_target() -> bool:
    """Whether requantize lowers to ``fixed_point_multiply_broadcast`` (CPU targets of the C backend)."""
    from ....target import Target
    target = Target.current(allow_none=True)
    return (target is not None and "cpu" in getattr(target, "keys", ())
            and getattr(target, "kind_name", "llvm") in ("llvm", "c"))


def _prescale_for_high_word(left: np.ndarray, right: np.ndarray, x_bound: int):
    """Left shifts ``p`` (per channel) that move a requantize of a small input onto the high-word form.

    ``round_up((x << l) * q / 2**r)`` equals ``round_up((x << (l + k)) * q / 2**(r + k))`` for any ``k >= 0``
    (numerator and denominator scale together; the UPWARD rounding constant ``2**(r-1)`` scales with them), so
    with ``k = max(0, 33 - r)`` every right shift reaches 33 and the product's high word alone decides the result
    (the cheap int32-lane form, no 64-bit lanes). Exact while ``x << (l + k)`` fits int32: ``|x| <= x_bound``
    (255 for an 8-bit input less its zero point, e.g. the two operands of a residual ``qnn.add``). None when a
    channel would overflow."""
    k = np.maximum(0, 33 - right)
    pre = left + k
    if np.any(right + k > 62) or np.any(float(x_bound) * np.exp2(pre.astype(np.float64)) >= 2.0 ** 31):
        return None
    return pre


def fixed_point_multiply_expr(x32, multipliers: np.ndarray, rounding: str, ndim: int, axis: int,
                              x_bound: int | None = None):
    """``round(x * m)`` with TVM's int64 fixed-point arithmetic (``multipliers`` known at compile time).
    ``x_bound``: a bound on ``|x|`` known from the input's dtype (see :func:`_prescale_for_high_word`)."""
    mults = np.atleast_1d(np.asarray(multipliers, dtype=np.float64))
    qs, shifts = zip(*(arith.fixed_point_multiplier_shift(m) for m in mults))
    q = np.array(qs, dtype=np.int64)
    shift = np.array(shifts, dtype=np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0) + 31
    tiny = right > 62
    q, right = np.where(tiny, 0, q), np.where(tiny, 31, right)
    per_channel = mults.size > 1

    def shaped(v):
        if not per_channel:
            return _i64(v.reshape(()))
        shape = [1] * ndim
        shape[axis] = v.size
        return _i64(v.reshape(shape))

    if _fused_fixed_point_target():
        # one broadcast op whose C helper multiplies with vpmuldq (the int64 chain below is emulated lane by
        # lane on AVX2); the same arithmetic bit for bit
        def i32(v):
            shape = [1] * ndim
            if per_channel:
                shape[axis] = v.size
            return Constant(np.asarray(v, np.int32).reshape(shape))
        high = rounding == "UPWARD" and not np.any(left) and bool(np.all(right >= 33))
        if not high and rounding == "UPWARD" and x_bound is not None:
            pre = _prescale_for_high_word(left, right, x_bound)
            if pre is not None:
                if np.any(pre):
                    x32 = op_call("left_shift", [x32, i32(pre)])
                left, right, high = np.zeros_like(left), right + pre - left, True
        return op_call("fixed_point_multiply_broadcast", [x32, i32(q), i32(left), i32(right)], rounding=rounding,
                       high_word=high)
    x = op_call("cast", [x32], dtype="int64")
    if np.any(left):
        x = op_call("left_shift", [x, shaped(left)])
    x = op_call("multiply", [x, shaped(q)])
    half = np.int64(1) << (right - 1)
    if rounding == "UPWARD":
        x = op_call("add", [x, shaped(half)])
    elif rounding == "TONEAREST":
        nonneg = op_call("greater_equal", [x, _i64(0)])
        x = op_call("add", [x, op_call("where", [nonneg, shaped(half), shaped(half - 1)])])
    else:
        raise TypeInferenceError(f"qnn.requantize: rounding must be UPWARD or TONEAREST, got {rounding!r}")
    x = op_call("right_shift", [x, shaped(right)])
    return op_call("cast", [x], dtype="int32")


def rescale(x32, ndim: int, axis: int, in_scale, in_stype, out_scale, out_stype, rounding: str,
            x_bound: int | None = None):
    """``x32 * in_scale / out_scale`` rounded to int32: fixed point for constant scales, float32 otherwise
    (``x_bound``: a known bound on ``|x32|``)."""
    s_in, s_out = const_value(in_scale), const_value(out_scale)
    if s_in is not None and s_out is not None:
        mult = np.asarray(s_in, np.float32).astype(np.float64) / np.asarray(s_out, np.float32).astype(np.float64)
        if np.all(mult == 1.0):
            return x32
        per_axis = axis if np.size(mult) > 1 else 0
        return fixed_point_multiply_expr(x32, np.ravel(mult), rounding, ndim, per_axis, x_bound)
    # scales computed at run time (DynamicQuantizeLinear): float32 arithmetic, ties to even
    mult = op_call("divide", [expand(in_scale, in_stype, ndim, axis), expand(out_scale, out_stype, ndim, axis)])
    y = op_call("round", [op_call("multiply", [op_call("cast", [x32], dtype="float32"), mult])])
    return op_call("cast", [y], dtype="int32")


def resolve_rounding(rounding: str) -> str:
    """``"None"`` means the PassContext's ``relay.qnn.default_rounding`` (UPWARD unless set), as in TVM."""
    if rounding in (None, "None", ""):
        rounding = str(PassContext.current().get_config("relay.qnn.default_rounding", "UPWARD"))
    if rounding not in arith.ROUNDINGS:
        raise TypeInferenceError(f"qnn.requantize: rounding must be one of {arith.ROUNDINGS}, got {rounding!r}")
    return rounding


def _small_input_bound(dtype: str, zp) -> int | None:
    """``max |x - zp|`` for an 8- or 16-bit input and a constant zero point within its range, else None."""
    if dtype not in ("int8", "uint8", "int16", "uint16"):
        return None
    z = const_value(zp)
    lo, hi = arith.qrange(dtype)
    if z is None or np.any(np.asarray(z) < lo) or np.any(np.asarray(z) > hi):
        return None
    return int(hi - lo)


def requantize_expr(x, xtype, in_scale, in_stype, in_zp, in_zptype, out_scale, out_stype, out_zp, out_zptype,
                    out_dtype: str, rounding: str = "None", axis: int = -1):
    """TVM's qnn.requantize lowering: shift by the input zero point, rescale, add the output zero point,
    saturate to ``out_dtype``."""
    ndim = len(xtype.shape)
    ax = axis_of("qnn.requantize", axis, ndim) if ndim else 0
    x32 = shift_zp(x, xtype, in_zp, in_zptype, ax)
    y = rescale(x32, ndim, ax, in_scale, in_stype, out_scale, out_stype, resolve_rounding(rounding),
                _small_input_bound(xtype.dtype, in_zp))
    if not is_const_zero(out_zp):
        y = op_call("add", [y, expand(out_zp, out_zptype, ndim, ax)])
    return saturate_cast(y, out_dtype)


def quantize_expr(x, xtype, scale, stype, zp, zptype, out_dtype: str, axis: int = -1):
    ndim = len(xtype.shape)
    ax = axis_of("qnn.quantize", axis, ndim) if ndim else 0
    if xtype.dtype != "float32":
        x = op_call("cast", [x], dtype="float32")
    y = op_call("round", [op_call("divide", [x, expand(scale, stype, ndim, ax)])])
    if not is_const_zero(zp):
        y = op_call("add", [y, op_call("cast", [expand(zp, zptype, ndim, ax)], dtype="float32")])
    lo, hi = arith.qrange(out_dtype)
    y = op_call("clip", [y], a_min=float(lo), a_max=float(hi))
    return op_call("cast", [y], dtype=out_dtype)


def dequantize_expr(x, xtype, scale, stype, zp, zptype, axis: int = -1):
    ndim = len(xtype.shape)
    ax = axis_of("qnn.dequantize", axis, ndim) if ndim else 0
    x32 = shift_zp(x, xtype, zp, zptype, ax)
    return op_call("multiply", [op_call("cast", [x32], dtype="float32"), expand(scale, stype, ndim, ax)])
