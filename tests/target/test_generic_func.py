"""kiln.target.generic_func: per-target-key dispatch (TVM's tvm.target.generic_func), and that a new target key
reaches relay.build's kernels through registrations alone."""
import numpy as np
import pytest

import kiln
from kiln import relay, topi
from kiln.error import ArgumentError
from kiln.target import Target, generic_func, get_native_generic_func, override_native_generic_func


def test_dispatch_follows_the_current_targets_keys_in_order():
    @generic_func
    def f(x):
        return ("default", x)

    @f.register(["cpu"])
    def f_cpu(x):
        return ("cpu", x)

    @f.register("wire_test_dev")
    def f_dev(x):
        return ("dev", x)

    assert f(1) == ("default", 1)  # no current target
    with Target("llvm"):
        assert f(2) == ("cpu", 2) and f.dispatch_key() == "cpu"
    with Target("llvm -keys=wire_test_dev,cpu"):
        assert f(3) == ("dev", 3)
    with Target("llvm -keys=cpu,wire_test_dev"):
        assert f(4) == ("cpu", 4)
    with Target("cuda"):
        assert f(5) == ("default", 5) and f.dispatch(Target("llvm")) is f_cpu
    assert f.fdefault(6) == ("default", 6) and f.__name__ == "f"


def test_double_registration_is_an_error_unless_override():
    @generic_func
    def g():
        return 0
    g.register("cpu", lambda: 1)
    with pytest.raises(ArgumentError, match="already registered"):
        g.register("cpu", lambda: 2)
    g.register("cpu", lambda: 3, override=True)
    with Target("llvm"):
        assert g() == 3


def test_native_generic_func_is_filed_by_name():
    @override_native_generic_func("wire_test_strategy")
    def s():
        return "a"
    s.register("cpu", lambda: "cpu")

    @override_native_generic_func("wire_test_strategy")
    def s2():  # a second definition replaces the default and keeps the registrations
        return "b"
    assert s2 is s and get_native_generic_func("wire_test_strategy") is s and s() == "b"
    with Target("llvm"):
        assert s() == "cpu"
    with pytest.raises(ArgumentError, match="no generic function named"):
        get_native_generic_func("wire_test_missing")


def test_a_new_target_key_gets_its_schedule_through_relay_build():
    """The 'new target' walkthrough of docs/architecture.md: a schedule registered for a key is used by every
    injective op compiled for a target with that key (and by nothing else)."""
    calls = []

    def schedule_injective_dev(outs):
        calls.append(len(outs))
        return topi.generic.schedule_injective.fdefault(outs)

    topi.generic.schedule_injective.register("wire_test_dev", schedule_injective_dev)
    try:
        x = relay.var("x", shape=(3, 5))
        mod = kiln.IRModule.from_expr(relay.Function([x], relay.exp(relay.add(x, relay.const(1.0)))))
        lib = relay.build(mod, target="llvm -keys=wire_test_dev,cpu")
        assert calls and [c.implementation for c in lib.lowered] == ["add.wire_test_dev"]  # the anchor: broadcast > elemwise
        from kiln.contrib import graph_executor
        gm = graph_executor.GraphModule(lib["default"](kiln.cpu()))
        data = np.random.default_rng(0).uniform(-1, 1, (3, 5)).astype("float32")
        gm.set_input("x", data)
        gm.run()
        np.testing.assert_allclose(gm.get_output(0).numpy(), np.exp(data + 1), rtol=1e-5)
        calls.clear()
        relay.build(mod, target="llvm")
        assert not calls
    finally:
        del topi.generic.schedule_injective.dispatch_dict["wire_test_dev"]
