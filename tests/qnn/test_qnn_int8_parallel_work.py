"""The parallel policy's work estimate of tensorized int8 kernels: an extern intrinsic call on vector lanes
(``kiln_dot4_u8s8`` on 8 int32 lanes) counts its lanes, so an int8 1x1 conv of mobilenet_v2's size keeps its
parallel loop as the fp32 conv of the same layer does (counted as one per call it ran serially)."""
import kiln as tvm
from kiln import te
from kiln.relay.backend.parallel_policy import DEFAULT_MIN_WORK, apply_parallel_policy, estimate_work
from kiln.tir import op as T
from kiln.topi.x86 import conv2d_int8

TARGET = "llvm -mcpu=core-avx2 -num-cores=4"


def _int8_conv_primfunc(ic: int, oc: int, hw: int):
    with tvm.target.Target(TARGET):
        d = te.placeholder((1, ic // 16, hw, hw, 16), "uint8", name="d")
        k = te.placeholder((oc // 8, ic // 4, 1, 1, 8, 4), "int8", name="k")
        out = conv2d_int8.conv2d_NCHWc_int8(d, k, (1, 1), (0, 0, 0, 0), (1, 1), "NCHW16c", "NCHW8c", "int32")
        ep = te.compute(out.shape, lambda *i: T.cast(T.min(out[i], 255), "uint8"), name="ep", tag="elemwise")
        s = conv2d_int8.schedule_conv2d_NCHWc_int8([ep])
        return te.schedule_to_primfunc(s, [d, k, ep], name="conv_int8"), ic * oc * hw * hw


def test_tensorized_int8_conv_keeps_its_parallel_loop():
    f, macs = _int8_conv_primfunc(144, 24, 56)   # mobilenet_v2's 144 -> 24 projection at 56x56 (10.8M MACs)
    assert "T.parallel" in str(f.body)
    work = estimate_work(f.body)
    # one intrinsic call per 8 lanes x 4 input channels: counted per lane, a quarter of the multiply-adds
    assert macs // 4 <= work < macs // 2, work
    assert "T.parallel" in str(apply_parallel_policy(f).body)
    assert work >= DEFAULT_MIN_WORK


def test_small_int8_conv_still_runs_serially():
    f, macs = _int8_conv_primfunc(16, 8, 6)
    if "T.parallel" in str(f.body):   # the schedule itself may already leave such a layer serial
        assert "T.parallel" not in str(apply_parallel_policy(f).body)
    assert estimate_work(f.body) < DEFAULT_MIN_WORK


def test_scalar_and_plain_vector_stores_count_once():
    a = te.placeholder((64,), "float32", name="a")
    b = te.compute((64,), lambda i: a[i] * 2.0, name="b")
    s = te.create_schedule(b.op)
    xo, xi = s[b].split(b.op.axis[0], factor=8)
    s[b].vectorize(xi)
    f = te.schedule_to_primfunc(s, [a, b], name="scale")
    assert estimate_work(f.body) == 64   # the vectorized loop's extent; its stores are not counted again
