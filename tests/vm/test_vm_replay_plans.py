"""The VM's per-signature replay plans (kiln/runtime/vm_replay.py): values fixed by the input shapes are
computed once per plan, shape functions over such values are skipped, per-call tensors are patched into
prepared argument arrays; every shortcut must give the results of the general dispatch loop, across
alternating shapes and changing data."""
from __future__ import annotations

import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.runtime.vm_replay import data_dependent_regs
from relay_exec_util import vm_of

A = relay.Any()
rng = np.random.default_rng(11)


def _plan(vm, *arrays):
    runner = vm._replay[vm.exe.func_index["main"]]
    return runner.plans[tuple((a.shape, str(a.dtype)) for a in arrays)]


def _dim(x, axis):
    return relay.take(relay.shape_of(x, "int64"), relay.const(axis, "int64"), axis=0)


def _rows(x):
    """float(x.shape[0]) as a (1,)-tensor through kernels of its own (arange is never fused)."""
    n = _dim(x, 0)
    return relay.cast(relay.arange(n, n + relay.const(1, "int64"), relay.const(1, "int64"), dtype="int64"), "float32")


def test_shape_derived_values_are_computed_once_per_signature():
    # BERT's position ids: arange(seq) from the input's shape (a data-dependent shape function whose operand
    # depends on shapes only), added to the data
    x = relay.var("x", shape=(A, A))
    pos = relay.arange(relay.const(0, "int64"), _dim(x, 1), relay.const(1, "int64"), dtype="int64")
    mod = kiln.IRModule.from_expr(relay.Function([x], x * relay.const(2.0) + relay.cast(pos, "float32")))
    vm = vm_of(mod, opt_level=3)
    shapes = [(2, 5), (2, 5), (3, 7), (2, 5), (3, 7), (3, 7), (1, 1)]
    xs = [rng.standard_normal(s).astype("float32") for s in shapes]
    outs = [vm.run(a) for a in xs]
    for a, o in zip(xs, outs):
        np.testing.assert_allclose(o.numpy(), a * 2 + np.arange(a.shape[1], dtype="float32"), rtol=1e-6, atol=1e-6)
    plan = _plan(vm, xs[0])
    assert plan.precomputed >= 1 and plan.skipped_shape_funcs >= 1
    assert all(st[0] != "shape_func" for st in plan.steps)


def test_equal_shaped_shape_values_of_two_signatures_do_not_share_a_buffer():
    # n = float(x.shape[0]) is a (1,)-tensor at every size: the runner's per-instruction memory reuses its
    # buffer for the next signature, so a plan that computed it once must own a private copy
    x = relay.var("x", shape=(A, 4))
    mod = kiln.IRModule.from_expr(relay.Function([x], relay.Tuple([x * _rows(x), _rows(x) + relay.const(0.5)])))
    vm = vm_of(mod, opt_level=3)
    xs = [rng.standard_normal((k, 4)).astype("float32") for k in (3, 5, 3, 5, 5, 3, 2, 3)]
    outs = [vm.run(a) for a in xs]  # every result kept: results escaping to the caller are fresh each call
    for a, o in zip(xs, outs):
        np.testing.assert_array_equal(o[0].numpy(), a * np.float32(a.shape[0]))
        np.testing.assert_array_equal(o[1].numpy(), np.array([a.shape[0] + 0.5], "float32"))


def test_inputs_changed_in_place_are_read_again():
    x = relay.var("x", shape=(A, 8))
    y = relay.var("y", shape=(A, 8))
    mod = kiln.IRModule.from_expr(relay.Function([x, y], relay.nn.relu(x) * y + relay.const(1.0)))
    vm = vm_of(mod, opt_level=3)
    a = kiln.nd.array(rng.standard_normal((4, 8)).astype("float32"))
    b = kiln.nd.array(rng.standard_normal((4, 8)).astype("float32"))
    vm.set_input("main", a, b)
    for _ in range(3):
        vm.invoke_stateful("main")
        np.testing.assert_allclose(vm.get_outputs()[0].numpy(), np.maximum(a.numpy(), 0) * b.numpy() + 1,
                                   rtol=1e-6, atol=1e-6)
        a.copyfrom(rng.standard_normal((4, 8)).astype("float32"))  # same object, new values
        b.copyfrom(rng.standard_normal((4, 8)).astype("float32"))
    plan = _plan(vm, a, b)
    assert len(plan.patches) >= 2 and [st[0] for st in plan.steps] in (["native"], ["kernels"])


