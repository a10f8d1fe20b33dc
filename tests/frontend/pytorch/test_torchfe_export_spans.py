"""Source spans from relay.frontend.from_exported_program (torch.export), filled the way from_pytorch fills
them but named after the FX nodes: each node's expressions get its name, inputs and parameters
``<first reader>.<name>``; relay.frontend.fill_span=False leaves them out, and spans never change structural
equality."""
import pytest

from torch_frontend_util import torch

import kiln
from kiln import relay
from kiln.relay.expr import Call, Constant, TupleGetItem


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)
        self.lin = torch.nn.Linear(4, 5)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return self.lin(y.mean((2, 3))) * 2.0


def _export():
    torch.manual_seed(0)
    return torch.export.export(_Net().eval(), (torch.randn(1, 3, 9, 7),))


def _calls(expr) -> list:
    out, stack, seen = [], [expr], set()
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, Call):
            out.append(e)
            stack.extend(e.args)
        elif isinstance(e, TupleGetItem):
            stack.append(e.tuple_value)
    return out


def _name(span):
    return None if span is None else span.source_name.name


def test_spans_name_the_fx_nodes():
    ep = _export()
    nodes = {n.name for n in ep.graph.nodes}
    mod, _ = relay.frontend.from_exported_program(ep)
    main = mod["main"]
    params = {p.name_hint: _name(p.span) for p in main.params}
    assert params["x"] == "conv2d.x"
    assert params["conv.weight"] == "conv2d.conv.weight" and params["conv.bias"] == "conv2d.conv.bias"
    assert params["lin.weight"] == "linear.lin.weight"
    bn = [k for k in params if k.startswith("bn.")]
    assert bn and all(params[k].split(".")[0] in nodes and params[k].endswith(k) for k in bn)
    by_op = {}
    for c in _calls(main.body):
        assert c.span is not None, f"{c.op.name} has no span"
        assert _name(c.span) in nodes
        by_op.setdefault(c.op.name, set()).add(_name(c.span))
    assert by_op["nn.conv2d"] == {"conv2d"} and by_op["nn.dense"] == {"linear"}
    assert by_op["nn.relu"] == {"relu"} and by_op["mean"] == {"mean"}
    assert main.body.span is not None and _name(main.body.span) == "mul"


def test_constants_take_the_span_of_their_node():
    mod, _ = relay.frontend.from_exported_program(_export(), keep_params_as_input=False)
    conv = [c for c in _calls(mod["main"].body) if c.op.name == "nn.conv2d"][0]
    assert isinstance(conv.args[1], Constant) and _name(conv.args[1].span) == "conv2d"


def test_fill_span_off_and_structural_equality():
    ep = _export()
    with_spans, _ = relay.frontend.from_exported_program(ep)
    with kiln.transform.PassContext(config={"relay.frontend.fill_span": False}):
        without, _ = relay.frontend.from_exported_program(ep)
    assert all(p.span is None for p in without["main"].params)
    assert all(c.span is None for c in _calls(without["main"].body))
    assert kiln.ir.structural_equal(with_spans, without, map_free_vars=True)


def test_data_dependent_nodes_get_spans():
    class M(torch.nn.Module):
        def forward(self, x):
            return x[x > 0] * 2

    ep = torch.export.export(M(), (torch.randn(4, 5),))
    mod, _ = relay.frontend.from_exported_program(ep)
    names = {_name(c.span) for c in _calls(mod["main"].body)}
    assert {"gt", "index", "mul"} <= names
