"""The x86 int8 dense (``dense_int8.x86``): uint8 x int8 -> int32 against numpy (odd K and N, N below one
16-column panel, batch 1 and several rows), and its instructions for named targets."""
import subprocess

import numpy as np
import pytest

import kiln as tvm
from kiln import te
from kiln.target.flags import cpu_cflags
from kiln.target.x86 import host_can_run
from kiln.topi.x86 import dense_int8, schedule_dense_int8

AVX2 = "llvm -mcpu=core-avx2"
RNG = np.random.default_rng(5)


def build(m, k, n, target):
    with tvm.target.Target(target):
        a = te.placeholder((m, k), "uint8", name="a")
        w = te.placeholder((n, k), "int8", name="w")
        out = dense_int8(a, w, None, "int32")
        s = schedule_dense_int8([out])
        return tvm.build(s, [a, w, out], target)


@pytest.mark.skipif(not host_can_run(tvm.target.Target(AVX2)), reason="host lacks AVX2")
@pytest.mark.parametrize("m,k,n", [(1, 19, 5), (1, 512, 1000), (3, 64, 40), (8, 130, 33), (7, 3, 17)])
def test_dense_int8_matches_numpy(m, k, n):
    d = RNG.integers(0, 256, (m, k)).astype("uint8")
    w = RNG.integers(-128, 128, (n, k)).astype("int8")
    f = build(m, k, n, AVX2)
    out = tvm.nd.array(np.zeros((m, n), "int32"))
    f(tvm.nd.array(d), tvm.nd.array(w), out)
    np.testing.assert_array_equal(out.numpy(), d.astype(np.int64) @ w.astype(np.int64).T)


@pytest.mark.parametrize("target,instr", [("llvm -mcpu=cascadelake", "vpdpbusd"), ("llvm -mcpu=znver4", "vpdpbusd"),
                                          (AVX2, "vpmaddubsw")])
def test_dense_int8_codegen(target, instr):
    src = build(4, 64, 32, target).get_source()
    asm = subprocess.run(["gcc", "-O3", *cpu_cflags(tvm.target.Target(target)), "-fopenmp", "-S", "-x", "c", "-",
                          "-o", "-"], input=src, capture_output=True, text=True, check=True).stdout
    assert instr in asm


def test_packed_weight_with_units_and_bad_units():
    """A zero-padded NC16n4c panel with ``units`` gives [M, units]; units the panels cannot hold are refused."""
    from kiln import relay
    from kiln.error import KilnError, TypeInferenceError
    from kiln.relay.op.nn._dense_pack import contrib_dense_pack
    from kiln.topi.x86.dense_int8 import dense_int8
    x = relay.var("x", shape=(3, 8), dtype="uint8")
    w = relay.var("w", shape=(2, 2, 16, 4), dtype="int8")
    ok = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x, w], contrib_dense_pack(
        x, w, units=27, out_dtype="int32", weight_layout="NC16n4c"))))
    assert tuple(int(d) for d in ok["main"].ret_type.shape) == (3, 27)
    bad = tvm.IRModule.from_expr(relay.Function([x, w], contrib_dense_pack(x, w, units=12, out_dtype="int32",
                                                                           weight_layout="NC16n4c")))
    with pytest.raises(TypeInferenceError, match="units=12"):
        relay.transform.InferType()(bad)
    with tvm.target.Target("llvm -mcpu=core-avx2"), pytest.raises(KilnError, match="units=40"):
        dense_int8(te.placeholder((3, 8), "uint8"), te.placeholder((2, 2, 16, 4), "int8"), None, "int32", 40)
