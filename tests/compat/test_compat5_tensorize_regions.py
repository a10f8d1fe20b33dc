"""Tensorize over regions kiln could not bind before: intermediate (realized) tensors passed to extern kernels with
``access_ptr`` (as inputs and as the output, at the root and under compute_at), and strided views passed to packed
functions (a DLTensor with strides)."""
import numpy as np
import pytest

import kiln as tvm
from kiln import te

from tensorize_tutorial_util import GEMV_C, intrin_gemv


def _split_gemv(s, C):
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=16)
    zo, zi = s[C].split(z, factor=16)
    s[C].reorder(x, yo, zo, yi, zi)
    s[C].tensorize(yi, intrin_gemv(16, 16, split_reduce=True))
    s[C].pragma(yo, "import_c", GEMV_C)
    return x, yo


@pytest.mark.parametrize("attach", ["root", "compute_at"])
def test_intermediate_input_region_by_access_ptr(attach):
    N, M, L = 7, 32, 48
    A = te.placeholder((N, L), name="A")
    B = te.placeholder((M, L), name="B")
    B2 = te.compute((M, L), lambda j, k: B[j, k] * 2.0 - 1.0, name="B2")
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B2[j, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    x, yo = _split_gemv(s, C)
    if attach == "compute_at":
        s[B2].compute_at(s[C], yo)  # a (16, 48) region per output tile: the stride is the realized row
    f = tvm.build(s, [A, B, C], "llvm")
    rs = np.random.RandomState(0)
    a, b = rs.rand(N, L).astype("float32"), rs.rand(M, L).astype("float32")
    c = tvm.nd.array(np.ones((N, M), "float32"))
    f(tvm.nd.array(a), tvm.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), a @ (2 * b - 1).T, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("attach", ["root", "compute_at"])
def test_intermediate_output_region_by_access_ptr(attach):
    N, M, L = 5, 48, 32
    A = te.placeholder((N, L), name="A")
    B = te.placeholder((M, L), name="B")
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
    D = te.compute((N, M), lambda i, j: C[i, j] + 1.0, name="D")
    s = te.create_schedule(D.op)
    _split_gemv(s, C)
    if attach == "compute_at":
        s[C].compute_at(s[D], D.op.axis[0])
    f = tvm.build(s, [A, B, D], "llvm")
    rs = np.random.RandomState(1)
    a, b = rs.rand(N, L).astype("float32"), rs.rand(M, L).astype("float32")
    d = tvm.nd.array(np.zeros((N, M), "float32"))
    f(tvm.nd.array(a), tvm.nd.array(b), d)
    np.testing.assert_allclose(d.numpy(), a @ b.T + 1, rtol=1e-4, atol=1e-5)


def test_strided_views_to_packed_functions():
    # the (16 x 16) tile of B has rows L apart: the Python kernel gets it as a strided NDArray
    shapes = []

    @tvm.register_func("compat5.gemv_update", override=True)
    def gemv_update(cc, aa, bb):
        b = bb.numpy()
        shapes.append(b.shape)
        cc.copyfrom(cc.numpy() + b @ aa.numpy())

    @tvm.register_func("compat5.gemv_reset", override=True)
    def gemv_reset(cc):
        cc.copyfrom(np.zeros(cc.shape, cc.dtype))

    a = te.placeholder((16,), name="a")
    b = te.placeholder((16, 16), name="b")
    kk = te.reduce_axis((0, 16), name="kk")
    c = te.compute((16,), lambda i: te.sum(a[kk] * b[i, kk], axis=kk), name="c")
    Bb = tvm.tir.decl_buffer(b.shape, b.dtype, name="Bb", offset_factor=1, strides=[te.var("s1"), 1])

    def intrin_func(ins, outs):
        reset = tvm.tir.call_packed("compat5.gemv_reset", outs[0])
        update = tvm.tir.call_packed("compat5.gemv_update", outs[0], ins[0], ins[1])
        return tvm.tir.stmt_seq(reset, update), reset, update

    gemv = te.decl_tensor_intrin(c.op, intrin_func, binds={b: Bb})
    N, M, L = 3, 32, 48
    A = te.placeholder((N, L), name="A")
    B = te.placeholder((M, L), name="B")
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    x, y = C.op.axis
    yo, yi = s[C].split(y, factor=16)
    ko, ki = s[C].split(k, factor=16)
    s[C].reorder(x, yo, ko, yi, ki)
    s[C].tensorize(yi, gemv)
    f = tvm.build(s, [A, B, C], "llvm")
    assert "kiln_pk_strides_" in f.get_source()
    rs = np.random.RandomState(2)
    av, bv = rs.randn(N, L).astype("float32"), rs.randn(M, L).astype("float32")
    cv = tvm.nd.array(np.full((N, M), 9.0, "float32"))
    f(tvm.nd.array(av), tvm.nd.array(bv), cv)
    np.testing.assert_allclose(cv.numpy(), av @ bv.T, rtol=1e-5, atol=1e-5)
    assert shapes and all(sh == (16, 16) for sh in shapes) and len(shapes) == N * 2 * 3


def test_split_reduction_without_reset_runs_body_first():
    # TVM's intrin_gemv_no_reset: (body, None, update); the body runs at the first outer reduction step (the
    # reduction split twice: both outer loops must be at their first step), the update at the others
    calls = {"body": 0, "update": 0}

    @tvm.register_func("compat5.gemv_body", override=True)
    def gemv_body(cc, aa, bb):
        calls["body"] += 1
        cc.copyfrom(bb.numpy() @ aa.numpy())

    @tvm.register_func("compat5.gemv_add", override=True)
    def gemv_add(cc, aa, bb):
        calls["update"] += 1
        cc.copyfrom(cc.numpy() + bb.numpy() @ aa.numpy())

    a = te.placeholder((8,), name="a")
    b = te.placeholder((16, 8), name="b")
    kk = te.reduce_axis((0, 8), name="kk")
    c = te.compute((16,), lambda i: te.sum(a[kk] * b[i, kk], axis=kk), name="c")
    Bb = tvm.tir.decl_buffer(b.shape, b.dtype, name="Bb", offset_factor=1, strides=[te.var("ldb"), 1])

    def intrin_func(ins, outs):
        body = tvm.tir.call_packed("compat5.gemv_body", outs[0], ins[0], ins[1])
        update = tvm.tir.call_packed("compat5.gemv_add", outs[0], ins[0], ins[1])
        return body, None, update

    gemv = te.decl_tensor_intrin(c.op, intrin_func, binds={b: Bb})
    N, M, L = 3, 32, 48
    A = te.placeholder((N, L), name="A")
    B = te.placeholder((M, L), name="B")
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    x, y = C.op.axis
    yo, yi = s[C].split(y, factor=16)
    ro, ri = s[C].split(k, factor=8)
    roo, roi = s[C].split(ro, factor=2)
    s[C].reorder(x, yo, roo, roi, yi, ri)
    s[C].tensorize(yi, gemv)
    f = tvm.build(s, [A, B, C], "llvm")
    rs = np.random.RandomState(4)
    av, bv = rs.randn(N, L).astype("float32"), rs.randn(M, L).astype("float32")
    cv = tvm.nd.array(np.full((N, M), 5.0, "float32"))
    f(tvm.nd.array(av), tvm.nd.array(bv), cv)
    np.testing.assert_allclose(cv.numpy(), av @ bv.T, rtol=1e-5, atol=1e-5)
    assert calls == {"body": N * 2, "update": N * 2 * 5}


def test_tensorize_whole_op_with_index_expressions():
    # TVM's test_tensorize_op: the intrinsic's and the stage's indices are the same div/mod expressions
    idxd, idxm = tvm.tir.indexdiv, tvm.tir.indexmod
    x = te.placeholder((5, 5), name="A")
    y = te.compute((9, 9), lambda i, j: x[idxd(j, 3) + idxm(i, 3), idxm(j, 3) + idxd(i, 3)])
    intrin = te.decl_tensor_intrin(y.op, lambda ins, outs: tvm.tir.call_packed("compat5.op", ins[0], outs[0]),
                                   default_buffer_params={"offset_factor": 2})
    ii, jj = np.meshgrid(np.arange(9), np.arange(9), indexing="ij")

    @tvm.register_func("compat5.op", override=True)
    def op(xx, zz):
        zz.copyfrom(xx.numpy()[jj // 3 + ii % 3, jj % 3 + ii // 3] * 2)

    A = te.placeholder((5, 5), name="A")
    B = te.compute((9, 9), lambda i, j: A[idxd(j, 3) + idxm(i, 3), idxm(j, 3) + idxd(i, 3)])
    s = te.create_schedule(B.op)
    s[B].tensorize(B.op.axis[0], intrin)
    s = s.normalize()
    f = tvm.build(s, [A, B], "llvm")
    a = np.random.RandomState(5).rand(5, 5).astype("float32")
    b = tvm.nd.array(np.zeros((9, 9), "float32"))
    f(tvm.nd.array(a), b)
    np.testing.assert_allclose(b.numpy(), a[jj // 3 + ii % 3, jj % 3 + ii // 3] * 2)
