"""The Relay VM: static models against the graph executor, dynamic batch against numpy, control flow."""
import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.error import ArgumentError
from kiln.runtime import vm as rvm
from relay_exec_util import graph_run

A = relay.Any()
rng = np.random.default_rng(7)


def _mlp(batch):
    x = relay.var("x", shape=(batch, 16))
    w1, b1, w2 = relay.var("w1", shape=(33, 16)), relay.var("b1", shape=(33,)), relay.var("w2", shape=(10, 33))
    h = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, w1), b1))
    y = relay.nn.softmax(relay.nn.dense(h, w2))
    params = {"w1": rng.standard_normal((33, 16)).astype("float32"),
              "b1": rng.standard_normal(33).astype("float32"),
              "w2": rng.standard_normal((10, 33)).astype("float32")}
    return tvm.IRModule.from_expr(relay.Function([x, w1, b1, w2], y)), params


def _mlp_ref(x, p):
    z = np.maximum(x @ p["w1"].T + p["b1"], 0) @ p["w2"].T
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _cnn(batch):
    x = relay.var("x", shape=(batch, 3, 10, 10))
    w = relay.var("w", shape=(8, 3, 3, 3))
    g, b, m, v = (relay.var(n, shape=(8,)) for n in ("g", "b", "m", "v"))
    fw = relay.var("fw", shape=(5, 8 * 5 * 5))
    y = relay.nn.conv2d(x, w, padding=(1, 1))
    y = relay.nn.relu(relay.nn.batch_norm(y, g, b, m, v)[0])
    y = relay.nn.max_pool2d(y, (2, 2), (2, 2))
    y = relay.nn.dense(relay.nn.batch_flatten(y), fw)
    params = {"w": rng.standard_normal((8, 3, 3, 3)).astype("float32"),
              "g": rng.uniform(0.5, 1.5, 8).astype("float32"), "b": rng.standard_normal(8).astype("float32"),
              "m": rng.standard_normal(8).astype("float32"), "v": rng.uniform(0.5, 2, 8).astype("float32"),
              "fw": rng.standard_normal((5, 200)).astype("float32")}
    return tvm.IRModule.from_expr(relay.Function([x, w, g, b, m, v, fw], y)), params


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_static_models_match_graph_executor(model):
    mod, params = _mlp(4) if model == "mlp" else _cnn(2)
    shape = (4, 16) if model == "mlp" else (2, 3, 10, 10)
    x = rng.standard_normal(shape).astype("float32")
    exe = relay.vm.compile(mod, "llvm", params=params)
    vm = rvm.VirtualMachine(exe, tvm.cpu())
    np.testing.assert_array_equal(vm.run(x).numpy(), graph_run(mod, {"x": x}, params)[0])


def test_dynamic_batch_mlp_against_numpy_and_storage_reuse():
    mod, params = _mlp(A)
    exe = relay.vm.compile(mod, "llvm", params=params)
    assert "kernel_shapes" in exe.bytecode and "alloc_tensor_reg" in exe.bytecode
    vm = rvm.VirtualMachine(exe, tvm.cpu())
    for n in (1, 3, 7, 64):
        x = rng.standard_normal((n, 16)).astype("float32")
        np.testing.assert_allclose(vm.run(x).numpy(), _mlp_ref(x, params), rtol=1e-4, atol=1e-6)
    x = rng.standard_normal((7, 16)).astype("float32")
    vm.run(x)
    before = vm.memory_stats["allocated"]
    for _ in range(3):  # steady state: every intermediate buffer comes from the pool
        np.testing.assert_allclose(vm.run(x).numpy(), _mlp_ref(x, params), rtol=1e-4, atol=1e-6)
    assert vm.memory_stats["allocated"] == before
    with pytest.raises(ArgumentError, match=r"\(\?, 16\)"):
        vm.run(rng.standard_normal((3, 15)).astype("float32"))


def test_dynamic_batch_cnn_against_static_graph():
    mod, params = _cnn(A)
    vm = rvm.VirtualMachine(relay.vm.compile(mod, "llvm", params=params), tvm.cpu())
    for n in (1, 3):
        x = rng.standard_normal((n, 3, 10, 10)).astype("float32")
        static_mod, _ = _cnn(n)
        np.testing.assert_allclose(vm.run(x).numpy(), graph_run(static_mod, {"x": x}, params)[0],
                                   rtol=1e-4, atol=1e-4)


