"""runtime.dtype.nbytes: the one byte count of a dense tensor (graph memory plans, the executor's storage, the
parallel policy, the weight prefetch, kiln tune's cache hint)."""
import numpy as np
import pytest

from kiln.runtime.dtype import nbytes
from kiln.tir import expr as E
from kiln import te


@pytest.mark.parametrize("dtype, size", [("float32", 4), ("int8", 1), ("bool", 1), ("bfloat16", 2),
                                         ("float16", 2), ("float32x8", 32), ("int64", 8)])
def test_nbytes_counts_elements_times_itemsize(dtype, size):
    assert nbytes((3, 5, 7), dtype) == 105 * size
    assert nbytes([], dtype) == size  # a scalar
    assert nbytes((4, 0), dtype) == 0


def test_nbytes_agrees_with_numpy_and_reads_imms():
    for dt in ("float32", "uint8", "int16", "float64", "bool"):
        assert nbytes((2, 3), dt) == np.zeros((2, 3), dt).nbytes
    assert nbytes((E.IntImm("int64", 6), np.int64(7)), np.float32) == 168


def test_nbytes_of_a_symbolic_shape_is_none():
    n = te.var("n")
    assert nbytes((n, 4), "float32") is None
