"""kiln's thread pool (kiln/runtime/thread_pool.c) running the outlined parallel loops of generated kernels:
results at every thread count, nesting, reductions and allocations inside bodies, two Python threads,
fork, errors raised inside a body, exported modules in a fresh process, the RPC server, a null launch
pointer (serial), and the backend switch."""
from __future__ import annotations

import ctypes
import importlib
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import kiln
from kiln import tir
from kiln.error import KilnError
from kiln.runtime import num_threads, set_num_threads
from kiln.runtime import thread_pool
from kiln.tir import stmt as S
from thread_pool_util import expect_row_sum as _expect_row_sum, row_sum as _row_sum

codegen_c = importlib.import_module("kiln.target.codegen_c")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def pool_backend(monkeypatch):
    monkeypatch.setattr(codegen_c, "PARALLEL_BACKEND", "pool")
    before = num_threads()
    yield
    set_num_threads(before)


@pytest.mark.parametrize("threads", [1, 2, 3, 7])
@pytest.mark.parametrize("rows", [1, 2, 5, 97, 1031])
def test_reduction_in_parallel_body(rows, threads):
    f = _row_sum(rows, 13)
    if rows > 1:  # a loop of one iteration is simplified away
        assert codegen_c.parallel_loop_marker("pool") in f.get_source()
    assert "#pragma omp" not in f.get_source()
    set_num_threads(threads)
    a = np.random.default_rng(rows).standard_normal((rows, 13)).astype(np.float32)
    c = kiln.nd.array(np.full(rows, np.nan, np.float32))
    for _ in range(3):
        f(kiln.nd.array(a), c)
        np.testing.assert_allclose(c.numpy(), _expect_row_sum(a), rtol=1e-5, atol=1e-5)


def _buf(name, n, dtype="float32"):
    data = tir.Var(name, "handle")
    return data, tir.decl_buffer([n], dtype, name, data=data)


def _prim(name, params, body):
    return tir.PrimFunc([p for p, _ in params], body, buffer_map={p: b for p, b in params}).with_attr(
        "global_symbol", name)


@pytest.mark.parametrize("m", [3, 40000])  # a stack array, then a heap buffer (> 32 KiB) inside the body
def test_allocation_and_nested_parallel_loop_in_body(m):
    """Each row reverses itself through a temporary allocated inside the parallel body; the inner loop is
    parallel too and runs serially inside the outer one."""
    n = 11
    A, C = _buf("A", n * m), _buf("C", n * m)
    tmp = tir.Var("row", "handle")
    T = tir.decl_buffer([m], "float32", "row", data=tmp)
    i, j, k = tir.Var("i", "int32"), tir.Var("j", "int32"), tir.Var("k", "int32")
    inner = S.Allocate(tmp, "float32", [m], tir.const(True), S.SeqStmt([
        S.For(j, 0, m, S.ForKind.SERIAL, S.BufferStore(T, A[1][i * m + j], [j])),
        S.For(k, 0, m, S.ForKind.PARALLEL, S.BufferStore(C[1], T[m - 1 - k] + tir.Cast("float32", i), [i * m + k]))]))
    f = kiln.build(_prim("rev", [A, C], S.For(i, 0, n, S.ForKind.PARALLEL, inner)), target="llvm")
    src = f.get_source()
    assert src.count(codegen_c.parallel_loop_marker()) == 1 and "nested parallel loop" in src
    set_num_threads(2)
    a = np.random.default_rng(m).standard_normal(n * m).astype(np.float32)
    c = kiln.nd.array(np.zeros(n * m, np.float32))
    f(kiln.nd.array(a), c)
    expect = a.reshape(n, m)[:, ::-1] + np.arange(n, dtype=np.float32)[:, None]
    np.testing.assert_array_equal(c.numpy().reshape(n, m), expect)


