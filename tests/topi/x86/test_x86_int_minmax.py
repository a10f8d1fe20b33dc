"""Integer vector min / max in the C backend are one x86 instruction (``vpminsd``, ``vpmaxub``, ...) where the
target has it, with the compare-and-blend form as the fallback; numerics on the extremes of each type."""
import numpy as np
import pytest

import kiln
from kiln import te
from kiln.runtime.cpu_features import host_features

AVX2 = "llvm -mcpu=core-avx2"
SFX = {"int8": "epi8", "int16": "epi16", "int32": "epi32", "uint8": "epu8", "uint16": "epu16", "uint32": "epu32"}


@pytest.mark.parametrize("dtype", list(SFX))
def test_int_vector_minmax_one_instruction_and_exact(dtype):
    lanes = 256 // np.dtype(dtype).itemsize // 8
    n = lanes * 3
    a = te.placeholder((n,), dtype, name="a")
    b = te.placeholder((n,), dtype, name="b")
    lo, hi = te.const(int(np.iinfo(dtype).min) + 3, dtype), te.const(int(np.iinfo(dtype).max) - 5, dtype)
    c = te.compute((n,), lambda i: te.max(te.min(te.max(a[i], b[i]), hi), lo), name="c")
    s = te.create_schedule(c.op)
    _, ii = s[c].split(c.op.axis[0], factor=lanes)
    s[c].vectorize(ii)
    f = kiln.build(s, [a, b, c], target=AVX2)
    src = f.get_source()
    assert f"_mm256_min_{SFX[dtype]}" in src and f"_mm256_max_{SFX[dtype]}" in src
    if "avx2" not in host_features():
        return
    info = np.iinfo(dtype)
    rng = np.random.default_rng(5)
    x = rng.integers(info.min, info.max, n, endpoint=True, dtype=np.int64).astype(dtype)
    y = rng.integers(info.min, info.max, n, endpoint=True, dtype=np.int64).astype(dtype)
    x[:4] = [info.min, info.max, info.min, 0]
    y[:4] = [info.max, info.min, info.min, 0]
    out = kiln.nd.empty((n,), dtype)
    f(kiln.nd.array(x), kiln.nd.array(y), out)
    ref = np.clip(np.maximum(x, y), info.min + 3, info.max - 5).astype(dtype)
    np.testing.assert_array_equal(out.numpy(), ref)
