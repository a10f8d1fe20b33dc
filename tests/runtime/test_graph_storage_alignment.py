"""The graph executor's buffers (every storage entry, the inputs and the bound parameters) start on a 64-byte
boundary: a cache line, and the alignment of a full AVX-512 vector, whatever the host's ISA (kernels for
AVX2 and AVX-512 read them with vector loads; a misaligned packed weight would split every other load)."""
import numpy as np

import kiln
from kiln import relay
from kiln.contrib import graph_executor


def test_storage_and_params_are_64_byte_aligned():
    rng = np.random.default_rng(0)
    m, k, n = 5, 13, 7  # odd sizes: byte sizes that are not multiples of 64
    xv, wv, bv = relay.var("x", shape=(m, k)), relay.var("w", shape=(n, k)), relay.var("b", shape=(n,))
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(xv, wv), bv))
    f = relay.Function([xv, wv, bv], relay.add(relay.sum(y, axis=1, keepdims=True), y))
    params = {"w": rng.standard_normal((n, k)).astype("float32"), "b": rng.standard_normal(n).astype("float32")}
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(kiln.IRModule.from_expr(f), target="llvm", params=params)
    g = graph_executor.GraphModule(lib["default"](kiln.cpu(0)))
    x = rng.standard_normal((m, k)).astype("float32")
    g.run(x=x)
    ex = g.module
    assert len(ex.entries) >= 4
    for i, entry in enumerate(ex.entries):
        assert entry._ptr % 64 == 0, f"entry {i} {entry.shape} at {entry._ptr:#x}"
    y_np = np.maximum(x @ params["w"].T + params["b"], 0)
    np.testing.assert_allclose(g.get_output(0).numpy(), y_np.sum(axis=1, keepdims=True) + y_np, rtol=1e-5, atol=1e-5)
