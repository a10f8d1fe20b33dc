import pytest

import kiln
from kiln.ir import Attrs, AttrsError, DictAttrs, Field, Op, make_node, register_op, register_op_attr
from kiln.ir import structural_equal, OpRegistryError
from kiln.ir.op import _remove_op_for_tests


class PoolTestAttrs(Attrs):
    type_key = "relay.attrs.PoolTestAttrs"
    fields = {"pool_size": (1, 1), "strides": (1, 1), "layout": "NCHW", "ceil_mode": False,
              "alpha": Field(0.5, float, "a scale")}


def test_attrs_access_and_defaults():
    a = make_node("relay.attrs.PoolTestAttrs", pool_size=[2, 2])
    assert isinstance(a, PoolTestAttrs)
    assert a.pool_size == (2, 2) and a["pool_size"] == (2, 2)
    assert a.strides == (1, 1) and a.layout == "NCHW" and a.ceil_mode is False
    assert a.keys() == ["pool_size", "strides", "layout", "ceil_mode", "alpha"]
    assert "layout" in a
    assert a.get_int_tuple("pool_size") == (2, 2)
    assert a.non_default_items() == [("pool_size", (2, 2))]


def test_attrs_convert_and_errors():
    a = PoolTestAttrs(alpha=2)
    assert isinstance(a.alpha, float) and a.alpha == 2.0
    with pytest.raises(AttrsError) as err:
        PoolTestAttrs(pool_sizes=(2, 2))
    assert "pool_sizes" in str(err.value) and "pool_size" in str(err.value)
    with pytest.raises(AttrsError) as err:
        make_node("relay.attrs.PoolTestAtrs")
    assert "PoolTestAttrs" in str(err.value)
    with pytest.raises(AttributeError):
        a.nothing
    with pytest.raises(KeyError):
        a["nothing"]


def test_attrs_structural_equality():
    a = PoolTestAttrs(pool_size=(2, 2))
    b = PoolTestAttrs(pool_size=[2, 2])
    c = PoolTestAttrs(pool_size=(3, 3))
    assert structural_equal(a, b) and not structural_equal(a, c)
    assert kiln.ir.structural_hash(a) == kiln.ir.structural_hash(b)


def test_dict_attrs():
    d = DictAttrs({"Primitive": 1, "global_symbol": "f"})
    assert d["Primitive"] == 1 and d.Primitive == 1 and d.get("x", 3) == 3
    assert sorted(d.keys()) == ["Primitive", "global_symbol"]
    assert structural_equal(d, DictAttrs({"global_symbol": "f", "Primitive": 1}))
    d2 = d.with_attr("Inline", 1)
    assert "Inline" in d2 and "Inline" not in d


def test_op_get_unknown_lists_close_names():
    register_op("test.reg.conv2d")
    with pytest.raises(OpRegistryError) as err:
        Op.get("test.reg.conv2")
    assert "test.reg.conv2d" in str(err.value)
    assert isinstance(err.value, kiln.KilnError)
    _remove_op_for_tests("test.reg.conv2d")


def test_op_metadata_and_attrs_levels():
    op = register_op("test.reg.relu", "a relu")
    assert Op.get("test.reg.relu") is op and register_op("test.reg.relu") is op
    op.set_num_inputs(1).add_argument("data", "Tensor").set_support_level(2).set_attrs_type(PoolTestAttrs)
    assert op.num_inputs == 1 and op.support_level == 2 and op.attrs_type_key == "relay.attrs.PoolTestAttrs"
    assert op.arguments[0].name == "data"
    assert op.make_attrs(layout="NHWC").layout == "NHWC"
    op.set_attr("TOpPattern", 0)
    assert op.get_attr("TOpPattern") == 0 and op.get_attr("missing") is None
    with pytest.raises(OpRegistryError):
        op.set_attr("TOpPattern", 1)  # same level
    op.set_attr("TOpPattern", 2, plevel=5)  # lower level ignored
    assert op.get_attr("TOpPattern") == 0
    op.set_attr("TOpPattern", 3, plevel=11)  # higher overrides
    assert op.get_attr("TOpPattern") == 3

    @register_op_attr("test.reg.relu", "FTVMCompute")
    def compute(attrs, inputs, out_type):
        return inputs

    assert op.get_attr("FTVMCompute") is compute
    register_op_attr("test.reg.relu", "FReference", len)
    assert op.get_attr("FReference") is len
    assert "FReference" in op.list_attrs()
    assert kiln.ir.get_op_attr_map("FReference")["test.reg.relu"] is len
    _remove_op_for_tests("test.reg.relu")


def test_op_without_attrs_rejects_values():
    op = register_op("test.reg.noattrs")
    assert op.make_attrs() is None
    with pytest.raises(OpRegistryError):
        op.make_attrs(axis=1)
    _remove_op_for_tests("test.reg.noattrs")


def test_named_type_relation():
    kiln.ir.register_type_relation("TestIdentityRel", lambda ts, attrs: ts[0])
    op = register_op("test.reg.ident").add_type_rel("TestIdentityRel")
    assert op.type_rel_name == "TestIdentityRel" and op.get_attr("FTypeRelation") is not None
    with pytest.raises(OpRegistryError):
        op.add_type_rel("NoSuchRel")
    _remove_op_for_tests("test.reg.ident")
