"""Vectorized float min/max: x86 min/max instructions with the semantics of the scalar helper (a NaN in either
operand gives NaN, as numpy's minimum/maximum; equal lanes give the second operand); clip fused after a
vectorized kernel uses one instruction per bound (its bounds are constants, never NaN)."""
import numpy as np
import pytest

import kiln
from kiln import te


def _build(op, dtype, lanes, n):
    a = te.placeholder((n,), dtype, name="a")
    b = te.placeholder((n,), dtype, name="b")
    c = te.compute((n,), lambda i: op(a[i], b[i]), name="c")
    s = te.create_schedule(c.op)
    xo, xi = s[c].split(c.op.axis[0], factor=lanes)
    s[c].vectorize(xi)
    return kiln.build(s, [a, b, c], target="llvm -mcpu=core-avx2")


@pytest.mark.parametrize("dtype, lanes", [("float32", 8), ("float32", 4), ("float64", 4), ("float32", 6)])
@pytest.mark.parametrize("which", ["min", "max"])
def test_vector_minmax_matches_scalar_semantics(dtype, lanes, which):
    n = 8 * lanes
    op = getattr(te, which)
    f = _build(op, dtype, lanes, n)
    rng = np.random.default_rng(0)
    a = rng.standard_normal(n).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    a[::5] = b[::5]          # equal lanes
    a[1::7] = np.nan         # NaN in the first operand
    b[2::7] = np.nan         # NaN in the second operand
    a[3::11] = -0.0
    b[3::11] = 0.0           # signed zeros: equal, so the second operand wins
    c = kiln.nd.empty((n,), dtype)
    f(kiln.nd.array(a), kiln.nd.array(b), c)
    expect = np.where(a < b, a, b) if which == "min" else np.where(a > b, a, b)
    expect = np.where(np.isnan(a), a, expect)  # NaN propagates from either operand
    got = c.numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expect))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expect))
    np.testing.assert_array_equal(got[~np.isnan(got)], expect[~np.isnan(expect)])
    src = f.get_source()
    if lanes in (4, 8) and not (dtype == "float64" and lanes == 8):
        assert "_mm" in src and f"_{which}_p" in src, src[:2000]


def test_clip_uses_min_max_instructions():
    n = 40
    a = te.placeholder((n,), "float32", name="a")
    c = te.compute((n,), lambda i: te.min(te.max(a[i], 0.0), 6.0), name="c")
    s = te.create_schedule(c.op)
    _, xi = s[c].split(c.op.axis[0], factor=8)
    s[c].vectorize(xi)
    f = kiln.build(s, [a, c], target="llvm -mcpu=core-avx2")
    src = f.get_source()
    assert "_mm256_min_ps" in src and "_mm256_max_ps" in src
    assert "blendv" not in src  # constant bounds: no NaN fix-up needed
    x = (np.random.default_rng(1).standard_normal(n) * 5).astype("float32")
    out = kiln.nd.empty((n,), "float32")
    f(kiln.nd.array(x), out)
    np.testing.assert_array_equal(out.numpy(), np.clip(x, 0, 6))
    x[3] = np.nan
    f(kiln.nd.array(x), out)
    assert np.isnan(out.numpy()[3])
