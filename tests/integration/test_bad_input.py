"""Bad input to the core, end to end: a function built by kiln.build from TE rejects wrong
arguments with a KilnError naming the argument, and TE / schedule misuse fails with a clear
message (instead of hanging, computing garbage or failing deep inside codegen).

The argument checks of hand-made modules are in tests/runtime/test_module.py and most invalid
schedules in tests/te/test_te_errors.py; this file covers the kiln.build path and the cases those
do not.
"""
import numpy as np
import pytest

import kiln
from kiln import te
from kiln.error import ArgumentError, KilnError, LoweringError
from kiln.target.codegen_c import CodegenError


@pytest.fixture(scope="module", params=["llvm", "c"])
def vadd(request):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    s[C].split(C.op.axis[0], factor=4)
    return kiln.build(s, [A, B, C], request.param, name="vadd")


def _arrays(n=7, dtype="float32"):
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    return kiln.nd.array(a), kiln.nd.array(b), kiln.nd.empty((n,), dtype)


def test_good_call_still_computes(vadd):
    a, b, c = _arrays(13)
    vadd(a, b, c)
    np.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy(), rtol=1e-6)


def test_wrong_number_of_arguments(vadd):
    a, b, c = _arrays()
    with pytest.raises(ArgumentError, match=r"vadd: expected 3 arguments \(A: .*B: .*C: .*\), got 2"):
        vadd(a, b)
    with pytest.raises(ArgumentError, match=r"expected 3 arguments.*got 4"):
        vadd(a, b, c, c)


def test_keyword_arguments_are_rejected_with_the_module_call(vadd):
    a, b, c = _arrays()
    with pytest.raises(ArgumentError, match=r"keyword arguments \(C\).*by position"):
        vadd(a, b, C=c)


def test_wrong_dtype_names_the_argument(vadd):
    a, b, _ = _arrays()
    with pytest.raises(ArgumentError, match=r"argument 2 \(C\): expected dtype float32, got float64"):
        vadd(a, b, kiln.nd.empty((7,), "float64"))
    with pytest.raises(ArgumentError, match=r"argument 0 \(A\): expected dtype float32, got int32"):
        vadd(kiln.nd.array(np.arange(7, dtype="int32")), b, a)


def test_wrong_shape_names_the_argument_and_the_expected_shape(vadd):
    a, b, _ = _arrays()
    with pytest.raises(ArgumentError, match=r"argument 2 \(C\): expected shape \(n,\) = \(7,\) with n=7, got \(8,\)"):
        vadd(a, b, kiln.nd.empty((8,), "float32"))
    with pytest.raises(ArgumentError, match=r"argument 1 \(B\): expected a 1-d array.*got shape \(7, 1\)"):
        vadd(a, kiln.nd.empty((7, 1), "float32"), a)


def test_non_contiguous_array_is_rejected(vadd):
    a, _, c = _arrays()
    strided = kiln.nd.from_dlpack(np.ones(14, "float32")[::2])  # a zero-copy strided view
    assert strided.shape == (7,)
    with pytest.raises(ArgumentError, match=r"argument 1 \(B\): expected a compact \(C-contiguous"):
        vadd(a, strided, c)


@pytest.mark.parametrize("bad, what", [(np.zeros(7, "float32"), "numpy array.*kiln.nd.array"),
                                       ([0.0] * 7, "got list"), (None, "got NoneType"), (1.5, "got float")])
def test_non_ndarray_argument_names_the_argument(vadd, bad, what):
    a, b, _ = _arrays()
    with pytest.raises(ArgumentError, match=rf"argument 2 \(C\).*{what}"):
        vadd(a, b, bad)


def test_failed_calls_leave_the_function_usable(vadd):
    a, b, c = _arrays(9)
    for bad in [(a, b), (a, b, np.zeros(9, "float32")), (a, b, kiln.nd.empty((3,), "float32"))]:
        with pytest.raises(KilnError):
            vadd(*bad)
    vadd(a, b, c)
    np.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy(), rtol=1e-6)


