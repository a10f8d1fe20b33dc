"""Run TE computes on numpy arrays: through the TIR reference interpreter or a compiled kernel.

Tests of TOPI ops use this to check a compute + schedule against the numpy references.
"""
from __future__ import annotations

import numpy as np

from ...error import KilnError
from ..utils import get_const_tuple
from ... import te
from ..generic import default_schedule
from ...tir.interpreter import run_primfunc
import kiln


def _shape(t):
    shape = get_const_tuple(t.shape)
    if not all(isinstance(s, int) for s in shape):
        raise KilnError(f"run_te: output {t.name} has a symbolic shape {shape}; give concrete shapes")
    return shape


def run_te(inputs, outputs, arrays, schedule=None, target=None):
    """Lower ``schedule`` (default: the generic one) and run it; return the output arrays.

    ``inputs``: placeholder tensors; ``arrays``: numpy arrays for them; ``outputs``: tensors to
    compute. ``target=None`` evaluates with :func:`kiln.tir.interpreter.run_primfunc`; a target
    string (e.g. "llvm") compiles with :func:`kiln.build` and runs the kernel.
    """
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    inputs = list(inputs)
    if len(inputs) != len(arrays):
        raise KilnError(f"run_te: {len(inputs)} inputs but {len(arrays)} arrays")
    s = schedule if schedule is not None else default_schedule(outputs)
    outs = [np.zeros(_shape(t), dtype=t.dtype) for t in outputs]
    ins = [np.ascontiguousarray(a, dtype=t.dtype) for a, t in zip(arrays, inputs)]
    if target is None:
        func = te.schedule_to_primfunc(s, inputs + outputs)
        run_primfunc(func, ins + outs)
        return outs
    mod = kiln.build(s, inputs + outputs, target=target)
    dev = kiln.device(str(target).split()[0], 0)
    nd_args = [kiln.nd.array(a, dev) for a in ins + outs]
    mod(*nd_args)
    return [a.numpy() for a in nd_args[len(ins):]]
