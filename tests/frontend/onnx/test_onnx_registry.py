"""The ONNX converter registry: @onnx_op versions chosen by the opset of the node's domain, `until`, custom
domains, the adapter for converters written as classes, and the unsupported-op report across domains."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from kiln import relay
from kiln.error import KilnError, OpNotImplemented
from kiln.relay import op as _op
from kiln.relay.frontend.onnx import supported_ops
from kiln.relay.frontend.onnx_common import REGISTRY, OnnxOpConverter, const, lookup, onnx_op, register

from onnx_helpers import build

DOMAIN = "com.kiln.test"


@pytest.fixture
def domain():
    """A custom domain the test registers converters in; removed afterwards."""
    yield DOMAIN
    REGISTRY.pop(DOMAIN, None)


def _model(nodes, domain_version: int, default_opset: int = 17):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", default_opset),
                                                    helper.make_opsetid(DOMAIN, domain_version)])
    model.ir_version = min(model.ir_version, 10)
    return model


def _node(op_type):
    return helper.make_node(op_type, ["x"], ["y"], domain=DOMAIN, name="n0")


def _run(model, x):
    mod, params = relay.frontend.from_onnx(model)
    m = build(mod, params)
    m.set_input("x", x)
    m.run()
    return m.get_output(0).numpy()


def _times(x, factor):
    return _op.multiply(x, const(np.float32(factor)))


def test_highest_since_not_above_the_domains_opset(domain):
    @onnx_op("Scale", since=1, domain=domain)
    def _scale_v1(inputs, attr, ctx):
        return _times(inputs[0], 2)

    @onnx_op("Scale", since=3, domain=domain)
    def _scale_v3(inputs, attr, ctx):
        return _times(inputs[0], ctx.opset)  # the node's domain opset, not the default domain's 17

    x = np.random.default_rng(0).standard_normal((3, 5)).astype("float32")
    for version, factor in ((1, 2), (2, 2), (3, 3), (7, 7)):
        np.testing.assert_allclose(_run(_model([_node("Scale")], version), x), x * factor, rtol=1e-6)
    assert lookup("Scale", domain).versions() == [1, 3]
    assert supported_ops(2, domain=domain) == ["Scale"]


def test_until_closes_a_range(domain):
    @onnx_op("Old", since=2, until=4, domain=domain)
    def _old(inputs, attr, ctx):
        return _times(inputs[0], 4)

    x = np.arange(15, dtype="float32").reshape(3, 5) - 7
    np.testing.assert_allclose(_run(_model([_node("Old")], 4), x), x * 4)
    with pytest.raises(OpNotImplemented, match=r"com\.kiln\.test::Old \(opset 5; kiln's converter stops at opset 4\)"):
        relay.frontend.from_onnx(_model([_node("Old")], 5))
    with pytest.raises(OpNotImplemented, match=r"com\.kiln\.test::Old \(opset 1; kiln starts at opset 2\)"):
        relay.frontend.from_onnx(_model([_node("Old")], 1))
    with pytest.raises(KilnError, match="until=1 is below since=2"):
        onnx_op("Older", since=2, until=1, domain=domain)(_old)


def test_class_convention_registers_through_the_adapter(domain):
    @register("Legacy", domain=domain)
    class Legacy(OnnxOpConverter):
        @classmethod
        def _scaled(cls, x, factor):
            return _times(x, factor)

        @classmethod
        def _impl_v1(cls, inputs, attr, ctx):
            return cls._scaled(inputs[0], 2)

        @classmethod
        def _impl_v5(cls, inputs, attr, ctx):
            return cls._scaled(inputs[0], 5)

    assert lookup("Legacy", domain).versions() == [1, 5]
    assert Legacy.get_converter(4) == Legacy._impl_v1  # the class keeps its old interface
    x = np.random.default_rng(1).standard_normal((3, 5)).astype("float32")
    np.testing.assert_allclose(_run(_model([_node("Legacy")], 4), x), x * 2, rtol=1e-6)
    np.testing.assert_allclose(_run(_model([_node("Legacy")], 6), x), x * 5, rtol=1e-6)
    with pytest.raises(KilnError, match="no _impl_v<N>"):
        register("Empty", domain=domain)(type("Empty", (OnnxOpConverter,), {}))


def test_a_version_registered_twice_is_an_error(domain):
    onnx_op("Twice", since=3, domain=domain)(lambda inputs, attr, ctx: inputs[0])
    with pytest.raises(KilnError, match=r"com\.kiln\.test::Twice \(since opset 3\) registered twice"):
        onnx_op("Twice", since=3, domain=domain)(lambda inputs, attr, ctx: inputs[0])
    with pytest.raises(KilnError, match="registered twice"):
        onnx_op("Relu", since=1)(lambda inputs, attr, ctx: inputs[0])  # the built-in table is not overwritten


def test_default_domain_spellings():
    assert lookup("Relu") is lookup("Relu", "ai.onnx") is not None
    assert lookup("Relu", "com.microsoft") is None
    assert "Relu" in supported_ops(13) and "Attention" not in supported_ops(22) and "Attention" in supported_ops(23)


def test_unsupported_ops_of_all_domains_are_listed_together(domain):
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("GridSample", ["a", "a"], ["b"], name="gs"),
             helper.make_node("Nope", ["b"], ["y"], domain=DOMAIN, name="nope")]
    with pytest.raises(OpNotImplemented) as info:
        relay.frontend.from_onnx(_model(nodes, 1))
    msg = str(info.value)
    assert "GridSample" in msg and "com.kiln.test::Nope" in msg and "Relu" not in msg


def test_dynamic_variants_live_in_the_same_registry():
    """onnx_dynamic.py registers with @onnx_op(..., dynamic=True): one table, one lookup, a second column."""
    import kiln.relay.frontend.onnx_dynamic as dyn_mod
    entry = lookup("Reshape")
    static, dynamic = entry.get_converter(13), entry.get_converter(13, dynamic=True)
    assert static is not None and dynamic is not None and static is not dynamic
    assert dynamic.__module__ == dyn_mod.__name__
    assert entry.get_converter(4, dynamic=True) is None          # the run-time Reshape starts at opset 5
    assert lookup("Resize").get_converter(10, dynamic=True) is None
    assert not hasattr(dyn_mod, "DYNAMIC_CONVERTERS")             # no second table


def test_a_dynamic_variant_is_chosen_only_when_the_static_one_refuses(domain):
    seen = []

    def static(inputs, attr, ctx):
        err = KilnError("shape operand known only at run time")
        err.runtime_inputs = [0]
        raise err

    def dynamic(inputs, attr, ctx):
        seen.append(ctx.opset)
        return _op.add(inputs[0], const(np.float32(3)))
    onnx_op("Later", since=1, domain=domain)(static)
    onnx_op("Later", since=2, domain=domain, dynamic=True)(dynamic)
    with pytest.raises(KilnError, match=r"dynamic ONNX converter for com\.kiln\.test::Later \(since opset 2\)"):
        onnx_op("Later", since=2, domain=domain, dynamic=True)(dynamic)
    x = np.random.default_rng(2).standard_normal((3, 5)).astype("float32")
    np.testing.assert_allclose(_run(_model([_node("Later")], 3), x), x + 3, rtol=1e-6)
    assert seen == [3]
    with pytest.raises(KilnError, match="run time"):               # below the variant's opset: the error stands
        _run(_model([_node("Later")], 1), x)
