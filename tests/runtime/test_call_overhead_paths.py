"""The graph executor's per-call fast paths (set_input of an exact-match numpy array or NDArray, get_output by
int index, nd.array / nd.empty without per-call numpy queries) give the results and errors of the general path:
inputs are copied, outputs are the executor's arrays (numpy() copies), every bad input is still refused."""
import json

import numpy as np
import pytest

import kiln as tvm
from kiln import relay, te
from kiln.contrib import graph_executor
from kiln.error import ArgumentError, DataTypeError, KilnError
from kiln.runtime.ndarray import NDArray, _dtype_name

N = 7  # odd on purpose


def _lib(dtype="float32"):
    A = te.placeholder((N,), name="A", dtype=dtype)
    B = te.placeholder((N,), name="B", dtype=dtype)
    C = te.compute((N,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    ir = tvm.IRModule({"k_add": te.schedule_to_primfunc(s, [A, B, C], name="k_add").with_attr("global_symbol",
                                                                                              "k_add")})
    return tvm.build(ir, target="llvm")


def _graph(dtype="float32"):
    """x, y -> add(x, y); outputs (sum, x's own entry)."""
    nodes = [{"op": "null", "name": "x", "inputs": []}, {"op": "null", "name": "y", "inputs": []},
             {"op": "tvm_op", "name": "add", "inputs": [[0, 0, 0], [1, 0, 0]],
              "attrs": {"func_name": "k_add", "num_inputs": "2", "num_outputs": "1", "flatten_data": "0"}}]
    return json.dumps({"nodes": nodes, "arg_nodes": [0, 1], "heads": [[2, 0, 0], [0, 0, 0]],
                       "node_row_ptr": [0, 1, 2, 3],
                       "attrs": {"shape": ["list_shape", [[N]] * 3], "dltype": ["list_str", [dtype] * 3],
                                 "storage_id": ["list_int", [0, 1, 2]]}})


@pytest.fixture(scope="module")
def lib():
    return _lib()


@pytest.fixture
def m(lib):
    return graph_executor.create(_graph(), lib, tvm.cpu(0))


def _rand(seed=0, dtype="float32"):
    return np.random.default_rng(seed).standard_normal(N).astype(dtype)


@pytest.mark.parametrize("wrap", ["numpy", "ndarray"])
def test_inputs_are_copied(m, wrap):
    x, y = _rand(1), _rand(2)
    xv = x.copy() if wrap == "numpy" else tvm.nd.array(x)
    m.set_input("x", xv)
    m.set_input(1, y.copy() if wrap == "numpy" else tvm.nd.array(y))
    if wrap == "numpy":
        xv[:] = 1e6  # the caller mutates its array after set_input
    else:
        xv[:] = np.full(N, 1e6, "float32")
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), x + y, rtol=1e-6)


def test_run_keyword_inputs_are_copied(m):
    x, y = _rand(3), _rand(4)
    xv = x.copy()
    m.run(x=xv, y=y)
    xv[:] = -5.0
    np.testing.assert_allclose(m.get_output(0).numpy(), x + y, rtol=1e-6)
    m.run()  # the executor's copy of x, not the mutated array
    np.testing.assert_allclose(m.get_output(0).numpy(), x + y, rtol=1e-6)


def test_strided_and_readonly_sources_are_accepted(m):
    big = np.random.default_rng(5).standard_normal(2 * N).astype("float32")
    strided = big[::2]  # right shape and dtype, not contiguous
    ro = _rand(6)
    ro.flags.writeable = False  # a read-only source is only read
    m.set_input("x", strided)
    m.set_input("y", ro)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), strided + ro, rtol=1e-6)


def test_ndarray_subclass_and_lists_take_the_general_path(m):
    class Sub(np.ndarray):
        pass
    x = _rand(7)
    m.set_input("x", x.view(Sub))
    m.set_input("y", [float(v) for v in _rand(8)])
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), x + _rand(8), rtol=1e-6)


