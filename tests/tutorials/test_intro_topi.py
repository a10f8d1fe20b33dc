"""Tutorial flow: "Introduction to TOPI".

topi.sum against a hand-written te reduction, implicit broadcasting through tensor operators
(a + b, a * b, e / 2.0), elemwise_sum, a reduce schedule for the whole fused expression, softmax
and a conv2d + relu with their target schedules. The tutorial schedules for "cuda"; kiln runs the
same flow with topi.x86 / topi.generic under target "llvm", and asks for topi.cuda clearly.
"""
import numpy as np
import pytest
import torch

import kiln as tvm
import kiln.testing
from kiln import te, topi
from kiln.topi.utils import get_const_tuple


def test_topi_sum_matches_handwritten_reduction():
    n = te.var("n")
    m = te.var("m")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    C = topi.sum(A, axis=1)
    assert "for" in str(tvm.lower(te.create_schedule(C.op), [A], simple_mode=True))
    fb = tvm.build(te.create_schedule(B.op), [A, B], "llvm")
    fc = tvm.build(te.create_schedule(C.op), [A, C], "llvm")
    a_np = np.random.default_rng(0).uniform(size=(9, 31)).astype("float32")
    outs = []
    for f in (fb, fc):
        out = tvm.nd.empty((9,), "float32")
        f(tvm.nd.array(a_np), out)
        outs.append(out.numpy())
    tvm.testing.assert_allclose(outs[0], a_np.sum(axis=1), rtol=1e-5)
    tvm.testing.assert_allclose(outs[1], outs[0], rtol=1e-6)


def _fused_expression(x, y):
    a = te.placeholder((x, y, y), name="a")
    b = te.placeholder((y, y), name="b")
    c = a + b  # topi.broadcast_add
    d = a * b  # topi.broadcast_mul
    e = topi.elemwise_sum([c, d])
    f = e / 2.0
    g = topi.sum(f)
    return a, b, c, d, g


@pytest.mark.parametrize("schedule", ["x86", "generic"])
def test_broadcast_operators_and_schedule_reduce(schedule):
    x, y = 23, 10
    a, b, c, d, g = _fused_expression(x, y)
    assert get_const_tuple(c.shape) == (x, y, y) and c.op.tag == "broadcast"
    assert d.op.tag == "broadcast"
    with tvm.target.Target("llvm"):
        sg = getattr(topi, schedule).schedule_reduce(g)
        text = str(tvm.lower(sg, [a, b], simple_mode=True))
    assert "T_sum" in text
    names = [st.op.name for st in sg.stages]
    assert names[:2] == ["a", "b"] and "T_elemwise_sum" in names and names[-1] == "T_sum"
    func = tvm.build(sg, [a, b, g], "llvm")
    rng = np.random.default_rng(1)
    a_np = rng.uniform(size=(x, y, y)).astype(a.dtype)
    b_np = rng.uniform(size=(y, y)).astype(b.dtype)
    g_np = np.sum(np.add(a_np + b_np, a_np * b_np) / 2.0)
    g_nd = tvm.nd.array(np.zeros(g_np.shape, dtype=g_np.dtype))
    func(tvm.nd.array(a_np), tvm.nd.array(b_np), g_nd)
    tvm.testing.assert_allclose(g_nd.numpy(), g_np, rtol=1e-5)


def test_tensor_operators_with_scalars():
    a = te.placeholder((5, 4), name="a")
    outs = [a + 1.0, 2.0 * a, a - 0.5, 3.0 - a, a / 4.0, 1.0 / (a + 1.0)]
    s = te.create_schedule([o.op for o in outs])
    f = tvm.build(s, [a] + outs, "llvm")
    a_np = np.random.default_rng(2).uniform(size=(5, 4)).astype("float32")
    nds = [tvm.nd.empty((5, 4), "float32") for _ in outs]
    f(tvm.nd.array(a_np), *nds)
    wants = [a_np + 1, 2 * a_np, a_np - 0.5, 3 - a_np, a_np / 4, 1 / (a_np + 1)]
    for got, want in zip(nds, wants):
        tvm.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


