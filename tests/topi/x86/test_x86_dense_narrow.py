"""dense_pack with few or padded columns (a 10-class head, N below one SIMD vector): numerics against numpy on
odd shapes, and the generated code of both ISAs keeps the padded micro-kernel in vector registers (a single
padded column block used to turn the last panel into guarded scalar code, 8x slower)."""
import re

import numpy as np
import pytest

import kiln as tvm
from kiln import te, topi
from kiln.topi import x86
from kiln.topi.x86.dense import gemm_block, narrow_panel_width
from kiln.topi.testing import dense_pack_weight_python

ISA = {"avx2": "llvm -mcpu=core-avx2", "avx512": "llvm -mcpu=skylake-avx512"}


def _build(target, m, n, k, bn):
    """relu(dense + bias) on a weight packed into ``bn``-wide panels (``bn`` 0: packed per call)."""
    with tvm.target.Target(target):
        A, B = te.placeholder((m, k), name="A"), te.placeholder((n,), name="B")
        W = te.placeholder((-(-n // bn), k, bn) if bn else (n, k), name="W")
        out = topi.nn.relu(x86.dense_pack(A, W, B, "float32", n if bn else None))
        f = tvm.build(x86.schedule_dense_pack([out]), [A, W, B, out], target=target)
    return f


def _check(f, m, n, k, bn, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype("float32")
    w = rng.standard_normal((n, k)).astype("float32")
    b = rng.standard_normal(n).astype("float32")
    out = tvm.nd.empty((m, n), "float32")
    f(tvm.nd.array(a), tvm.nd.array(dense_pack_weight_python(w, bn) if bn else w), tvm.nd.array(b), out)
    np.testing.assert_allclose(out.numpy(), np.maximum(a @ w.T + b, 0), rtol=1e-4, atol=1e-4)


def test_padded_units_keep_two_column_blocks():
    assert gemm_block(64, 16, 8, 8) == (6, 2)                          # unpadded 16 columns: 2 panels, 1 block
    assert gemm_block(64, 16, 8, 8, padded_units=10) == (6, 1)         # 10 of 16: 2 blocks of one panel
    assert gemm_block(1, 1024, 16, 8, padded_units=1020) == (1, 4)     # wide: unaffected
    assert [narrow_panel_width(n) for n in (1, 2, 3, 5, 8, 10, 15)] == [1, 2, 2, 4, 8, 8, 8]


@pytest.mark.parametrize("m,n,k,bn", [(64, 10, 512, 8), (13, 10, 37, 8), (1, 10, 33, 8), (7, 20, 9, 16),
                                      (5, 1001, 19, 16), (3, 5, 17, 0), (7, 3, 9, 0), (5, 1, 8, 0), (9, 10, 21, 0)])
def test_narrow_dense_numerics(m, n, k, bn):
    _check(_build("llvm", m, n, k, bn), m, n, k, bn, m * 131 + n)


@pytest.mark.parametrize("isa,m,n,k,bn", [("avx2", 64, 10, 512, 8), ("avx2", 9, 5, 64, 0),
                                          ("avx512", 64, 10, 512, 0), ("avx512", 64, 24, 64, 16)])
def test_narrow_dense_accumulators_are_registers(isa, m, n, k, bn):
    src = _build(ISA[isa], m, n, k, bn).get_source()
    assert "float T_dense_pack_global[" not in src                     # no accumulator array in memory
    assert "T_dense_pack_global_r" in src                              # promoted to vector variables
    assert ("kiln_f32x16" if isa == "avx512" and n >= 16 else "kiln_f32x") in src


@pytest.mark.parametrize("isa,steps", [("avx2", 8), ("avx512", 1)])
def test_fallback_reduction_unroll_per_isa(isa, steps):
    """AVX-512's 24-accumulator block is not unrolled along k (gcc's reassociation of unrolled steps spilled
    it); AVX2's 12-accumulator block unrolls 8 steps. Counted as accumulator updates in the C source."""
    bn = 32 if isa == "avx512" else 16
    src = _build(ISA[isa], 12, 64, 64, bn).get_source()
    assert len(re.findall(r"(\w+_r0) = \1 \+", src)) == steps
