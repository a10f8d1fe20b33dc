"""The debug executor: every node's output equals the reference interpreter's; a sorted time table."""
import json

import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.contrib.debugger import debug_executor
from kiln.error import ArgumentError


def _model():
    x = relay.var("data", shape=(1, 3, 9, 9), dtype="float32")
    w = relay.var("w", shape=(4, 3, 3, 3), dtype="float32")
    y = relay.nn.conv2d(x, w, padding=(1, 1), channels=4, kernel_size=(3, 3))
    y = relay.nn.relu(relay.add(y, relay.const(np.linspace(-1, 1, 4).reshape(1, 4, 1, 1).astype("float32"))))
    y = relay.nn.max_pool2d(y, pool_size=(2, 2), strides=(2, 2))
    y = relay.nn.batch_flatten(y)
    return tvm.IRModule.from_expr(relay.Function([x, w], relay.nn.softmax(y)))


@pytest.mark.parametrize("opt_level", [0, 3])
def test_node_outputs_equal_interpreter(opt_level):
    mod = _model()
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((4, 3, 3, 3)).astype("float32")}
    x = rng.standard_normal((1, 3, 9, 9)).astype("float32")
    with tvm.transform.PassContext(opt_level=opt_level):
        lib = relay.build(mod, target="llvm", params=params)
    m = debug_executor.create(lib.get_graph_json(), lib.get_lib(), tvm.cpu(0))
    m.set_input("data", x)
    m.set_input(**lib.get_params())
    m.run()
    # every op node: run its own fused primitive function in the interpreter on the node's recorded inputs
    g = json.loads(lib.get_graph_json())
    prims = {c.func_name: c for c in lib.lowered}
    main = lib.optimized_mod["main"]

    def collect(e):
        if isinstance(e, relay.Call) and isinstance(e.op, relay.Function) and e.op.get_attr("Primitive"):
            calls.append(e)
    calls = []
    relay.post_order_visit(main, collect)  # the order the graph codegen emits nodes in
    op_nodes = [n for n in g["nodes"] if n["op"] == "tvm_op"]
    assert len(op_nodes) == len(calls)
    outputs = m.get_node_outputs()
    for node, call in zip(op_nodes, calls):
        # a reshape-only function runs nothing: its output shares its input's storage (TVM's "__nop")
        assert node["attrs"]["func_name"] in prims or node["attrs"]["func_name"] == "__nop"
        ins = [outputs[g["nodes"][i]["name"]][k] for i, k, _ in node["inputs"]]
        fn = call.op.without_attr("Primitive")
        ref = relay.create_executor("debug", mod=tvm.IRModule.from_expr(fn)).evaluate()(*ins)
        np.testing.assert_allclose(outputs[node["name"]][0], ref.numpy(), rtol=1e-5, atol=1e-5,
                                   err_msg=node["name"])
        np.testing.assert_allclose(m.debug_get_output(node["name"]).numpy(), outputs[node["name"]][0])
    # and the final output equals the whole program in the interpreter
    want = relay.create_executor("debug", mod=mod, params=params).evaluate()(x).numpy()
    np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-5, atol=1e-6)


def test_time_table_is_sorted_and_complete():
    mod = _model()
    params = {"w": np.ones((4, 3, 3, 3), "float32")}
    with tvm.transform.PassContext(opt_level=0):
        lib = relay.build(mod, target="llvm", params=params)
    m = lib["debug_create"]("default", tvm.cpu(0))
    m.run(data=np.ones((1, 3, 9, 9), "float32"))
    table = m.debug_datum.get_debug_result()
    lines = table.splitlines()
    assert lines[0].split()[:4] == ["Node", "Name", "Ops", "Time(us)"]
    rows = lines[2:-1]
    n_ops = sum(n["op"] == "tvm_op" for n in json.loads(lib.get_graph_json())["nodes"])
    assert len(rows) == n_ops
    times = [float(r.split()[2]) for r in rows]
    assert times == sorted(times, reverse=True)
    assert abs(sum(float(r.split()[3]) for r in rows) - 100.0) < 0.5
    assert any("conv2d" in r for r in rows) and "[1, 4, 9, 9]" in table
    per_op = m.debug_datum.get_op_times()
    assert per_op[0][1] >= per_op[-1][1]
    assert len(m.run_individual(number=2)) == n_ops
    tensors = m.debug_datum.get_output_tensors()
    assert any(k.startswith("data____topo-index:0") for k in tensors)


def test_debug_output_of_unknown_node():
    lib = relay.build(_model(), target="llvm", params={"w": np.ones((4, 3, 3, 3), "float32")})
    m = lib["debug_create"]("default", tvm.cpu(0))
    m.run(data=np.zeros((1, 3, 9, 9), "float32"))
    with pytest.raises(ArgumentError, match="no node named 'nope'"):
        m.debug_get_output("nope")
    with pytest.raises(ArgumentError, match="out of range"):
        m.debug_get_output(999)
