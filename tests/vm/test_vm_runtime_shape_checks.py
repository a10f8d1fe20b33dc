"""Kernels over unknown extents check at run time what type inference could not: operands that must broadcast
(equal or 1) and a reduction size two operands share. A call that breaks one fails with a clear error instead of
reading out of bounds or returning a wrong number."""
import numpy as np
import pytest

import kiln
from kiln import relay, te
from kiln.error import KilnError
from kiln.runtime.vm import VirtualMachine

ANY = relay.Any


def _vm(func):
    mod = kiln.IRModule.from_expr(func)
    exe = relay.vm.compile(mod, target="llvm")
    return VirtualMachine(exe, kiln.cpu())


def test_broadcast_add_of_two_unknown_dims_checks_at_run_time():
    a = relay.var("a", shape=(ANY(), 4))
    b = relay.var("b", shape=(ANY(), 4))
    vm = _vm(relay.Function([a, b], a + b))
    rng = np.random.default_rng(0)
    for sa, sb in [((3, 4), (3, 4)), ((3, 4), (1, 4)), ((1, 4), (5, 4))]:
        x, y = rng.standard_normal(sa).astype("float32"), rng.standard_normal(sb).astype("float32")
        np.testing.assert_allclose(vm.invoke("main", x, y).numpy(), x + y, rtol=1e-6)
    with pytest.raises(KilnError, match="do not broadcast"):
        vm.invoke("main", np.ones((3, 4), "float32"), np.ones((2, 4), "float32"))


def test_where_of_three_unknown_dims_checks_at_run_time():
    c = relay.var("c", shape=(ANY(),), dtype="bool")
    a = relay.var("a", shape=(ANY(),))
    b = relay.var("b", shape=(ANY(),))
    vm = _vm(relay.Function([c, a, b], relay.where(c, a, b)))
    rng = np.random.default_rng(1)
    cond = rng.random(7) > 0.5
    x, y = rng.standard_normal(7).astype("float32"), rng.standard_normal(1).astype("float32")
    np.testing.assert_array_equal(vm.invoke("main", cond, x, y).numpy(), np.where(cond, x, y))
    with pytest.raises(KilnError, match="do not broadcast"):
        vm.invoke("main", cond, x, np.ones(6, "float32"))


def test_batch_matmul_unknown_reduction_and_batch():
    # (?, ?, 64) x (?, ?, 16) without transpose_b: K is 64 against an unknown; type inference accepts it
    a = relay.var("a", shape=(ANY(), ANY(), 64))
    b = relay.var("b", shape=(ANY(), ANY(), 16))
    func = relay.Function([a, b], relay.nn.batch_matmul(a, b, transpose_b=False))
    mod = relay.transform.InferType()(kiln.IRModule.from_expr(func))
    assert str(mod["main"].ret_type) == "Tensor[(?, ?, 16), float32]"
    vm = _vm(func)
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((3, 5, 64)).astype("float32"), rng.standard_normal((3, 64, 16)).astype("float32")
    np.testing.assert_allclose(vm.invoke("main", x, y).numpy(), x @ y, rtol=1e-4, atol=1e-4)
    x1 = x[:1]
    np.testing.assert_allclose(vm.invoke("main", x1, y).numpy(), x1 @ y, rtol=1e-4, atol=1e-4)
    with pytest.raises(KilnError, match="reduction"):
        vm.invoke("main", x, rng.standard_normal((3, 32, 16)).astype("float32"))
    with pytest.raises(KilnError, match="batch"):
        vm.invoke("main", x, rng.standard_normal((2, 64, 16)).astype("float32"))


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
    with pytest.raises(KilnError, match="do not broadcast"):
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
    with pytest.raises(KilnError, match="do not broadcast"):
        f(kiln.nd.array(np.ones(3, "float32")), kiln.nd.empty((1,), "float32"))
