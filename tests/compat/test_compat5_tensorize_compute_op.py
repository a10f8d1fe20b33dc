"""A tensor intrinsic called inside ``te.compute`` (TVM's TensorComputeOp; test_te_tensor.py's test_tensor_compute1/2
and test_tensor_intrin_scalar_params, run and checked against numpy)."""
import numpy as np
import pytest

import kiln as tvm
from kiln import te
from kiln.error import KilnError

VADD_C = """
float vadd(const float* a, const float* b, float* c, int n) {
  for (int i = 0; i < n; ++i) c[i] = a[i] + 2.0f * b[i];
  return 0.0f;
}
"""


def intrin_vadd(n):
    x = te.placeholder((n,), name="x")
    y = te.placeholder((n,), name="y")
    z = te.compute(x.shape, lambda i: x[i] + y[i], name="z")

    def intrin_func(ins, outs):
        ib = tvm.tir.ir_builder.create()
        ib.emit(tvm.tir.call_extern(outs[0].dtype, "vadd", ins[0].access_ptr("r"), ins[1].access_ptr("r"),
                                    outs[0].access_ptr("wr"), n))
        return ib.get()

    return te.decl_tensor_intrin(z.op, intrin_func, default_buffer_params={"offset_factor": n})


def test_tensor_compute1_vadd_rows():
    m, factor = 112, 16
    vadd = intrin_vadd(factor)
    A = te.placeholder((m // factor, factor), name="A")
    B = te.placeholder((m // factor, factor), name="B")
    C = te.compute((m // factor, factor), lambda i: vadd(A[i, 0:factor], B[i, 0:factor]), name="C")
    assert isinstance(C.op, te.TensorComputeOp) and C.shape[1].value == factor
    assert isinstance(C.op, te.ComputeOp)  # regular call: a tensorized compute stage, schedulable
    # the kernel's C comes in through a consumer stage's loop
    D = te.compute(C.shape, lambda i, j: C[i, j] * 1.0, name="D")
    s = te.create_schedule(D.op)
    stmt = tvm.lower(s, [A, B, D])["main"].body
    assert "vadd" in str(stmt)
    s[D].pragma(D.op.axis[0], "import_c", VADD_C)
    f = tvm.build(s, [A, B, D], "llvm")
    rs = np.random.RandomState(0)
    a, b = rs.randn(m // factor, factor).astype("float32"), rs.randn(m // factor, factor).astype("float32")
    d = tvm.nd.array(np.zeros((m // factor, factor), "float32"))
    f(tvm.nd.array(a), tvm.nd.array(b), d)
    np.testing.assert_allclose(d.numpy(), a + 2 * b, rtol=1e-6)  # the intrinsic's code (a + 2b) ran


def test_tensor_compute_stage_is_schedulable():
    # split + parallel + pragma import_c on the intrinsic call's outer axis; a producer computed at it
    m, factor = 16 * 13, 16
    vadd = intrin_vadd(factor)
    A = te.placeholder((m // factor, factor), name="A")
    B = te.placeholder((m // factor, factor), name="B")
    B1 = te.compute(B.shape, lambda i, j: B[i, j] - 1.0, name="B1")
    C = te.compute((m // factor, factor), lambda i: vadd(A[i, 0:factor], B1[i, 0:factor]), name="C")
    s = te.create_schedule(C.op)
    io, ii = s[C].split(C.op.axis[0], factor=4)
    s[C].parallel(io)
    s[C].pragma(io, "import_c", VADD_C)
    s[B1].compute_at(s[C], ii)
    f = tvm.build(s, [A, B, C], "llvm")
    rs = np.random.RandomState(4)
    a, b = rs.randn(m // factor, factor).astype("float32"), rs.randn(m // factor, factor).astype("float32")
    c = tvm.nd.array(np.zeros((m // factor, factor), "float32"))
    f(tvm.nd.array(a), tvm.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), a + 2 * (b - 1), rtol=1e-6, atol=1e-6)


def intrin_gemm(m, n, l):
    k = te.reduce_axis((0, l), name="k")
    x = te.placeholder((m, l), name="x")
    y = te.placeholder((n, l), name="y")
    z = te.compute((m, n), lambda i, j: te.sum(x[i, k] * y[j, k], axis=k), name="z")

    def intrin_func(ins, outs):
        xx, yy = ins
        zz = outs[0]
        i, j, r = te.var("i"), te.var("j"), te.var("r")

        def nest(body):
            return tvm.tir.For(i, 0, m, tvm.tir.ForKind.SERIAL, tvm.tir.For(j, 0, n, tvm.tir.ForKind.SERIAL, body))

        update = nest(tvm.tir.For(r, 0, l, tvm.tir.ForKind.SERIAL,
                                  tvm.tir.BufferStore(zz, zz[i, j] + xx[i, r] * yy[j, r], [i, j])))
        reset = nest(tvm.tir.BufferStore(zz, tvm.tir.const(0.0, "float32"), [i, j]))
        return tvm.tir.stmt_seq(reset, update), reset, update

    return te.decl_tensor_intrin(z.op, intrin_func, default_buffer_params={"offset_factor": 1})


@pytest.mark.parametrize("schedule", [False, True])
def test_tensor_compute2_gemm_blocks_with_reduce_axis(schedule):
    # blocked layout (M/f1, L/f, f1, f) x (N/f2, L/f, f2, f); the intrinsic computes one (f1, f2) block per step
    M, N, L, f1, f2, f = 12, 10, 15, 4, 5, 3
    vgemm = intrin_gemm(f1, f2, f)
    A = te.placeholder((M // f1, L // f, f1, f), name="A")
    B = te.placeholder((N // f2, L // f, f2, f), name="B")
    k = te.reduce_axis((0, L // f), name="k")
    C = te.compute((M // f1, N // f2, f1, f2),
                   lambda i, j: vgemm(A[i, k, 0:f1, 0:f], B[j, k, 0:f2, 0:f], reduce_axis=k), name="C")
    assert isinstance(C.op, te.TensorComputeOp)
    s = te.create_schedule(C.op)
    if schedule:
        s[C].reorder(C.op.axis[1], C.op.axis[0])
        s[C].parallel(C.op.axis[1])
    f_ = tvm.build(s, [A, B, C], "llvm")
    rs = np.random.RandomState(1)
    a, b = rs.randn(*[int(x) for x in A.shape]).astype("float32"), rs.randn(*[int(x) for x in B.shape]).astype("float32")
    c = tvm.nd.array(np.full([int(x) for x in C.shape], 3.0, "float32"))
    f_(tvm.nd.array(a), tvm.nd.array(b), c)
    want = np.einsum("ikpr,jkqr->ijpq", a, b)
    np.testing.assert_allclose(c.numpy(), want, rtol=1e-5, atol=1e-5)


def test_tensor_intrin_scalar_params_in_compute():
    # TVM's test: scalar inputs interleaved with tensor inputs, passed for the scalar_params
    n = te.size_var("n")
    x = te.placeholder((n,), name="x")
    v = te.size_var("v")
    w = te.size_var("w")
    z = te.compute((n,), lambda i: x[i] * v + w, name="z")

    def intrin_func(ins, outs, sp):
        assert ins[0].shape[0] is n
        return tvm.tir.call_packed("compat5.hw_func", ins[0], outs[0], sp[0], sp[1])

    intrin = te.decl_tensor_intrin(z.op, intrin_func, scalar_params=[v, w], default_buffer_params={"offset_factor": 1})
    assert tuple(intrin.scalar_params) == (v, w)
    # the intrinsic's shape (n) is bound by the call (n = 1): kiln makes an opaque stage of it
    calls = []

    @tvm.register_func("compat5.hw_func", override=True)
    def hw_func(xx, zz, a, b):
        calls.append((a, b))
        zz.copyfrom(xx.numpy() * a + b)

    A = te.placeholder((10, 10), name="A")
    C = te.compute((10, 10), lambda i, j: intrin(i * i, A[i, j], i + j), name="C")
    s = te.create_schedule(C.op)
    stmt = tvm.lower(s, [A, C])["main"].body
    assert "i * i" in str(stmt) and "i + j" in str(stmt)
    f = tvm.build(s, [A, C], "llvm")
    a = np.random.RandomState(3).randn(10, 10).astype("float32")
    c = tvm.nd.array(np.zeros((10, 10), "float32"))
    f(tvm.nd.array(a), c)
    ii, jj = np.meshgrid(np.arange(10), np.arange(10), indexing="ij")
    np.testing.assert_allclose(c.numpy(), a * ii * ii + ii + jj, rtol=1e-6)
    assert len(calls) == 100


def test_tensor_intrin_call_errors():
    vadd = intrin_vadd(8)
    A = te.placeholder((4, 8), name="A")
    with pytest.raises(KilnError, match="takes 2 tensor arguments"):
        te.compute((4, 8), lambda i: vadd(A[i, 0:8]), name="C")
    with pytest.raises(KilnError, match="extent 4 in dimension 1"):
        te.compute((4, 8), lambda i: vadd(A[i, 0:4], A[i, 0:8]), name="C")
    with pytest.raises(KilnError, match="takes 1 argument.*2 dimension"):
        te.compute((4, 8), lambda i: A[i, 0] + 1.0)
    C = te.compute((4, 8), lambda i: vadd(A[i, 0:8], A[i, 0:8]), name="C")
    s = te.create_schedule(C.op)
    with pytest.raises(NotImplementedError, match="TensorComputeOp"):
        s[C].split(C.op.axis[0], 2)


def test_slices_outside_an_intrinsic_call_are_clear_errors():
    A = te.placeholder((4, 8), name="A")
    with pytest.raises(KilnError, match="slicing with ':'.*tensor intrinsic call"):
        te.compute((4, 8), lambda i, j: A[i, 0:4] + 1.0)
    with pytest.raises(KilnError, match="2 dimension.*indexed with 1"):
        te.compute((4, 8), lambda i, j: A[i] * 2.0)


def test_tensorize_on_a_tensor_compute_stage_has_no_effect(caplog):
    # TVM's test_tensorize_tensor_compute_op: the stage is computed by its intrinsic; tensorize leaves it as is
    factor = 16
    vadd = intrin_vadd(factor)
    A = te.placeholder((5, factor), name="A")
    B = te.placeholder((5, factor), name="B")
    C = te.compute((5, factor), lambda i: vadd(A[i, 0:factor], B[i, 0:factor]), name="C")
    other = intrin_vadd(factor)
    s = te.create_schedule(C.op)
    s[C].tensorize(C.op.axis[0], other)
    assert "has no effect" in caplog.text
    stmt = tvm.lower(s, [A, B, C])["main"].body
    assert isinstance(stmt, tvm.tir.For) and stmt.loop_var.name == C.op.axis[0].var.name