def test_data_dependent_shape_functions_still_run_each_call():
    x = relay.var("x", shape=(A, 8))
    n = relay.var("n", shape=(1,), dtype="int64")
    y = relay.strided_slice(x, relay.const(np.array([0], "int64"), dtype="int64"), n,
                            relay.const(np.array([1], "int64"), dtype="int64"))
    mod = kiln.IRModule.from_expr(relay.Function([x, n], y * relay.const(3.0)))
    vm = vm_of(mod, opt_level=3)
    a = rng.standard_normal((6, 8)).astype("float32")
    for k in (4, 4, 2, 2, 6, 4):
        np.testing.assert_array_equal(vm.run(a, np.array([k], "int64")).numpy(), a[:k] * 3)
    plan = _plan(vm, a, np.array([4], "int64"))
    assert any(st[0] == "shape_func" for st in plan.steps) and plan.skipped_shape_funcs == 0


def test_data_dependence_analysis():
    x = relay.var("x", shape=(A, 4))
    mod = kiln.IRModule.from_expr(relay.Function([x], x * _rows(x)))
    vm = vm_of(mod, opt_level=3)
    f = vm.exe.functions[vm.exe.func_index["main"]]
    dep = data_dependent_regs(f, vm._kernels, 1)
    calls = [ins for ins in f.instructions if ins[0] == "invoke_packed"]
    # the kernels computing the row count read shapes only; the multiply reads x
    flags = [any(r in dep for r in ins[2]) for ins in calls]
    assert flags[-1] and not any(flags[:-1]) and len(flags) >= 3
    a = rng.standard_normal((3, 4)).astype("float32")
    vm.run(a)
    plan = _plan(vm, a)
    assert plan.precomputed == len(flags) - 1 and plan.skipped_shape_funcs == 1


def test_plan_outputs_match_the_instruction_by_instruction_run():
    x = relay.var("x", shape=(A, 16))
    w = relay.const(rng.standard_normal((8, 16)).astype("float32"))
    pos = relay.cast(relay.arange(relay.const(0, "int64"), relay.const(8, "int64") + _dim(x, 0) * relay.const(0, "int64"),
                                  relay.const(1, "int64"), dtype="int64"), "float32")
    mod = kiln.IRModule.from_expr(relay.Function([x], relay.nn.softmax(relay.nn.dense(x, w) + pos)))
    vm = vm_of(mod, opt_level=3)
    runner = vm._replay[0]
    for k in (3, 5, 3, 3, 5):
        a = kiln.nd.array(rng.standard_normal((k, 16)).astype("float32"))
        planned = vm.run(a).numpy()
        direct, _ = runner._run([a])  # the per-instruction path the plans were recorded from
        np.testing.assert_array_equal(planned, direct.numpy())
    assert len(runner.plans) == 2


def test_int32_shape_variables_refuse_extents_that_overflow():
    # kernels index unknown dims with int32 variables (as the static build); an extent past 2**31 - 1 is
    # refused with a clear error (a 0 x 2**31 array holds no bytes, so this needs no memory)
    from kiln.error import KilnError
    from kiln.relay.backend.vm.lower import SHAPE_VAR_DTYPE
    assert SHAPE_VAR_DTYPE == "int32"
    x = relay.var("x", shape=(A, A))
    vm = vm_of(kiln.IRModule.from_expr(relay.Function([x], relay.nn.relu(x) * relay.const(2.0))), opt_level=3)
    np.testing.assert_array_equal(vm.run(np.ones((2, 3), "float32")).numpy(), np.full((2, 3), 2, "float32"))
    try:
        vm.run(np.empty((0, 2 ** 31), "float32"))
    except KilnError as err:
        assert "2147483647" in str(err) or "int32" in str(err) or "fit" in str(err), str(err)
    else:
        raise AssertionError("an extent of 2**31 was accepted by an int32-indexed kernel")


