"""Pre-0.8 TVM spellings: classic tutorial snippets run unchanged with ``import kiln as tvm``.

Each test is a small tutorial-style script (the vector add / reduction / export flows of TVM's
old "Get Started with Tensor Expression" tutorial) whose numbers are checked against numpy.
"""
import os

import numpy as np
import pytest

import kiln
import kiln as tvm
from kiln.contrib import cc, utils

RNG = np.random.default_rng(7)


def _vector_add(n_factor=4):
    """The tutorial's symbolic-length vector add, in the pre-0.8 spellings."""
    n = tvm.var("n")
    A = tvm.placeholder((n,), name="A")
    B = tvm.placeholder((n,), name="B")
    C = tvm.compute(A.shape, lambda i: A[i] + B[i], name="C")
    s = tvm.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=n_factor)
    return s, [A, B, C]


def _random(shape, dtype="float32"):
    return RNG.uniform(-2, 2, size=shape).astype(dtype)


@pytest.mark.parametrize("length", [1, 37, 1024])
def test_vector_add_with_context_and_asnumpy(length):
    s, (A, B, C) = _vector_add()
    fadd = tvm.build(s, [A, B, C], "llvm", target_host="llvm", name="myadd")
    ctx = tvm.context("llvm", 0)
    a = tvm.nd.array(_random(length), ctx)
    b = tvm.nd.array(_random(length), ctx)
    c = tvm.nd.array(np.zeros(length, dtype=C.dtype), ctx)
    fadd(a, b, c)
    np.testing.assert_allclose(c.asnumpy(), a.asnumpy() + b.asnumpy(), rtol=1e-6)
    assert ctx == tvm.cpu(0)
    assert c.ctx == ctx  # NDArray.ctx: the pre-0.8 name of NDArray.device


def test_target_host_with_c_target_and_string_device():
    s, (A, B, C) = _vector_add(n_factor=8)
    fadd = tvm.build(s, [A, B, C], target="c", target_host="llvm")
    ctx = tvm.context("cpu", 0)
    a, b = _random(19), _random(19)
    c = tvm.nd.empty((19,), "float32", ctx)
    fadd(tvm.nd.array(a, ctx), tvm.nd.array(b, ctx), c)
    np.testing.assert_allclose(c.asnumpy(), a + b, rtol=1e-6)


def test_reduce_axis_and_sum_row_sums():
    n, m = tvm.var("n"), tvm.var("m")
    A = tvm.placeholder((n, m), name="A")
    k = tvm.reduce_axis((0, m), "k")
    B = tvm.compute((n,), lambda i: tvm.sum(A[i, k], axis=k), name="B")
    s = tvm.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    f = tvm.build(s, [A, B], "llvm")
    ctx = tvm.cpu(0)
    for shape in [(5, 3), (13, 47)]:
        a = _random(shape)
        b = tvm.nd.array(np.zeros(shape[0], dtype="float32"), ctx)
        f(tvm.nd.array(a, ctx), b)
        np.testing.assert_allclose(b.asnumpy(), a.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_classic_matmul_with_top_level_names():
    M, K, N = 29, 33, 17
    k = tvm.reduce_axis((0, K), "k")
    A = tvm.placeholder((M, K), name="A")
    B = tvm.placeholder((K, N), name="B")
    C = tvm.compute((M, N), lambda x, y: tvm.sum(A[x, k] * B[k, y], axis=k), name="C")
    s = tvm.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 8)
    s[C].vectorize(yi)
    f = tvm.build(s, [A, B, C], target="llvm", target_host="llvm")
    a, b = _random((M, K)), _random((K, N))
    c = tvm.nd.array(np.zeros((M, N), "float32"))
    f(tvm.nd.array(a), tvm.nd.array(b), c)
    np.testing.assert_allclose(c.asnumpy(), a @ b, rtol=1e-4, atol=1e-4)


def test_elementwise_intrinsics_at_top_level():
    n = 23
    A = tvm.placeholder((n,), name="A")
    B = tvm.compute((n,), lambda i: tvm.max(tvm.exp(A[i]), tvm.const(1.5, "float32")) + tvm.sqrt(
        tvm.select(A[i] > 0, A[i], -A[i])), name="B")
    s = tvm.create_schedule(B.op)
    f = tvm.build(s, [A, B], "llvm")
    a = _random(n)
    b = tvm.nd.empty((n,), "float32")
    f(tvm.nd.array(a), b)
    np.testing.assert_allclose(b.asnumpy(), np.maximum(np.exp(a), 1.5) + np.sqrt(np.abs(a)), rtol=1e-5)