def test_dynamic_reshape_concat_and_stateful_api():
    x = relay.var("x", shape=(A, 8))
    y = relay.var("y", shape=(A, 8))
    z = relay.reshape(relay.concatenate([x, y], 0), (-1, 4))
    mod = tvm.IRModule.from_expr(relay.Function([x, y], relay.Tuple([z, relay.sum(x, axis=[1])])))
    exe = relay.vm.compile(mod, "llvm")
    vm = rvm.VirtualMachine(exe, tvm.cpu())
    xv, yv = rng.standard_normal((3, 8)).astype("float32"), rng.standard_normal((5, 8)).astype("float32")
    vm.set_input("main", xv, y=yv)
    vm.invoke_stateful("main")
    out = vm.get_outputs()
    np.testing.assert_allclose(out[0].numpy(), np.concatenate([xv, yv]).reshape(-1, 4), rtol=1e-6)
    np.testing.assert_allclose(out[1].numpy(), xv.sum(1), rtol=1e-5)
    res = vm.benchmark(tvm.cpu(), xv, yv, repeat=2, number=2)
    assert res.mean > 0


def _run_vm(mod, *args):
    return relay.create_executor("vm", mod=mod, device=tvm.cpu(), target="llvm").evaluate()(*args)


def test_if_and_while_loop():
    i = relay.var("i", shape=(), dtype="int32")
    s = relay.var("s", shape=(3,))
    loop = relay.loops.while_loop(lambda i, s: relay.less(i, relay.const(10, "int32")), [i, s],
                                  lambda i, s: [relay.add(i, relay.const(1, "int32")), relay.multiply(s, s)])
    x = relay.var("x", shape=(3,))
    c = relay.var("c", shape=(), dtype="bool")
    body = relay.If(c, relay.TupleGetItem(relay.Call(loop, [relay.const(7, "int32"), x]), 1), relay.negative(x))
    mod = tvm.IRModule.from_expr(relay.Function([x, c], body))
    xv = rng.uniform(0.9, 1.1, 3).astype("float32")
    np.testing.assert_allclose(_run_vm(mod, xv, np.array(True)).numpy(), xv ** 8, rtol=1e-5)
    np.testing.assert_allclose(_run_vm(mod, xv, np.array(False)).numpy(), -xv)


def test_recursion_through_global_var():
    mod = tvm.IRModule()
    fact = relay.GlobalVar("fact")
    n = relay.var("n", shape=(), dtype="int64")
    acc = relay.var("acc", shape=(), dtype="int64")
    body = relay.If(relay.equal(n, relay.const(0, "int64")), acc,
                    relay.Call(fact, [relay.subtract(n, relay.const(1, "int64")), relay.multiply(acc, n)]))
    mod[fact] = relay.Function([n, acc], body, relay.TensorType((), "int64"))
    m = relay.var("m", shape=(), dtype="int64")
    mod["main"] = relay.Function([m], relay.Call(fact, [m, relay.const(1, "int64")]))
    exe = relay.vm.compile(mod, "llvm")
    vm = rvm.VirtualMachine(exe, tvm.cpu())
    assert int(vm.run(np.array(10, "int64")).numpy()) == 3628800
    assert int(vm.invoke("fact", np.array(5, "int64"), np.array(2, "int64")).numpy()) == 240
    assert int(vm.run(np.array(3000, "int64")).numpy()) == 0  # deep recursion: no Python stack per call


def test_closures_capture_values():
    x = relay.var("x", shape=(4,))
    y = relay.var("y", shape=(4,))
    f = relay.var("f")
    adder = relay.Function([y], relay.add(x, y))  # captures x
    body = relay.Let(f, adder, relay.Call(f, [relay.Call(f, [x])]))
    mod = tvm.IRModule.from_expr(relay.Function([x], body))
    xv = rng.standard_normal(4).astype("float32")
    np.testing.assert_allclose(_run_vm(mod, xv).numpy(), 3 * xv, rtol=1e-6)
