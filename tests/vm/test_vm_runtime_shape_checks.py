"""Kernels over unknown extents check at run time what type inference could not: operands that must broadcast
(equal or 1) and a reduction size two operands share. A call that breaks one fails with a clear error instead of
reading out of bounds or returning a wrong number. The kernel's assertion is the only check: its message names the
operation, the condition and the extents the call had, on every executor path (the VM's replayed straight-line
functions, its general dispatch loop, the native plan runner, the graph executor)."""
import numpy as np
import pytest

import kiln
from kiln import relay, te
from kiln.error import ArgumentError, KilnError
from kiln.runtime.vm import VirtualMachine

ANY = relay.Any


def _vm(func, path="replay"):
    mod = kiln.IRModule.from_expr(func)
    exe = relay.vm.compile(mod, target="llvm")
    vm = VirtualMachine(exe, kiln.cpu())
    if path == "dispatch":  # the general dispatch loop instead of the straight-line replay (vm_replay.py)
        vm._replay = [None] * len(vm._replay)
    return vm


PATHS = pytest.mark.parametrize("path", ["replay", "dispatch"])


@PATHS
def test_broadcast_add_of_two_unknown_dims_checks_at_run_time(path):
    a = relay.var("a", shape=(ANY(), 4))
    b = relay.var("b", shape=(ANY(), 4))
    vm = _vm(relay.Function([a, b], a + b), path)
    rng = np.random.default_rng(0)
    for sa, sb in [((3, 4), (3, 4)), ((3, 4), (1, 4)), ((1, 4), (5, 4))]:
        x, y = rng.standard_normal(sa).astype("float32"), rng.standard_normal(sb).astype("float32")
        np.testing.assert_allclose(vm.invoke("main", x, y).numpy(), x + y, rtol=1e-6)
    with pytest.raises(ArgumentError, match=r"fused_add: add: operands of shapes \(3, 4\) and \(2, 4\) do not "
                       r"broadcast: dimension 0 is 3 in one and 2 in the other \(must be equal or 1\)"):
        vm.invoke("main", np.ones((3, 4), "float32"), np.ones((2, 4), "float32"))
    x = rng.standard_normal((5, 4)).astype("float32")
    np.testing.assert_allclose(vm.invoke("main", x, x[:1]).numpy(), x + x[:1], rtol=1e-6)  # still usable


@PATHS
def test_unknown_dim_against_a_static_one_checks_at_run_time(path):
    # (?,) + (3,) is (3,): the unknown extent must be 1 or 3 at run time
    a = relay.var("a", shape=(ANY(),))
    b = relay.var("b", shape=(3,))
    vm = _vm(relay.Function([a, b], a * b), path)
    y = np.arange(3, dtype="float32")
    for n in (1, 3):
        x = np.full(n, 2.0, "float32")
        np.testing.assert_array_equal(vm.invoke("main", x, y).numpy(), x * y)
    with pytest.raises(ArgumentError, match=r"multiply: operands of shapes \(5,\) and \(3,\) do not broadcast: "
                                            r"dimension 0 is 5 in one and 3 in the other"):
        vm.invoke("main", np.ones(5, "float32"), y)


@PATHS
def test_where_of_three_unknown_dims_checks_at_run_time(path):
    c = relay.var("c", shape=(ANY(),), dtype="bool")
    a = relay.var("a", shape=(ANY(),))
    b = relay.var("b", shape=(ANY(),))
    vm = _vm(relay.Function([c, a, b], relay.where(c, a, b)), path)
    rng = np.random.default_rng(1)
    cond = rng.random(7) > 0.5
    x, y = rng.standard_normal(7).astype("float32"), rng.standard_normal(1).astype("float32")
    np.testing.assert_array_equal(vm.invoke("main", cond, x, y).numpy(), np.where(cond, x, y))
    with pytest.raises(ArgumentError, match=r"where: operands of shapes \(7,\), \(7,\) and \(6,\) do not broadcast: "
                                            r"dimension 0 is 7, 7 and 6 in the operands"):
        vm.invoke("main", cond, x, np.ones(6, "float32"))
    with pytest.raises(ArgumentError, match=r"shapes \(2,\), \(7,\) and \(1,\) .* is 2, 7 and 1 in the operands"):
        vm.invoke("main", cond[:2], x, y)


