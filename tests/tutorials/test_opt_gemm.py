"""Tutorial flow: "How to optimize GEMM on CPU" (opt_gemm).

Each step of the tutorial (blocking, vectorization, loop permutation, array packing, write cache,
parallel) is built and its result checked against numpy; the tutorial's timings become a smoke
call of time_evaluator.
"""
import numpy as np
import pytest

import kiln as tvm
import kiln.testing
from kiln import te

TARGET = "llvm"
BN = 8
KFACTOR = 4


def _inputs(M, K, N):
    rng = np.random.default_rng(M * 1000 + N)
    a = rng.random((M, K), dtype="float32")
    b = rng.random((K, N), dtype="float32")
    return a, b, np.dot(a, b)


def _plain(M, K, N):
    k = te.reduce_axis((0, K), "k")
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    C = te.compute((M, N), lambda m, n: te.sum(A[m, k] * B[k, n], axis=k), name="C")
    return A, B, C


def _packed(M, K, N):
    k = te.reduce_axis((0, K), "k")
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    packedB = te.compute((N // BN, K, BN), lambda bigN, kk, littleN: B[kk, bigN * BN + littleN],
                         name="packedB")
    C = te.compute(
        (M, N),
        lambda m, n: te.sum(A[m, k] * packedB[n // BN, k, tvm.tir.indexmod(n, BN)], axis=k),
        name="C")
    return A, B, packedB, C


def _default(M, K, N):
    A, B, C = _plain(M, K, N)
    return te.create_schedule(C.op), [A, B, C]


def _blocking(M, K, N, vectorize=False, permute=False):
    A, B, C = _plain(M, K, N)
    s = te.create_schedule(C.op)
    mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], BN, BN)
    (kaxis,) = s[C].op.reduce_axis
    ko, ki = s[C].split(kaxis, factor=KFACTOR)
    if permute:
        s[C].reorder(mo, no, ko, mi, ki, ni)
    else:
        s[C].reorder(mo, no, ko, ki, mi, ni)
    if vectorize:
        s[C].vectorize(ni)
    return s, [A, B, C]


def _array_packing(M, K, N):
    A, B, packedB, C = _packed(M, K, N)
    s = te.create_schedule(C.op)
    mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], BN, BN)
    (kaxis,) = s[C].op.reduce_axis
    ko, ki = s[C].split(kaxis, factor=KFACTOR)
    s[C].reorder(mo, no, ko, mi, ki, ni)
    s[C].vectorize(ni)
    bigN, _, littleN = s[packedB].op.axis
    s[packedB].vectorize(littleN)
    s[packedB].parallel(bigN)
    return s, [A, B, C]


def _write_cache(M, K, N, parallel=False):
    A, B, packedB, C = _packed(M, K, N)
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "global")
    mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], BN, BN)
    s[CC].compute_at(s[C], no)
    mc, nc = s[CC].op.axis
    (kaxis,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(kaxis, factor=KFACTOR)
    s[CC].reorder(ko, mc, ki, nc)
    s[CC].vectorize(nc)
    s[CC].unroll(ki)
    if parallel:
        s[C].parallel(mo)
    bigN, _, littleN = s[packedB].op.axis
    s[packedB].vectorize(littleN)
    s[packedB].parallel(bigN)
    return s, [A, B, C]


STEPS = {
    "default": _default,
    "blocking": _blocking,
    "vectorization": lambda M, K, N: _blocking(M, K, N, vectorize=True),
    "loop_permutation": lambda M, K, N: _blocking(M, K, N, vectorize=True, permute=True),
    "array_packing": _array_packing,
    "write_cache": _write_cache,
    "parallel": lambda M, K, N: _write_cache(M, K, N, parallel=True),
}


@pytest.mark.parametrize("step", list(STEPS))
@pytest.mark.parametrize("M,K,N", [(64, 64, 64), (33, 21, 40)])
def test_gemm_step(step, M, K, N):
    a_np, b_np, want = _inputs(M, K, N)
    s, args = STEPS[step](M, K, N)
    func = tvm.build(s, args, target=TARGET, name="mmult")
    assert func
    dev = tvm.device(TARGET, 0)
    a = tvm.nd.array(a_np, dev)
    b = tvm.nd.array(b_np, dev)
    c = tvm.nd.array(np.zeros((M, N), dtype="float32"), dev)
    func(a, b, c)
    tvm.testing.assert_allclose(c.numpy(), want, rtol=1e-5, atol=1e-4)
    if step == "parallel":
        evaluator = func.time_evaluator(func.entry_name, dev, number=2)
        assert evaluator(a, b, c).mean > 0
        # the lowered IR names the packed buffer and the cache stage
        text = str(tvm.lower(s, args, simple_mode=True))
        assert "packedB" in text and "C_global" in text and "parallel" in text
