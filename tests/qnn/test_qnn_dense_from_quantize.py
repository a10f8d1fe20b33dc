"""x86 exact-mode qnn.dense / qnn.batch_matmul fed by a per-tensor qnn.quantize with run-time parameters: the
legalization computes the int16 operand ``q - zd`` straight from the float input
(``clip(round(v / s) + (zq - zd), qmin - zd, qmax - zd)``), the scalars once per call. Checked bit-exact against
numpy references written from the QNN definitions (round half to even, saturation at both ends, a data zero
point that differs from the quantize's, int8 and uint8 quantization, odd sizes), and that denses sharing one
quantized input share one operand kernel."""
import re

import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.contrib import graph_executor

RNG = np.random.default_rng(7)
F32 = np.float32
TARGET = "llvm -mcpu=core-avx2"   # no VNNI: the exact int16 (vpmaddwd) form


def _quantize_ref(v, s, zq, dtype):
    lo, hi = (0, 255) if dtype == "uint8" else (-128, 127)
    return np.clip(np.round((v / s).astype(F32)) + zq, lo, hi).astype(np.int64)


def _build(m, k, ns, dtype, out_names=None):
    """x [m, k] float -> quantize(x, s, zq) -> one qnn.dense per weight in ``ns`` (zero point zd, run time)."""
    x = relay.var("x", shape=(m, k), dtype="float32")
    s = relay.var("s", shape=(), dtype="float32")
    zq = relay.var("zq", shape=(), dtype="int32")
    zd = relay.var("zd", shape=(1,), dtype="uint8" if dtype == "uint8" else "int8")
    q = relay.qnn.op.quantize(x, s, zq, out_dtype=dtype)
    one = relay.const(F32(1))
    ws, outs = [], []
    for n in ns:
        w = RNG.integers(-128, 128, (n, k)).astype("int8")
        ws.append(w)
        outs.append(relay.qnn.op.dense(q, relay.const(w), relay.cast(zd, "int32"), relay.const(np.int32(3)), one,
                                       one, units=n))
    body = outs[0] if len(outs) == 1 else relay.Tuple(outs)
    mod = kiln.IRModule.from_expr(relay.Function([x, s, zq, zd], body))
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(mod, TARGET)
    return lib, ws


def _run(lib, n_out, **inputs):
    m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    for name, v in inputs.items():
        m.set_input(name, v)
    m.run()
    return [m.get_output(i).numpy() for i in range(n_out)]


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("m,k,n", [(7, 37, 16), (33, 64, 40), (1, 13, 5)])
def test_dense_from_quantize_exact(dtype, m, k, n):
    lib, (w,) = _build(m, k, [n], dtype)
    lo = 0 if dtype == "uint8" else -128
    for s, zq, zd, scale_x in ((0.05, 131 + lo, 131 + lo, 3.0), (0.5, 7 + lo, 200 + lo, 200.0),
                               (0.25, 250 + lo, 3 + lo, 1.0)):
        # quarter steps of a scale 0.5 quantize hit ties; a wide range saturates at both ends
        x = (RNG.integers(-4 * int(scale_x), 4 * int(scale_x) + 1, (m, k)) * F32(0.25)).astype(F32) if s == 0.5 \
            else (RNG.standard_normal((m, k)) * scale_x).astype(F32)
        (y,) = _run(lib, 1, x=x, s=F32(s), zq=np.int32(zq), zd=np.array([zd], dtype))
        q = _quantize_ref(x, F32(s), zq, dtype)
        want = (q - zd) @ (w.astype(np.int64) - 3).T
        np.testing.assert_array_equal(y, want.astype(np.int32))


def test_denses_sharing_a_quantized_input_share_its_operand_kernel():
    """The Q, K and V projections of one quantized input: one int16 operand kernel, no uint8 tensor."""
    lib, ws = _build(9, 24, [16, 32, 8], "uint8")
    x = (RNG.standard_normal((9, 24)) * 2).astype(F32)
    ys = _run(lib, 3, x=x, s=F32(0.03), zq=np.int32(120), zd=np.array([120], "uint8"))
    q = _quantize_ref(x, F32(0.03), 120, "uint8")
    for y, w in zip(ys, ws):
        np.testing.assert_array_equal(y, ((q - 120) @ (w.astype(np.int64) - 3).T).astype(np.int32))
    src = lib.get_lib().get_source()
    kernels = set(re.findall(r"^int32_t (tvmgen_\w+)\(", src, re.M))
    operand = [k for k in kernels if k.startswith("tvmgen_default_fused_divide_round")]
    assert len(operand) == 1, sorted(kernels)
    assert not any("clip_cast" in k for k in kernels), sorted(kernels)


def test_batch_matmul_from_quantize_exact():
    """qnn.batch_matmul with both operands quantized at run time (attention's Q K^T)."""
    b, m, n, k = 2, 7, 9, 19
    a = relay.var("a", shape=(b, m, k), dtype="float32")
    c = relay.var("c", shape=(b, n, k), dtype="float32")
    s = relay.var("s", shape=(), dtype="float32")
    z = relay.var("z", shape=(), dtype="int32")
    qa = relay.qnn.op.quantize(a, s, z, out_dtype="uint8")
    qc = relay.qnn.op.quantize(c, s, relay.const(np.int32(0)), out_dtype="int8")
    one = relay.const(F32(1))
    y = relay.qnn.op.batch_matmul(qa, qc, relay.const(np.int32(0)), relay.const(np.int32(0)), one, one)
    mod = kiln.IRModule.from_expr(relay.Function([a, c, s, z], y))
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(mod, TARGET)
    av = (RNG.standard_normal((b, m, k)) * 3).astype(F32)
    cv = (RNG.standard_normal((b, n, k)) * 3).astype(F32)
    (out,) = _run(lib, 1, a=av, c=cv, s=F32(0.04), z=np.int32(77))
    want = np.einsum("bmk,bnk->bmn", _quantize_ref(av, F32(0.04), 77, "uint8"),
                     _quantize_ref(cv, F32(0.04), 0, "int8"))
    np.testing.assert_array_equal(out, want.astype(np.int32))
