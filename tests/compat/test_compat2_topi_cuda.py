"""topi.cuda / topi.gpu: GPU TE schedules importable and lowerable without a GPU; building for cuda says no."""
import numpy as np
import pytest

import kiln as tvm
from kiln import te, topi
from kiln.tir.stmt_functor import post_order_visit


def _thread_extents(func):
    ext = {}

    def f(n):
        if isinstance(n, tvm.tir.AttrStmt) and n.attr_key == "thread_extent":
            ext.setdefault(n.node.thread_tag, []).append(int(n.value))
    post_order_visit(func.body, f)
    return ext


def test_modules_import():
    import kiln.topi.cuda as cuda
    import kiln.topi.gpu as gpu
    assert cuda.schedule_injective is gpu.schedule_injective
    for name in ["schedule_injective", "schedule_reduce", "schedule_softmax", "dense_small_batch",
                 "schedule_dense_small_batch", "dense_large_batch", "schedule_dense_large_batch"]:
        assert callable(getattr(topi.cuda, name))


def test_schedule_injective_binds_blocks_and_threads():
    A = te.placeholder((37, 19), name="A")
    B = topi.exp(A) + 1.0
    s = topi.cuda.schedule_injective(B)
    ext = _thread_extents(tvm.lower(s, [A, B])["main"])
    assert ext == {"blockIdx.x": [2], "threadIdx.x": [512]}


@pytest.mark.parametrize("make,sched", [
    (lambda A: topi.sum(A, axis=1), topi.cuda.schedule_reduce),
    (lambda A: topi.nn.softmax(A), topi.cuda.schedule_softmax),
])
def test_reduce_and_softmax_schedules(make, sched):
    A = te.placeholder((37, 19), name="A")
    B = make(A)
    s = sched(B)
    ext = _thread_extents(tvm.lower(s, [A, B])["main"])
    assert "blockIdx.x" in ext and "threadIdx.x" in ext
    with pytest.raises(NotImplementedError, match="cuda"):
        tvm.build(s, [A, B], "cuda")


@pytest.mark.parametrize("variant", ["small", "large"])
def test_dense_compute_and_schedule(variant):
    A = te.placeholder((7, 19), name="A")
    W = te.placeholder((23, 19), name="W")
    bias = te.placeholder((23,), name="bias")
    D = getattr(topi.gpu, f"dense_{variant}_batch")(None, A, W, bias)
    assert [int(x) for x in D.shape] == [7, 23]
    s = getattr(topi.gpu, f"schedule_dense_{variant}_batch")(None, D)
    assert "threadIdx.x" in _thread_extents(tvm.lower(s, [A, W, bias, D])["main"])
    # the compute itself is right: the same definition under a CPU schedule
    f = tvm.build(te.create_schedule(D.op), [A, W, bias, D], "llvm")
    rs = np.random.RandomState(0)
    a, w, b = rs.randn(7, 19).astype("float32"), rs.randn(23, 19).astype("float32"), rs.randn(23).astype("float32")
    d = tvm.nd.array(np.zeros((7, 23), "float32"))
    f(tvm.nd.array(a), tvm.nd.array(w), tvm.nd.array(b), d)
    np.testing.assert_allclose(d.numpy(), a @ w.T + b, rtol=1e-5, atol=1e-5)
