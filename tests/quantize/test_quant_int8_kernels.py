"""int8 nn.conv2d / nn.dense with int32 accumulation through the x86 strategies: exact integer results.

Operands near 127 make every sum exceed 2**24, so a kernel accumulating in float32 would be caught."""
import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.contrib import graph_executor

AVX2 = "llvm -mcpu=core-avx2"


@pytest.fixture(autouse=True)
def _host_runs_avx2():
    from kiln.target.x86 import host_can_run
    if not host_can_run(tvm.target.Target(AVX2)):
        pytest.skip("this host cannot run AVX2 code")


def _build(expr, params, target):
    mod = tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(expr), expr))
    with tvm.transform.PassContext(opt_level=3):
        return relay.build(mod, target=target, params=params)


def _conv_ref(x, w, pad):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    out = np.zeros((n, o, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,oc->nohw", xp[:, :, i:i + oh, j:j + ow], w[:, :, i, j].astype(np.int64))
    return out


@pytest.mark.parametrize("dshape, wshape", [((1, 256, 5, 7), (19, 256, 3, 3)), ((2, 3, 11, 13), (5, 3, 3, 3))])
def test_quant_int8_conv2d_exact(dshape, wshape):
    rng = np.random.default_rng(0)
    x = rng.integers(100, 128, size=dshape).astype("int8")
    w = rng.integers(-128, -100, size=wshape).astype("int8")
    x.flat[::7] = -128
    xv = relay.var("x", shape=dshape, dtype="int8")
    wv = relay.var("w", shape=wshape, dtype="int8")
    lib = _build(relay.nn.conv2d(xv, wv, padding=(1, 1), out_dtype="int32"), {"w": w}, AVX2)
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    m.set_input("x", x)
    m.run()
    out = m.get_output(0).numpy()
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out.astype(np.int64), _conv_ref(x, w, 1))


@pytest.mark.parametrize("m_, k", [(5, 4099), (1, 37)])
def test_quant_int8_dense_exact(m_, k):
    rng = np.random.default_rng(1)
    x = rng.integers(100, 128, size=(m_, k)).astype("int8")
    w = rng.integers(100, 128, size=(13, k)).astype("int8")
    xv = relay.var("x", shape=(m_, k), dtype="int8")
    wv = relay.var("w", shape=(13, k), dtype="int8")
    lib = _build(relay.nn.dense(xv, wv, out_dtype="int32"), {"w": w}, AVX2)
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    m.set_input("x", x)
    m.run()
    out = m.get_output(0).numpy()
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out.astype(np.int64), x.astype(np.int64) @ w.astype(np.int64).T)


def test_quant_int8_kernels_compile_for_avx512():
    """Code for an AVX-512 target is compiled (not run: the host may lack AVX-512)."""
    xv = relay.var("x", shape=(1, 32, 9, 9), dtype="int8")
    wv = relay.var("w", shape=(16, 32, 3, 3), dtype="int8")
    y = relay.nn.conv2d(xv, wv, padding=(1, 1), out_dtype="int32")
    y = relay.nn.dense(relay.nn.batch_flatten(relay.cast(y, "int8")), relay.var("d", shape=(10, 16 * 81), dtype="int8"),
                       out_dtype="int32")
    w = np.ones((16, 32, 3, 3), "int8")
    d = np.ones((10, 16 * 81), "int8")
    lib = _build(y, {"w": w, "d": d}, "llvm -mcpu=skylake-avx512")
    assert lib.get_lib() is not None
