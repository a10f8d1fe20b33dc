"""Graph node names are unique (a second call of ``f`` must not be named like a function ``f_1``), and the
debug executor keeps one time and one output per node even for a graph whose nodes share a name."""
import json

import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.contrib.debugger import debug_executor
from kiln.error import ArgumentError


def _lib():
    x = relay.var("x", shape=(2, 6))
    x2 = relay.var("x2", shape=(2, 6))
    # negative(reshape (3, 4)) is compiled once and called twice; with (4, 3) it is a second function "..._1"
    # (a reshape alone would be a "__nop" node sharing its input's storage, with no kernel)
    y = relay.Tuple([-relay.reshape(x, (3, 4)), -relay.reshape(x, (4, 3)), -relay.reshape(x2, (3, 4))])
    with tvm.transform.PassContext(opt_level=3):
        return relay.build(tvm.IRModule.from_expr(relay.Function([x, x2], y)), target="llvm")


def _inputs():
    return np.arange(12, dtype="float32").reshape(2, 6), -np.arange(12, dtype="float32").reshape(2, 6)


def test_graph_node_names_unique():
    g = json.loads(_lib().get_graph_json())
    names = [n["name"] for n in g["nodes"]]
    assert len(names) == len(set(names)), names
    funcs = [n["attrs"]["func_name"] for n in g["nodes"] if n["op"] == "tvm_op"]
    assert len(set(funcs)) == 2 and len(funcs) == 3


def test_debug_table_one_row_per_node_even_with_duplicate_names():
    lib = _lib()
    g = json.loads(lib.get_graph_json())
    ops = [i for i, n in enumerate(g["nodes"]) if n["op"] == "tvm_op"]
    g["nodes"][ops[2]]["name"] = g["nodes"][ops[1]]["name"]  # as another graph producer might write it
    m = debug_executor.create(json.dumps(g), lib.get_lib(), tvm.cpu())
    a, b = _inputs()
    m.set_input("x", a)
    m.set_input("x2", b)
    m.run()
    table = m.debug_datum.get_debug_result().splitlines()
    assert len(table) == 2 + 3 + 1  # header, rule, one row per kernel call, total
    assert len(m.debug_datum.node_times) == 3
    np.testing.assert_array_equal(m.debug_get_output(ops[2]).numpy(), -b.reshape(3, 4))
    np.testing.assert_array_equal(m.debug_get_output(ops[1]).numpy(), -a.reshape(4, 3))
    with pytest.raises(ArgumentError, match="name the node by its index"):
        m.debug_get_output(g["nodes"][ops[1]]["name"])
    per_kernel = dict((k, v) for k, v, _ in m.debug_datum.get_op_times())
    assert len(per_kernel) == 2
