"""The x86 int8 depthwise conv (``depthwise_conv2d_NCHWc_int8.x86``): uint8 x int8 -> int32 against numpy (odd
channel counts padded inside, stride 2, padding, a window too large for the float32-exact form), the blocked
NCHW16c form, and the compile-only check of named targets."""
import subprocess

import numpy as np
import pytest

import kiln as tvm
from kiln import te
from kiln.error import KilnError
from kiln.target.flags import cpu_cflags
from kiln.target.x86 import host_can_run
from kiln.topi.x86 import (depthwise_conv2d_NCHWc_int8, depthwise_conv2d_nchw_int8,
                           schedule_depthwise_conv2d_NCHWc_int8, schedule_depthwise_conv2d_nchw_int8)
from kiln.topi.x86.depthwise_conv2d_int8 import float_exact

AVX2 = "llvm -mcpu=core-avx2"
RNG = np.random.default_rng(8)
needs_avx2 = pytest.mark.skipif(not host_can_run(tvm.target.Target(AVX2)), reason="host lacks AVX2")


def dw_ref(d, w, stride, pad):
    n, c, h, wd = d.shape
    kh, kw = w.shape[2:]
    dp = np.pad(d.astype(np.int64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, c, oh, ow), np.int64)
    for y in range(kh):
        for x in range(kw):
            out += dp[:, :, y:y + stride * oh:stride, x:x + stride * ow:stride] * w[:, 0, y, x].astype(np.int64)[None, :, None, None]
    return out


def build_nchw(dshape, wshape, stride, pad, target):
    with tvm.target.Target(target):
        d = te.placeholder(dshape, "uint8", name="d")
        w = te.placeholder(wshape, "int8", name="w")
        out = depthwise_conv2d_nchw_int8(d, w, (stride, stride), (pad, pad), (1, 1), "int32")
        s = schedule_depthwise_conv2d_nchw_int8([out])
        return tvm.build(s, [d, w, out], target), [int(v) for v in out.shape]


@needs_avx2
@pytest.mark.parametrize("c,h,w,k,stride,pad", [(5, 9, 11, 3, 1, 1), (32, 14, 14, 3, 2, 1), (17, 8, 7, 5, 1, 2),
                                                 (20, 6, 6, 3, 1, 0), (3, 25, 25, 23, 1, 0)])
def test_depthwise_int8_matches_numpy(c, h, w, k, stride, pad):
    d = RNG.integers(0, 256, (1, c, h, w)).astype("uint8")
    wt = RNG.integers(-128, 128, (c, 1, k, k)).astype("int8")
    if k == 23:
        assert not float_exact(k * k)  # the int16-product form
        d[:] = 255
        wt[:] = -128
    f, shape = build_nchw(d.shape, wt.shape, stride, pad, AVX2)
    out = tvm.nd.array(np.zeros(shape, "int32"))
    f(tvm.nd.array(d), tvm.nd.array(wt), out)
    np.testing.assert_array_equal(out.numpy(), dw_ref(d, wt, stride, pad))


@needs_avx2
@pytest.mark.parametrize("c,bn", [(32, 16), (24, 8)])
def test_depthwise_int8_blocked_layout(c, bn):
    h = 10
    d = RNG.integers(0, 256, (1, c, h, h)).astype("uint8")
    wt = RNG.integers(-128, 128, (c, 1, 3, 3)).astype("int8")
    with tvm.target.Target(AVX2):
        dv = te.placeholder((1, c // bn, h, h, bn), "uint8", name="d")
        wv = te.placeholder((c // bn, 1, 3, 3, 1, bn), "int8", name="w")
        out = depthwise_conv2d_NCHWc_int8(dv, wv, (1, 1), (1, 1), (1, 1), f"NCHW{bn}c", f"NCHW{bn}c", "int32")
        f = tvm.build(schedule_depthwise_conv2d_NCHWc_int8([out]), [dv, wv, out], AVX2)
    d5 = d.reshape(1, c // bn, bn, h, h).transpose(0, 1, 3, 4, 2).copy()
    w6 = wt.reshape(c // bn, bn, 1, 3, 3).transpose(0, 2, 3, 4, 1).reshape(c // bn, 1, 3, 3, 1, bn).copy()
    res = tvm.nd.array(np.zeros((1, c // bn, h, h, bn), "int32"))
    f(tvm.nd.array(d5), tvm.nd.array(w6), res)
    np.testing.assert_array_equal(res.numpy().transpose(0, 1, 4, 2, 3).reshape(1, c, h, h), dw_ref(d, wt, 1, 1))


def test_depthwise_int8_rejects_bad_input():
    d = te.placeholder((1, 8, 5, 5), "int8", name="d")
    w = te.placeholder((8, 1, 3, 3), "int8", name="w")
    with tvm.target.Target(AVX2), pytest.raises(KilnError, match="uint8 data x int8 kernel"):
        depthwise_conv2d_nchw_int8(d, w, (1, 1), (1, 1), (1, 1), "int32")
    d = te.placeholder((1, 8, 5, 5), "uint8", name="d")
    w = te.placeholder((8, 2, 3, 3), "int8", name="w")
    with tvm.target.Target(AVX2), pytest.raises(KilnError, match="multiplier 1"):
        depthwise_conv2d_nchw_int8(d, w, (1, 1), (1, 1), (1, 1), "int32")


@pytest.mark.parametrize("target", ["llvm -mcpu=cascadelake", "llvm -mcpu=znver4", AVX2])
def test_depthwise_int8_compiles_for_named_targets(target):
    """Compile only (the host may lack the ISA): the C builds for the target and keeps int32 SIMD."""
    f, _ = build_nchw((1, 32, 12, 12), (32, 1, 3, 3), 1, 1, target)
    asm = subprocess.run(["gcc", "-O3", *cpu_cflags(tvm.target.Target(target)), "-fopenmp", "-S", "-x", "c", "-",
                          "-o", "-"], input=f.get_source(), capture_output=True, text=True, check=True).stdout
    assert "vfmadd" in asm and "vpmovzxbd" in asm


@pytest.mark.parametrize("int8", [True, False])
def test_depthwise_packed_kernel_layout_check_shared(int8):
    """fp32 and int8 templates share ``_check_dw_kernel``: a kernel block that differs from the data's, and (int8)
    a block the int8 template lacks, are refused with the layout named."""
    from kiln.topi.x86 import depthwise_conv2d_NCHWc
    dt, kt = ("uint8", "int8") if int8 else ("float32", "float32")
    fn = depthwise_conv2d_NCHWc_int8 if int8 else depthwise_conv2d_NCHWc
    cases = [((1, 2, 6, 6, 16), (4, 1, 3, 3, 1, 8), "OIHW1i16o")]
    if int8:
        cases.append(((1, 8, 6, 6, 4), (8, 1, 3, 3, 1, 4), "16 or 8 channels a block"))
    for dshape, kshape, msg in cases:
        d = te.placeholder(dshape, dt, name="d")
        w = te.placeholder(kshape, kt, name="w")
        with tvm.target.Target(AVX2), pytest.raises(KilnError, match=msg):
            fn(d, w, (1, 1), (1, 1), (1, 1), "NCHWc", "NCHWc", "int32" if int8 else "float32")


def test_depthwise_int8_weights_converted_a_vector_at_a_time():
    """The per-call float32 copy of the int8 weights is a vector loop (a scalar one cost ~15% of a 7x7 layer)."""
    f, _ = build_nchw((1, 40, 7, 7), (40, 1, 3, 3), 1, 1, AVX2)
    assert "kiln_vstore_f32x8(kernel_f32" in f.get_source()
