"""te.scan as in TVM's scan tutorial: cumulative sum over rows, a multi-stage scan body, several states."""
import numpy as np
import pytest

import kiln as tvm
from kiln import te
from kiln.error import KilnError, OpNotImplemented


def _build_run(s, args, *arrays):
    f = tvm.build(s, args, "llvm")
    nd = [tvm.nd.array(a) for a in arrays]
    f(*nd)
    return [x.numpy() for x in nd]


@pytest.mark.parametrize("shape", [(7, 5), (1, 3), (13, 1)])
def test_cumsum_over_rows_symbolic_shape(shape):
    m = te.var("m")
    n = te.var("n")
    X = te.placeholder((m, n), name="X")
    s_state = te.placeholder((m, n))
    s_init = te.compute((1, n), lambda _, i: X[0, i])
    s_update = te.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i])
    s_scan = tvm.te.scan(s_init, s_update, s_state, inputs=[X])
    assert isinstance(s_scan.op, te.ScanOp) and s_scan.op.state_placeholder[0] is s_state
    assert s_scan.op.scan_inputs == [X]
    s = te.create_schedule(s_scan.op)
    a = np.random.RandomState(0).randn(*shape).astype("float32")
    _, out = _build_run(s, [X, s_scan], a, np.zeros(shape, "float32"))
    np.testing.assert_allclose(out, np.cumsum(a, axis=0), rtol=1e-5, atol=1e-5)


def test_multi_stage_scan_body():
    m, n = 9, 6
    X = te.placeholder((m, n), name="X")
    s_state = te.placeholder((m, n))
    s_init = te.compute((1, n), lambda _, i: X[0, i])
    s1 = te.compute((m, n), lambda t, i: s_state[t - 1, i] * 2, name="s1")
    s2 = te.compute((m, n), lambda t, i: s1[t, i] + X[t, i], name="s2")
    res = tvm.te.scan(s_init, s2, s_state, inputs=[X])
    s = te.create_schedule(res.op)
    a = np.random.RandomState(1).randn(m, n).astype("float32")
    _, out = _build_run(s, [X, res], a, np.zeros((m, n), "float32"))
    ref = a.copy()
    for t in range(1, m):
        ref[t] = ref[t - 1] * 2 + a[t]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_multiple_states():
    m, n, l = 8, 4, 3
    X = te.placeholder((m, n), name="X")
    s_state1 = te.placeholder((m, n))
    s_state2 = te.placeholder((m, l))
    s_init1 = te.compute((1, n), lambda _, i: X[0, i])
    s_init2 = te.compute((1, l), lambda _, i: 0.0)
    s_update1 = te.compute((m, n), lambda t, i: s_state1[t - 1, i] + X[t, i])
    s_update2 = te.compute((m, l), lambda t, i: s_state2[t - 1, i] + s_state1[t - 1, 0])
    s_scan1, s_scan2 = tvm.te.scan([s_init1, s_init2], [s_update1, s_update2], [s_state1, s_state2])
    s = te.create_schedule([s_scan1.op])
    a = np.random.RandomState(2).randn(m, n).astype("float32")
    _, o1, o2 = _build_run(s, [X, s_scan1, s_scan2], a, np.zeros((m, n), "float32"),
                           np.zeros((m, l), "float32"))
    r1 = np.cumsum(a, axis=0)
    r2 = np.zeros((m, l), "float32")
    for t in range(1, m):
        r2[t] = r2[t - 1] + r1[t - 1, 0]
    np.testing.assert_allclose(o1, r1, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(o2, r2, rtol=1e-5, atol=1e-5)


def test_scan_with_two_init_rows_and_consumer():
    m, n = 10, 3
    X = te.placeholder((m, n), name="X")
    st = te.placeholder((m, n))
    init = te.compute((2, n), lambda t, i: X[t, i])
    upd = te.compute((m, n), lambda t, i: st[t - 1, i] + st[t - 2, i])  # Fibonacci-like
    res = te.scan(init, upd, st)
    Y = te.compute((m, n), lambda t, i: res[t, i] * 0.5, name="Y")
    s = te.create_schedule(Y.op)
    a = np.random.RandomState(3).rand(m, n).astype("float32")
    _, y = _build_run(s, [X, Y], a, np.zeros((m, n), "float32"))
    ref = a.copy()
    for t in range(2, m):
        ref[t] = ref[t - 1] + ref[t - 2]
    np.testing.assert_allclose(y, ref * 0.5, rtol=1e-5)


def test_scan_errors():
    m, n = 4, 3
    X = te.placeholder((m, n), name="X")
    st = te.placeholder((m, n))
    init = te.compute((1, n), lambda _, i: X[0, i])
    with pytest.raises(KilnError, match="as many init"):
        te.scan([init], [], [st])
    k = te.reduce_axis((0, n), "k")
    from kiln.topi.reduction import _arg_reducer
    reducer = _arg_reducer(True, False)
    am_idx, am_val = te.compute((m, n), lambda t, i: reducer((tvm.tir.Cast("int32", k.var), st[t - 1, k]), axis=k),
                                name="am")
    upd = te.compute((m, n), lambda t, i: X[t, i] + am_val[t, i])
    with pytest.raises(OpNotImplemented, match="reduction with 2 values"):
        te.scan(init, upd, st)