@PATHS
def test_batch_matmul_unknown_reduction_and_batch(path):
    # (?, ?, 64) x (?, ?, 16) without transpose_b: K is 64 against an unknown; type inference accepts it
    a = relay.var("a", shape=(ANY(), ANY(), 64))
    b = relay.var("b", shape=(ANY(), ANY(), 16))
    func = relay.Function([a, b], relay.nn.batch_matmul(a, b, transpose_b=False))
    mod = relay.transform.InferType()(kiln.IRModule.from_expr(func))
    assert str(mod["main"].ret_type) == "Tensor[(?, ?, 16), float32]"
    vm = _vm(func, path)
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((3, 5, 64)).astype("float32"), rng.standard_normal((3, 64, 16)).astype("float32")
    np.testing.assert_allclose(vm.invoke("main", x, y).numpy(), x @ y, rtol=1e-4, atol=1e-4)
    x1 = x[:1]
    np.testing.assert_allclose(vm.invoke("main", x1, y).numpy(), x1 @ y, rtol=1e-4, atol=1e-4)
    with pytest.raises(ArgumentError, match=r"reduction \(K\): the operands' sizes differ at run time: 64 in one "
                                            r"and 32 in the other \(must be equal\)"):
        vm.invoke("main", x, rng.standard_normal((3, 32, 16)).astype("float32"))
    with pytest.raises(ArgumentError, match=r"batch.* dimension 0 is 3 in one and 2 in the other"):
        vm.invoke("main", x, rng.standard_normal((2, 64, 16)).astype("float32"))


@PATHS
def test_broadcast_to_from_an_unknown_dim_through_the_vm(path):
    x = relay.var("x", shape=(ANY(), 5))
    vm = _vm(relay.Function([x], relay.broadcast_to(x, (4, 5))), path)
    v = np.arange(5, dtype="float32")[None]
    np.testing.assert_array_equal(vm.invoke("main", v).numpy(), np.broadcast_to(v, (4, 5)))
    with pytest.raises(ArgumentError, match=r"broadcast_to: shape \(3, 5\) does not broadcast to \(4, 5\): "
                                            r"dimension 0 is 3 in the input and 4 in the target shape"):
        vm.invoke("main", np.ones((3, 5), "float32"))


def _take_raise_model():
    x = relay.var("x", shape=(ANY(), 4))
    i = relay.var("i", shape=(ANY(),), dtype="int64")
    y = relay.take(relay.exp(x) * relay.const(2.0), i, axis=0, mode="raise")
    return relay.Function([x, i], relay.nn.relu(relay.sum(y, axis=1)))


def test_native_plan_runner_reports_the_kernels_check():
    """A check on data (an index out of range), so it fails inside a recorded plan's native call sequence."""
    vm = _vm(_take_raise_model())
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 4)).astype("float32")
    ok = np.array([0, 5, -1], "int64")
    want = np.maximum((2 * np.exp(x))[ok].sum(axis=1), 0)
    for _ in range(2):
        np.testing.assert_allclose(vm.invoke("main", x, ok).numpy(), want, rtol=1e-5)
    plans = vm._replay[vm.exe.func_index["main"]].plans
    assert any(st[0] == "native" for p in plans.values() for st in p.steps)
    with pytest.raises(ArgumentError, match=r"take: index 6 is out of range for an axis of size 6"):
        vm.invoke("main", x, np.array([0, 6, 1], "int64"))
    with pytest.raises(ArgumentError, match=r"take: index -7 is out of range for an axis of size 6"):
        vm.invoke("main", x, np.array([-7, 0, 1], "int64"))
    np.testing.assert_allclose(vm.invoke("main", x, ok).numpy(), want, rtol=1e-5)


def test_graph_executor_reports_the_kernels_check():
    from kiln.contrib import graph_executor
    x = relay.var("x", shape=(6, 4))
    i = relay.var("i", shape=(3,), dtype="int64")
    mod = kiln.IRModule.from_expr(relay.Function([x, i], relay.take(x, i, axis=0, mode="raise") * relay.const(2.0)))
    g = graph_executor.GraphModule(relay.build(mod, target="llvm")["default"](kiln.cpu()))
    xv = np.arange(24, dtype="float32").reshape(6, 4)
    g.set_input("x", xv)
    g.set_input("i", np.array([1, -1, 0], "int64"))
    g.run()
    np.testing.assert_array_equal(g.get_output(0).numpy(), 2 * xv[[1, -1, 0]])
    g.set_input("i", np.array([1, 9, 0], "int64"))
    with pytest.raises(ArgumentError, match=r"take: index 9 is out of range for an axis of size 6 \(valid: -6..5\)"):
        g.run()


