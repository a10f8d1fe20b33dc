"""Memory planning: storage reuse happens, and no two simultaneously live tensors share storage."""
import json

import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.contrib import graph_executor
from kiln.relay.backend.graph_executor_codegen import verify_memory_plan

SHAPE = (7, 13)  # odd sizes


def _build(func, opt_level=0):
    with tvm.transform.PassContext(opt_level=opt_level):
        return relay.build(tvm.IRModule.from_expr(func), target="llvm")


def _chain(n=8):
    x = relay.var("x", shape=SHAPE, dtype="float32")
    y = x
    for i in range(n):
        y = relay.nn.relu(y) if i % 2 else relay.exp(relay.negative(y) * relay.const(0.5))
    return relay.Function([x], y), lambda a: _chain_ref(a, n)


def _chain_ref(a, n):
    y = a
    for i in range(n):
        y = np.maximum(y, 0) if i % 2 else np.exp(-y * 0.5)
    return y


def _diamond():
    x = relay.var("x", shape=SHAPE, dtype="float32")
    a = relay.exp(x)
    b = relay.negative(a)
    c = relay.sigmoid(a)
    d = relay.add(b, c)
    e = relay.multiply(d, a)  # `a` stays live across both branches
    f = relay.tanh(e)
    return relay.Function([x], f), lambda v: np.tanh((-np.exp(v) + 1 / (1 + np.exp(-np.exp(v)))) * np.exp(v))


def _storage_ids(lib):
    g = json.loads(lib.get_graph_json())
    return g["attrs"]["storage_id"][1], g


@pytest.mark.parametrize("make", [_chain, _diamond], ids=["chain", "diamond"])
def test_plan_reuses_and_is_correct(make):
    func, ref = make()
    lib = _build(func)
    sids, g = _storage_ids(lib)
    op_entries = [g["node_row_ptr"][i] for i, n in enumerate(g["nodes"]) if n["op"] == "tvm_op"]
    heads = {g["node_row_ptr"][h[0]] + h[1] for h in g["heads"]}
    inter = [e for e in op_entries if e not in heads]
    # reuse happened: fewer storage blocks than intermediate tensors
    assert len({sids[e] for e in inter}) < len(inter)
    plan = lib.memory_plan
    assert plan.num_intermediate_tensors == len(inter)
    assert plan.planned_bytes < plan.intermediate_bytes
    verify_memory_plan(lib.get_graph_json())
    x = np.random.uniform(-2, 2, SHAPE).astype("float32")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.run(x=x)
    np.testing.assert_allclose(m.get_output(0).numpy(), ref(x), rtol=1e-5, atol=1e-5)
    # poisoning every buffer after its last reader must not change the result
    m.module.run_poisoned()
    np.testing.assert_allclose(m.get_output(0).numpy(), ref(x), rtol=1e-5, atol=1e-5)


def test_diamond_keeps_shared_producer_alive():
    func, _ = _diamond()
    lib = _build(func)
    sids, g = _storage_ids(lib)
    rp = g["node_row_ptr"]
    names = [n["name"] for n in g["nodes"]]
    exp_entry = rp[next(i for i, n in enumerate(names) if "exp" in n)]
    # the storage of exp(x) is read by the last multiply: nothing written in between may use it
    users = [i for i, n in enumerate(g["nodes"]) if any(rp[j] + k == exp_entry for j, k, _ in n["inputs"])]
    last = max(users)
    for nid in range(exp_entry + 1, last):
        if g["nodes"][nid]["op"] == "tvm_op":
            assert sids[rp[nid]] != sids[exp_entry]


def test_verify_memory_plan_catches_overlap():
    func, _ = _chain(4)
    lib = _build(func)
    g = json.loads(lib.get_graph_json())
    sids = g["attrs"]["storage_id"][1]
    g["attrs"]["storage_id"][1] = [sids[0]] * len(sids)  # everything in one buffer: must be rejected
    with pytest.raises(AssertionError):
        verify_memory_plan(json.dumps(g))


def test_poisoning_exposes_a_bad_plan():
    """The poison test mode is able to fail: a deliberately wrong plan gives wrong results."""
    func, ref = _diamond()
    lib = _build(func)
    g = json.loads(lib.get_graph_json())
    rp = g["node_row_ptr"]
    sids = g["attrs"]["storage_id"][1]
    ops = [i for i, n in enumerate(g["nodes"]) if n["op"] == "tvm_op"]
    # put sigmoid(a) into the buffer of negative(a), which is still live (add reads both): no kernel sees
    # its output alias one of its inputs (the executor refuses that outright), yet the result is wrong
    sig = next(i for i in ops if "sigmoid" in g["nodes"][i]["name"])
    neg = next(i for i in ops if "negative" in g["nodes"][i]["name"])
    sids[rp[sig]] = sids[rp[neg]]
    from kiln.runtime.graph_executor import GraphExecutor
    ex = GraphExecutor(json.dumps(g), lib.get_lib(), [tvm.cpu(0)])
    x = np.random.uniform(-2, 2, SHAPE).astype("float32")
    ex.set_input("x", x)
    ex.run_poisoned()
    assert not np.allclose(ex.get_output(0).numpy(), ref(x), rtol=1e-5, atol=1e-5)


def test_outputs_and_inputs_never_share_storage():
    x = relay.var("x", shape=SHAPE, dtype="float32")
    a = relay.exp(x)
    b = relay.nn.relu(a)
    c = relay.negative(b)
    d = relay.sigmoid(c)
    func = relay.Function([x], relay.Tuple([a, d]))
    lib = _build(func)
    sids, g = _storage_ids(lib)
    rp = g["node_row_ptr"]
    reserved = [sids[rp[i]] for i in g["arg_nodes"]] + [sids[rp[h[0]] + h[1]] for h in g["heads"]]
    assert len(set(reserved)) == len(reserved)
    others = [sids[e] for e in range(rp[-1]) if sids[e] in reserved]
    assert len(others) == len(reserved)
    verify_memory_plan(lib.get_graph_json())
    xv = np.random.randn(*SHAPE).astype("float32")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.run(x=xv)
    np.testing.assert_allclose(m.get_output(0).numpy(), np.exp(xv), rtol=1e-5)
    np.testing.assert_allclose(m.get_output(1).numpy(), 1 / (1 + np.exp(np.maximum(np.exp(xv), 0))), rtol=1e-5)
    np.testing.assert_allclose(m.get_input("x").numpy(), xv)  # the input survives the run


def test_plan_report_and_mixed_sizes():
    x = relay.var("x", shape=(64, 64), dtype="float32")
    a = relay.exp(x)
    s = relay.sum(a, axis=[1])          # smaller intermediate
    b = relay.exp(relay.negative(s))
    c = relay.expand_dims(b, axis=1) * relay.const(2.0)
    d = relay.add(c, relay.sigmoid(x))  # large again
    e = relay.tanh(d)
    lib = _build(relay.Function([x], e))
    plan = lib.memory_plan
    assert "saved" in str(plan) and plan.total_bytes >= plan.planned_bytes
    verify_memory_plan(lib.get_graph_json())
    xv = np.random.randn(64, 64).astype("float32")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.run(x=xv)
    want = np.tanh(np.exp(-np.exp(xv).sum(1))[:, None] * 2 + 1 / (1 + np.exp(-xv)))
    np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-4, atol=1e-5)
    m.module.run_poisoned()
    np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-4, atol=1e-5)
