"""strided_slice against numpy slicing (negative strides, out-of-range and sentinel bounds), and
take / gather / gather_nd with int32 and int64 indices, compiled with kiln.build."""
import itertools

import numpy as np
import pytest

from kiln import te, topi
from kiln.error import KilnError
import kiln.topi.testing as tt
from kiln.topi.testing import run_te
from kiln.topi.transform import plan_slices, strided_slice_plan

INT32_MIN, INT32_MAX, INT64_MIN, INT64_MAX = -2 ** 31, 2 ** 31 - 1, -2 ** 63, 2 ** 63 - 1
BOUNDS = [-7, -6, -5, -2, -1, 0, 1, 3, 4, 5, 9, INT32_MIN, INT32_MAX, INT64_MIN, INT64_MAX]
STEPS = [-7, -3, -2, -1, 1, 2, 4]
rng = np.random.default_rng(11)


def _cases(n=5):
    """Every (begin, end, step) over interesting bounds for an axis of size n."""
    return list(itertools.product(BOUNDS, BOUNDS, STEPS))


def test_plan_matches_numpy_on_all_cases():
    x = np.arange(5)
    for b, e, s in _cases():
        plan = strided_slice_plan((5,), [b], [e], [s])
        got = x[plan_slices(plan)]
        np.testing.assert_array_equal(got, x[b:e:s], err_msg=f"[{b}:{e}:{s}]")
        assert len(range(*plan[0])) == len(x[b:e:s]), (b, e, s)


def test_reverse_to_index_zero():
    x = np.arange(3)
    for end in (-4, -100, INT32_MIN, INT64_MIN):
        plan = strided_slice_plan((3,), [-1], [end], [-1])
        assert len(range(*plan[0])) == 3
        np.testing.assert_array_equal(x[plan_slices(plan)], [2, 1, 0])


def test_plan_errors_and_defaults():
    with pytest.raises(KilnError, match="stride of 0"):
        strided_slice_plan((4,), [0], [4], [0])
    with pytest.raises(KilnError, match="slice_mode"):
        strided_slice_plan((4,), [0], [4], [1], slice_mode="bogus")
    with pytest.raises(KilnError, match="longer than the rank"):
        strided_slice_plan((4,), [0, 0], [4, 4])
    # missing strides are 1 (TVM pads with ones; a single stride is not broadcast)
    assert strided_slice_plan((4, 4), [3, 0], [0, 4], [-1]) == [(3, 0, -1), (0, 4, 1)]


def _sample_cases(k, seed):
    cases = _cases()
    pick = np.random.default_rng(seed).choice(len(cases), size=k, replace=False)
    return [cases[i] for i in pick]


@pytest.mark.parametrize("target", [None, "c"])
def test_strided_slice_compute_vs_numpy(target):
    """Many 1-d slices in one kernel (one compile), each checked against numpy."""
    x = rng.standard_normal(5).astype("float32")
    A = te.placeholder((5,), name="A")
    cases = [(-1, -6, -1), (-1, INT64_MIN, -1), (INT64_MAX, INT32_MIN, -2), (4, 0, -1), (0, 5, 1)]
    cases += [c for c in _sample_cases(10, 3) if len(x[c[0]:c[1]:c[2]])]
    outs = [topi.strided_slice(A, [b], [e], [s]) for b, e, s in cases]
    got = run_te([A], outs, [x], target=target)
    for (b, e, s), g in zip(cases, got):
        np.testing.assert_array_equal(g, x[b:e:s], err_msg=f"[{b}:{e}:{s}]")


@pytest.mark.parametrize("target", [None, "c"])
def test_strided_slice_multi_axis_negative(target):
    x = rng.standard_normal((4, 7, 3)).astype("float32")
    A = te.placeholder(x.shape, name="A")
    specs = [
        (([-1, -2], [-5, INT32_MIN], [-1, -3], None), x[-1:-5:-1, -2::-3]),
        (([INT64_MAX], [INT64_MIN], [-2], [1]), x[:, ::-2]),
        (([0, 6, 2], [4, -8, -4], [1, -1, -1], None), x[:, ::-1, ::-1]),
        (([-100], [100], [3], [2]), x[:, :, ::3]),
    ]
    outs = [topi.strided_slice(A, b, e, s, axes=ax) for (b, e, s, ax), _ in specs]
    for g, (_, want) in zip(run_te([A], outs, [x], target=target), specs):
        np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize("idt", ["int32", "int64"])
@pytest.mark.parametrize("target", [None, "c"])
def test_take_gather_index_dtypes(idt, target):
    x = rng.standard_normal((5, 7)).astype("float32")
    A = te.placeholder(x.shape, name="A")
    idx = rng.integers(-3, 9, (3, 4)).astype(idt)  # out of range: clip / wrap handle it
    I = te.placeholder(idx.shape, idt, "I")
    g = rng.integers(0, 5, (2, 7)).astype(idt)
    G = te.placeholder(g.shape, idt, "G")
    nd = np.stack([rng.integers(0, 5, (2, 3)), rng.integers(0, 7, (2, 3))]).astype(idt)
    N = te.placeholder(nd.shape, idt, "N")
    ok = np.abs(idx) % 5
    K = te.placeholder(ok.shape, idt, "K")
    outs = [topi.take(A, I, axis=1, mode="clip"), topi.take(A, I, axis=0, mode="wrap"),
            topi.take(A, I, mode="clip"), topi.take(A, K, axis=0, mode="fast"),
            topi.gather(A, 0, G), topi.gather_nd(A, N)]
    got = run_te([A, I, G, N, K], outs, [x, idx, g, nd, ok.astype(idt)], target=target)
    np.testing.assert_array_equal(got[0], tt.take_python(x, idx, 1, "clip"))
    np.testing.assert_array_equal(got[1], np.take(x, idx, axis=0, mode="wrap"))
    np.testing.assert_array_equal(got[2], np.take(x.reshape(-1), idx, mode="clip"))
    np.testing.assert_array_equal(got[3], np.take(x, ok, axis=0))
    np.testing.assert_array_equal(got[4], np.take_along_axis(x, g.astype("int64"), 0))
    np.testing.assert_array_equal(got[5], x[nd[0], nd[1]])


@pytest.mark.parametrize("target", [None, "c"])
def test_take_int64_clip_huge_indices(target):
    """Clipping happens in the index's own dtype, so int64 values beyond int32 clip, not wrap."""
    x = rng.standard_normal(6).astype("float32")
    idx = np.array([2 ** 33, -(2 ** 40), 3, 2 ** 32 + 1], "int64")
    A, I = te.placeholder(x.shape, name="A"), te.placeholder(idx.shape, "int64", "I")
    got = run_te([A, I], [topi.take(A, I, axis=0, mode="clip"), topi.take(A, I, axis=0, mode="wrap")],
                 [x, idx], target=target)
    # numpy's own take(mode="wrap") wraps by repeated addition (minutes for -2**40): index directly.
    np.testing.assert_array_equal(got[0], x[np.clip(idx, 0, len(x) - 1)])
    np.testing.assert_array_equal(got[1], x[np.mod(idx, len(x))])
