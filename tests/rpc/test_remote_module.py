"""Compiled modules over RPC: export locally, upload, load and run on the server, time remotely."""
from __future__ import annotations

import numpy as np
import pytest

import kiln
from kiln import rpc
from kiln.error import ArgumentError, RPCError
from kiln.target import create_c_module
from kiln.runtime.abi import C_PRELUDE

from .conftest import HOST, TEST_INIT

pytestmark = pytest.mark.timeout(60)

# Kernels written by hand against docs/abi.md (the codegen is tested elsewhere; here the point is
# that compiled code travels and runs on the server).
SRC = C_PRELUDE + r"""
/* out[i] = x[i] * y[i] + 1 over n elements */
int32_t fma1(KilnValue* args, int32_t num_args) {
  const float* x = (const float*)args[0].v_handle;
  const float* y = (const float*)args[1].v_handle;
  float* out = (float*)args[2].v_handle;
  int64_t n = args[3].v_int64;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = x[i] * y[i] + 1.0f;
  }
  return 0;
}

/* out[i, j] = scale * a[i, j] + shift, a and out are (m, k) float64 */
int32_t affine(KilnValue* args, int32_t num_args) {
  const double* a = (const double*)args[0].v_handle;
  double* out = (double*)args[1].v_handle;
  double scale = args[2].v_float64;
  int64_t shift = args[3].v_int64;
  int64_t m = args[4].v_int64;
  int64_t k = args[5].v_int64;
  for (int64_t i = 0; i < m * k; ++i) {
    out[i] = scale * a[i] + (double)shift;
  }
  return 0;
}

/* a broken kernel: writes through a null pointer when flag != 0 */
int32_t broken(KilnValue* args, int32_t num_args) {
  if (args[0].v_int64 != 0) {
    volatile int32_t* p = (volatile int32_t*)0;
    *p = 1;
  }
  return 0;
}
"""

FUNCS = [
    {"name": "fma1",
     "args": [{"name": "x", "kind": "buffer", "dtype": "float32", "shape": ["n"]},
              {"name": "y", "kind": "buffer", "dtype": "float32", "shape": ["n"]},
              {"name": "out", "kind": "buffer", "dtype": "float32", "shape": ["n"], "output": True}],
     "shape_vars": ["n"]},
    {"name": "affine",
     "args": [{"name": "a", "kind": "buffer", "dtype": "float64", "shape": ["m", "k"]},
              {"name": "out", "kind": "buffer", "dtype": "float64", "shape": ["m", "k"], "output": True},
              {"name": "scale", "kind": "scalar", "dtype": "float64"},
              {"name": "shift", "kind": "scalar", "dtype": "int32"}],
     "shape_vars": ["m", "k"]},
    {"name": "broken", "args": [{"name": "flag", "kind": "scalar", "dtype": "int32"}], "shape_vars": []},
]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("rpc_lib") / "kernels.so")
    create_c_module(SRC, FUNCS, entry_name="fma1").export_library(path)
    return path


@pytest.fixture(scope="module")
def server():
    s = rpc.Server(HOST, 0, 0, silent=True, server_init=TEST_INIT)
    yield s
    s.terminate()


@pytest.mark.parametrize("n", [1, 17, 1000])
def test_remote_build_and_run(server, exported, n):
    rng = np.random.default_rng(n)
    remote = rpc.connect(HOST, server.port)
    remote.upload(exported)
    assert "kernels.so" in remote.listdir(".").split(",")
    mod = remote.load_module("kernels.so")
    assert mod.entry_name == "fma1"
    dev = remote.cpu(0)
    x = rng.standard_normal(n).astype("float32")
    y = rng.standard_normal(n).astype("float32")
    a, b = rpc.remote_array(x, dev), rpc.remote_array(y, dev)
    out = rpc.remote_empty(dev, (n,), "float32")
    mod(a, b, out)  # entry function
    np.testing.assert_allclose(out.numpy(), x * y + 1, rtol=1e-6)
    out.copyfrom(np.zeros(n, "float32"))
    mod["fma1"](a, b, out)
    np.testing.assert_allclose(out.numpy(), x * y + 1, rtol=1e-6)
    # scalars cross the wire too; odd 2-d shapes
    m, k = 3, n % 7 + 2
    arr = rng.standard_normal((m, k))
    res = rpc.remote_empty(dev, (m, k), "float64")
    mod.get_function("affine")(rpc.remote_array(arr, dev), res, 0.5, -3)
    np.testing.assert_allclose(res.numpy(), 0.5 * arr - 3)
    remote.close()


def test_remote_argument_errors_keep_the_session(server, exported):
    remote = rpc.connect(HOST, server.port)
    remote.upload(exported, "k.so")
    mod = remote.load_module("k.so")
    dev = remote.cpu()
    a = rpc.remote_array(np.ones(4, "float32"), dev)
    bad = rpc.remote_empty(dev, (5,), "float32")
    with pytest.raises(ArgumentError, match="remote"):
        mod["fma1"](a, a, bad)
    with pytest.raises(RPCError, match="no function"):
        mod.get_function("missing")
    with pytest.raises(RPCError, match="upload it first"):
        remote.load_module("other.so")
    out = rpc.remote_empty(dev, (4,), "float32")
    mod["fma1"](a, a, out)
    np.testing.assert_allclose(out.numpy(), np.full(4, 2.0, "float32"))
    remote.close()


