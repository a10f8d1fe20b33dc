"""TVM-classic Relay API: build unpacking, ScopeBuilder, annotations, references, helpers, memory plan."""
import json
import warnings

import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.contrib import graph_executor
from kiln.error import KilnError

RNG = np.random.default_rng(7)


def _run_graph(mod, *inputs):
    return relay.create_executor("graph", mod=mod, target="llvm").evaluate()(*inputs)


def test_build_unpacks_legacy_triple_with_deprecation_warning():
    x = relay.var("x", shape=(3, 5))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.exp(x) * relay.const(2.0)))
    lib = relay.build(mod, "llvm")
    with pytest.warns(DeprecationWarning):
        graph_json, kernels, params = lib
    assert json.loads(graph_json)["nodes"][0]["name"] == "x"
    assert lib[0] == graph_json and lib[1] is kernels and lib[2] is params
    m = graph_executor.create(graph_json, kernels, tvm.cpu())
    m.set_input(**params)
    xn = RNG.standard_normal((3, 5)).astype("float32")
    m.set_input("x", xn)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), np.exp(xn) * 2, rtol=1e-5)


def test_scope_builder_if_else_and_lets():
    x = relay.var("x", shape=(), dtype="float32")
    sb = relay.ScopeBuilder()
    y = sb.let("y", x * relay.const(2.0))
    with sb.if_scope(relay.greater(y, relay.const(0.0))):
        sb.ret(y + relay.const(1.0))
    with sb.else_scope():
        z = sb.let(("z", relay.TensorType((), "float32")), y - relay.const(1.0))
        sb.ret(z)
    mod = tvm.IRModule.from_expr(relay.Function([x], sb.get()))
    run = relay.create_executor("debug", mod=mod).evaluate()
    assert float(run(np.float32(3.0)).numpy()) == 7.0
    assert float(run(np.float32(-3.0)).numpy()) == -7.0
    bad = relay.ScopeBuilder()
    with bad.if_scope(relay.const(True)):
        bad.ret(relay.const(1.0))
    with pytest.raises(KilnError, match="else"):
        bad.get()


def test_stop_fusion_splits_kernels_and_on_device_is_removed():
    x = relay.var("x", shape=(4, 6))
    y = relay.annotation.stop_fusion(relay.exp(x))
    y = relay.annotation.on_device(relay.sqrt(y), tvm.cpu(0))
    mod = tvm.IRModule.from_expr(relay.Function([x], y))
    lib = relay.build(mod, "llvm")
    names = [n.get("attrs", {}).get("func_name") for n in json.loads(lib.get_graph_json())["nodes"]]
    assert sum(1 for n in names if n and "exp" in n) == 1 and sum(1 for n in names if n and "sqrt" in n) == 1
    assert not any(n and "on_device" in n for n in names)
    xn = RNG.random((4, 6)).astype("float32")
    np.testing.assert_allclose(_run_graph(mod, xn).numpy(), np.sqrt(np.exp(xn)), rtol=1e-5)
    assert tvm.target.VirtualDevice(tvm.cpu(0)).device_type_int == 1


def test_on_device_for_another_device_is_refused():
    x = relay.var("x", shape=(2,))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.annotation.on_device(x + x, tvm.cuda(0))))
    with pytest.raises(NotImplementedError, match="one device"):
        relay.build(mod, "llvm")


def test_references_in_the_interpreter_and_refused_by_graph_executor():
    x = relay.var("x", shape=(3,))
    sb = relay.ScopeBuilder()
    r = sb.let("r", relay.RefCreate(x))
    sb.let("w", relay.RefWrite(r, relay.RefRead(r) + relay.const(1.0)))
    sb.ret(relay.RefRead(r))
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x], sb.get())))
    assert isinstance(mod["main"].body.value.checked_type, relay.RefType)
    assert "ref(%x)" in mod.astext()
    xn = RNG.random(3).astype("float32")
    out = relay.create_executor("debug", mod=mod).evaluate()(xn)
    np.testing.assert_allclose(out.numpy(), xn + 1, rtol=1e-6)
    with pytest.raises(KilnError, match="RefCreate"):
        _run_graph(mod, xn)
    with pytest.raises(KilnError, match="reference"):
        relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x], relay.RefRead(x))))


@pytest.mark.parametrize("axis,keepdims,unbiased", [(1, False, False), ((0, 2), True, True), (None, False, False)])
def test_mean_variance_and_mean_std(axis, keepdims, unbiased):
    x = relay.var("x", shape=(3, 5, 7))
    mv = relay.mean_variance(x, axis=axis, keepdims=keepdims, unbiased=unbiased)
    ms = relay.mean_std(x, axis=axis, keepdims=keepdims, unbiased=unbiased)
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.Tuple([mv[0], mv[1], ms[1]])))
    xn = RNG.standard_normal((3, 5, 7)).astype("float32")
    ddof = 1 if unbiased else 0
    out = _run_graph(mod, xn)
    np.testing.assert_allclose(out[0].numpy(), xn.mean(axis=axis, keepdims=keepdims), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[1].numpy(), xn.var(axis=axis, keepdims=keepdims, ddof=ddof), rtol=1e-4)
    np.testing.assert_allclose(out[2].numpy(), xn.std(axis=axis, keepdims=keepdims, ddof=ddof), rtol=1e-4)