@pytest.mark.parametrize("bad, what", [
    (np.zeros(N, "float64"), "dtype float64"),
    (np.zeros(N, ">f4"), "dtype >f4"),          # same kind, other byte order: refused as before
    (np.zeros(N + 1, "float32"), f"shape ({N + 1},)"),
    (np.zeros((1, N), "float32"), f"shape (1, {N})"),
    (np.zeros(N, "int32"), "dtype int32"),
])
def test_wrong_numpy_input_is_refused(m, bad, what):
    with pytest.raises(ArgumentError, match="input 'x'") as err:
        m.set_input("x", bad)
    assert what in str(err.value) and "float32" in str(err.value)
    with pytest.raises(ArgumentError, match="input 'x'"):
        m.run(x=bad)


def test_wrong_ndarray_input_is_refused(m):
    with pytest.raises(ArgumentError, match="dtype float64"):
        m.set_input("x", tvm.nd.array(np.zeros(N, "float64")))
    with pytest.raises(ArgumentError, match=r"shape \(3,\)"):
        m.set_input("x", tvm.nd.array(np.zeros(3, "float32")))


def test_bad_keys_are_refused(m):
    with pytest.raises(ArgumentError, match="no input named 'z'"):
        m.set_input("z", _rand())
    with pytest.raises(ArgumentError, match="out of range"):
        m.set_input(2, _rand())
    with pytest.raises(ArgumentError):
        m.set_input(True, _rand())
    with pytest.raises(ArgumentError, match="never received a value"):
        m.run()  # nothing set yet


def test_get_output_aliases_the_executor_array_and_numpy_copies(m):
    x, y = _rand(9), _rand(10)
    m.run(x=x, y=y)
    out = m.get_output(0)
    assert out is m.get_output(0) and out is m.get_output(-2)  # TVM: get_output returns the executor's array
    assert m.get_output(np.int64(1)) is m.get_output(1)
    first = out.numpy()
    first[:] = 0.0  # a copy: the executor's output is untouched
    np.testing.assert_allclose(m.get_output(0).numpy(), x + y, rtol=1e-6)
    m.run(x=y, y=y)
    np.testing.assert_allclose(out.numpy(), 2 * y, rtol=1e-6)  # the alias sees the new run
    np.testing.assert_allclose(m.get_output(1).numpy(), y)      # an output that is an input entry


def test_get_output_bad_index_and_out(m):
    m.run(x=_rand(), y=_rand())
    for bad in (2, -3):
        with pytest.raises(ArgumentError, match="out of range"):
            m.get_output(bad)
    for bad in (True, 0.0, "0"):
        with pytest.raises(ArgumentError, match="integer"):
            m.get_output(bad)
    ro = tvm.nd.from_dlpack(np.frombuffer(np.zeros(N, "float32").tobytes(), "float32"))
    with pytest.raises(ArgumentError, match="read-only"):
        m.get_output(0, ro)
    with pytest.raises(ArgumentError, match="kiln NDArray"):
        m.get_output(0, np.zeros(N, "float32"))
    with pytest.raises(KilnError, match="shape mismatch"):
        m.get_output(0, tvm.nd.empty((N + 1,), "float32"))
    with pytest.raises(DataTypeError, match="dtype mismatch"):
        m.get_output(0, tvm.nd.empty((N,), "float64"))
    out = tvm.nd.empty((N,), "float32")
    assert m.get_output(0, out) is out and out is not m.get_output(0)
    np.testing.assert_array_equal(out.numpy(), m.get_output(0).numpy())
    strided = tvm.nd.from_dlpack(np.zeros(2 * N, "float32")[::2])  # writable, not compact: copied into
    m.get_output(0, strided)
    np.testing.assert_array_equal(strided.numpy(), m.get_output(0).numpy())


def test_float16_and_int8_inputs_use_the_same_rules():
    for dtype, make in (("float16", lambda s: _rand(s, "float16")),
                        ("int8", lambda s: np.random.default_rng(s).integers(-9, 9, N).astype("int8"))):
        m = graph_executor.create(_graph(dtype), _lib(dtype), tvm.cpu(0))
        x, y = make(1), make(2)
        m.run(x=x, y=tvm.nd.array(y))
        np.testing.assert_array_equal(m.get_output(0).numpy(), (x + y).astype(dtype))
        with pytest.raises(ArgumentError, match=f"dtype {dtype}"):
            m.set_input("x", x.astype("float32" if dtype != "float32" else "float64"))


