"""The VM compiler computes a value the program shares once (a DAG is not unfolded into a tree), and keeps
values computed inside a branch out of the other branch and of the code after the If."""
import numpy as np

import kiln as tvm
from kiln import relay
from kiln.runtime.vm import VirtualMachine


def test_shared_values_are_computed_once():
    x = relay.var("x", shape=(2, 3))
    w, w2 = relay.var("w", shape=(3, 3)), relay.var("w2", shape=(3, 3))
    y = x
    for _ in range(10):  # each level uses the previous one twice: 2**10 copies if unfolded
        y = relay.nn.dense(y, w) + relay.nn.dense(y, w2)
    exe = relay.vm.compile(tvm.IRModule.from_expr(relay.Function([x, w, w2], y)), "llvm")
    calls = [ins for f in exe.functions for ins in f.instructions if ins[0] == "invoke_packed"]
    assert len(calls) <= 30, len(calls)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3)).astype("float32")
    b, c = (rng.standard_normal((3, 3)).astype("float32") * 0.3 for _ in range(2))
    expect = a
    for _ in range(10):
        expect = expect @ b.T + expect @ c.T
    got = VirtualMachine(exe, tvm.cpu()).run(a, b, c).numpy()
    np.testing.assert_allclose(got, expect, rtol=1e-4, atol=1e-5)


def test_value_first_computed_in_a_branch_is_recomputed_after_it():
    x = relay.var("x", shape=(3,))
    c = relay.var("c", shape=(), dtype="bool")
    shared = relay.exp(x)
    body = relay.If(c, shared * relay.const(2.0), x) + shared  # `shared` first appears in the true branch
    exe = relay.vm.compile(tvm.IRModule.from_expr(relay.Function([x, c], body)), "llvm")
    vm = VirtualMachine(exe, tvm.cpu())
    a = np.array([0.5, -1.0, 2.0], "float32")
    np.testing.assert_allclose(vm.run(a, np.array(True)).numpy(), 3 * np.exp(a), rtol=1e-6)
    np.testing.assert_allclose(vm.run(a, np.array(False)).numpy(), a + np.exp(a), rtol=1e-6)