@pytest.mark.parametrize("shape,vshape,begin,end,strides", [
    ((5, 7), (2, 4), [1, 0], [5, 7], [2, 2]),
    ((6, 3), (3, 1), [5, 2], [-7, 3], [-2, 1]),
    ((4, 9), (9,), [3], [4], None),
])
def test_strided_set(shape, vshape, begin, end, strides):
    x = relay.var("x", shape=shape)
    v = relay.var("v", shape=vshape)
    s = relay.const(strides) if strides is not None else None
    y = relay.strided_set(x, v, relay.const(begin), relay.const(end), s)
    mod = tvm.IRModule.from_expr(relay.Function([x, v], y))
    xn = RNG.standard_normal(shape).astype("float32")
    vn = RNG.standard_normal(vshape).astype("float32")
    expect = xn.copy()
    expect[tuple(slice(b, e, st) for b, e, st in zip(begin, end, strides or [1] * len(begin)))] = vn
    np.testing.assert_allclose(_run_graph(mod, xn, vn).numpy(), expect)
    np.testing.assert_allclose(relay.create_executor("debug", mod=mod).evaluate()(xn, vn).numpy(), expect)


def test_reshape_is_a_nop_sharing_storage():
    x = relay.var("x", shape=(4, 6))
    a = relay.annotation.stop_fusion(relay.exp(x))
    b = relay.reshape(a, (6, 4))
    c = relay.sqrt(relay.annotation.stop_fusion(b))
    d = relay.reshape(c, (24,))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.Tuple([d, relay.reshape(d, (2, 12))])))
    graph = json.loads(relay.build(mod, "llvm").get_graph_json())
    sids = graph["attrs"]["storage_id"][1]
    rows = graph["node_row_ptr"]
    for nid, node in enumerate(graph["nodes"]):
        if node.get("attrs", {}).get("func_name") == "__nop":
            src = node["inputs"][0]
            assert sids[rows[nid]] == sids[rows[src[0]] + src[1]]
    assert sum(1 for n in graph["nodes"] if n.get("attrs", {}).get("func_name") == "__nop") == 3
    xn = RNG.random((4, 6)).astype("float32")
    out = _run_graph(mod, xn)
    np.testing.assert_allclose(out[0].numpy(), np.sqrt(np.exp(xn)).reshape(24), rtol=1e-5)
    np.testing.assert_allclose(out[1].numpy(), np.sqrt(np.exp(xn)).reshape(2, 12), rtol=1e-5)


def test_graph_plan_memory_entry_point():
    from kiln.relay.backend import _backend
    x = relay.var("x", shape=(10,))
    y = relay.add(x, x)
    z = relay.add(y, y)
    w = relay.multiply(z, z)
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x], relay.exp(w))))
    mod = relay.transform.InferType()(relay.transform.FuseOps(0)(mod))
    plan = _backend.GraphPlanMemory(mod["main"])
    ids, devs, sizes = set(), set(), {}
    for info in plan.expr_to_storage_info.values():
        ids.update(info.storage_ids)
        devs.update(info.device_types)
        sizes.update(zip(info.storage_ids, info.storage_sizes_in_bytes))
    # x, the output, and two intermediate blocks reused in turn
    assert len(ids) == 4 and devs == {1} and set(sizes.values()) == {40}


def test_span_names_ty_and_annotate_spans():
    assert relay.Span(relay.SourceName("a.py"), 3, 4, 3, 9).line == 3
    assert relay.ty.TensorType is relay.TensorType and relay.ty.RefType is relay.RefType
    x = relay.var("x", shape=(3,))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.exp(x) + relay.const(2.0)))
    annotated = relay.transform.AnnotateSpans()(mod)
    assert annotated["main"].body.span is not None
    assert tvm.ir.structural_equal(annotated, mod)
    with tvm.testing.disable_span_filling():
        assert tvm.transform.PassContext.current().config["relay.frontend.fill_span"] is False
    with tvm.transform.PassContext(opt_level=3):
        with tvm.testing.enable_span_filling():
            ctx = tvm.transform.PassContext.current()
            assert ctx.opt_level == 3 and ctx.config["relay.frontend.fill_span"] is True


def test_container_module():
    assert isinstance([1, 2], tvm.container.Array) and isinstance({}, tvm.container.Map)
    assert tvm.container.Array((1, 2)) == [1, 2]
    assert tvm.container.ShapeTuple([2, 3]) == (2, 3)
    assert isinstance(tvm.container.String("a"), str)