def test_save_object_create_shared_load_module():
    """The tutorial's export flow: save the object, link it with contrib.cc, load it back."""
    s, (A, B, C) = _vector_add()
    fadd = tvm.build(s, [A, B, C], "llvm", target_host="llvm", name="myadd")
    temp = utils.tempdir()
    fadd.save(temp.relpath("myadd.o"))
    assert "myadd.o" in temp.listdir()
    cc.create_shared(temp.relpath("myadd.so"), [temp.relpath("myadd.o")])
    fadd1 = tvm.runtime.load_module(temp.relpath("myadd.so"))
    ctx = tvm.context("llvm", 0)
    a, b = _random(41), _random(41)
    c = tvm.nd.array(np.zeros(41, "float32"), ctx)
    fadd1["myadd"](tvm.nd.array(a, ctx), tvm.nd.array(b, ctx), c)
    np.testing.assert_allclose(c.asnumpy(), a + b, rtol=1e-6)
    # the loaded function still checks its arguments against the recorded signature
    with pytest.raises(kiln.KilnError, match="myadd"):
        fadd1["myadd"](tvm.nd.array(a, ctx), c)


def test_export_library_into_tempdir():
    s, (A, B, C) = _vector_add()
    fadd = tvm.build(s, [A, B, C], "llvm", name="myadd")
    temp = utils.tempdir()
    path = temp.relpath("deploy.so")
    fadd.export_library(path)
    assert os.path.exists(path)
    m = tvm.runtime.load_module(path)
    a, b = _random(9), _random(9)
    c = tvm.nd.empty((9,), "float32")
    m["myadd"](tvm.nd.array(a), tvm.nd.array(b), c)
    np.testing.assert_allclose(c.asnumpy(), a + b, rtol=1e-6)


def test_target_create_is_target_and_builds():
    t = tvm.target.create("llvm -mcpu=core-avx2")
    assert isinstance(t, tvm.target.Target)
    assert t.kind.name == "llvm"
    assert t.mcpu == "core-avx2"
    assert str(tvm.target.create("c")) == str(tvm.target.Target("c"))
    s, (A, B, C) = _vector_add()
    f = tvm.build(s, [A, B, C], target=tvm.target.create("llvm"))
    a, b = _random(6), _random(6)
    c = tvm.nd.empty((6,), "float32")
    f(tvm.nd.array(a), tvm.nd.array(b), c)
    np.testing.assert_allclose(c.asnumpy(), a + b, rtol=1e-6)


def test_codegen_backends_are_registered_global_functions():
    names = tvm.list_global_func_names()
    assert "target.build.llvm" in names
    assert "target.build.c" in names
    assert callable(tvm.get_global_func("target.build.c"))


def test_build_dispatches_through_the_registered_backend():
    """kiln.build looks the backend up as ``target.build.<kind>``, so a registered override is used."""
    original = tvm.get_global_func("target.build.c")
    seen = []

    def traced_backend(mod, target):
        seen.append((sorted(gv.name_hint for gv in mod.get_global_vars()), str(target)))
        return original(mod, target)

    tvm.register_func("target.build.c", traced_backend, override=True)
    try:
        s, (A, B, C) = _vector_add()
        f = tvm.build(s, [A, B, C], target="c", name="traced_add")
    finally:
        tvm.register_func("target.build.c", original, override=True)
    assert seen and seen[0][0] == ["traced_add"] and seen[0][1].startswith("c")
    a, b = _random(10), _random(10)
    c = tvm.nd.empty((10,), "float32")
    f(tvm.nd.array(a), tvm.nd.array(b), c)
    np.testing.assert_allclose(c.asnumpy(), a + b, rtol=1e-6)


def test_unknown_target_kind_is_rejected_even_with_a_backend():
    """As in TVM, target kinds form a fixed registry: a ``target.build.mykind`` function alone does
    not make ``mykind`` a Target; the error lists the kinds kiln knows."""
    tvm.register_func("target.build.mykind", lambda mod, target: None, override=True)
    try:
        with pytest.raises(kiln.KilnError, match=r"unknown target kind 'mykind'.*llvm"):
            tvm.target.Target("mykind")
        s, (A, B, C) = _vector_add()
        with pytest.raises(kiln.KilnError, match="mykind"):
            tvm.build(s, [A, B, C], target="mykind")
    finally:
        tvm.remove_global_func("target.build.mykind")


def test_pre_08_top_level_names_resolve():
    """Every name in kiln's lazy top-level table resolves (old scripts use tvm.<name> directly)."""
    import kiln as tvm
    from kiln import _LAZY
    for name in _LAZY:
        assert getattr(tvm, name) is not None, name
    from kiln.contrib import util
    with util.tempdir() as tmp:
        assert tmp.relpath("x").endswith("x")


def test_runtime_convert_and_param_dict():
    import numpy as np
    import kiln as tvm
    f = tvm.runtime.convert(lambda x: x + 1)
    assert f(2) == 3
    nd_list = tvm.runtime.convert([np.arange(3, dtype="float32")])
    assert isinstance(nd_list[0], tvm.nd.NDArray)
    params = {"w": tvm.nd.array(np.random.rand(2, 3).astype("float32"))}
    data = tvm.runtime.save_param_dict(params)
    back = tvm.runtime.load_param_dict(data)
    np.testing.assert_array_equal(back["w"].numpy(), params["w"].numpy())
    # the same bytes as relay.save_param_dict (TVM's format)
    from kiln import relay
    assert relay.save_param_dict(params) == data
