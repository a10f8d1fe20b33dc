"""Small float models and a build-and-run helper shared by the relay.quantize tests."""
from __future__ import annotations

import numpy as np

import kiln as tvm
from kiln import relay
from kiln.contrib import graph_executor

TARGET = "llvm"


def _p(rng, shape, scale):
    return rng.normal(0, scale, shape).astype("float32")


def small_cnn(seed: int = 0):
    """conv-bn-relu-maxpool, conv-bias-relu-maxpool, flatten, dense-bias (odd spatial size 13)."""
    rng = np.random.default_rng(seed)
    x = relay.var("data", shape=(1, 3, 13, 13))
    w1 = relay.var("w1", shape=(8, 3, 3, 3))
    g, b, m, v = (relay.var(n, shape=(8,)) for n in ("g", "b", "m", "v"))
    y = relay.nn.conv2d(x, w1, padding=(1, 1), channels=8, kernel_size=(3, 3))
    y = relay.nn.relu(relay.nn.batch_norm(y, g, b, m, v)[0])
    y = relay.nn.max_pool2d(y, pool_size=(2, 2), strides=(2, 2))
    w2 = relay.var("w2", shape=(16, 8, 3, 3))
    b2 = relay.var("b2", shape=(16,))
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(y, w2, padding=(1, 1), channels=16, kernel_size=(3, 3)), b2))
    y = relay.nn.batch_flatten(relay.nn.max_pool2d(y, pool_size=(2, 2), strides=(2, 2)))
    w3 = relay.var("w3", shape=(10, 16 * 3 * 3))
    b3 = relay.var("b3", shape=(10,))
    y = relay.nn.bias_add(relay.nn.dense(y, w3), b3)
    params = {"w1": _p(rng, (8, 3, 3, 3), 0.3), "g": rng.uniform(0.5, 1.5, 8).astype("float32"),
              "b": _p(rng, 8, 0.1), "m": _p(rng, 8, 0.1), "v": rng.uniform(0.5, 1.5, 8).astype("float32"),
              "w2": _p(rng, (16, 8, 3, 3), 0.2), "b2": _p(rng, 16, 0.1), "w3": _p(rng, (10, 144), 0.1),
              "b3": _p(rng, 10, 0.1)}
    mod = tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(y), y))
    return mod, params, (1, 3, 13, 13)


def mlp(seed: int = 1):
    """dense-bias-relu, dense-bias-relu, dense-bias on 37 features (sizes that divide no tile)."""
    rng = np.random.default_rng(seed)
    x = relay.var("data", shape=(1, 37))
    params = {}
    y = x
    sizes = [37, 29, 23, 10]
    for i in range(3):
        w = relay.var(f"w{i}", shape=(sizes[i + 1], sizes[i]))
        b = relay.var(f"b{i}", shape=(sizes[i + 1],))
        params[f"w{i}"] = _p(rng, (sizes[i + 1], sizes[i]), 1.0 / np.sqrt(sizes[i]))
        params[f"b{i}"] = _p(rng, sizes[i + 1], 0.1)
        y = relay.nn.bias_add(relay.nn.dense(y, w), b)
        if i < 2:
            y = relay.nn.relu(y)
    mod = tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(y), y))
    return mod, params, (1, 37)


def run_model(mod, params, inputs, target: str = TARGET) -> np.ndarray:
    """Build ``mod`` with relay.build and run it on each input; outputs stacked."""
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target=target, params=params)
    g = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    outs = []
    for x in inputs:
        g.set_input("data", x)
        g.run()
        outs.append(g.get_output(0).numpy())
    return np.stack(outs)


def rel_err(a, b) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(a))


def calls(mod, op_name):
    """The calls of ``op_name`` in main, in post order."""
    found = []
    relay.analysis.post_order_visit(mod["main"], lambda e: found.append(e) if isinstance(e, relay.Call)
                                    and getattr(e.op, "name", None) == op_name else None)
    return found
