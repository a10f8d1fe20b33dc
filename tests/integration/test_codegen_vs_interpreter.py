"""Compiled code and the TIR reference interpreter agree on the same lowered functions."""
import numpy as np

import kiln as tvm
from kiln import te, tir
from kiln.tir.interpreter import run_primfunc


def test_lowered_functions_match_interpreter():
    n, m = 9, 13
    A = te.placeholder((n, m), name="A")
    B = te.placeholder((m,), name="B")
    C = te.compute((n, m), lambda i, j: te.if_then_else(
        A[i, j] > B[j], tir.floordiv(tir.Cast("int32", A[i, j] * 10.0) - 7, 3).astype("float32"),
        te.exp(A[i, j]) - B[j]), name="C")
    k = te.reduce_axis((0, m), "k")
    D = te.compute((n,), lambda i: te.max(C[i, k] * 0.5, axis=k), name="D")
    s = te.create_schedule(D.op)
    jo, ji = s[C].split(C.op.axis[1], factor=4)
    s[C].vectorize(ji)
    s[C].parallel(C.op.axis[0])
    mod = tvm.lower(s, [A, B, D], name="mixed")
    f = tvm.build(mod, name="mixed")
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (n, m)).astype("float32")
    b = rng.uniform(-1, 1, (m,)).astype("float32")
    d_ref = np.zeros(n, np.float32)
    run_primfunc(mod["mixed"], [a, b, d_ref])
    d = tvm.nd.array(np.zeros(n, np.float32))
    f(tvm.nd.array(a), tvm.nd.array(b), d)
    np.testing.assert_allclose(d.numpy(), d_ref, rtol=1e-5, atol=1e-6)
    c_np = np.where(a > b, np.floor_divide((a * 10).astype(np.int32) - 7, 3).astype(np.float32), np.exp(a) - b)
    np.testing.assert_allclose(d.numpy(), (c_np * 0.5).max(axis=1), rtol=1e-5, atol=1e-6)
