"""Source spans from the ONNX importer (TVM v0.13's ``relay.frontend.fill_span``): a node's name, or
``<op_type>_<n>`` for unnamed nodes; inputs and initializers ``<first reader>.<ONNX name>``."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

import kiln as tvm
from kiln import relay


def _model(nodes, inputs, outputs, inits=(), opset=13):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _info(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def _init(name, arr):
    return numpy_helper.from_array(np.asarray(arr, dtype="float32"), name)


def _span(e):
    s = getattr(e, "span", None)
    return None if s is None else s.source_name.name


def _spans(func):
    """(node kind, op name or var name, span) of every expression reachable from the body, params first."""
    out = [("param", p.name_hint, _span(p)) for p in func.params]
    stack, seen = [func.body], set()
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, relay.Call):
            out.append(("call", e.op.name, _span(e)))
            stack.extend(e.args)
        elif isinstance(e, relay.Var):
            out.append(("var", e.name_hint, _span(e)))
        elif isinstance(e, relay.Constant):
            out.append(("const", tuple(e.data.shape), _span(e)))
        elif isinstance(e, relay.TupleGetItem):
            out.append(("getitem", e.index, _span(e)))
            stack.append(e.tuple_value)
        elif isinstance(e, relay.Tuple):
            out.append(("tuple", len(e.fields), _span(e)))
            stack.extend(e.fields)
    return out


def _conv_relu_model():
    rng = np.random.RandomState(0)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Relu", ["r"], ["y"], name="last_relu")]
    return _model(nodes, [_info("x", [1, 3, 5, 5])], [_info("y", [1, 4, 5, 5])],
                  [_init("w", rng.rand(4, 3, 3, 3)), _init("b", rng.rand(4))])


def test_spans_of_nodes_inputs_and_params():
    with tvm.testing.enable_span_filling():
        mod, _ = relay.frontend.from_onnx(_conv_relu_model(), freeze_params=False)
    spans = _spans(mod["main"])
    assert ("param", "x", "Conv_0.x") in spans and ("param", "w", "Conv_0.w") in spans
    assert ("param", "b", "Conv_0.b") in spans
    calls = [(name, span) for kind, name, span in spans if kind == "call"]
    assert calls == [("nn.relu", "last_relu"), ("nn.relu", "Relu_0"), ("nn.bias_add", "Conv_0"),
                     ("nn.conv2d", "Conv_0")]


def test_frozen_initializers_are_constants_with_parameter_spans():
    mod, _ = relay.frontend.from_onnx(_conv_relu_model(), freeze_params=True)  # fill_span is on by default
    spans = _spans(mod["main"])
    assert ("const", (4, 3, 3, 3), "Conv_0.w") in spans and ("const", (4,), "Conv_0.b") in spans
    assert ("param", "x", "Conv_0.x") in spans


def test_disabled_span_filling_leaves_no_spans_and_equal_modules():
    with tvm.testing.disable_span_filling():
        plain, _ = relay.frontend.from_onnx(_conv_relu_model(), freeze_params=False)
    assert all(span is None for _, _, span in _spans(plain["main"]))
    with tvm.testing.enable_span_filling():
        spanned, _ = relay.frontend.from_onnx(_conv_relu_model(), freeze_params=False)
    assert tvm.ir.structural_equal(plain["main"], spanned["main"])


def test_unnamed_nodes_are_counted_per_op_type_and_first_reader_names_an_input():
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("Relu", ["a"], ["b"], name="mine"),
             helper.make_node("Add", ["b", "x"], ["c"]),
             helper.make_node("Relu", ["c"], ["d"]),
             helper.make_node("Add", ["d", "k"], ["y"])]
    model = _model(nodes, [_info("x", [2, 3])], [_info("y", [2, 3])], [_init("k", np.ones((2, 3)))])
    with tvm.testing.enable_span_filling():
        mod, _ = relay.frontend.from_onnx(model)
    spans = _spans(mod["main"])
    calls = [(name, span) for kind, name, span in spans if kind == "call"]
    assert calls == [("add", "Add_1"), ("nn.relu", "Relu_1"), ("add", "Add_0"), ("nn.relu", "mine"),
                     ("nn.relu", "Relu_0")]
    assert ("param", "x", "Relu_0.x") in spans  # read first by Relu_0, later by Add_0: keeps the first
    assert ("const", (2, 3), "Add_1.k") in spans


def test_multi_output_node_and_constants_made_by_a_converter():
    nodes = [helper.make_node("Split", ["x"], ["p", "q"], axis=1, name="split"),
             helper.make_node("Mul", ["p", "q"], ["m"]),
             helper.make_node("LeakyRelu", ["m"], ["y"], alpha=0.2)]
    model = _model(nodes, [_info("x", [2, 4])], [_info("y", [2, 2])])
    with tvm.testing.enable_span_filling():
        mod, _ = relay.frontend.from_onnx(model)
    spans = _spans(mod["main"])
    for kind, name, span in spans:
        if kind in ("getitem", "tuple") or (kind == "call" and name == "split"):
            assert span == "split", (kind, name, span)
    assert ("call", "multiply", "Mul_0") in spans
    assert ("call", "nn.leaky_relu", "LeakyRelu_0") in spans
    assert ("param", "x", "split.x") in spans


def test_subgraph_nodes_share_the_count():
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [], [_info("t", [3])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [_info("e", [3])])
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("If", ["c"], ["i"], then_branch=then_g, else_branch=else_g),
             helper.make_node("Add", ["r", "i"], ["y"])]
    model = _model(nodes, [_info("x", [3]), _info("c", [], TensorProto.BOOL)], [_info("y", [3])])
    with tvm.testing.enable_span_filling():
        mod, _ = relay.frontend.from_onnx(model)
    names = set()
    stack = [mod["main"].body]
    while stack:
        e = stack.pop()
        if isinstance(e, relay.Call):
            names.add((e.op.name if hasattr(e.op, "name") else type(e.op).__name__, _span(e)))
            stack.extend(e.args)
        elif isinstance(e, relay.If):
            names.add(("if", _span(e)))
            stack.extend([e.true_branch, e.false_branch])
        elif isinstance(e, (relay.Let,)):
            stack.extend([e.value, e.body])
    assert ("nn.relu", "Relu_0") in names and ("nn.relu", "Relu_1") in names
    assert ("negative", "Neg_0") in names and ("add", "Add_0") in names


def test_spans_do_not_change_the_compiled_result():
    model = _conv_relu_model()
    x = np.random.RandomState(1).rand(1, 3, 5, 5).astype("float32")
    outs = []
    for ctx in (tvm.testing.enable_span_filling(), tvm.testing.disable_span_filling()):
        with ctx:
            mod, params = relay.frontend.from_onnx(model)
        outs.append(relay.create_executor("debug", mod=mod).evaluate()(x, **params).numpy())
    np.testing.assert_array_equal(outs[0], outs[1])