def test_error_inside_parallel_body_raises_and_frees():
    """A failing assert inside a parallel body ends the call with the assert's message, on any thread."""
    n, m = 64, 5000  # the per-row buffer is on the heap: the error exit frees it
    A, C = _buf("A", n * m), _buf("C", n * m)
    tmp = tir.Var("row", "handle")
    T = tir.decl_buffer([m], "float32", "row", data=tmp)
    i, j = tir.Var("i", "int32"), tir.Var("j", "int32")
    body = S.Allocate(tmp, "float32", [m], tir.const(True), S.SeqStmt([
        S.For(j, 0, m, S.ForKind.SERIAL, S.BufferStore(T, A[1][i * m + j], [j])),
        S.AssertStmt(T[0] >= 0.0, "rows must start non-negative",
                     S.For(j, 0, m, S.ForKind.SERIAL, S.BufferStore(C[1], T[j] * 2.0, [i * m + j])))]))
    f = kiln.build(_prim("checked", [A, C], S.For(i, 0, n, S.ForKind.PARALLEL, body)), target="llvm")
    set_num_threads(2)
    a = np.abs(np.random.default_rng(0).standard_normal((n, m)).astype(np.float32))
    c = kiln.nd.array(np.zeros(n * m, np.float32))
    f(kiln.nd.array(a.ravel()), c)
    np.testing.assert_array_equal(c.numpy(), a.ravel() * 2)
    for bad_row in (0, n // 2, n - 1):
        b = a.copy()
        b[bad_row, 0] = -1.0
        with pytest.raises(KilnError, match="rows must start non-negative"):
            f(kiln.nd.array(b.ravel()), c)
    f(kiln.nd.array(a.ravel()), c)  # the pool is usable after an error
    np.testing.assert_array_equal(c.numpy(), a.ravel() * 2)


def test_two_python_threads_at_once():
    f = _row_sum(517, 31, name="rowsum_mt")
    set_num_threads(2)
    rng = np.random.default_rng(3)
    inputs = [rng.standard_normal((517, 31)).astype(np.float32) for _ in range(2)]
    errors = []

    def work(a):
        try:
            c = kiln.nd.array(np.zeros(517, np.float32))
            for _ in range(200):
                f(kiln.nd.array(a), c)
                np.testing.assert_allclose(c.numpy(), _expect_row_sum(a), rtol=1e-5, atol=1e-5)
        except BaseException as err:  # noqa: BLE001 - reported by the main thread
            errors.append(err)

    threads = [threading.Thread(target=work, args=(a,)) for a in inputs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    stats = thread_pool.pool_stats()
    assert stats["jobs"] + stats["serial_jobs"] >= 400


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_pool_threads_are_recreated_after_fork():
    f = _row_sum(257, 9, name="rowsum_fork")
    set_num_threads(2)
    a = np.random.default_rng(5).standard_normal((257, 9)).astype(np.float32)
    c = kiln.nd.array(np.zeros(257, np.float32))
    f(kiln.nd.array(a), c)  # the parent's workers exist now
    assert thread_pool.pool_stats()["workers"] >= 1
    pid = os.fork()
    if pid == 0:  # child: only this thread survived fork(); the pool must start new workers
        code = 1
        try:
            before = thread_pool.pool_stats()
            d = kiln.nd.array(np.zeros(257, np.float32))
            for _ in range(50):
                f(kiln.nd.array(a), d)
            after = thread_pool.pool_stats()
            ok = np.allclose(d.numpy(), _expect_row_sum(a), rtol=1e-5, atol=1e-5)
            code = 0 if ok and before["workers"] == 0 and after["workers"] >= 1 and \
                after["jobs"] > before["jobs"] else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


def test_null_launch_pointer_runs_serially():
    f = _row_sum(300, 7, name="rowsum_null")
    lib = f._library if hasattr(f, "_library") else None
    if lib is None:
        lib = next(k._library for k in [f.get_function(f.entry_name)] if getattr(k, "_library", None))
    slot = ctypes.c_void_p.in_dll(lib._cdll, "__kiln_parallel_launch")
    assert slot.value == thread_pool.launch_address()
    set_num_threads(2)
    slot.value = None
    try:
        before = thread_pool.pool_stats()
        a = np.random.default_rng(9).standard_normal((300, 7)).astype(np.float32)
        c = kiln.nd.array(np.zeros(300, np.float32))
        f(kiln.nd.array(a), c)
        np.testing.assert_allclose(c.numpy(), _expect_row_sum(a), rtol=1e-5, atol=1e-5)
        after = thread_pool.pool_stats()
        assert after["jobs"] == before["jobs"] and after["serial_jobs"] == before["serial_jobs"]
    finally:
        slot.value = thread_pool.launch_address()


_CHILD = r"""
import importlib.abc, sys
BLOCKED = ("kiln.target", "kiln.relay", "kiln.te", "kiln.tir", "kiln.topi", "kiln.autotvm", "kiln.driver")

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ImportError("blocked for this test: " + name)
        return None

if sys.argv[4] == "blocked":  # a process with the runtime only: the pool comes from the cache's copy
    sys.meta_path.insert(0, Block())
import numpy as np
import kiln.runtime
from kiln.runtime import thread_pool, set_num_threads
set_num_threads(2)
m = kiln.runtime.load_module(sys.argv[1])
a = np.load(sys.argv[2])
c = kiln.runtime.nd.array(np.zeros(a.shape[0], np.float32))
m["rowsum_exp"](kiln.runtime.nd.array(a), c)
np.save(sys.argv[3], c.numpy())
print("jobs", thread_pool.pool_stats()["jobs"])
"""


@pytest.mark.parametrize("mode", ["full", "blocked"])
def test_exported_module_runs_on_the_pool_in_a_fresh_process(tmp_path, mode):
    f = _row_sum(1003, 17, name="rowsum_exp")
    path = str(tmp_path / "rowsum.so")
    f.export_library(path)
    a = np.random.default_rng(11).standard_normal((1003, 17)).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", _CHILD, path, str(tmp_path / "a.npy"), str(tmp_path / "c.npy"), mode],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    np.testing.assert_allclose(np.load(tmp_path / "c.npy"), _expect_row_sum(a), rtol=1e-5, atol=1e-5)
    assert "jobs 1" in out.stdout  # the loaded module's launch pointer was wired to the pool


@pytest.mark.timeout(120)
def test_parallel_kernel_over_rpc(tmp_path):
    from kiln import rpc
    f = _row_sum(333, 5, name="rowsum_rpc")
    path = str(tmp_path / "rowsum_rpc.so")
    f.export_library(path)
    server = rpc.Server("127.0.0.1", 0, 0, silent=True)
    try:
        remote = rpc.connect("127.0.0.1", server.port)
        remote.upload(path)
        g = remote.load_module("rowsum_rpc.so")
        dev = remote.cpu()
        a = np.random.default_rng(13).standard_normal((333, 5)).astype(np.float32)
        c = rpc.remote_empty(dev, (333,), "float32")
        g(rpc.remote_array(a, dev), c)
        np.testing.assert_allclose(c.numpy(), _expect_row_sum(a), rtol=1e-5, atol=1e-5)
        remote.close()
    finally:
        server.terminate()


def test_backend_switch(monkeypatch):
    monkeypatch.setattr(codegen_c, "PARALLEL_BACKEND", None)
    monkeypatch.setenv("KILN_PARALLEL_BACKEND", "openmp")
    assert codegen_c.parallel_backend() == "openmp"
    f = _row_sum(40, 3, name="rowsum_omp")
    assert codegen_c.parallel_loop_marker("openmp") in f.get_source()
    monkeypatch.setenv("KILN_PARALLEL_BACKEND", "threads")
    with pytest.raises(KilnError, match="must be one of pool, openmp"):
        codegen_c.parallel_backend()


def test_spin_setting():
    old = thread_pool.set_spin_us(7)
    try:
        assert thread_pool.pool_stats()["spin_us"] == 7
    finally:
        thread_pool.set_spin_us(old)
    with pytest.raises(KilnError):
        thread_pool.set_spin_us(-1)


def test_set_num_threads_reaches_libraries_loaded_before_and_after():
    """One thread: the kernel runs its loop itself (no launch); two: through the pool."""
    f = _row_sum(64, 3, name="rowsum_nt")
    a = kiln.nd.array(np.ones((64, 3), np.float32))
    c = kiln.nd.array(np.zeros(64, np.float32))

    def launches(g):
        before = thread_pool.pool_stats()
        g(a, c)
        after = thread_pool.pool_stats()
        return after["jobs"] + after["serial_jobs"] - before["jobs"] - before["serial_jobs"]
    set_num_threads(1)
    assert launches(f) == 0
    set_num_threads(2)
    assert launches(f) == 1
    g = _row_sum(64, 3, name="rowsum_nt2")
    assert launches(g) == 1
    set_num_threads(1)
    assert launches(g) == 0 and launches(f) == 0


_calls: list = []


@kiln.register_func("test_thread_pool.record_or_fail", override=True)
def _record_or_fail(i):
    if int(i) == 37:
        raise ValueError(f"row {i} refused")
    _calls.append((int(i), threading.get_ident()))
    return 0


def test_packed_call_inside_parallel_body():
    """A packed call from a body runs Python on whichever pool thread took the chunk; its exception reaches
    the caller."""
    n = 40
    A = _buf("A", n)
    i = tir.Var("i", "int32")
    body = S.For(i, 0, n, S.ForKind.PARALLEL, S.Evaluate(tir.call_packed("test_thread_pool.record_or_fail", i)))
    f = kiln.build(_prim("calls", [A], body), target="llvm")
    set_num_threads(2)
    _calls.clear()
    with pytest.raises(KilnError, match="row 37 refused"):
        f(kiln.nd.array(np.zeros(n, np.float32)))
    assert 37 not in {row for row, _ in _calls}
    m = 30
    A2 = _buf("A", m)
    j = tir.Var("j", "int32")
    body2 = S.For(j, 0, m, S.ForKind.PARALLEL, S.Evaluate(tir.call_packed("test_thread_pool.record_or_fail", j)))
    g = kiln.build(_prim("calls_ok", [A2], body2), target="llvm")
    _calls.clear()
    g(kiln.nd.array(np.zeros(m, np.float32)))
    assert sorted(row for row, _ in _calls) == list(range(m))
