"""The x86 int16 dense (``dense_int16.x86``, the exact int8 dense without VNNI): int16 x int16 -> int32 against
numpy (odd K and N, N below one 16-column panel, M = 1, 7, 33, the whole +-255 operand range of the QNN
legalization and int16 extremes), the packed NC16n2c weight, and its instruction for named targets."""
import subprocess

import numpy as np
import pytest

import kiln as tvm
from kiln import te
from kiln.error import KilnError
from kiln.target.flags import cpu_cflags
from kiln.target.x86 import host_can_run
from kiln.topi.x86 import dense_int16, schedule_dense_int16
from kiln.topi.x86.dense_int16 import pack_int16_weight

AVX2 = "llvm -mcpu=core-avx2"
RNG = np.random.default_rng(11)


def build(m, k, n, target, packed=False):
    with tvm.target.Target(target):
        a = te.placeholder((m, k), "int16", name="a")
        if packed:
            w = te.placeholder((-(-n // 16), -(-k // 2), 16, 2), "int16", name="w")
            out = dense_int16(a, w, None, "int32", n)
        else:
            w = te.placeholder((n, k), "int16", name="w")
            out = dense_int16(a, w, None, "int32")
        s = schedule_dense_int16([out])
        return tvm.build(s, [a, w, out], target)


def _pack(w):
    n, k = w.shape
    wp = np.zeros((-(-n // 16) * 16, -(-k // 2) * 2), w.dtype)
    wp[:n, :k] = w
    return wp.reshape(wp.shape[0] // 16, 16, wp.shape[1] // 2, 2).transpose(0, 2, 1, 3).copy()


@pytest.mark.skipif(not host_can_run(tvm.target.Target(AVX2)), reason="host lacks AVX2")
@pytest.mark.parametrize("m,k,n", [(1, 19, 5), (1, 256, 1000), (7, 33, 40), (33, 130, 33), (7, 3, 17), (128, 64, 48)])
def test_dense_int16_matches_numpy(m, k, n):
    d = RNG.integers(-255, 256, (m, k)).astype("int16")
    w = RNG.integers(-255, 256, (n, k)).astype("int16")
    f = build(m, k, n, AVX2)
    out = tvm.nd.array(np.zeros((m, n), "int32"))
    f(tvm.nd.array(d), tvm.nd.array(w), out)
    np.testing.assert_array_equal(out.numpy(), d.astype(np.int64) @ w.astype(np.int64).T)


@pytest.mark.skipif(not host_can_run(tvm.target.Target(AVX2)), reason="host lacks AVX2")
@pytest.mark.parametrize("m,k,n", [(7, 9, 20), (4, 64, 32)])
def test_dense_int16_packed_weight_and_extremes(m, k, n):
    """A packed NC16n2c weight with ``units``; int16 extremes whose int32 pair sums wrap as int32 arithmetic does."""
    d = RNG.choice(np.array([-32768, 32767, -1, 0, 1, 255, -255], "int16"), (m, k))
    w = RNG.choice(np.array([-32768, 32767, -1, 0, 7, 128], "int16"), (n, k))
    f = build(m, k, n, AVX2, packed=True)
    out = tvm.nd.array(np.zeros((m, n), "int32"))
    f(tvm.nd.array(d), tvm.nd.array(_pack(w)), out)
    want = (d.astype(np.int64) @ w.astype(np.int64).T)
    np.testing.assert_array_equal(out.numpy(), ((want + 2**31) % 2**32 - 2**31).astype(np.int32))


def test_pack_int16_weight_layout():
    w = RNG.integers(-300, 300, (21, 7)).astype("int16")
    wt = te.placeholder(w.shape, "int16", name="w")
    p = pack_int16_weight(wt)
    s = te.create_schedule(p.op)
    f = tvm.build(s, [wt, p], "llvm")
    out = tvm.nd.array(np.zeros([int(v) for v in p.shape], "int16"))
    f(tvm.nd.array(w), out)
    np.testing.assert_array_equal(out.numpy(), _pack(w))


@pytest.mark.parametrize("target,instr", [(AVX2, "vpmaddwd"), ("llvm -mcpu=skylake-avx512", "vpmaddwd")])
def test_dense_int16_codegen(target, instr):
    src = build(4, 64, 32, target).get_source()
    asm = subprocess.run(["gcc", "-O3", *cpu_cflags(tvm.target.Target(target)), "-fopenmp", "-S", "-x", "c", "-",
                          "-o", "-"], input=src, capture_output=True, text=True, check=True).stdout
    assert instr in asm and "vpmaddubsw" not in asm


def test_dense_int16_refuses_other_dtypes_and_shapes():
    with tvm.target.Target(AVX2):
        with pytest.raises(KilnError, match="int16 data x int16 weight"):
            dense_int16(te.placeholder((3, 8), "uint8"), te.placeholder((4, 8), "int8"), None, "int32")
        with pytest.raises(KilnError, match="8 columns but the weight 6"):
            dense_int16(te.placeholder((3, 8), "int16"), te.placeholder((4, 6), "int16"), None, "int32")
        with pytest.raises(KilnError, match="units=40"):
            dense_int16(te.placeholder((3, 8), "int16"), te.placeholder((2, 4, 16, 2), "int16"), None, "int32", 40)
