"""Issue 15, defect 8 (robustc): deep TIR expressions through the vectorizer, the simplifier's integer
sums and the code generator, and concatenate's TIR, whose depth no longer follows its input count.
Each deep check runs in a child process under a low recursion limit: a recursive walker fails there
at once, and a crash by signal cannot take pytest down with it."""

import numpy as np
import pytest
from robust_child import run_child

import kiln as tvm
from kiln import te, topi

_PRELUDE = """
import sys
import numpy as np
import pytest
import kiln as tvm
from kiln import te
"""


def _run(body: str, limit: int = 300, timeout: float = 600) -> str:
    return run_child(_PRELUDE, body, limit, timeout)


def test_vectorized_deep_float_and_select_expressions():
    out = _run("""
        n = 2000
        A = te.placeholder((37,), name="A")
        def f(i):
            e = A[i]
            for k in range(n):
                e = e + A[i] * float(k % 3)
            return e
        def g(i):
            e = A[i]
            for k in range(n):
                e = tvm.tir.if_then_else(i > k % 7, e + 1.0, A[i] * 0.5)
            return e
        B = te.compute((37,), f, name="B")
        C = te.compute((37,), g, name="C")
        s = te.create_schedule([B.op, C.op])
        for T in (B, C):
            xo, xi = s[T].split(T.op.axis[0], factor=8)
            s[T].vectorize(xi)
        mod = tvm.build(s, [A, B, C], "llvm")
        a = np.random.default_rng(1).standard_normal(37).astype("float32")
        b = tvm.nd.array(np.zeros(37, "float32"))
        c = tvm.nd.array(np.zeros(37, "float32"))
        mod(tvm.nd.array(a), b, c)
        np.testing.assert_allclose(b.numpy(), a.astype("float64") * (1 + sum(k % 3 for k in range(n))), rtol=1e-3)
        ref = a.astype("float64").copy()
        ii = np.arange(37)
        for k in range(n):
            ref = np.where(ii > k % 7, ref + 1.0, a * 0.5)
        np.testing.assert_allclose(c.numpy(), ref, rtol=1e-4, atol=1e-4)
        print("ok")
    """)
    assert "ok" in out


def test_integer_index_sums_of_thousands_of_terms():
    out = _run("""
        n = 1000
        A = te.placeholder((64,), name="A", dtype="float32")
        def cancel(i):
            j = i
            for k in range(3 * n):
                j = j + (k % 3) - (k % 3)
            return A[j]
        def atoms(i):
            j = i
            for k in range(n):
                j = j + i // (k + 2)
            return A[j % 64]
        B = te.compute((64,), cancel, name="B")
        C = te.compute((64,), atoms, name="C")
        s = te.create_schedule([B.op, C.op])
        mod = tvm.build(s, [A, B, C], "llvm")
        a = np.random.default_rng(2).standard_normal(64).astype("float32")
        b = tvm.nd.array(np.zeros(64, "float32"))
        c = tvm.nd.array(np.zeros(64, "float32"))
        mod(tvm.nd.array(a), b, c)
        ii = np.arange(64)
        np.testing.assert_array_equal(b.numpy(), a)
        np.testing.assert_array_equal(c.numpy(), a[(ii + sum(ii // (k + 2) for k in range(n))) % 64])
        print("ok")
    """)
    assert "ok" in out


def test_concatenate_tir_depth_is_logarithmic_and_zero_size_inputs_are_skipped():
    sizes = [3, 0, 1, 2, 0, 5, 1, 0] * 40
    xs = [te.placeholder((2, n), name=f"x{i}") for i, n in enumerate(sizes)]
    out = topi.concatenate(xs, axis=1)
    depth, todo = 0, [(out.op.body[0], 1)]
    while todo:
        e, d = todo.pop()
        depth = max(depth, d)
        if isinstance(e, tvm.tir.Call) and e.op == "tir.if_then_else":
            todo.extend((a, d + 1) for a in e.args[1:])
    assert depth <= 10, depth      # 320 inputs: a chain was 320 deep
    s = te.create_schedule(out.op)
    f = tvm.build(s, xs + [out], "llvm")
    rng = np.random.default_rng(3)
    data = [rng.standard_normal((2, n)).astype("float32") for n in sizes]
    res = tvm.nd.array(np.zeros((2, sum(sizes)), "float32"))
    f(*[tvm.nd.array(d) for d in data], res)
    np.testing.assert_array_equal(res.numpy(), np.concatenate(data, axis=1))


_BUILD_CHAIN = """
from kiln import relay
from kiln.contrib import graph_executor
n = {n}
x = relay.var("x", shape=(4,), dtype="float32")
y = x
for i in range(n):
    y = relay.nn.relu(y) if i % 2 else relay.add(y, relay.const(1.0))
mod = tvm.IRModule.from_expr(relay.Function([x], y))
with tvm.transform.PassContext(opt_level=3):
    lib = relay.build(mod, target="llvm")
m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
a = np.array([-3, -0.5, 0.25, 2], "float32")
m.run(x=a)
ref = a.copy()
for i in range(n):
    ref = np.maximum(ref, 0) if i % 2 else ref + 1
np.testing.assert_allclose(m.get_output(0).numpy(), ref, rtol=1e-5)
print("ok")
"""


def test_relay_build_of_a_20k_node_chain_under_a_low_recursion_limit():
    # graph codegen, FuseOps groups of 256 ops lowered through TE (inject_inline), CSE: no recursion
    # on depth and nothing quadratic (about 20 s on a loaded 2-core machine)
    assert "ok" in _run(_BUILD_CHAIN.format(n=20000))


@pytest.mark.slow
def test_relay_build_of_a_100k_node_chain():
    assert "ok" in _run(_BUILD_CHAIN.format(n=100000), timeout=1800)
