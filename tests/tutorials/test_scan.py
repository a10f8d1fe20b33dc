"""Tutorial flow: "Scan and Recurrent Kernel".

The tutorial's cumulative-sum flow, written out in full and checked against numpy.cumsum (more scan
cases, multi-stage and multi-state, are in tests/compat/test_compat2_te_scan.py).
"""
import numpy as np
import pytest

import kiln as tvm
import kiln.testing
from kiln import te


def _cumsum_scan():
    m = te.var("m")
    n = te.var("n")
    X = te.placeholder((m, n), name="X")
    s_state = te.placeholder((m, n))
    s_init = te.compute((1, n), lambda _, i: X[0, i])
    s_update = te.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i])
    s_scan = tvm.te.scan(s_init, s_update, s_state, inputs=[X])
    return X, s_scan


def test_cumsum_scan():
    X, s_scan = _cumsum_scan()
    s = te.create_schedule(s_scan.op)
    f = tvm.build(s, [X, s_scan], "llvm")
    x_np = np.random.default_rng(0).uniform(size=(7, 5)).astype("float32")
    out = tvm.nd.empty((7, 5), "float32")
    f(tvm.nd.array(x_np), out)
    tvm.testing.assert_allclose(out.numpy(), np.cumsum(x_np, axis=0), rtol=1e-5)