def test_share_params_refreshes_the_cached_inputs(lib):
    a = graph_executor.create(_graph(), lib, tvm.cpu(0))
    b = graph_executor.create(_graph(), lib, tvm.cpu(0))
    y = _rand(11)
    a.set_input("y", y)
    b.share_params(a.module, {"y": tvm.nd.array(y)})
    assert b.get_input("y") is a.get_input("y")
    new_y = _rand(12)
    b.set_input("y", new_y)  # written into the shared array, seen by both
    np.testing.assert_allclose(a.get_input("y").numpy(), new_y)
    x = _rand(13)
    a.run(x=x)
    b.run(x=x)
    np.testing.assert_allclose(b.get_output(0).numpy(), x + new_y, rtol=1e-6)
    np.testing.assert_allclose(a.get_output(0).numpy(), x + new_y, rtol=1e-6)


def test_relay_build_native_plan_path():
    """A relay.build library (native plan runner): the fast paths give numpy's results batch after batch."""
    rng = np.random.default_rng(0)
    x = relay.var("x", shape=(3, 33), dtype="float32")
    w = rng.standard_normal((17, 33)).astype("float32")
    b = rng.standard_normal(17).astype("float32")
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, relay.const(w)), relay.const(b)))
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(tvm.IRModule.from_expr(relay.Function([x], y)), target="llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    assert m.module._native is not None
    for seed in range(3):
        data = np.random.default_rng(seed).standard_normal((3, 33)).astype("float32")
        m.set_input("x", data if seed != 1 else tvm.nd.array(data))
        data_copy = data.copy()
        data[:] = np.nan  # mutated after set_input: not seen by the run
        m.run()
        got = m.get_output(0).numpy()
        np.testing.assert_allclose(got, np.maximum(data_copy @ w.T + b, 0), rtol=1e-5, atol=1e-5)
    with pytest.raises(ArgumentError, match="input 'x'"):
        m.set_input("x", np.zeros((3, 32), "float32"))


def test_nd_array_and_empty_metadata():
    for dtype in ("float32", "float16", "int8", "uint64", "bool"):
        src = np.random.default_rng(0).standard_normal((3, 5)).astype(dtype)
        a = tvm.nd.array(src)
        assert a.dtype == dtype and a.shape == (3, 5)
        assert a.data_ptr == a._arr.__array_interface__["data"][0] and a.data_ptr % 64 == 0
        np.testing.assert_array_equal(a.numpy(), src)
        before = src.copy()
        src[...] = 1 - src  # copied: the NDArray keeps the old values
        np.testing.assert_array_equal(a.numpy(), before)
        e = tvm.nd.empty((2, 3), dtype)
        assert e.dtype == dtype and e.data_ptr == e._arr.__array_interface__["data"][0] and e.data_ptr % 64 == 0
        assert e.is_writable and e.is_contiguous
    z = tvm.nd.array(np.zeros((0, 4), "float32"))
    assert z.shape == (0, 4) and z._lo == z._hi == 0
    s = tvm.nd.array(np.float32(2.5))
    assert s.shape == () and s.numpy() == np.float32(2.5)
    assert tvm.nd.array(src, dtype="float32").dtype == "float32"
    with pytest.raises(DataTypeError):
        tvm.nd.array(np.zeros(3, ">f4"))  # no kiln equivalent, checked every time (not cached)
    with pytest.raises(DataTypeError):
        tvm.nd.array(np.zeros(3, "complex64"))
    with pytest.raises(KilnError):
        tvm.nd.empty((2, -1), "float32")


def test_dtype_names_are_cached_consistently():
    assert _dtype_name(np.dtype("float32")) == "float32" == _dtype_name(np.dtype("=f4"))
    assert _dtype_name(np.dtype(np.bool_)) == "bool"
    assert _dtype_name(np.dtype(">f4")) == ">f4"  # not the native float32
    assert _dtype_name(np.dtype("float32")) == "float32"  # after the big-endian one: still float32
    assert NDArray(np.zeros(2, "int16")).dtype == "int16"
