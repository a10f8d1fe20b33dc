"""te.scan with reductions: outside the scan body (a cumulative sum of row sums), inside it (a row sum of the
previous state, an RNN cell's matrix-vector product), and an update that is itself a reduction; vs numpy."""
import numpy as np
import pytest

import kiln as tvm
from kiln import te


def _run(s, args, *arrays):
    f = tvm.build(s, args, "llvm")
    nd = [tvm.nd.array(a) for a in arrays]
    f(*nd)
    return [x.numpy() for x in nd]


@pytest.mark.parametrize("m,n", [(7, 5), (1, 3), (9, 1)])
def test_cumulative_sum_of_row_sums(m, n):
    X = te.placeholder((m, n), name="X")
    k = te.reduce_axis((0, n), "k")
    rows = te.compute((m, 1), lambda t, _: te.sum(X[t, k], axis=k), name="rows")
    st = te.placeholder((m, 1))
    init = te.compute((1, 1), lambda _, i: rows[0, i])
    upd = te.compute((m, 1), lambda t, i: st[t - 1, i] + rows[t, i])
    res = te.scan(init, upd, st, inputs=[X])
    assert rows in res.op.input_tensors  # the row sums are an ordinary stage before the scan
    a = np.random.RandomState(0).randn(m, n).astype("float32")
    _, out = _run(te.create_schedule(res.op), [X, res], a, np.zeros((m, 1), "float32"))
    np.testing.assert_allclose(out[:, 0], np.cumsum(a.sum(axis=1)), rtol=1e-5, atol=1e-5)


def test_row_sum_of_previous_state_in_the_body_symbolic():
    m, n = te.var("m"), te.var("n")
    X = te.placeholder((m, n), name="X")
    st = te.placeholder((m, n))
    k = te.reduce_axis((0, n), "k")
    init = te.compute((1, n), lambda _, i: X[0, i])
    total = te.compute((m,), lambda t: te.sum(st[t - 1, k], axis=k), name="total")
    upd = te.compute((m, n), lambda t, i: X[t, i] + total[t] * 0.5)
    res = te.scan(init, upd, st, inputs=[X])
    for shape in [(6, 4), (3, 7)]:
        a = np.random.RandomState(1).randn(*shape).astype("float32")
        _, out = _run(te.create_schedule(res.op), [X, res], a, np.zeros(shape, "float32"))
        ref = a.copy()
        for t in range(1, shape[0]):
            ref[t] = a[t] + ref[t - 1].sum() * 0.5
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_rnn_cell_matvec_then_tanh():
    m, h = 8, 5
    X = te.placeholder((m, h), name="X")
    W = te.placeholder((h, h), name="W")
    st = te.placeholder((m, h))
    k = te.reduce_axis((0, h), "k")
    init = te.compute((1, h), lambda _, i: te.tanh(X[0, i]))
    mv = te.compute((m, h), lambda t, i: te.sum(st[t - 1, k] * W[k, i], axis=k), name="mv")
    upd = te.compute((m, h), lambda t, i: te.tanh(mv[t, i] + X[t, i]), name="upd")
    res = te.scan(init, upd, st, inputs=[X, W])
    rng = np.random.RandomState(2)
    x, w = rng.randn(m, h).astype("float32"), (rng.randn(h, h) * 0.5).astype("float32")
    *_, out = _run(te.create_schedule(res.op), [X, W, res], x, w, np.zeros((m, h), "float32"))
    ref = np.zeros((m, h), "float32")
    ref[0] = np.tanh(x[0])
    for t in range(1, m):
        ref[t] = np.tanh(ref[t - 1] @ w + x[t])
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_update_that_is_a_max_reduction():
    """s[t, i] = max_k s[t-1, k] * A[t, i, k], with an element-wise stage inside the reduction's source."""
    m, n = 6, 4
    A = te.placeholder((m, n, n), name="A")
    st = te.placeholder((m, n))
    k = te.reduce_axis((0, n), "k")
    init = te.compute((1, n), lambda _, i: A[0, i, 0])
    scaled = te.compute((m, n), lambda t, j: st[t - 1, j] + 1.0, name="scaled")
    upd = te.compute((m, n), lambda t, i: te.max(scaled[t, k] * A[t, i, k], axis=k), name="upd")
    res = te.scan(init, upd, st, inputs=[A])
    a = np.random.RandomState(3).randn(m, n, n).astype("float32")
    _, out = _run(te.create_schedule(res.op), [A, res], a, np.zeros((m, n), "float32"))
    ref = np.zeros((m, n), "float32")
    ref[0] = a[0, :, 0]
    for t in range(1, m):
        ref[t] = ((ref[t - 1] + 1.0)[None, :] * a[t]).max(axis=1)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_two_states_with_a_reduction_linking_them():
    m, n = 7, 3
    X = te.placeholder((m, n), name="X")
    s1, s2 = te.placeholder((m, n)), te.placeholder((m, 1))
    k = te.reduce_axis((0, n), "k")
    i1 = te.compute((1, n), lambda _, i: X[0, i])
    i2 = te.compute((1, 1), lambda _, i: te.const(0.0, "float32"))
    norm = te.compute((m, 1), lambda t, _: te.sum(s1[t - 1, k] * s1[t - 1, k], axis=k), name="norm")
    u1 = te.compute((m, n), lambda t, i: X[t, i] - s1[t - 1, i] * 0.1)
    u2 = te.compute((m, 1), lambda t, i: s2[t - 1, i] + norm[t, i])
    r1, r2 = te.scan([i1, i2], [u1, u2], [s1, s2], inputs=[X])
    a = np.random.RandomState(4).randn(m, n).astype("float32")
    _, o1, o2 = _run(te.create_schedule(r1.op), [X, r1, r2], a, np.zeros((m, n), "float32"),
                     np.zeros((m, 1), "float32"))
    e1, e2 = a.copy(), np.zeros((m, 1), "float32")
    for t in range(1, m):
        e1[t] = a[t] - e1[t - 1] * 0.1
        e2[t] = e2[t - 1] + (e1[t - 1] ** 2).sum()
    np.testing.assert_allclose(o1, e1, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(o2, e2, rtol=1e-5, atol=1e-5)
