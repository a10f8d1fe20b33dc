"""``tvm.runtime.convert``: Python values to the runtime's objects.

Callables become PackedFuncs, numpy arrays NDArrays, sequences and dicts are converted element by
element; numbers, strings and runtime objects pass through. (Expressions are the compiler's business:
``kiln.tir.const`` / ``kiln.convert`` make TIR immediates.)
"""
from __future__ import annotations

import numpy as np

from .ndarray import NDArray, array
from .registry import PackedFunc


def convert(value):
    """Convert ``value`` for passing to runtime functions (TVM's ``tvm.runtime.convert``)."""
    if isinstance(value, (PackedFunc, NDArray)):
        return value
    if isinstance(value, np.ndarray):
        return array(value)
    if isinstance(value, (list, tuple)):
        return type(value)(convert(v) for v in value)
    if isinstance(value, dict):
        return {k: convert(v) for k, v in value.items()}
    if callable(value) and not isinstance(value, type):
        return PackedFunc(value)
    return value


convert_to_object = convert