def test_crashing_kernel_kills_only_the_worker(server, exported):
    remote = rpc.connect(HOST, server.port)
    remote.upload(exported, "k.so")
    mod = remote.load_module("k.so")
    mod["broken"](0)
    with pytest.raises(RPCError, match="SIGSEGV"):
        mod["broken"](1)
    # the server is still there and serves a fresh worker
    again = rpc.connect(HOST, server.port)
    again.upload(exported, "k.so")
    again.load_module("k.so")["broken"](0)
    again.close()


def test_remote_time_evaluator(server, exported):
    remote = rpc.connect(HOST, server.port)
    remote.upload(exported)
    mod = remote.load_module("kernels.so")
    dev = remote.cpu()
    n = 4096
    args = [rpc.remote_array(np.ones(n, "float32"), dev) for _ in range(2)] + [rpc.remote_empty(dev, (n,), "float32")]
    timer = mod.time_evaluator(mod.entry_name, dev, number=5, repeat=3)
    result = timer(*args)
    assert isinstance(result, kiln.runtime.BenchmarkResult)
    assert len(result.results) == 3 and all(0 < t < 1 for t in result.results)
    assert result.min <= result.mean <= result.max
    np.testing.assert_allclose(args[2].numpy(), np.full(n, 2.0, "float32"))
    # min_repeat_ms makes each repeat last at least that long, measured on the server
    slow = mod.time_evaluator("fma1", dev, number=1, repeat=2, min_repeat_ms=20)(*args)
    assert len(slow.results) == 2
    remote.close()


def test_measure_helpers_through_a_tracker(exported):
    with rpc.LocalCluster(2, key="measure", port=0, port_end=0, server_init=TEST_INIT) as cluster:
        assert rpc.check_remote("measure", HOST, cluster.port, timeout=10)
        remote = rpc.request_remote("measure", HOST, cluster.port, priority=1, timeout=30)
        costs = rpc.run_remote_evaluation(remote, exported, [((1000,), "float32")] * 3,
                                          number=3, repeat=4, min_repeat_ms=0)
        assert len(costs) == 2 and all(c > 0 for c in costs)  # fastest and slowest of 4 dropped
        # the library was removed from the session afterwards
        assert "kernels.so" not in remote.listdir(".").split(",")
        # reference inputs instead of random ones
        x = np.arange(8, dtype="float32")
        costs = rpc.run_remote_evaluation(remote, exported, None, number=1, repeat=1,
                                          ref_input=[x, x, np.zeros(8, "float32")])
        assert len(costs) == 1
        # AutoTVM's enable_cpu_cache_flush maps to the server's cache_flush_cpu_non_first_arg
        costs = rpc.run_remote_evaluation(remote, exported, [((256,), "float32")] * 3, number=2, repeat=2,
                                          enable_cpu_cache_flush=True)
        assert len(costs) == 2 and all(c > 0 for c in costs)
        args = rpc.random_fill_args(remote, [((64,), "float32"), ((3, 3), "int32")])
        assert args[0].numpy().min() >= 1.0 and args[1].numpy().max() <= 10
        remote.close()


def test_load_library(make_server, exported):
    server = make_server(load_library=exported)
    remote = rpc.connect(HOST, server.port)
    assert remote.get_function("rpc.test.addone")(1) == 2
    remote.close()
    with pytest.raises(RPCError, match="exited"):
        make_server(load_library="/nonexistent/libfoo.so")


def test_te_kernel_built_with_kiln_build(server, tmp_path):
    """The issue's example: kiln.build a TE kernel, export, upload, run remotely, time remotely."""
    from kiln import te

    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] * 2.0 + B[i], name="C")
    s = te.create_schedule(C.op)
    lib = kiln.build(s, [A, B, C], "llvm", name="myaxpy")
    path = str(tmp_path / "myaxpy.so")
    lib.export_library(path)

    remote = rpc.connect(HOST, server.port)
    remote.upload(path)
    f = remote.load_module("myaxpy.so")
    dev = remote.cpu()
    rng = np.random.default_rng(7)
    for size in (1, 33, 1025):
        x = rng.standard_normal(size).astype("float32")
        y = rng.standard_normal(size).astype("float32")
        a, b = rpc.remote_array(x, dev), rpc.remote_array(y, dev)
        c = rpc.remote_empty(dev, (size,), "float32")
        f(a, b, c)
        np.testing.assert_allclose(c.numpy(), x * 2 + y, rtol=1e-5, atol=1e-6)
    result = f.time_evaluator(f.entry_name, dev, number=10, repeat=2)(a, b, c)
    assert len(result.results) == 2 and result.mean > 0
    remote.close()
