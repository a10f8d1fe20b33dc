import numpy as np
import pytest

import kiln
from kiln import nd
from kiln.error import DataTypeError, DeviceError, KilnError


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int32", "int64", "uint8", "uint16", "bool"])
@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 1, 3), ()])
def test_round_trip(dtype, shape, rng):
    x = (rng.standard_normal(shape) * 10).astype(dtype)
    a = nd.array(x)
    assert a.shape == shape
    assert a.dtype == dtype
    assert a.ndim == len(shape)
    assert a.size == x.size
    assert a.device == kiln.cpu(0)
    assert a.data_ptr % 64 == 0
    np.testing.assert_array_equal(a.numpy(), x)
    np.testing.assert_array_equal(a.asnumpy(), x)


def test_numpy_is_a_copy():
    a = nd.array(np.zeros(4, "float32"))
    out = a.numpy()
    out[0] = 5
    assert a.numpy()[0] == 0


def test_array_copies_its_source():
    x = np.arange(6, dtype="float32")
    a = nd.array(x)
    x[0] = 100
    assert a.numpy()[0] == 0


def test_from_list_and_dtype():
    a = nd.array([[1, 2], [3, 4]], dtype="float32")
    assert a.dtype == "float32" and a.shape == (2, 2)
    b = nd.array([1.5, 2.5])
    assert b.dtype == "float64"
    c = nd.array(a)
    assert c.dtype == "float32" and c.data_ptr != a.data_ptr
    np.testing.assert_array_equal(c.numpy(), a.numpy())


def test_non_contiguous_source_is_copied():
    x = np.arange(24, dtype="float32").reshape(4, 6)[:, ::2]
    a = nd.array(x)
    assert a.is_contiguous
    np.testing.assert_array_equal(a.numpy(), x)


def test_empty():
    a = nd.empty((3, 4), "int32")
    assert a.shape == (3, 4) and a.dtype == "int32" and a.data_ptr % 64 == 0
    b = nd.empty(5)
    assert b.shape == (5,) and b.dtype == "float32"
    with pytest.raises(KilnError, match="negative"):
        nd.empty((2, -1))
    with pytest.raises(DataTypeError):
        nd.empty((2,), "float13")


def test_copyfrom_and_copyto(rng):
    x = rng.standard_normal((3, 4)).astype("float32")
    a = nd.empty((3, 4))
    assert a.copyfrom(x) is a
    np.testing.assert_array_equal(a.numpy(), x)
    b = nd.empty((3, 4))
    a.copyto(b)
    np.testing.assert_array_equal(b.numpy(), x)
    c = a.copyto(kiln.cpu(0))
    assert c.data_ptr != a.data_ptr
    np.testing.assert_array_equal(c.numpy(), x)
    a[:] = np.zeros((3, 4), "float32")
    assert not a.numpy().any()
    a.copyfrom(x.astype("float64"))  # numpy sources convert, as in TVM
    np.testing.assert_array_equal(a.numpy(), x)


def test_copyfrom_errors():
    a = nd.empty((3, 4))
    with pytest.raises(KilnError, match=r"shape mismatch.*\(4, 3\).*\(3, 4\)"):
        a.copyfrom(np.zeros((4, 3), "float32"))
    with pytest.raises(DataTypeError, match="float64.*float32"):
        a.copyfrom(nd.empty((3, 4), "float64"))
    with pytest.raises(KilnError, match="shape mismatch"):
        a.copyfrom(nd.empty((12,)))
    with pytest.raises(DataTypeError):
        a.copyfrom(np.array([["a"] * 4] * 3))
    with pytest.raises(KilnError):
        a.copyto("cpu")


def test_unavailable_device():
    with pytest.raises(DeviceError, match="cuda"):
        nd.array(np.zeros(3), device=kiln.cuda(0))
    with pytest.raises(DeviceError):
        nd.empty((3,), device=kiln.cuda(0))


def test_repr_and_handle():
    a = nd.array(np.arange(3, dtype="int32"))
    assert "shape=(3,)" in repr(a) and "cpu(0)" in repr(a)
    h = a.handle
    assert h.ndim == 1 and h.shape[0] == 3 and h.dtype.code == 0 and h.dtype.bits == 32
    assert h.data == a.data_ptr