# -- TE / schedule misuse ---------------------------------------------------------------------
def _chain():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((n,), lambda i: B[i] + 1.0, name="C")
    return A, B, C


def test_args_that_are_not_a_list_fail_fast():
    A, B, C = _chain()
    s = te.create_schedule(C.op)
    # a single tensor used to be iterated as A[0], A[1], ... forever
    with pytest.raises(LoweringError, match=r"args must be a list.*\[A, B, C\]"):
        kiln.lower(s, A)
    with pytest.raises(LoweringError, match="needs args"):
        kiln.build(s, None, "llvm")
    with pytest.raises(KilnError, match="tensor A is not iterable"):
        list(A)


def test_schedule_primitives_on_the_wrong_stage():
    A, B, C = _chain()
    s = te.create_schedule(C.op)
    with pytest.raises(kiln.error.ScheduleError, match=r"stage 'C'.*belongs to stage 'B'"):
        s[C].split(B.op.axis[0], factor=2)
    # invalid attaches are recorded as TVM records them, and refused when the schedule is lowered
    s[C].compute_at(s[B], B.op.axis[0])
    with pytest.raises(kiln.error.ScheduleError, match="'C' is an output.*computed at root"):
        kiln.lower(s, [A, C])
    s = te.create_schedule(C.op)
    s[B].compute_at(s[B], B.op.axis[0])
    with pytest.raises(kiln.error.ScheduleError, match="cannot be computed at itself"):
        kiln.lower(s, [A, C])
    # a diamond: B2 does not read B, so B cannot be computed inside B2's loops
    B2 = te.compute(A.shape, lambda i: A[i] - 1.0, name="B2")
    D = te.compute(A.shape, lambda i: B[i] * B2[i], name="D")
    s = te.create_schedule(D.op)
    s[B].compute_at(s[B2], B2.op.axis[0])
    with pytest.raises(kiln.error.ScheduleError, match="'B2' does not consume 'B'"):
        kiln.lower(s, [A, D])


def test_vectorize_reduction_axis():
    n = te.var("n")
    A = te.placeholder((n, 8), name="A")
    k = te.reduce_axis((0, 8), "k")
    R = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="R")
    s = te.create_schedule(R.op)
    with pytest.raises(kiln.error.ScheduleError, match="reduction axis.*rfactor"):
        s[R].vectorize(k)


def test_reduction_over_a_data_parallel_axis_is_rejected():
    """It used to build and silently compute n * A[i]."""
    A, B, C = _chain()
    with pytest.raises(KilnError, match="sum reduction: data-parallel axis 'i' is not a reduction axis"):
        te.compute(A.shape, lambda i: te.sum(A[i], axis=B.op.axis[0]), name="R")
    with pytest.raises(KilnError, match=r"sum reduction: give the axes.*te.reduce_axis"):
        te.compute(A.shape, lambda i: te.sum(A[i]), name="R")
    with pytest.raises(KilnError, match=r"max needs two operands.*max-reduction"):
        te.compute(A.shape, lambda i: te.max(A[i]), name="R")


def test_non_numeric_compute_bodies_and_indices():
    A, _, _ = _chain()
    with pytest.raises(KilnError, match="compute S: fcompute returned \"x\".*must be a number"):
        te.compute(A.shape, lambda i: "x", name="S")
    with pytest.raises(KilnError, match="tensor A: index .* has dtype float32; tensor indices must be integers"):
        te.compute(A.shape, lambda i: A[i * 1.5], name="S")


def test_gpu_thread_bind_on_a_cpu_target_names_the_problem():
    """Loop partitioning used to hoist the thread variable out of its scope, so codegen failed
    with 'threadIdx.x is used but never defined' instead of this message."""
    A, B, C = _chain()
    s = te.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=4)
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    for target in ("llvm", "c"):
        with pytest.raises(CodegenError, match="binds an axis to GPU thread 'threadIdx.x'.*CPU"):
            kiln.build(s, [A, C], target)
