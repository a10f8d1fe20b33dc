"""VirtualMachine.invoke / set_input: the fast conversion of arguments that are numpy arrays or compact NDArrays of
their parameter's static shape and exact dtype gives the general path's results and refusals."""
import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.error import ArgumentError
from kiln.runtime import vm as rvm

rng = np.random.default_rng(3)
W = rng.standard_normal((5, 9)).astype("float32")


def _ref(x, y):
    return np.maximum(x @ W.T, 0) + y


@pytest.fixture(scope="module")
def vm():
    x = relay.var("x", shape=(3, 9), dtype="float32")
    y = relay.var("y", shape=(3, 5), dtype="float32")
    out = relay.nn.relu(relay.nn.dense(x, relay.const(W))) + y
    exe = relay.vm.compile(tvm.IRModule.from_expr(relay.Function([x, y], out)), "llvm")
    return rvm.VirtualMachine(exe, tvm.cpu())


def _xy(seed):
    r = np.random.default_rng(seed)
    return r.standard_normal((3, 9)).astype("float32"), r.standard_normal((3, 5)).astype("float32")


def test_numpy_and_ndarray_arguments(vm):
    for seed in range(3):
        x, y = _xy(seed)
        got = vm.invoke("main", x, tvm.nd.array(y) if seed == 1 else y)
        np.testing.assert_allclose(got.numpy(), _ref(x, y), rtol=1e-5, atol=1e-5)
    x, y = _xy(4)
    np.testing.assert_allclose(vm.invoke("main", x=x, y=y).numpy(), _ref(x, y), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(vm.run(x, y=y).numpy(), _ref(x, y), rtol=1e-5, atol=1e-5)


def test_results_are_not_overwritten_by_later_calls(vm):
    x, y = _xy(5)
    first = vm.invoke("main", x, y)
    keep = first.numpy()
    x2, y2 = _xy(6)
    second = vm.invoke("main", x2, y2)
    np.testing.assert_array_equal(first.numpy(), keep)
    np.testing.assert_allclose(second.numpy(), _ref(x2, y2), rtol=1e-5, atol=1e-5)


def test_set_input_copies_numpy_arrays(vm):
    x, y = _xy(7)
    xv, yv = x.copy(), y.copy()
    vm.set_input("main", xv, yv)
    xv[:] = np.nan  # mutated after set_input: the VM holds its own copy
    yv[:] = np.nan
    vm.invoke_stateful("main")
    np.testing.assert_allclose(vm.get_outputs()[0].numpy(), _ref(x, y), rtol=1e-5, atol=1e-5)


def test_strided_numpy_and_strided_ndarray(vm):
    x, y = _xy(8)
    big = np.zeros((3, 18), "float32")
    big[:, ::2] = x
    strided = big[:, ::2]  # right shape and dtype, not contiguous: copied into a compact buffer
    np.testing.assert_allclose(vm.invoke("main", strided, y).numpy(), _ref(x, y), rtol=1e-5, atol=1e-5)
    view = tvm.nd.from_dlpack(big[:, ::2])
    assert not view.is_contiguous  # an NDArray a kernel cannot take: the general path copies it
    np.testing.assert_allclose(vm.invoke("main", view, y).numpy(), _ref(x, y), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bad, match", [
    (np.zeros((3, 9), "float64"), "dtype float32"),
    (np.zeros((3, 9), ">f4"), "dtype float32"),
    (np.zeros((3, 8), "float32"), r"shape \(3, 9\)"),
    (np.zeros((1, 3, 9), "float32"), r"shape \(3, 9\)"),
])
def test_wrong_arguments_are_refused(vm, bad, match):
    y = _xy(9)[1]
    with pytest.raises(ArgumentError, match=match):
        vm.invoke("main", bad, y)
    with pytest.raises(ArgumentError, match=match):
        vm.invoke("main", tvm.nd.array(bad) if bad.dtype.isnative else bad, y)


def test_wrong_arity_and_names(vm):
    x, y = _xy(10)
    with pytest.raises(ArgumentError, match="takes 2 arguments"):
        vm.invoke("main", x, y, y)
    with pytest.raises(ArgumentError, match="missing input 'y'"):
        vm.invoke("main", x)
    with pytest.raises(ArgumentError, match="unknown inputs"):
        vm.invoke("main", x, y=y, z=y)


def test_dynamic_parameter_takes_the_general_path():
    x = relay.var("x", shape=(relay.Any(), 4), dtype="float32")
    exe = relay.vm.compile(tvm.IRModule.from_expr(relay.Function([x], relay.nn.relu(x) * relay.const(2.0))),
                           "llvm")
    machine = rvm.VirtualMachine(exe, tvm.cpu())
    for n in (1, 5, 2):
        data = np.random.default_rng(n).standard_normal((n, 4)).astype("float32")
        np.testing.assert_allclose(machine.invoke("main", data).numpy(), np.maximum(data, 0) * 2, rtol=1e-6)
    with pytest.raises(ArgumentError):
        machine.invoke("main", np.zeros((2, 3), "float32"))


def test_reshaped_input_views_per_call():
    """A dynamic reshape of an input is a per-call view in the replay plan (its address taken from the source when
    that is a compact writable tensor, asked of numpy otherwise): results follow the input call after call."""
    x = relay.var("x", shape=(relay.Any(), 6), dtype="float32")
    w = rng.standard_normal((4, 3)).astype("float32")
    out = relay.nn.dense(relay.reshape(x, (-1, 3)), relay.const(w))  # the reshape does not fuse into dense
    machine = rvm.VirtualMachine(relay.vm.compile(tvm.IRModule.from_expr(relay.Function([x], out)), "llvm"),
                                 tvm.cpu())
    for seed in range(4):
        data = np.random.default_rng(seed).standard_normal((5, 6)).astype("float32")
        arg = data if seed != 2 else tvm.nd.from_dlpack(np.frombuffer(data.tobytes(), "float32").reshape(5, 6))
        assert seed != 2 or not arg.is_writable  # read-only input: the view is made the general way
        np.testing.assert_allclose(machine.invoke("main", arg).numpy(), data.reshape(10, 3) @ w.T, rtol=1e-5,
                                   atol=1e-5)
    plans = [p for r in machine._replay if r is not None for p in r.plans.values()]
    assert any(st[0] == "view" for p in plans for st in p.prologue)
