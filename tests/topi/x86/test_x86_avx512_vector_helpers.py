"""AVX-512 forms of the C backend's vector helpers (``CSupport.int_convert``, ``_vec_minmax``, ``vector_round``): a
16-lane integer cast is one ``vpmov*`` per 16 lanes, a 16-lane float min/max one ``vminps``/``vmaxps``, a 16-lane
``round`` one ``vrndscaleps``; none goes through the stack. Compiled for ``skylake-avx512`` (``gcc -S``); the values
are checked against numpy where the host runs AVX-512."""
import re

import numpy as np
import pytest

import kiln as tvm
from kiln import te
from kiln.target.x86 import host_can_run
from vector_code_util import check_cast, target_asm, vector_cast_func

AVX512 = "llvm -mcpu=skylake-avx512"
CAN_RUN = host_can_run(tvm.target.Target(AVX512))
# (src, dst) -> the instruction doing 16 lanes
CASTS = {("int32", "uint8"): "vpmovdb", ("int32", "int8"): "vpmovdb", ("int32", "int16"): "vpmovdw",
         ("int16", "int8"): "vpmovwb", ("uint8", "int32"): "vpmovzxbd", ("int8", "int32"): "vpmovsxbd",
         ("int16", "int32"): "vpmovsxwd", ("uint16", "int32"): "vpmovzxwd"}


def _vector_build(n, lanes, fcompute, in_dtype, out_dtype):
    a = te.placeholder((n,), in_dtype, name="a")
    b = te.compute((n,), lambda i: fcompute(a[i]), name="b")
    s = te.create_schedule(b.op)
    _, inner = s[b].split(b.op.axis[0], factor=lanes)
    s[b].vectorize(inner)
    return tvm.build(s, [a, b], AVX512)


def _asm(f):
    return target_asm(f.get_source(), AVX512)


def _no_stack_vectors(asm):
    return not re.search(r"v\w+\s+%[xyz]mm\d+, -?\d*\(%rsp\)", asm)


@pytest.mark.parametrize("src,dst", sorted(CASTS))
@pytest.mark.parametrize("lanes", [16, 32])
def test_avx512_int_casts(src, dst, lanes):
    n = 3 * lanes
    f = vector_cast_func(src, dst, lanes, AVX512)
    asm = _asm(f)
    assert re.search(rf"{CASTS[(src, dst)]}\s", asm), CASTS[(src, dst)]
    if lanes == 16:  # one register in, one out (32 lanes assemble two results in memory)
        assert _no_stack_vectors(asm)
    if CAN_RUN:
        check_cast(f, src, dst, n, seed=5)


@pytest.mark.parametrize("which", ["min", "max"])
@pytest.mark.parametrize("const_b", [True, False])
def test_avx512_float_minmax(which, const_b):
    """16 float32 lanes: a NaN in either operand gives NaN (numpy's minimum/maximum); with a constant bound it is
    one instruction."""
    n = 48
    fn = getattr(tvm.tir, which)
    a = te.placeholder((n,), "float32", name="a")
    c = te.placeholder((n,), "float32", name="c")
    b = te.compute((n,), (lambda i: fn(a[i], tvm.tir.const(0.5, "float32"))) if const_b else
                   (lambda i: fn(a[i], c[i])), name="b")
    s = te.create_schedule(b.op)
    _, inner = s[b].split(b.op.axis[0], factor=16)
    s[b].vectorize(inner)
    f = tvm.build(s, [a, c, b], AVX512)
    asm = _asm(f)
    assert re.search(rf"v{which}ps\s+.*%zmm", asm)
    assert _no_stack_vectors(asm)
    if CAN_RUN:
        rng = np.random.default_rng(7)
        x, y = rng.standard_normal(n).astype("float32"), rng.standard_normal(n).astype("float32")
        x[::5], y[1::7] = np.nan, np.nan
        out = tvm.nd.empty((n,), "float32")
        f(tvm.nd.array(x), tvm.nd.array(y), out)
        ref = getattr(np, "minimum" if which == "min" else "maximum")(x, np.float32(0.5) if const_b else y)
        np.testing.assert_array_equal(out.numpy(), ref)


def test_avx512_round_half_to_even():
    n = 48
    f = _vector_build(n, 16, tvm.tir.round, "float32", "float32")
    asm = _asm(f)
    assert re.search(r"vrndscaleps\s+\$12, [^\n]*%zmm", asm) and "nearbyint" not in asm
    assert _no_stack_vectors(asm)
    if CAN_RUN:
        x = (np.arange(n, dtype=np.float32) - 24) + np.float32(0.5)
        out = tvm.nd.empty((n,), "float32")
        f(tvm.nd.array(x), out)
        np.testing.assert_array_equal(out.numpy(), np.round(x))
