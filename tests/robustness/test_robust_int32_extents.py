"""Shapes past int32: a kernel compiled with 32-bit extents given an array of 2**31 + 64 elements raised
nothing and did nothing (the extent became negative). The Python/C boundary now refuses any shape variable
that does not fit the C type the kernel reads it into, and any buffer too large for 32-bit indexing.

The big arrays are sparse memory-mapped files: their pages are never touched (the call is refused first),
so nothing near 2 GiB is allocated."""
import numpy as np
import pytest

import kiln
from kiln import te
from kiln.error import ArgumentError

BIG = 2 ** 31 + 64


def _sparse(tmp_path, name, shape, dtype="int8", mode="r+"):
    path = tmp_path / name
    with open(path, "wb") as f:
        f.truncate(int(np.prod(shape)) * np.dtype(dtype).itemsize)
    return kiln.nd.from_dlpack(np.memmap(path, dtype=dtype, mode=mode, shape=shape))


def _copy_kernel(index_dtype="int32", ndim=1):
    shape = [te.var(f"n{d}", index_dtype) for d in range(ndim)]
    A = te.placeholder(shape, "int8", name="A")
    B = te.compute(shape, lambda *i: A(*i) + kiln.tir.const(1, "int8"), name="B")
    return kiln.build(te.create_schedule(B.op), [A, B], "llvm")


def test_metadata_records_shape_variable_types():
    meta = _copy_kernel().functions[0]
    f64 = _copy_kernel("int64")
    assert meta["var_dtypes"] == {"n0": "int32"}
    assert f64.functions[0]["var_dtypes"] == {"n0": "int64"}


def test_extent_past_int32_is_refused(tmp_path):
    f = _copy_kernel()
    a = _sparse(tmp_path, "a", (BIG,), mode="r")
    b = _sparse(tmp_path, "b", (BIG,))
    with pytest.raises(ArgumentError, match="n0 = 2147483712 does not fit"):
        f(a, b)
    with pytest.raises(ArgumentError, match="does not fit"):
        f[f.entry_name].prepare(a, b)


def test_element_count_past_int32_is_refused(tmp_path):
    """Each extent fits int32 but the flattened index (65536 * 32769) does not."""
    f = _copy_kernel(ndim=2)
    shape = (65536, 32769)
    a = _sparse(tmp_path, "a", shape, mode="r")
    b = _sparse(tmp_path, "b", shape)
    with pytest.raises(ArgumentError, match="more than the kernel's 32-bit indexing"):
        f(a, b)


def test_int64_extents_are_accepted(tmp_path):
    """A kernel whose shape variable is int64 takes the big extent (checked and packed, not run)."""
    f = _copy_kernel("int64")
    a = _sparse(tmp_path, "a", (BIG,), mode="r")
    b = _sparse(tmp_path, "b", (BIG,))
    packed = f[f.entry_name].prepare(a, b)
    assert packed[2] == BIG


def test_largest_int32_extent_still_fine():
    f = _copy_kernel()
    a = kiln.nd.array(np.arange(100, dtype="int8"))
    b = kiln.nd.empty((100,), "int8")
    f(a, b)
    np.testing.assert_array_equal(b.numpy(), np.arange(100, dtype="int8") + 1)


def test_old_metadata_without_var_dtypes_is_treated_as_int32(tmp_path):
    f = _copy_kernel()
    meta = {k: v for k, v in f.functions[0].items() if k != "var_dtypes"}
    from kiln.runtime.kernel import KernelFunction
    old = KernelFunction(None, meta)
    with pytest.raises(ArgumentError, match="does not fit"):
        old.prepare(_sparse(tmp_path, "a", (BIG,), mode="r"), _sparse(tmp_path, "b", (BIG,)))
