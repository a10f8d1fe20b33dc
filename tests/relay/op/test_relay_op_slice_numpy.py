"""strided_slice: the type relation, the numpy reference (debug interpreter) and numpy slicing agree on
negative strides and out-of-range / sentinel bounds; take/gather accept int64 indices."""
import numpy as np
import pytest

from kiln import relay

from op_helpers import out_type, rnd, run

INT32_MIN, INT64_MIN, INT64_MAX = -2 ** 31, -2 ** 63, 2 ** 63 - 1


@pytest.mark.parametrize("begin,end,strides,axes,expect", [
    ([-1], [-4], [-1], None, lambda x: x[::-1]),
    ([-1], [INT32_MIN], [-1], None, lambda x: x[::-1]),
    ([INT64_MAX], [INT64_MIN], [-1], None, lambda x: x[::-1]),
    ([2, -1], [-100, -6], [-1, -2], None, lambda x: x[2::-1, ::-2]),
    ([-1], [0], [-1], [1], lambda x: x[:, :0:-1]),
    ([-7], [-7], [-7], [1], lambda x: x[:, -7:-7:-7]),
    ([5], [INT64_MAX], [1], [0], lambda x: x[5:]),
])
def test_strided_slice_matches_numpy(begin, end, strides, axes, expect):
    x = rnd(3, 5)
    want = expect(x)
    build = lambda v: relay.strided_slice(v, begin, end, strides, axes=axes)  # noqa: E731
    assert tuple(int(d) for d in out_type(build, x).shape) == want.shape
    np.testing.assert_array_equal(run(build, x), want)


@pytest.mark.parametrize("idt", ["int32", "int64"])
def test_take_gather_index_dtypes(idt):
    x = rnd(4, 6)
    idx = np.array([[5, -2], [0, 9]], idt)
    np.testing.assert_array_equal(run(lambda v, i: relay.take(v, i, axis=1), x, idx), np.take(x, idx, 1, mode="clip"))
    g = np.array([[0, 3, 1, 2, 0, 1]], idt)
    np.testing.assert_array_equal(run(lambda v, i: relay.gather(v, 0, i), x, g), np.take_along_axis(x, g, 0))