def test_batch_matmul_type_relation_with_any():
    a = relay.var("a", shape=(ANY(), 5, 8))
    b = relay.var("b", shape=(3, 7, 8))
    mod = relay.transform.InferType()(kiln.IRModule.from_expr(relay.Function([a, b], relay.nn.batch_matmul(a, b))))
    assert str(mod["main"].ret_type) == "Tensor[(3, 5, 7), float32]"
    c = relay.var("c", shape=(2, 5, 8))
    with pytest.raises(Exception, match="batch sizes"):
        relay.transform.InferType()(kiln.IRModule.from_expr(relay.Function([c, b], relay.nn.batch_matmul(c, b))))
    d = relay.var("d", shape=(3, 5, 9))
    with pytest.raises(Exception, match="reduction"):
        relay.transform.InferType()(kiln.IRModule.from_expr(relay.Function([d, b], relay.nn.batch_matmul(d, b))))


def test_te_broadcast_over_two_vars_checks_at_run_time():
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((m,), name="B")
    C = A + B
    f = kiln.build(te.create_schedule(C.op), [A, B, C], target="llvm")
    x, y = np.arange(5, dtype="float32"), np.ones(1, "float32")
    out = kiln.nd.empty((5,), "float32")
    f(kiln.nd.array(x), kiln.nd.array(y), out)
    np.testing.assert_array_equal(out.numpy(), x + 1)
    with pytest.raises(KilnError, match=r"add: operands of shapes \(5,\) and \(4,\) do not broadcast: dimension 0 "
                                        r"is 5 in one and 4 in the other"):
        f(kiln.nd.array(x), kiln.nd.array(np.ones(4, "float32")), kiln.nd.empty((5,), "float32"))


def test_broadcast_to_one_from_an_unknown_dim_is_checked_at_run_time():
    # (?,) -> (1,) is fine when ? is 1 at run time; any other size fails the kernel's check (no silent read)
    from kiln import topi
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = topi.broadcast_to(A, (1,))
    f = kiln.build(te.create_schedule(B.op), [A, B], target="llvm")
    out = kiln.nd.empty((1,), "float32")
    f(kiln.nd.array(np.array([2.5], "float32")), out)
    assert out.numpy()[0] == 2.5
    with pytest.raises(KilnError, match=r"shape \(3,\) does not broadcast to \(1,\): dimension 0 is 3 in the input"):
        f(kiln.nd.array(np.ones(3, "float32")), kiln.nd.empty((1,), "float32"))


def test_broadcast_to_an_unknown_dim_from_a_static_one_is_checked_at_run_time():
    from kiln import topi
    n = te.var("n")
    A = te.placeholder((3,), name="A")
    B = topi.broadcast_to(A, (n,))
    f = kiln.build(te.create_schedule(B.op), [A, B], target="llvm")
    out = kiln.nd.empty((3,), "float32")
    f(kiln.nd.array(np.arange(3, dtype="float32")), out)
    np.testing.assert_array_equal(out.numpy(), np.arange(3))
    with pytest.raises(KilnError, match=r"dimension 0 is 3 in the input and 5 in the target shape"):
        f(kiln.nd.array(np.ones(3, "float32")), kiln.nd.empty((5,), "float32"))


def test_assert_message_in_the_tir_interpreter_and_source():
    from kiln import tir
    from kiln.tir.assert_message import assert_message
    n = tir.Var("n", "int32")
    msg = assert_message("n is {} (must be below 4, %d literal)", n)
    body = tir.AssertStmt(n < 4, msg, tir.Evaluate(tir.const(0, "int32")))
    f = tir.PrimFunc([n], body).with_attr("global_symbol", "check_n")
    from kiln.tir.interpreter import InterpreterError, run_primfunc
    run_primfunc(f, [3])
    with pytest.raises(InterpreterError, match=r"n is 7 \(must be below 4, %d literal\)"):
        run_primfunc(f, [7])
    m = kiln.build(f, target="llvm")
    m["check_n"](3)
    with pytest.raises(ArgumentError, match=r"check_n: n is 7 \(must be below 4, %d literal\)"):
        m["check_n"](7)

