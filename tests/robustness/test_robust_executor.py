"""The graph executor's user-facing checks: threads sharing one GraphModule get serialized, correct runs;
set_input with an unknown name warns (TVM skips it); run() before an input was set raises; load_params
whose names match nothing raises (partly matching: a warning naming the skipped ones)."""
import threading
import warnings

import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.contrib import graph_executor
from kiln.error import ArgumentError

SHAPE = (8, 64)


def _ref(x, w):
    h = np.maximum(x @ w.T, 0)
    return np.tanh(h + h.sum(axis=1, keepdims=True) * 0.01)


@pytest.fixture(scope="module")
def built():
    """A small graph with several kernels whose intermediates share storage (the plan reuses blocks)."""
    x = relay.var("x", shape=SHAPE, dtype="float32")
    w = relay.var("w", shape=(64, 64), dtype="float32")
    h = relay.nn.relu(relay.nn.dense(x, w))
    y = relay.tanh(h + relay.sum(h, axis=1, keepdims=True) * relay.const(0.01))
    wv = np.random.default_rng(0).standard_normal((64, 64)).astype("float32") * 0.1
    lib = relay.build(kiln.IRModule.from_expr(relay.Function([x, w], y)), target="llvm", params={"w": wv})
    return lib, wv


def _module(built):
    lib, _ = built
    return graph_executor.GraphModule(lib["default"](kiln.cpu()))


def test_threads_sharing_one_module_get_correct_results(built):
    m = _module(built)
    _, wv = built
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal(SHAPE).astype("float32") for _ in range(4)]
    errors = []

    def worker(k):
        for _ in range(25):
            with m.lock:  # the documented way to make set_input/run/get_output one step
                m.set_input("x", inputs[k])
                m.run()
                got = m.get_output(0).numpy()
            if not np.allclose(got, _ref(inputs[k], wv), rtol=1e-4, atol=1e-5):
                errors.append(k)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_concurrent_runs_are_serialized(built):
    """run() from a second thread waits while another thread holds the executor (no shared-buffer races)."""
    m = _module(built)
    m.set_input("x", np.ones(SHAPE, "float32"))
    done = threading.Event()

    def other():
        m.run()
        done.set()

    with m.lock:
        t = threading.Thread(target=other)
        t.start()
        assert not done.wait(0.3)  # blocked on the lock
    t.join(10)
    assert done.is_set()


def test_concurrent_runs_with_inputs_in_run_are_atomic(built):
    """run(x=...) sets the inputs and runs under one lock: concurrent calls never mix inputs; each output
    copied under the lock matches one of the inputs exactly."""
    m = _module(built)
    _, wv = built
    rng = np.random.default_rng(2)
    inputs = [rng.standard_normal(SHAPE).astype("float32") for _ in range(3)]
    refs = [_ref(x, wv) for x in inputs]
    bad = []

    def worker(k):
        out = kiln.nd.empty(SHAPE, "float32")
        for _ in range(20):
            with m.lock:
                m.run(x=inputs[k])
                m.get_output(0, out)
            if not np.allclose(out.numpy(), refs[k], rtol=1e-4, atol=1e-5):
                bad.append(k)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


def test_set_input_unknown_keyword_warns(built):
    m = _module(built)
    with pytest.warns(UserWarning, match="no input named 'X'"):
        m.set_input(X=np.ones(SHAPE, "float32"))
    with pytest.raises(ArgumentError, match="no input named 'X'"):
        m.set_input("X", np.ones(SHAPE, "float32"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m.set_input(x=np.ones(SHAPE, "float32"))  # a known name: silent


def test_run_before_input_set_raises(built):
    m = _module(built)
    with pytest.raises(ArgumentError, match="'x' never received a value"):
        m.run()
    m.set_input("x", np.zeros(SHAPE, "float32"))
    m.run()  # params came from the factory; x is now set


def test_run_before_input_set_raises_debug_executor(built):
    lib, _ = built
    from kiln.contrib.debugger import debug_executor
    m = debug_executor.create(lib.get_graph_json(), lib.get_lib(), kiln.cpu())
    with pytest.raises(ArgumentError, match="never received a value"):
        m.run()


def test_load_params_matching_nothing_raises(built):
    m = _module(built)
    (pname,) = built[0].get_params()  # relay.build names bound parameters p0, p1, ... as TVM does
    blob = relay.save_param_dict({"weight_typo": np.zeros((64, 64), "float32")})
    with pytest.raises(ArgumentError, match="none of the 1 parameters"):
        m.load_params(blob)
    partly = relay.save_param_dict({pname: np.zeros((64, 64), "float32"), "bias": np.zeros(3, "float32")})
    with pytest.warns(UserWarning, match="'bias'"):
        m.load_params(partly)
    m.set_input("x", np.ones(SHAPE, "float32"))
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), 0.0, atol=1e-6)  # the zero weight was loaded
