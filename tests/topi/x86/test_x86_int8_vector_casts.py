"""Integer vector casts between 8-, 16- and 32-bit lanes in the C backend (``CSupport.int_convert``: AVX2 /
SSE4.1 widening and byte-shuffle truncation instead of GCC's lane-by-lane ``__builtin_convertvector``), the
int8 kernels' loads and stores: values against numpy's ``astype`` (truncation wraps, sign or zero extension)."""
import numpy as np
import pytest

import kiln as tvm
from kiln import te
from kiln.target.x86 import host_can_run
from vector_code_util import check_cast, vector_cast_func

AVX2 = "llvm -mcpu=core-avx2"
PAIRS = [("uint8", "int32"), ("int8", "int32"), ("uint8", "int16"), ("int8", "int16"), ("int16", "int32"),
         ("uint16", "int32"), ("int32", "uint8"), ("int32", "int8"), ("int32", "int16"), ("int16", "int8"),
         ("int16", "uint8"), ("uint8", "uint32")]


@pytest.mark.skipif(not host_can_run(tvm.target.Target(AVX2)), reason="host lacks AVX2")
@pytest.mark.parametrize("src,dst", PAIRS)
@pytest.mark.parametrize("lanes", [8, 16])
def test_vector_int_casts(src, dst, lanes):
    f = vector_cast_func(src, dst, lanes, AVX2)
    assert "kiln_cvt_" in f.get_source()
    check_cast(f, src, dst, 3 * lanes, seed=3)


@pytest.mark.skipif(not host_can_run(tvm.target.Target(AVX2)), reason="host lacks AVX2")
@pytest.mark.parametrize("other", ["uint8", "int8", "int16", "uint16"])
@pytest.mark.parametrize("lanes", [8, 16])
def test_vector_float_int_casts(other, lanes):
    """float32 <-> 8/16-bit integer lanes go through int32 lanes (one vcvt(t)ps2dq / vcvtdq2ps and the integer
    helper, not GCC's lane-by-lane conversion): float -> int truncates toward zero (C's cast) for values that
    fit the integer type; int -> float is exact."""
    n = 3 * lanes
    info = np.iinfo(other)
    for src, dst in (("float32", other), (other, "float32")):
        a = te.placeholder((n,), src, name="a")
        b = te.compute((n,), lambda i: a[i].astype(dst), name="b")
        s = te.create_schedule(b.op)
        _, inner = s[b].split(b.op.axis[0], factor=lanes)
        s[b].vectorize(inner)
        f = tvm.build(s, [a, b], AVX2)
        assert "kiln_cvt_" in f.get_source()
        rng = np.random.default_rng(4)
        if src == "float32":
            x = rng.uniform(info.min, info.max + 0.999, n).astype("float32")
            x[:4] = [info.min, info.max, 0.5 if info.min == 0 else -0.5, info.max - 0.25]
            want = np.trunc(x).astype(dst)
        else:
            x = rng.integers(info.min, info.max + 1, n).astype(src)
            x[:2] = [info.min, info.max]
            want = x.astype(dst)
        out = tvm.nd.array(np.zeros(n, dst))
        f(tvm.nd.array(x), out)
        np.testing.assert_array_equal(out.numpy(), want)
