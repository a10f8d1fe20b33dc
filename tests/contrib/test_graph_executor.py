"""kiln.contrib.graph_executor: GraphModule API over a hand-built kernel library and over relay.build."""
import json

import numpy as np
import pytest

import kiln as tvm
from kiln import te
from kiln.contrib import graph_executor
from kiln.error import ArgumentError


def _kernel_lib(n=5):
    """Two hand-written kernels built with kiln.build: add (2 in, 1 out) and scale by 2."""
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    D = te.compute((n,), lambda i: A[i] * 2.0, name="D")
    s1 = te.create_schedule(C.op)
    s2 = te.create_schedule(D.op)
    ir = tvm.IRModule({"k_add": te.schedule_to_primfunc(s1, [A, B, C], name="k_add").with_attr("global_symbol", "k_add"),
                       "k_twice": te.schedule_to_primfunc(s2, [A, D], name="k_twice").with_attr("global_symbol",
                                                                                                  "k_twice")})
    return tvm.build(ir, target="llvm")


def _graph(n=5):
    """x, y -> t = add(x, y) -> u = twice(t) -> v = add(u, x); outputs (v, t)."""
    nodes = [
        {"op": "null", "name": "x", "inputs": []},
        {"op": "null", "name": "y", "inputs": []},
        {"op": "tvm_op", "name": "add0", "inputs": [[0, 0, 0], [1, 0, 0]],
         "attrs": {"func_name": "k_add", "num_inputs": "2", "num_outputs": "1", "flatten_data": "0"}},
        {"op": "tvm_op", "name": "twice", "inputs": [[2, 0, 0]],
         "attrs": {"func_name": "k_twice", "num_inputs": "1", "num_outputs": "1", "flatten_data": "0"}},
        {"op": "tvm_op", "name": "add1", "inputs": [[3, 0, 0], [0, 0, 0]],
         "attrs": {"func_name": "k_add", "num_inputs": "2", "num_outputs": "1", "flatten_data": "0"}},
    ]
    return json.dumps({"nodes": nodes, "arg_nodes": [0, 1], "heads": [[4, 0, 0], [2, 0, 0]],
                       "node_row_ptr": [0, 1, 2, 3, 4, 5],
                       "attrs": {"shape": ["list_shape", [[n]] * 5], "dltype": ["list_str", ["float32"] * 5],
                                 "storage_id": ["list_int", [0, 1, 2, 3, 4]]}})


@pytest.fixture(scope="module")
def lib():
    return _kernel_lib()


def test_hand_built_graph_runs(lib):
    m = graph_executor.create(_graph(), lib, tvm.cpu(0))
    x = np.random.randn(5).astype("float32")
    y = np.random.randn(5).astype("float32")
    m.set_input("x", x)
    m.set_input(y=tvm.nd.array(y))
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), (x + y) * 2 + x, rtol=1e-6)
    np.testing.assert_allclose(m.get_output(1).numpy(), x + y, rtol=1e-6)
    out = tvm.nd.empty((5,), "float32")
    assert m.get_output(1, out) is out
    np.testing.assert_allclose(out.numpy(), x + y, rtol=1e-6)
    assert m.get_num_inputs() == 2 and m.get_num_outputs() == 2
    assert m.get_input_index("y") == 1 and m.get_input_index("z") == -1
    np.testing.assert_allclose(m.get_input(0).numpy(), x)
    np.testing.assert_allclose(m.get_input("y").numpy(), y)
    shapes, dtypes = m.get_input_info()
    assert shapes == {"x": (5,), "y": (5,)} and dtypes == {"x": "float32", "y": "float32"}


def test_run_with_inputs_and_positional_index(lib):
    m = graph_executor.create(_graph(), lib, tvm.cpu(0))
    x = np.arange(5, dtype="float32")
    m.set_input(0, x)
    m.run(y=np.ones(5, "float32"))
    np.testing.assert_allclose(m.get_output(0).numpy(), (x + 1) * 2 + x)


def test_native_plan_and_python_loop_agree(lib):
    m = graph_executor.create(_graph(), lib, tvm.cpu(0))
    assert m.module._native is None  # a kiln.build library has no plan runner: the Python loop runs it
    x = np.random.randn(5).astype("float32")
    m.run(x=x, y=x)
    np.testing.assert_allclose(m.get_output(0).numpy(), 5 * x, rtol=1e-6)


def test_mismatching_graph_and_kernel_shapes(lib):
    g = json.loads(_graph())
    g["attrs"]["shape"][1] = [[6]] * 5
    with pytest.raises(tvm.error.ModuleLoadError, match="do not match kernel 'k_add'"):
        graph_executor.create(json.dumps(g), lib, tvm.cpu(0))


def test_bad_inputs(lib):
    m = graph_executor.create(_graph(), lib, tvm.cpu(0))
    with pytest.raises(ArgumentError, match="inputs are: x, y"):
        m.set_input("data", np.zeros(5, "float32"))
    with pytest.raises(ArgumentError, match=r"expected shape \(5,\) and dtype float32"):
        m.set_input("x", np.zeros(4, "float32"))
    with pytest.raises(ArgumentError, match="out of range"):
        m.get_output(2)
    with pytest.raises(ArgumentError, match="no value"):
        m.set_input("x")


def test_benchmark(lib):
    m = graph_executor.create(_graph(), lib, tvm.cpu(0))
    res = m.benchmark(tvm.cpu(0), number=3, repeat=2, x=np.ones(5, "float32"), y=np.ones(5, "float32"))
    assert len(res.results) == 2 and res.mean > 0
    res = m.benchmark(tvm.cpu(0), number=2, repeat=2, end_to_end=True, x=np.ones(5, "float32"))
    assert len(res.results) == 2
    with pytest.raises(tvm.error.KilnError, match="func_name"):
        m.benchmark(tvm.cpu(0), func_name="nope")


def test_overhead_graph_of_100_trivial_kernels():
    """100 kernel nodes run from the precomputed plan (correctness only; the time is a benchmark figure)."""
    from kiln import relay
    x = relay.var("x", shape=(4,), dtype="float32")
    y = x
    for _ in range(100):
        y = relay.add(y, x)
    with tvm.transform.PassContext(opt_level=0):
        built = relay.build(tvm.IRModule.from_expr(relay.Function([x], y)), target="llvm")
    m = graph_executor.GraphModule(built["default"](tvm.cpu(0)))
    assert m.module._native is not None and len(m.module._plan) == 100
    xv = np.arange(4, dtype="float32")
    m.run(x=xv)
    np.testing.assert_allclose(m.get_output(0).numpy(), 101 * xv)
    m.module._native = None  # the Python fallback loop gives the same
    m.run(x=xv + 1)
    np.testing.assert_allclose(m.get_output(0).numpy(), 101 * (xv + 1))
