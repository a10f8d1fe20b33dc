"""x86 injective schedule: an innermost axis shorter than a vector (NCHW4c's ``4c``) is fused with the axes outside
it so the stage still vectorizes; numerics against numpy on odd shapes, and the loop nest of the generated C."""
import numpy as np
import pytest

import kiln as tvm
from kiln import te, topi

AVX2 = "llvm -mcpu=core-avx2"
AVX512 = "llvm -mcpu=skylake-avx512"


def _build(shape, target):
    with tvm.target.Target(target):
        a = te.placeholder(shape, "float32", name="a")
        out = te.compute(shape, lambda *i: te.round(a(*i) * 2.5) + 1.0, name="o", tag="injective")
        s = topi.generic.schedule_injective([out])
        return tvm.build(s, [a, out], target)


@pytest.mark.parametrize("shape", [(1, 3, 7, 6, 4), (2, 5, 3, 3, 4), (1, 2, 5, 7, 4), (3, 5, 2)])
def test_short_inner_axis_matches_numpy(shape):
    """The first three shapes fuse a suffix of axes (6x4 = 24; 5x3x3x4 = 180 -> 2x5x3x3x4 = 360; 2x5x7x4 = 280),
    the last has no suffix that 8 divides and stays serial; the values are exact either way."""
    f = _build(shape, "llvm")
    x = (np.random.default_rng(3).standard_normal(shape) * 4).astype("float32")
    o = tvm.nd.array(np.zeros_like(x))
    f(tvm.nd.array(x), o)
    np.testing.assert_array_equal(o.numpy(), np.round(x * np.float32(2.5)) + 1)


@pytest.mark.parametrize("target,lanes", [(AVX2, 8), (AVX512, 16)])
def test_short_inner_axis_is_fused_and_vectorized(target, lanes):
    """Compile only: the 8 x 4 suffix becomes one loop split by the target's float32 lanes (8 AVX2, 16 AVX-512)."""
    shape = (1, 3, 5, 8, 4)  # 8 x 4 = 32: a multiple of 8 and of 16
    src = _build(shape, target).get_source()
    assert "i3_i4_fused" in src
    assert f"i3_i4_fused_outer < {32 // lanes}" in src
