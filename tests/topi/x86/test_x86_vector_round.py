"""float32 floor / ceil / trunc / round on vectors: one SIMD round instruction in the generated C
(CSupport.vector_round), not a loop of scalar libm calls; numerics against numpy incl. NaN, inf, -0.0, halves
and values beyond 2^23 (AVX2 run, AVX-512 compiled)."""
import numpy as np
import pytest

import kiln as tvm
from kiln import te, topi

AVX2 = "llvm -mcpu=core-avx2"
AVX512 = "llvm -mcpu=skylake-avx512"
VALUES = np.array([0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, 2.49999, -2.50001, 7.9, -7.9, 1e-30, -1e-30, 8388609.0,
                   -8388609.5, 3e9, -3e9, np.inf, -np.inf, np.nan, 123.456, -0.99], dtype="float32")


def _build(fn, lanes, target, n):
    A = te.placeholder((n,), name="a")
    B = te.compute((n,), lambda i: fn(A[i]), name="b")
    s = te.create_schedule(B.op)
    _, xi = s[B].split(B.op.axis[0], factor=lanes)
    s[B].vectorize(xi)
    return tvm.build(s, [A, B], target=target)


@pytest.mark.parametrize("name,ref", [("floor", np.floor), ("ceil", np.ceil), ("trunc", np.trunc)])
def test_vector_round_avx2(name, ref):
    n = 24  # a multiple of the 8 lanes
    vals = np.resize(VALUES, n)
    f = _build(getattr(tvm.tir, name), 8, AVX2, n)
    src = f.get_source()
    assert "_mm256_round_ps" in src
    out = tvm.nd.empty((n,), "float32")
    f(tvm.nd.array(vals), out)
    np.testing.assert_array_equal(out.numpy(), ref(vals))
    assert np.array_equal(np.signbit(out.numpy()), np.signbit(ref(vals)))  # -0.0 stays -0.0


def test_vector_round_avx512_compiles_to_roundscale():
    f = _build(tvm.tir.floor, 16, AVX512, 32)
    assert "_mm512_roundscale_ps" in f.get_source()


def test_fast_exp_uses_the_vector_round():
    A = te.placeholder((64,), name="a")
    out = topi.fast_exp(A)
    s = te.create_schedule(out.op)
    _, xi = s[out].split(out.op.axis[0], factor=8)
    s[out].vectorize(xi)
    f = tvm.build(s, [A, out], target=AVX2)
    assert "_mm256_round_ps" in f.get_source()
    a = np.linspace(-87, 88, 64).astype("float32")  # fast_exp: 0 below -87.3, inf above 88.72
    res = tvm.nd.empty((64,), "float32")
    f(tvm.nd.array(a), res)
    np.testing.assert_allclose(res.numpy(), np.exp(a.astype(np.float64)), rtol=3e-7)
