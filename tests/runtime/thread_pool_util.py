"""The kernel the thread-pool tests run: a row sum with a reduction inside the parallel body."""
from __future__ import annotations

import numpy as np

import kiln
from kiln import te


def row_sum(rows: int, cols: int, name: str = "rowsum"):
    """B[i] = sum_j A[i, j] * 2 + i, parallel over rows: a reduction inside the parallel body."""
    A = te.placeholder((rows, cols), name="A")
    k = te.reduce_axis((0, cols), name="k")
    B = te.compute((rows,), lambda i: te.sum(A[i, k] * 2.0, axis=k), name="B")
    C = te.compute((rows,), lambda i: B[i] + i.astype("float32"), name="C")
    s = te.create_schedule(C.op)
    s[C].parallel(C.op.axis[0])
    s[B].compute_at(s[C], C.op.axis[0])
    return kiln.build(s, [A, C], target="llvm", name=name)


def expect_row_sum(a):
    return (a.astype(np.float64) * 2).sum(axis=1).astype(np.float32) + np.arange(a.shape[0], dtype=np.float32)
