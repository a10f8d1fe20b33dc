"""te.decl_tensor_intrin + Stage.tensorize as in TVM's tensorize tutorial and te schedule tests."""
import numpy as np
import pytest

import kiln as tvm
from kiln import te
from kiln.error import LoweringError


def test_tensor_intrin_declaration_and_vadd_by_tir_body():
    n, m = 16, 48
    x = te.placeholder((n,), name="x")
    y = te.placeholder((n,), name="y")
    z = te.compute(x.shape, lambda i: x[i] + y[i], name="z")

    def intrin_func(ins, outs):
        xx, yy = ins
        i = te.var("i")
        return tvm.tir.For(i, 0, n, tvm.tir.ForKind.SERIAL,
                           tvm.tir.BufferStore(outs[0], xx[i] * 10.0 + yy[i], [i]))

    intrin = te.decl_tensor_intrin(z.op, intrin_func, default_buffer_params={"offset_factor": n})
    assert intrin.op == z.op and intrin.reduce_init is None
    assert tuple(intrin.inputs) == tuple(z.op.input_tensors)
    assert intrin.buffers[0].shape[0].value == n
    X = te.placeholder((m,), name="X")
    Y = te.placeholder((m,), name="Y")
    Z = te.compute(X.shape, lambda i: X[i] + Y[i], name="Z")
    s = te.create_schedule(Z.op)
    xo, xi = s[Z].split(Z.op.axis[0], factor=n)
    s[Z].tensorize(xi, intrin)
    assert s[Z].iter_var_attrs[xi].tensor_intrin is intrin
    assert s[Z].iter_var_attrs[xi].iter_type == te.schedule.IterVar.Tensorized
    f = tvm.build(s, [X, Y, Z], "llvm")
    rs = np.random.RandomState(0)
    a, b = rs.rand(m).astype("float32"), rs.rand(m).astype("float32")
    c = tvm.nd.array(np.zeros(m, "float32"))
    f(tvm.nd.array(a), tvm.nd.array(b), c)
    # the intrinsic's body (x * 10 + y), not the stage's (x + y), computed each 16-element tile
    np.testing.assert_allclose(c.numpy(), a * 10 + b, rtol=1e-6)


def test_vadd_by_call_packed_lowered():
    n = 16
    x = te.placeholder((n,), name="x")
    y = te.placeholder((n,), name="y")
    z = te.compute(x.shape, lambda i: x[i] + y[i], name="z")
    intrin = te.decl_tensor_intrin(
        z.op, lambda ins, outs: tvm.tir.call_packed("vadd", ins[0].data, outs[0].data, ins[0].shape[0]),
        default_buffer_params={"offset_factor": n})
    X = te.placeholder((32,), name="X")
    Y = te.placeholder((32,), name="Y")
    Z = te.compute(X.shape, lambda i: X[i] + Y[i], name="Z")
    s = te.create_schedule(Z.op)
    xo, xi = s[Z].split(Z.op.axis[0], factor=n)
    s[Z].tensorize(xi, intrin)
    stmt = tvm.lower(s, [X, Y, Z])["main"].body
    assert "vadd" in str(stmt) and "X + Y" not in str(stmt)


def _gemv_schedule(N, M, L, factor, k_factor, intrin_func):
    A = te.placeholder((N, L), name="A")
    B = te.placeholder((M, L), name="B")
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
    a = te.placeholder((k_factor,), name="a")
    b = te.placeholder((factor, k_factor), name="b")
    kk = te.reduce_axis((0, k_factor), name="kk")
    c = te.compute((factor,), lambda i: te.sum(a[kk] * b[i, kk], axis=kk), name="c")
    Ab = tvm.tir.decl_buffer(a.shape, a.dtype, name="Ab", offset_factor=1, strides=[1])
    Bb = tvm.tir.decl_buffer(b.shape, b.dtype, name="Bb", offset_factor=1, strides=[te.var("s1"), 1])
    Cb = tvm.tir.decl_buffer(c.shape, c.dtype, name="Cb", offset_factor=1, strides=[1])
    gemv = te.decl_tensor_intrin(c.op, intrin_func, binds={a: Ab, b: Bb, c: Cb})
    s = te.create_schedule(C.op)
    x, y = C.op.axis
    yo, yi = s[C].split(y, factor=factor)
    ko, ki = s[C].split(k, factor=k_factor)
    s[C].reorder(x, yo, ko, yi, ki)
    s[C].tensorize(yi, gemv)
    return s, [A, B, C]