def _root(t):
    base = t._arr
    while getattr(base, "base", None) is not None:
        base = base.base
    return id(base)


def test_intermediates_share_planned_storage():
    # a chain of kernels that are not fused together (softmax / dense anchors), at alternating sizes: a plan
    # gives intermediates whose lifetimes do not overlap the same buffer (storage planning per signature), the
    # results stay right with kept results and reshaped views, and no two live tensors overlap
    x = relay.var("x", shape=(A, 24))
    w1 = relay.const(rng.standard_normal((32, 24)).astype("float32"))
    w2 = relay.const(rng.standard_normal((24, 32)).astype("float32"))
    h = x
    for _ in range(3):
        h = relay.nn.softmax(relay.nn.dense(relay.nn.softmax(relay.nn.dense(h, w1)), w2))
    h2 = relay.reshape(h, (-1, 4, 6))
    mod = kiln.IRModule.from_expr(relay.Function([x], relay.nn.softmax(h2, axis=1) + relay.const(1.0)))
    vm = vm_of(mod, opt_level=3)

    def ref(a):
        def sm(v, axis=-1):
            e = np.exp(v - v.max(axis=axis, keepdims=True))
            return e / e.sum(axis=axis, keepdims=True)
        v = a
        for _ in range(3):
            v = sm(sm(v @ w1.data.numpy().T) @ w2.data.numpy().T)
        return sm(v.reshape(-1, 4, 6), axis=1) + 1
    xs = [rng.standard_normal((k, 24)).astype("float32") for k in (5, 9, 5, 9, 1, 5, 9)]
    outs = [vm.run(a) for a in xs]
    for a, o in zip(xs, outs):
        np.testing.assert_allclose(o.numpy(), ref(a), rtol=1e-5, atol=1e-6)
    plan = _plan(vm, xs[0])
    assert len(plan.planned) >= 6
    assert len({_root(t) for t in plan.planned.values()}) < len(plan.planned) // 2
    assert all(_root(t) not in {_root(o) for o in outs} for t in plan.planned.values())


def test_numpy_inputs_are_copied_into_pooled_buffers(monkeypatch):
    # a numpy argument is copied into a buffer of the VM's storage pool (no allocation per call once warm);
    # the copy is private: changing the caller's array afterwards, or keeping earlier results, changes nothing
    x = relay.var("x", shape=(A, 6))
    m = relay.var("m", shape=(A, 6), dtype="bool")
    mod = kiln.IRModule.from_expr(relay.Function([x, m], relay.where(m, x * relay.const(3.0), x)))
    vm = vm_of(mod, opt_level=3)
    xs = [rng.standard_normal((k, 6)).astype("float32") for k in (2, 5, 2, 2, 5)]
    ms = [rng.random(a.shape) < 0.5 for a in xs]
    outs, expect = [], []
    for a, b in zip(xs, ms):
        outs.append(vm.invoke("main", a, b))
        expect.append(np.where(b, a * 3, a))
        a += 100.0  # the caller reuses its array: the VM read its own copy
    for o, e in zip(outs, expect):
        np.testing.assert_allclose(o.numpy(), e, rtol=1e-6)
    a, b = xs[0] - 100.0, ms[0]
    for _ in range(3):
        vm.invoke("main", a, b)
    from kiln.runtime import ndarray as nd_mod
    fresh = []
    real = nd_mod._aligned_empty
    monkeypatch.setattr(nd_mod, "_aligned_empty", lambda *a, **k: fresh.append(a) or real(*a, **k))
    before = vm.pool.allocated
    for _ in range(5):
        np.testing.assert_allclose(vm.invoke("main", a, b).numpy(), np.where(b, a * 3, a), rtol=1e-6)
    assert vm.pool.allocated == before and not fresh
    with pytest.raises(kiln.error.ArgumentError, match="dtype"):
        vm.invoke("main", a.astype("float64"), b)
