"""TE schedule behaviours of TVM-era code: loop-dependent reducers with cache_write, reductions over no
axes, fusing data-parallel with reduction axes, compute_at legalization and the rules checked at lowering."""
import numpy as np
import pytest

import kiln as tvm
from kiln import relay, te, topi
from kiln.error import ScheduleError


def _run(s, args, *arrays):
    f = tvm.build(s, args, "llvm")
    nd = [tvm.nd.array(a) for a in arrays]
    f(*nd)
    return [x.numpy() for x in nd]


def test_loop_dependent_reducer_with_cache_write():
    # TVM's test_loop_dep_reduce_cache_write: the reducer's combiner and identity read the outer axis
    X = te.placeholder(shape=(10,), name="x")

    def f(n):
        rv = te.reduce_axis((0, n))
        init = lambda dtype: tvm.tir.Select(n > 1, tvm.tir.const(0, dtype), n.astype(dtype))
        red = te.comm_reducer(lambda x, y: te.max(x + y, n.astype("float32")), init, name="sum")
        return red(X[rv], axis=rv)

    Y = te.compute(X.shape, f, name="y")
    s = te.create_schedule([Y.op])
    s.cache_write(Y, "local")
    x = np.random.RandomState(0).randn(10).astype("float32")
    _, y = _run(s, [X, Y], x, np.zeros(10, "float32"))
    ref = []
    for n in range(10):
        acc = np.float32(0.0 if n > 1 else n)
        for r in range(n):
            acc = max(acc + x[r], np.float32(n))
        ref.append(acc)
    np.testing.assert_allclose(y, np.array(ref, "float32"), rtol=1e-6)


def test_loop_dependent_extent_with_cache_write_and_split():
    n = 13
    A = te.placeholder((n, n), name="A")

    def f(i, j):
        k = te.reduce_axis((0, i + 1), name="k")
        return te.sum(A[i, k] * (j + 1).astype("float32"), axis=k)

    C = te.compute((n, n), f, name="C")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "global")
    io, ii = s[C].split(C.op.axis[0], factor=4)
    s[CC].compute_at(s[C], io)
    a = np.random.RandomState(1).rand(n, n).astype("float32")
    _, c = _run(s, [A, C], a, np.zeros((n, n), "float32"))
    ref = np.cumsum(a, axis=1)[np.arange(n), np.arange(n)][:, None] * (np.arange(n) + 1)[None, :]
    np.testing.assert_allclose(c, ref, rtol=1e-5)


@pytest.mark.parametrize("reducer", ["sum", "max", "min"])
def test_te_reduction_over_no_axes_of_bool(reducer):
    A = te.placeholder((3, 5), dtype="bool", name="A")
    B = te.compute((3, 5), lambda i, j: getattr(te, reducer)(A[i, j], axis=[]), name="B")
    s = te.create_schedule(B.op)
    a = np.random.RandomState(2).rand(3, 5) > 0.5
    _, b = _run(s, [A, B], a, np.zeros((3, 5), "bool"))
    np.testing.assert_array_equal(b, a)


@pytest.mark.parametrize("fn,dtype", [(f, "bool") for f in ("any", "all", "sum", "max", "min")]
                         + [(f, "float32") for f in ("sum", "max", "min")])
def test_topi_reduction_over_empty_axis_list_reduces_nothing(fn, dtype):
    # TVM v0.13's topi GetRealAxis: None is every axis, an empty list none (numpy's axis=())
    A = te.placeholder((3, 5), dtype=dtype, name="A")
    B = getattr(topi, fn)(A, axis=[])
    assert [int(x) for x in B.shape] == [3, 5]
    s = te.create_schedule(B.op)
    rs = np.random.RandomState(3)
    a = (rs.rand(3, 5) > 0.5) if dtype == "bool" else rs.randn(3, 5).astype(dtype)
    _, b = _run(s, [A, B], a, np.zeros((3, 5), dtype))
    np.testing.assert_array_equal(b, getattr(np, fn)(a, axis=()).astype(dtype))