def test_gemv_by_python_packed_functions():
    # the tutorial's GEMV, its micro-kernel a Python function registered with kiln.register_func
    calls = []

    @tvm.register_func("compat2.gemv_update", override=True)
    def gemv_update(cc, aa, bb):
        calls.append(1)
        cc.copyfrom(cc.numpy() + bb.numpy() @ aa.numpy())

    @tvm.register_func("compat2.gemv_reset", override=True)
    def gemv_reset(cc):
        cc.copyfrom(np.zeros(cc.shape, cc.dtype))

    def intrin_func(ins, outs):
        aa, bb = ins
        reset = tvm.tir.call_packed("compat2.gemv_reset", outs[0])
        update = tvm.tir.call_packed("compat2.gemv_update", outs[0], aa, bb)
        return tvm.tir.stmt_seq(reset, update), reset, update

    N, M, L = 5, 48, 21
    s, args = _gemv_schedule(N, M, L, 16, L, intrin_func)
    f = tvm.build(s, args, "llvm")
    rs = np.random.RandomState(1)
    a, b = rs.randn(N, L).astype("float32"), rs.randn(M, L).astype("float32")
    c = tvm.nd.array(np.zeros((N, M), "float32"))
    f(tvm.nd.array(a), tvm.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b.T, rtol=1e-5, atol=1e-5)
    assert len(calls) == N * (M // 16)


def test_gemv_reduction_split_uses_reset_and_update():
    # reduction loop ko outside the tensorized loops: reset once per output tile, update per ko step;
    # the kernel is TIR over strided views of B
    def intrin_func(ins, outs):
        aa, bb = ins
        cc = outs[0]
        i, r = te.var("i"), te.var("r")
        n, lk = cc.shape[0], aa.shape[0]
        upd = tvm.tir.For(i, 0, n, tvm.tir.ForKind.SERIAL, tvm.tir.For(
            r, 0, lk, tvm.tir.ForKind.SERIAL,
            tvm.tir.BufferStore(cc, cc[i] + aa[r] * bb[i, r], [i])))
        reset = tvm.tir.For(i, 0, n, tvm.tir.ForKind.SERIAL, tvm.tir.BufferStore(cc, tvm.tir.const(0.0, "float32"), [i]))
        return tvm.tir.stmt_seq(reset, upd), reset, upd

    N, M, L = 3, 32, 30
    s, args = _gemv_schedule(N, M, L, 16, 10, intrin_func)
    f = tvm.build(s, args, "llvm")
    rs = np.random.RandomState(2)
    a, b = rs.randn(N, L).astype("float32"), rs.randn(M, L).astype("float32")
    c = tvm.nd.array(np.full((N, M), 7.0, "float32"))
    f(tvm.nd.array(a), tvm.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b.T, rtol=1e-5, atol=1e-5)


def test_tensorize_mismatch_is_a_clear_error():
    def intrin_func(ins, outs):
        return tvm.tir.call_packed("unused", outs[0])

    with pytest.raises(LoweringError, match="different extent|intrinsic"):
        s, args = _gemv_schedule(2, 32, 20, 16, 20, intrin_func)
        s2 = s  # tensorized with a 16x20 intrinsic: fine; now a wrong tile
        A, B, C = args
        s3 = te.create_schedule(C.op)
        y = C.op.axis[1]
        yo, yi = s3[C].split(y, factor=8)
        s3[C].tensorize(yi, s2[C].iter_var_attrs[s2[C].leaf_iter_vars[3]].tensor_intrin)
        tvm.lower(s3, args)
