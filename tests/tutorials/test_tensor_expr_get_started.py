"""Tutorial flow: "Working with Operators Using Tensor Expression" (tensor_expr_get_started).

Vector add with a symbolic length: build, run, time, print the lowered loop nest, parallelize and
vectorize, save an object file and link it with cc.create_shared, export_library and load back;
then a matmul tiled, reordered, vectorized, packed and cached the way the tutorial walks through.
"""
import numpy as np
import pytest

import kiln as tvm
import kiln.testing
from kiln import te
from kiln.contrib import cc, utils

TGT = tvm.target.Target(target="llvm", host="llvm")


def _vector_add():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    return A, B, C


def _arrays(n, dev, rng):
    a = tvm.nd.array(rng.uniform(size=n).astype("float32"), dev)
    b = tvm.nd.array(rng.uniform(size=n).astype("float32"), dev)
    c = tvm.nd.array(np.zeros(n, dtype="float32"), dev)
    return a, b, c


def test_vector_add_naive_and_timed():
    rng = np.random.default_rng(1)
    A, B, C = _vector_add()
    s = te.create_schedule(C.op)
    fadd = tvm.build(s, [A, B, C], TGT, name="myadd")
    dev = tvm.device(TGT.kind.name, 0)
    assert TGT.kind.name == "llvm"
    for n in (1, 17, 1031):
        a, b, c = _arrays(n, dev, rng)
        fadd(a, b, c)
        tvm.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy())
    timer = fadd.time_evaluator(fadd.entry_name, dev, number=5)
    res = timer(a, b, c)
    assert res.mean > 0 and len(res.results) >= 1
    text = str(tvm.lower(s, [A, B, C], simple_mode=True))
    assert "for" in text and "A[i] + B[i]" in text


def test_vector_add_parallel_and_vectorized():
    rng = np.random.default_rng(2)
    A, B, C = _vector_add()
    dev = tvm.cpu(0)
    s = te.create_schedule(C.op)
    s[C].parallel(C.op.axis[0])
    assert "parallel" in str(tvm.lower(s, [A, B, C], simple_mode=True))
    fpar = tvm.build(s, [A, B, C], TGT, name="myadd_parallel")

    s2 = te.create_schedule(C.op)
    outer, inner = s2[C].split(C.op.axis[0], factor=4)
    s2[C].parallel(outer)
    s2[C].vectorize(inner)
    text = str(tvm.lower(s2, [A, B, C], simple_mode=True))
    assert "parallel" in text
    fvec = tvm.build(s2, [A, B, C], TGT, name="myadd_vector")
    for n in (3, 4, 1001):
        for f in (fpar, fvec):
            a, b, c = _arrays(n, dev, rng)
            f(a, b, c)
            tvm.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy())


def test_save_object_link_and_export_library():
    rng = np.random.default_rng(3)
    A, B, C = _vector_add()
    s = te.create_schedule(C.op)
    fadd = tvm.build(s, [A, B, C], TGT, name="myadd")
    dev = tvm.cpu(0)
    assert isinstance(fadd.get_source(), str) and fadd.get_source()
    temp = utils.tempdir()
    fadd.save(temp.relpath("myadd.o"))
    cc.create_shared(temp.relpath("myadd.so"), [temp.relpath("myadd.o")])
    assert {"myadd.o", "myadd.so"} <= set(temp.listdir())
    fadd.export_library(temp.relpath("myadd_pack.so"))
    for path in ("myadd.so", "myadd_pack.so"):
        f = tvm.runtime.load_module(temp.relpath(path))
        a, b, c = _arrays(77, dev, rng)
        f(a, b, c)
        tvm.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy())
        # the named function is reachable too
        g = f.get_function("myadd")
        c2 = tvm.nd.empty((77,), "float32", dev)
        g(a, b, c2)
        tvm.testing.assert_allclose(c2.numpy(), a.numpy() + b.numpy())


def test_wrong_shape_is_a_clear_error():
    A, B, C = _vector_add()
    s = te.create_schedule(C.op)
    fadd = tvm.build(s, [A, B, C], TGT, name="myadd")
    dev = tvm.cpu(0)
    a = tvm.nd.array(np.zeros(8, "float32"), dev)
    b = tvm.nd.array(np.zeros(9, "float32"), dev)
    c = tvm.nd.array(np.zeros(8, "float32"), dev)
    with pytest.raises(tvm.error.KilnError):
        fadd(a, b, c)


def _matmul(M, K, N):
    k = te.reduce_axis((0, K), "k")
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    C = te.compute((M, N), lambda x, y: te.sum(A[x, k] * B[k, y], axis=k), name="C")
    return A, B, C, k


@pytest.mark.parametrize("M,K,N", [(64, 64, 64), (37, 29, 45)])
def test_matmul_schedules(M, K, N):
    rng = np.random.default_rng(4)
    dev = tvm.cpu(0)
    a_np = rng.random((M, K), dtype="float32")
    b_np = rng.random((K, N), dtype="float32")
    want = a_np @ b_np
    bn = 16

    def run(s, args, name):
        f = tvm.build(s, args, target=TGT, name=name)
        c = tvm.nd.array(np.zeros((M, N), "float32"), dev)
        f(tvm.nd.array(a_np, dev), tvm.nd.array(b_np, dev), c)
        tvm.testing.assert_allclose(c.numpy(), want, rtol=1e-4, atol=1e-4)

    # default
    A, B, C, k = _matmul(M, K, N)
    s = te.create_schedule(C.op)
    run(s, [A, B, C], "mm_default")

    # tiled, reordered, vectorized, parallel
    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    (kaxis,) = s[C].op.reduce_axis
    ko, ki = s[C].split(kaxis, factor=4)
    s[C].reorder(xo, yo, ko, xi, ki, yi)
    s[C].vectorize(yi)
    s[C].parallel(xo)
    run(s, [A, B, C], "mm_tiled")

    # array packing + cache_write + unroll (only exact tiles pack cleanly)
    if N % bn == 0:
        A, B, _, k = _matmul(M, K, N)
        packedB = te.compute((N // bn, K, bn), lambda x, y, z: B[y, x * bn + z], name="packedB")
        C = te.compute(
            (M, N),
            lambda x, y: te.sum(A[x, k] * packedB[y // bn, k, tvm.tir.indexmod(y, bn)], axis=k),
            name="C")
        s = te.create_schedule(C.op)
        CC = s.cache_write(C, "global")
        xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
        s[CC].compute_at(s[C], yo)
        xc, yc = s[CC].op.axis
        (kaxis,) = s[CC].op.reduce_axis
        ko, ki = s[CC].split(kaxis, factor=4)
        s[CC].reorder(ko, xc, ki, yc)
        s[CC].unroll(ki)
        s[CC].vectorize(yc)
        s[C].parallel(xo)
        x, y, z = s[packedB].op.axis
        s[packedB].vectorize(z)
        s[packedB].parallel(x)
        text = str(tvm.lower(s, [A, B, C], simple_mode=True))
        assert "packedB" in text and "C_global" in text
        run(s, [A, B, C], "mm_packed")
