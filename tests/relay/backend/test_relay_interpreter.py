import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.error import ArgumentError
from kiln.relay.backend import ADT


def evaluate(mod_or_func, *args, **kwargs):
    mod = mod_or_func if isinstance(mod_or_func, kiln.IRModule) else kiln.IRModule.from_expr(mod_or_func)
    return relay.create_executor("debug", mod=mod, device=kiln.cpu(0), target="llvm").evaluate()(*args, **kwargs)


def test_function_positional_and_keyword_args():
    x = relay.var("x", shape=(2, 3))
    y = relay.var("y", shape=(3,))
    f = relay.Function([x, y], relay.multiply(relay.add(x, y), x))
    a, b = np.random.rand(2, 3).astype("float32"), np.random.rand(3).astype("float32")
    res = evaluate(f, a, y=b)
    assert isinstance(res, kiln.nd.NDArray)
    np.testing.assert_allclose(res.numpy(), (a + b) * a, rtol=1e-6)
    np.testing.assert_allclose(evaluate(f, kiln.nd.array(a), kiln.nd.array(b)).numpy(), (a + b) * a, rtol=1e-6)
    with pytest.raises(ArgumentError, match=r"input 'x' has shape \(3, 2\), expected \(2, 3\)"):
        evaluate(f, a.T.copy(), b)
    with pytest.raises(ArgumentError, match="missing inputs"):
        evaluate(f, a)


def test_let_if_tuples_and_closures():
    x = relay.var("x", shape=(), dtype="float32")
    v = relay.var("v")
    g = relay.var("g")
    p = relay.var("p", shape=(), dtype="float32")
    adder = relay.Function([p], relay.add(p, x))  # captures x
    body = relay.Let(g, adder, relay.Let(v, relay.Call(g, [relay.const(10.0)]),
                     relay.If(relay.greater(v, relay.const(11.0)), relay.Tuple([v, x]),
                              relay.Tuple([relay.negative(v), x]))))
    f = relay.Function([x], body)
    res = evaluate(f, np.array(2.0, "float32"))
    assert isinstance(res, ADT) and len(res) == 2
    assert float(res[0].numpy()) == 12.0 and float(res[1].numpy()) == 2.0
    res = evaluate(f, np.array(0.5, "float32"))
    assert float(res[0].numpy()) == -10.5


def test_global_functions_and_recursion():
    mod = kiln.parser.parse("""
        def @fact(%n: int32) -> int32 {
          if (less(%n, 1)) { 1 } else { multiply(%n, @fact(subtract(%n, 1))) }
        }
        def @main(%n: int32) -> int32 { @fact(%n) }
    """)
    assert int(evaluate(mod, np.array(5, "int32")).numpy()) == 120


def test_evaluate_plain_expression_and_tuple_ops():
    x = relay.const(np.arange(6, dtype="float32").reshape(2, 3))
    parts = relay.split(x, 3, axis=1)
    ex = relay.create_executor("debug")
    res = ex.evaluate(relay.add(parts[0], parts[2]))
    np.testing.assert_array_equal(res.numpy(), [[2], [8]])
    res = ex.evaluate(parts.astuple())
    assert isinstance(res, ADT) and [r.shape for r in res] == [(2, 1)] * 3


def test_params_are_bound_by_name():
    x = relay.var("x", shape=(2,))
    w = relay.var("w", shape=(2,))
    mod = kiln.IRModule.from_expr(relay.Function([x, w], relay.subtract(x, w)))
    ex = relay.create_executor("debug", mod=mod, params={"w": np.array([1, 2], "float32")})
    np.testing.assert_array_equal(ex.evaluate()(np.array([5, 5], "float32")).numpy(), [4, 3])


def test_executor_kinds_dispatch():
    from kiln.relay.backend import executor
    mod = kiln.IRModule.from_expr(relay.Function([], relay.const(1.0)))
    assert {"debug", "graph", "vm"} <= set(executor.list_executor_kinds())
    # a kind whose backend is not built says so (graph/vm start like this until relay.build registers them)
    executor.register_executor("test_unbuilt", executor._not_built("test_unbuilt"))
    with pytest.raises(NotImplementedError, match="relay.build"):
        relay.create_executor("test_unbuilt", mod=mod)
    executor._EXECUTORS.pop("test_unbuilt")
    with pytest.raises(kiln.error.KilnError, match="unknown executor kind"):
        relay.create_executor("nope", mod=mod)


def test_free_variables_are_reported():
    x = relay.var("x", shape=(1,))
    with pytest.raises(ArgumentError, match="free variables %x"):
        relay.create_executor("debug").evaluate(relay.add(x, x))


def test_small_cnn_vs_torch():
    import torch
    import torch.nn.functional as F
    x = relay.var("x", shape=(2, 3, 9, 9))
    w = relay.var("w", shape=(4, 3, 3, 3))
    b = relay.var("b", shape=(4,))
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, w, strides=2, padding=1), b))
    y = relay.nn.max_pool2d(y, 2, 2, ceil_mode=True)
    y = relay.nn.softmax(relay.nn.batch_flatten(y))
    f = relay.Function([x, w, b], y)
    rng = np.random.default_rng(0)
    xs, ws, bs = (rng.standard_normal(s).astype("float32") for s in ((2, 3, 9, 9), (4, 3, 3, 3), (4,)))
    got = evaluate(f, xs, ws, bs).numpy()
    t = F.max_pool2d(F.relu(F.conv2d(torch.tensor(xs), torch.tensor(ws), torch.tensor(bs), 2, 1)), 2, 2,
                     ceil_mode=True)
    np.testing.assert_allclose(got, F.softmax(t.flatten(1), -1).numpy(), rtol=1e-4, atol=1e-6)
