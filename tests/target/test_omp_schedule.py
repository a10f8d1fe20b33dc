"""How the C backend schedules the iterations of a parallel loop (codegen_c.OMP_SCHEDULE): the pragma it
prints, that every iteration still runs exactly once at any thread count, and that the C compiles with and
without OpenMP."""
import importlib
import os
import subprocess
import tempfile

import numpy as np
import pytest

import kiln
from kiln import te
from kiln.error import KilnError
from kiln.runtime import num_threads, set_num_threads
from kiln.target.compiler import find_compiler

codegen_c = importlib.import_module("kiln.target.codegen_c")  # the module; kiln.target.codegen_c is a function

AVX2 = "llvm -mcpu=core-avx2"


def _scaled(rows, cols=16):
    A = te.placeholder((rows, cols), name="A")
    B = te.compute(A.shape, lambda i, j: A[i, j] + i.astype("float32"), name="B")
    s = te.create_schedule(B.op)
    s[B].parallel(B.op.axis[0])
    return s, [A, B]


@pytest.fixture(autouse=True)
def openmp_backend(monkeypatch):
    """This file is about the OpenMP backend's pragmas (the pool's schedule: tests/runtime/test_thread_pool.py)."""
    monkeypatch.setattr(codegen_c, "PARALLEL_BACKEND", "openmp")


@pytest.fixture
def restore_threads():
    before = num_threads()
    yield
    set_num_threads(before)


def test_avx2_source_has_guided_schedule():
    s, args = _scaled(37)
    src = kiln.build(s, args, target=AVX2).get_source()
    assert "#pragma omp parallel for num_threads(kiln_omp_threads()) schedule(guided)\n" in src


def test_dynamic_chunk_is_computed_at_run_time(monkeypatch):
    monkeypatch.setattr(codegen_c, "OMP_SCHEDULE", "dynamic")
    chunk = f"kiln_omp_chunk_{codegen_c.OMP_CHUNKS_PER_THREAD}"
    n = te.var("n")
    A = te.placeholder((n, 8), name="A")
    B = te.compute(A.shape, lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].parallel(B.op.axis[0])
    f = kiln.build(s, [A, B], target="llvm")
    src = f.get_source()
    assert f"schedule(dynamic, {chunk}(n))" in src and f"static inline int64_t {chunk}(int64_t extent)" in src
    for rows in (1, 3, 9, 130):
        a = np.random.default_rng(rows).random((rows, 8), dtype=np.float32)
        b = kiln.nd.array(np.zeros((rows, 8), np.float32))
        f(kiln.nd.array(a), b)
        np.testing.assert_array_equal(b.numpy(), a + np.float32(1.0))


@pytest.mark.parametrize("rows", [1, 2, 7, 8, 9, 37, 1000])
@pytest.mark.parametrize("threads", [1, 2, 3, 5])
@pytest.mark.parametrize("backend", ["openmp", "pool"])
def test_every_iteration_runs_once(rows, threads, backend, restore_threads, monkeypatch):
    monkeypatch.setattr(codegen_c, "PARALLEL_BACKEND", backend)
    s, args = _scaled(rows)
    f = kiln.build(s, args, target="llvm")
    set_num_threads(threads)
    a = np.random.default_rng(rows).random((rows, 16), dtype=np.float32)
    a[0, 0] = np.nan
    b = kiln.nd.array(np.full((rows, 16), -7.0, np.float32))
    f(kiln.nd.array(a), b)
    expect = a + np.arange(rows, dtype=np.float32)[:, None]
    np.testing.assert_array_equal(b.numpy(), expect)


@pytest.mark.parametrize("schedule,clause", [("static", ""), ("dynamic", " schedule(dynamic, kiln_omp_chunk_4(29))")])
def test_other_schedules_print_their_clause(monkeypatch, schedule, clause):
    monkeypatch.setattr(codegen_c, "OMP_SCHEDULE", schedule)
    s, args = _scaled(29)
    f = kiln.build(s, args, target="llvm")
    assert "#pragma omp parallel for num_threads(kiln_omp_threads())" + clause + "\n" in f.get_source()
    a = np.random.default_rng(1).random((29, 16), dtype=np.float32)
    b = kiln.nd.array(np.zeros((29, 16), np.float32))
    f(kiln.nd.array(a), b)
    np.testing.assert_array_equal(b.numpy(), a + np.arange(29, dtype=np.float32)[:, None])


def test_unknown_schedule_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(codegen_c, "OMP_SCHEDULE", "auto")
    s, args = _scaled(4)
    with pytest.raises(KilnError, match="OMP_SCHEDULE must be"):
        kiln.build(s, args, target="llvm")


@pytest.mark.parametrize("openmp", [True, False])
def test_source_compiles_with_and_without_openmp(openmp):
    """gcc compiles the printed C with -fopenmp and without it (the pragmas are then ignored)."""
    s, args = _scaled(37)
    src = kiln.build(s, args, target=AVX2).get_source()
    cc = find_compiler()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.c")
        with open(path, "w") as f:
            f.write(src)
        flags = ["-O2", "-std=gnu11", "-fPIC", "-march=haswell", "-Werror=implicit-function-declaration"]
        flags += ["-fopenmp"] if openmp else []
        out = subprocess.run(cc + flags + ["-c", path, "-o", os.path.join(d, "k.o")],
                             capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
