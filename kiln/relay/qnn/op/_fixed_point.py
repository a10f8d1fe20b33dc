"""``fixed_point_multiply_broadcast(x, multiplier, left_shift, right_shift, rounding)``: requantization's fixed-point
multiply as one broadcast op (kiln's; TVM lowers requantize to ``fixed_point_multiply`` /
``q_multiply_shift``, which LLVM turns into ``vpmuldq`` on x86). All operands int32; the three parameters
broadcast against ``x`` (per channel). ``y = round(((x << l) * m) / 2**r)`` with the product exact in int64,
``UPWARD``: ties toward +inf, ``TONEAREST``: ties away from zero (``kiln.topi.x86.fixed_point_int8``).

``high_word=True`` promises UPWARD rounding, every right shift >= 33 and every left shift 0 (multipliers
below 1/4, the usual case after a conv): then the high 32 bits of ``x * m`` decide the result and the kernel
uses the cheaper form (int32 lanes only).

The requantize lowering emits it for constant scales on C-backend CPU targets, where the int64 chain it stands
for would be emulated lane by lane; it fuses into the producing kernel like any broadcast op.
"""
from __future__ import annotations

import numpy as np

from ....error import TypeInferenceError
from ....ir.op import OpPattern, register_op_attr
from ....ir.type import TensorType
from ...op._define import define_op
from ...op.op import register_broadcast_schedule
from ...op.type_relations import shape_text, tensor_arg
from . import attrs as A

NAME = "fixed_point_multiply_broadcast"


def fixed_point_multiply_rel(arg_types, attrs):
    x = tensor_arg(arg_types, 0, "data")
    for i, what in enumerate(("data", "multiplier", "left_shift", "right_shift")):
        t = tensor_arg(arg_types, i, what)
        if t.dtype != "int32":
            raise TypeInferenceError(f"{NAME}: {what} must be int32, got {t.dtype}")
        if i and (len(t.shape) > len(x.shape) or any(
                isinstance(d, int) and isinstance(xd, int) and d not in (1, xd)
                for d, xd in zip(reversed(t.shape), reversed(x.shape)))):
            raise TypeInferenceError(f"{NAME}: {what} of shape {shape_text(t.shape)} does not broadcast to the "
                                     f"data's {shape_text(x.shape)}")
    if attrs.rounding not in ("UPWARD", "TONEAREST"):
        raise TypeInferenceError(f"{NAME}: rounding must be UPWARD or TONEAREST, got {attrs.rounding!r}")
    if attrs.high_word and attrs.rounding != "UPWARD":
        raise TypeInferenceError(f"{NAME}: high_word=True is for UPWARD rounding only")
    return TensorType(x.shape, "int32")


def reference(x, m, left, right, rounding: str):
    """The definition in numpy int64 (what the int64 Relay chain computes)."""
    p = (np.asarray(x, np.int64) << np.asarray(left, np.int64)) * np.asarray(m, np.int64)
    right = np.asarray(right, np.int64)
    half = np.int64(1) << (right - 1)
    rnd = half if rounding == "UPWARD" else np.where(p >= 0, half, half - 1)
    return ((p + rnd) >> right).astype(np.int32)


def _compute(attrs, inputs, out_type):
    from ....topi.x86.fixed_point_int8 import fixed_point_multiply
    return [fixed_point_multiply(*inputs, rounding=attrs.rounding, high_word=bool(attrs.high_word))]


define_op(NAME, num_inputs=4, args=("data", "multiplier", "left_shift", "right_shift"),
          attrs=A.FixedPointMultiplyAttrs, rel=fixed_point_multiply_rel, rel_name="QnnFixedPointMultiplyRel",
          pattern=OpPattern.BROADCAST, level=11, compute=_compute,
          reference=lambda a, i, t: reference(i[0], i[1], i[2], i[3], a.rounding))
register_broadcast_schedule(NAME)
