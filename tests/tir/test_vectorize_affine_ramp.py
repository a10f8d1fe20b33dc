"""The vectorizer keeps lane indices affine: ``int64(ramp)`` is a ramp of int64 and ``ramp (+ - *) scalar`` one
ramp, so int64 indices (kernels over symbolic int64 extents) stay contiguous vector accesses."""
import numpy as np

import kiln
from kiln import te
from kiln.tir import expr as E
from kiln.tir.transform.vectorize import _affine_ramp


def test_affine_ramp_folding_rules():
    r = E.Ramp(E.IntImm("int32", 4), E.IntImm("int32", 1), 8)
    s = E.IntImm("int32", 3)
    add = _affine_ramp(E.Add, s, r)
    assert isinstance(add, E.Ramp) and add.lanes == 8
    mul = _affine_ramp(E.Mul, r, s)
    assert isinstance(mul, E.Ramp)
    sub = _affine_ramp(E.Sub, s, r)   # 3 - (4 + i) = -1 - i: stride -1
    assert isinstance(sub, E.Ramp)
    assert _affine_ramp(E.Mul, r, r) is None          # ramp * ramp is not affine
    assert _affine_ramp(E.Div, r, s) is None


def test_symbolic_int64_extent_copy_is_vector_loads_and_correct():
    n = te.var("n", "int64")
    a = te.placeholder((n, 16), "float32", name="a")
    b = te.compute((n, 16), lambda i, j: a[i, j] * 2.0, name="b")
    s = te.create_schedule(b.op)
    s[b].vectorize(b.op.axis[1])
    f = kiln.build(s, [a, b], target="llvm -mcpu=core-avx2")  # compiled for AVX2; run only where it exists
    src = f.get_source()
    assert "kiln_gather" not in src and "kiln_scatter" not in src
    from kiln.runtime.cpu_features import host_features
    if "avx2" in host_features():
        x = np.random.default_rng(0).standard_normal((5, 16)).astype("float32")
        out = kiln.nd.empty((5, 16), "float32")
        f(kiln.nd.array(x), out)
        np.testing.assert_allclose(out.numpy(), x * 2.0)