def test_elemwise_sum_rejects_mismatched_inputs():
    a = te.placeholder((5, 4), name="a")
    b = te.placeholder((4,), name="b")
    with pytest.raises(tvm.error.KilnError, match="elemwise_sum"):
        topi.elemwise_sum([a, b])
    with pytest.raises(tvm.error.KilnError, match="non-empty"):
        topi.elemwise_sum([])


def test_softmax_with_target_schedule():
    rows, cols = 13, 37
    tarray = te.placeholder((rows, cols), name="tarray")
    softmax_topi = topi.nn.softmax(tarray)
    with tvm.target.Target("llvm"):
        sst = topi.x86.schedule_softmax(softmax_topi)
        assert "exp" in str(tvm.lower(sst, [tarray], simple_mode=True))
    f = tvm.build(sst, [tarray, softmax_topi], "llvm")
    t_np = np.random.default_rng(3).standard_normal((rows, cols)).astype("float32")
    out = tvm.nd.empty((rows, cols), "float32")
    f(tvm.nd.array(t_np), out)
    want = torch.softmax(torch.from_numpy(t_np), dim=1).numpy()
    tvm.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)


def test_fused_conv2d_relu():
    data = te.placeholder((1, 3, 19, 21), name="data")
    kernel = te.placeholder((10, 3, 5, 5), name="kernel")
    with tvm.target.Target("llvm"):
        conv = topi.x86.conv2d_nchw(data, kernel, 1, 2, 1)
        out = topi.nn.relu(conv)
        sconv = topi.x86.schedule_conv2d_nchw([out])
        assert "T_relu" in str(tvm.lower(sconv, [data, kernel], simple_mode=True))
    f = tvm.build(sconv, [data, kernel, out], "llvm")
    rng = np.random.default_rng(4)
    d_np = rng.standard_normal((1, 3, 19, 21)).astype("float32")
    k_np = rng.standard_normal((10, 3, 5, 5)).astype("float32")
    o = tvm.nd.empty(get_const_tuple(out.shape), "float32")
    f(tvm.nd.array(d_np), tvm.nd.array(k_np), o)
    want = torch.relu(torch.nn.functional.conv2d(torch.from_numpy(d_np), torch.from_numpy(k_np), padding=2)).numpy()
    tvm.testing.assert_allclose(o.numpy(), want, rtol=1e-4, atol=1e-4)


def test_generic_conv2d_nchw_relu():
    data = te.placeholder((2, 4, 9, 11), name="data")
    kernel = te.placeholder((6, 4, 3, 3), name="kernel")
    conv = topi.nn.conv2d_nchw(data, kernel, 2, 1, 1)
    out = topi.nn.relu(conv)
    with tvm.target.Target("llvm"):
        s = topi.generic.schedule_conv2d_nchw([out])
    f = tvm.build(s, [data, kernel, out], "llvm")
    rng = np.random.default_rng(5)
    d_np = rng.standard_normal((2, 4, 9, 11)).astype("float32")
    k_np = rng.standard_normal((6, 4, 3, 3)).astype("float32")
    o = tvm.nd.empty(get_const_tuple(out.shape), "float32")
    f(tvm.nd.array(d_np), tvm.nd.array(k_np), o)
    want = torch.relu(torch.nn.functional.conv2d(torch.from_numpy(d_np), torch.from_numpy(k_np), stride=2,
                                                 padding=1)).numpy()
    tvm.testing.assert_allclose(o.numpy(), want, rtol=1e-4, atol=1e-4)


def test_cuda_schedules_lower_but_do_not_build():
    # topi.cuda's schedules exist (thread-bound TE schedules); kiln has no CUDA backend to build them
    A = te.placeholder((8, 5), name="A")
    B = topi.sum(A, axis=1)
    s = topi.cuda.schedule_reduce(B)
    assert "threadIdx.x" in str(tvm.lower(s, [A, B], simple_mode=True))
    with pytest.raises(NotImplementedError, match="cuda"):
        tvm.build(s, [A, B], "cuda")
