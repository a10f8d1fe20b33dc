import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.error import KilnError, RelayError
from kiln.ir import Op, structural_equal, structural_hash

import relay_test_ops  # noqa: F401  (registers test.* ops)

ADD = Op.get("test.add")


def add(a, b):
    return relay.Call(ADD, [a, b])


def test_var_and_const_constructors():
    x = relay.var("x", shape=(1, 3), dtype="float16")
    assert x.name_hint == "x" and x.type_annotation == kiln.ir.TensorType((1, 3), "float16")
    s = relay.var("s", "int64")
    assert s.type_annotation == kiln.ir.TensorType((), "int64")
    with pytest.raises(RelayError):
        relay.var("z", relay.TensorType((1,)), shape=(1,))
    assert relay.const(1).dtype == "int32" and relay.const(1.5).dtype == "float32"
    assert relay.const(np.ones(3)).dtype == "float32"  # float64 arrays default to float32, as TVM
    assert relay.const(np.ones(3), "float64").dtype == "float64"
    c = relay.const([1, 2, 3], "int8")
    np.testing.assert_array_equal(c.data.numpy(), [1, 2, 3])
    assert c.data.numpy().dtype == np.int8


def test_constant_is_immutable_copy():
    a = np.arange(4, dtype="float32")
    c = relay.const(a)
    a[0] = 100
    assert c.data.numpy()[0] == 0


def test_call_checks_argument_types():
    with pytest.raises(RelayError):
        relay.Call(ADD, [relay.var("x"), 3])
    with pytest.raises(RelayError):
        relay.Function([3], relay.var("x"))


def test_alpha_equivalence():
    x, y = relay.var("x", shape=(2,)), relay.var("y", shape=(2,))
    f1 = relay.Function([x], add(x, x))
    f2 = relay.Function([y], add(y, y))
    assert structural_equal(f1, f2)
    assert structural_hash(f1) == structural_hash(f2)
    z = relay.var("z", shape=(3,))
    assert not structural_equal(f1, relay.Function([z], add(z, z)))  # annotations differ
    w = relay.var("w", shape=(2,))
    assert not structural_equal(f1, relay.Function([x, w], add(x, w)))


def test_free_vars_not_equal_unless_mapped():
    x, y = relay.var("x", shape=(2,)), relay.var("y", shape=(2,))
    assert not structural_equal(add(x, x), add(y, y))
    assert structural_equal(add(x, x), add(y, y), map_free_vars=True)
    assert not structural_equal(add(x, x), add(x, y), map_free_vars=True)


def test_let_alpha_equivalence():
    x = relay.var("x", shape=(2,))
    a, b = relay.var("a"), relay.var("b")
    l1 = relay.Function([x], relay.Let(a, add(x, x), add(a, a)))
    l2 = relay.Function([x], relay.Let(b, add(x, x), add(b, b)))
    assert structural_equal(l1, l2)


def test_tuple_get_item_if():
    x = relay.var("x", shape=(2,))
    t = relay.Tuple([x, x])
    assert len(t) == 2 and t[0] is x
    g = relay.TupleGetItem(t, 1)
    assert g.index == 1 and g.tuple_value is t
    c = relay.var("c", "bool")
    i = relay.If(c, x, g)
    assert i.cond is c


def test_operators_need_registered_ops():
    x = relay.var("x", shape=(2,))
    if "add" in Op.list_op_names():
        call = x + x
        assert isinstance(call, relay.Call) and call.op.name == "add"
    else:
        with pytest.raises(RelayError) as err:
            x + x
        assert "'add'" in str(err.value)
    with pytest.raises(TypeError):
        x + "s"


def test_checked_type_before_inference():
    x = relay.var("x", shape=(2,))
    with pytest.raises(KilnError) as err:
        add(x, x).checked_type
    assert "InferType" in str(err.value)


def test_visitor_visits_shared_nodes_once():
    x = relay.var("x", shape=(2,))
    shared = add(x, x)
    out = add(shared, shared)
    calls = []

    class Counter(relay.ExprVisitor):
        def visit_call(self, call):
            calls.append(call)
            super().visit_call(call)

    Counter().visit(out)
    assert len(calls) == 2
    order = []
    relay.post_order_visit(out, lambda n: order.append(n))
    assert order.index(shared) < order.index(out) and order.count(shared) == 1


def test_mutator_keeps_sharing_and_identity():
    x = relay.var("x", shape=(2,))
    shared = add(x, x)
    out = relay.Tuple([shared, add(shared, x)])
    assert relay.ExprMutator().visit(out) is out
    y = relay.var("y", shape=(2,))

    class Swap(relay.ExprMutator):
        def visit_var(self, v):
            return y if v is x else v

    new = Swap().visit(out)
    assert new is not out
    assert new.fields[0] is new.fields[1].args[0]  # still shared
    assert new.fields[1].args[1] is y


def test_deep_chain_does_not_overflow():
    x = relay.var("x", shape=(2,))
    e = x
    for _ in range(5000):
        e = add(e, x)
    assert relay.analysis.count_nodes(e) == 5002
    new = relay.ExprMutator().visit(e)
    assert new is e


def test_free_bound_all_vars():
    x, y, z = relay.var("x"), relay.var("y"), relay.var("z")
    body = relay.Let(z, add(x, y), add(z, x))
    f = relay.Function([x], body)
    assert relay.analysis.free_vars(f) == [y]
    assert set(relay.analysis.bound_vars(f)) == {x, z}
    assert set(relay.analysis.all_vars(f)) == {x, y, z}
    assert relay.analysis.free_vars(add(y, x)) == [y, x]


def test_free_type_vars():
    a = relay.TypeVar("A")
    x = relay.var("x", a)
    f = relay.Function([x], x, ret_type=a, type_params=[a])
    assert relay.analysis.free_type_vars(f) == []
    assert relay.analysis.bound_type_vars(f) == [a]
    g = relay.Function([x], x)
    assert relay.analysis.free_type_vars(g) == [a]


def test_bind_and_bind_params_by_name():
    x, w = relay.var("x", shape=(2,)), relay.var("weight", shape=(2,))
    f = relay.Function([x, w], add(x, w))
    value = np.array([1, 2], dtype="float32")
    g = relay.build_module.bind_params_by_name(f, {"weight": value, "unused": value})
    assert list(g.params) == [x]
    c = g.body.args[1]
    assert isinstance(c, relay.Constant)
    np.testing.assert_array_equal(c.data.numpy(), value)
    assert relay.bind_params_by_name is relay.build_module.bind_params_by_name
    h = relay.bind(add(x, w), {w: relay.const(1.0)})
    assert isinstance(h.args[1], relay.Constant) and h.args[0] is x
    dup = relay.Function([relay.var("a"), relay.var("a")], relay.const(1))
    with pytest.raises(RelayError):
        relay.build_module.bind_params_by_name(dup, {"a": value})


def test_function_attrs():
    x = relay.var("x")
    f = relay.Function([x], x).with_attr("Primitive", 1)
    assert f.attrs["Primitive"] == 1 and f.get_attr("Primitive") == 1
    assert f.without_attr("Primitive").attrs is None


def test_tuple_wrapper():
    x = relay.var("x", shape=(4,))
    tw = relay.TupleWrapper(relay.Call(Op.get("test.split2"), [x]), 2)
    assert len(tw) == 2 and isinstance(tw[1], relay.TupleGetItem) and tw[-1].index == 1
    assert len(list(tw)) == 2