@pytest.mark.parametrize("fn", ["any", "all"])
def test_relay_any_all_empty_axis_list_reduce_every_axis(fn):
    # Relay's GetReduceAxes: an empty list means every axis
    x = relay.var("x", shape=(3, 5), dtype="bool")
    f = relay.Function([x], getattr(relay, fn)(x, axis=[]))
    for a in [np.random.RandomState(4).rand(3, 5) > 0.5, np.ones((3, 5), bool), np.zeros((3, 5), bool)]:
        r = relay.create_executor("graph", mod=tvm.IRModule.from_expr(f), target="llvm").evaluate()(a)
        assert r.numpy().shape == () and bool(r.numpy()) == bool(getattr(np, fn)(a))


@pytest.mark.parametrize("split", [None, 5, 4])
def test_fuse_data_parallel_with_reduction_axis(split):
    A = te.placeholder((6, 7), name="A")
    r = te.reduce_axis((0, 7), "r")
    B = te.compute((6,), lambda i: te.sum(A[i, r], axis=r), name="B")
    s = te.create_schedule(B.op)
    f = s[B].fuse(B.op.axis[0], r)
    assert f.iter_type == te.schedule.IterVar.CommReduce
    if split:
        s[B].split(f, factor=split)
    a = np.random.RandomState(5).randn(6, 7).astype("float32")
    _, b = _run(s, [A, B], a, np.zeros(6, "float32"))
    np.testing.assert_allclose(b, a.sum(1), rtol=1e-5, atol=1e-6)


def test_legalize_invalid_attach():
    A = te.compute((10, 10), lambda i, j: 1.0, name="A")
    B = te.compute((10, 10), lambda i, j: A[i][j] * 3.0, name="B")
    # split of the attach loop: the attachment moves to the inner loop
    s = te.create_schedule([B.op])
    s[A].compute_at(s[B], B.op.axis[1])
    jo, ji = s[B].split(B.op.axis[1], 2)
    stmt = tvm.lower(s, [B], simple_mode=True)["main"].body
    assert isinstance(stmt.body.body, tvm.tir.stmt.For)
    (b,) = _run(s, [B], np.zeros((10, 10), "float32"))
    np.testing.assert_array_equal(b, np.full((10, 10), 3.0, "float32"))
    # fuse of the attach loop: the attachment moves to the fused loop
    s = te.create_schedule([B.op])
    s[A].compute_at(s[B], B.op.axis[1])
    s[B].fuse(B.op.axis[0], B.op.axis[1])
    stmt = tvm.lower(s, [B], simple_mode=True)["main"].body
    assert isinstance(stmt, tvm.tir.stmt.For)
    (b,) = _run(s, [B], np.zeros((10, 10), "float32"))
    np.testing.assert_array_equal(b, np.full((10, 10), 3.0, "float32"))


def _add():
    A = te.compute((16, 16), lambda *i: 1.0, name="A")
    B = te.compute((16, 16), lambda *i: 2.0, name="B")
    C = te.compute((16, 16), lambda *i: A(*i) + B(*i), name="C")
    return A, B, C


def test_compute_at_self_raises_when_lowering():
    A, B, C = _add()
    s = te.create_schedule(C.op)
    s[C].compute_at(s[C], C.op.axis[0])  # accepted here, as in TVM
    with pytest.raises(ScheduleError, match="cannot be computed at itself"):
        tvm.lower(s, [A, B], simple_mode=True)


def test_compute_at_cycle_raises_when_lowering():
    A, B, C = _add()
    s = te.create_schedule(C.op)
    s[A].compute_at(s[C], C.op.axis[0])
    s[C].compute_at(s[A], A.op.axis[0])
    with pytest.raises(RuntimeError):  # TVM's test only asks for a RuntimeError
        tvm.lower(s, [C], simple_mode=True)
    with pytest.raises(ScheduleError, match="output of the schedule|cycle"):
        tvm.lower(s, [C], simple_mode=True)
