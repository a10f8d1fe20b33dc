import numpy as np
import pytest

from kiln import nd

torch = pytest.importorskip("torch")


def test_torch_from_kiln_shares_memory():
    a = nd.array(np.arange(6, dtype="float32").reshape(2, 3))
    t = torch.from_dlpack(a)
    assert t.shape == (2, 3) and t.dtype == torch.float32
    t[1, 2] = 42.0
    assert a.numpy()[1, 2] == 42.0
    a.copyfrom(np.full((2, 3), 7, "float32"))
    assert float(t[0, 0]) == 7.0


def test_kiln_from_torch_shares_memory():
    t = torch.arange(10, dtype=torch.int64)
    a = nd.from_dlpack(t)
    assert a.shape == (10,) and a.dtype == "int64"
    assert a.data_ptr == t.data_ptr()
    t[3] = -1
    assert a.numpy()[3] == -1
    a.copyfrom(np.zeros(10, "int64"))
    assert int(t.sum()) == 0


def test_capsule_round_trip():
    a = nd.array(np.arange(4, dtype="float64"))
    t = torch.utils.dlpack.from_dlpack(a.to_dlpack())
    t[0] = 9
    assert a.numpy()[0] == 9
    b = nd.from_dlpack(torch.utils.dlpack.to_dlpack(t))
    assert b.data_ptr == a.data_ptr


def test_numpy_both_ways():
    a = nd.array(np.arange(5, dtype="int32"))
    v = np.from_dlpack(a)
    v[0] = 11
    assert a.numpy()[0] == 11
    x = np.arange(8, dtype="float32")
    b = nd.from_dlpack(x)
    x[2] = -3
    assert b.numpy()[2] == -3
    assert np.from_dlpack(b).ctypes.data == x.ctypes.data


def test_non_contiguous_view_is_flagged():
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()
    a = nd.from_dlpack(t)
    assert a.shape == (4, 3)
    assert not a.is_contiguous
    np.testing.assert_array_equal(a.numpy(), t.numpy())


@pytest.mark.parametrize("dtype", [torch.float16, torch.uint8, torch.int16, torch.bool])
def test_dtypes(dtype):
    t = torch.ones(3, dtype=dtype)
    a = nd.from_dlpack(t)
    assert a.dtype == str(dtype).split(".")[1]
    back = torch.from_dlpack(a)
    assert back.dtype == dtype
