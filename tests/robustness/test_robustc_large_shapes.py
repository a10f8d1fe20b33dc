"""Constant shapes past int32 (issue 15, defect 2, the constant-shape half): a buffer of 65536 x 32769
elements has every dim in int32 range, but its element count and row-major offsets are not. The flat size
wrapped to a negative int32 and offsets past 2^31 overflowed. StorageFlatten now computes constant sizes
exactly (int64 when they do not fit int32) and indexes such buffers in int64."""
import numpy as np

import kiln as tvm
from kiln import te

ROWS, COLS = 65536, 32769          # 2,147,549,184 elements: past 2^31 - 1


def _strip_kernel(target="llvm"):
    A = te.placeholder((ROWS, COLS), name="A", dtype="int8")
    B = te.compute((4,), lambda k: A[ROWS - 1, COLS - 4 + k] + tvm.tir.const(1, "int8"), name="B")
    s = te.create_schedule(B.op)
    return s, A, B


def test_flat_size_and_offsets_are_int64():
    s, A, B = _strip_kernel()
    text = str(tvm.lower(s, [A, B]))
    assert "2147549184" in text and "-2147" not in text
    mod = tvm.build(s, [A, B], "llvm -mcpu=core-avx2")
    src = mod.get_source()
    assert "INT64_C(32769)" in src or "(int64_t)" in src


def test_elementwise_loop_over_a_large_constant_shape_indexes_in_int64():
    A = te.placeholder((ROWS, COLS), name="A", dtype="int8")
    B = te.compute((ROWS, COLS), lambda i, j: A[i, j] + tvm.tir.const(1, "int8"), name="B")
    s = te.create_schedule(B.op)
    src = tvm.build(s, [A, B], "llvm -mcpu=core-avx2").get_source()
    body = src[src.index("default_function(KilnValue"):]
    assert "(int64_t)" in body.split("return 0;")[0]


def test_reading_past_2_31_elements_is_correct(tmp_path):
    # a sparse file: 2 GiB of address space, a few bytes on disk; only the last row is written
    path = tmp_path / "big.bin"
    with open(path, "wb") as f:
        f.truncate(ROWS * COLS)
    tail = np.array([5, -7, 11, 100], "int8")
    mm = np.memmap(path, dtype="int8", mode="r+", shape=(ROWS, COLS))
    mm[ROWS - 1, COLS - 4:] = tail
    mm.flush()
    s, A, B = _strip_kernel()
    f = tvm.build(s, [A, B], "llvm")
    out = tvm.nd.array(np.zeros(4, "int8"))
    f(tvm.nd.from_dlpack(mm), out)
    np.testing.assert_array_equal(out.numpy(), tail + 1)
    del mm
