"""relay.build API: options, old spellings, executors ("graph", "vm"), param dicts, bad input."""
import json

import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.contrib import graph_executor
from kiln.error import ArgumentError, KilnError, LoweringError, ModuleLoadError


def _small_func(shape=(3, 5)):
    x = relay.var("x", shape=shape, dtype="float32")
    w = relay.var("w", shape=shape, dtype="float32")
    y = relay.nn.relu(relay.add(x, w)) * relay.const(3.0)
    return relay.Function([x, w], y)


def _build(func, params=None, opt_level=3, **kw):
    with tvm.transform.PassContext(opt_level=opt_level):
        return relay.build(tvm.IRModule.from_expr(func), target="llvm", params=params, **kw)


def test_graph_json_format():
    lib = _build(_small_func())
    g = json.loads(lib.get_graph_json())
    assert set(g) == {"nodes", "arg_nodes", "heads", "attrs", "node_row_ptr"}
    assert [n["op"] for n in g["nodes"]] == ["null", "null", "tvm_op"]
    op = g["nodes"][2]
    assert op["inputs"] == [[0, 0, 0], [1, 0, 0]]
    assert op["attrs"]["func_name"].startswith("tvmgen_default_fused_")
    assert op["attrs"]["num_inputs"] == "2" and op["attrs"]["num_outputs"] == "1" and op["attrs"]["flatten_data"] == "0"
    assert g["arg_nodes"] == [0, 1] and g["heads"] == [[2, 0, 0]] and g["node_row_ptr"] == [0, 1, 2, 3]
    assert g["attrs"]["shape"] == ["list_shape", [[3, 5]] * 3]
    assert g["attrs"]["dltype"] == ["list_str", ["float32"] * 3]
    assert g["attrs"]["storage_id"][0] == "list_int"
    assert g["attrs"]["device_index"][0] == "list_int"


def test_params_are_bound_and_kept_out_of_the_graph():
    w = np.random.randn(3, 5).astype("float32")
    lib = _build(_small_func(), params={"w": w}, opt_level=0)
    assert "w" not in [n["name"] for n in json.loads(lib.get_graph_json())["nodes"]]
    params = lib.get_params()
    assert params and all(k.startswith("p") for k in params)
    assert not any("data" in k for k in json.loads(lib.get_graph_json())["attrs"])
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    x = np.random.randn(3, 5).astype("float32")
    m.set_input("x", x)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), np.maximum(x + w, 0) * 3, rtol=1e-6)
    shapes, dtypes = m.get_input_info()
    assert shapes == {"x": (3, 5)} and dtypes == {"x": "float32"}


def test_identical_fused_functions_compile_once():
    x = relay.var("x", shape=(4, 6), dtype="float32")
    y = x
    for _ in range(5):
        y = relay.nn.relu(relay.add(y, x))
    lib = _build(relay.Function([x], y), opt_level=0)  # no fusion: 5 adds and 5 relus
    # the first add is add(x, x): x is passed once (TVM's GetOrAllocParam), so it is a one-parameter
    # function of its own; the other four adds are one kernel, the five relus another
    assert len(lib.lowered) == 3
    g = json.loads(lib.get_graph_json())
    ops = [n for n in g["nodes"] if n["op"] == "tvm_op"]
    assert len(ops) == 10 and len({n["attrs"]["func_name"] for n in ops}) == 3
    assert sorted(len(n["inputs"]) for n in ops if "add" in n["attrs"]["func_name"]) == [1, 2, 2, 2, 2]
    assert len({n["name"] for n in ops}) == 10  # node names stay unique
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    xv = np.random.randn(4, 6).astype("float32")
    m.run(x=xv)
    want = xv
    for _ in range(5):
        want = np.maximum(want + xv, 0)
    np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-5)


def test_tuple_outputs_and_multi_output_kernel():
    x = relay.var("x", shape=(6, 4), dtype="float32")
    parts = relay.split(x, indices_or_sections=3, axis=0)
    out = relay.Tuple([relay.exp(parts[0]), parts[2], relay.add(parts[1], parts[2])])
    lib = _build(relay.Function([x], out))
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    xv = np.random.randn(6, 4).astype("float32")
    m.run(x=xv)
    assert m.get_num_outputs() == 3
    np.testing.assert_allclose(m.get_output(0).numpy(), np.exp(xv[:2]), rtol=1e-6)
    np.testing.assert_allclose(m.get_output(1).numpy(), xv[4:])
    np.testing.assert_allclose(m.get_output(2).numpy(), xv[2:4] + xv[4:], rtol=1e-6)


def test_optimize_returns_fused_module():
    mod, _ = relay.optimize(tvm.IRModule.from_expr(_small_func()), target="llvm")
    text = mod.astext()
    assert "Primitive=1" in text


def test_pass_context_disabled_pass_is_honoured():
    x = relay.var("x", shape=(2, 2), dtype="float32")
    c = relay.add(relay.const(np.ones((2, 2), "float32")), relay.const(np.ones((2, 2), "float32")))
    func = relay.Function([x], relay.add(x, c))
    with tvm.transform.PassContext(opt_level=3):
        folded = relay.build(tvm.IRModule.from_expr(func), target="llvm")
    with tvm.transform.PassContext(opt_level=3, disabled_pass=["FoldConstant", "FoldScaleAxis"]):
        unfolded = relay.build(tvm.IRModule.from_expr(func), target="llvm")
    kernels = lambda lib: [c.func_name for c in lib.lowered]  # noqa: E731
    assert kernels(folded) == ["tvmgen_default_fused_add"]
    assert kernels(unfolded) == ["tvmgen_default_fused_add_add"]
    with tvm.transform.PassContext(opt_level=1):  # FoldConstant is an opt level 2 pass
        low = relay.build(tvm.IRModule.from_expr(func), target="llvm")
    assert kernels(low) == ["tvmgen_default_fused_add_add"]
    for lib in (folded, unfolded):
        m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
        m.run(x=np.zeros((2, 2), "float32"))
        np.testing.assert_allclose(m.get_output(0).numpy(), np.full((2, 2), 2.0))


# -- old spellings ------------------------------------------------------------------------------------
def test_build_config_and_graph_runtime_aliases():
    with pytest.warns(DeprecationWarning):
        ctx = relay.build_config(opt_level=2)
    with ctx:
        lib = relay.build(tvm.IRModule.from_expr(_small_func()), target="llvm")
    from kiln.contrib import graph_runtime
    with pytest.warns(DeprecationWarning):
        m = graph_runtime.create(lib.get_graph_json(), lib.get_lib(), tvm.cpu(0))
    x = np.ones((3, 5), "float32")
    m.run(x=x, w=x)
    np.testing.assert_allclose(m.get_output(0).numpy(), np.full((3, 5), 6.0))


def test_bare_function_is_deprecated_but_builds():
    with pytest.warns(DeprecationWarning):
        lib = relay.build(_small_func(), target="llvm")
    assert lib["default"](tvm.cpu(0)).get_num_outputs() == 1


def test_old_three_value_unpacking_warns_and_says_how_to_migrate():
    lib = _build(_small_func())
    with pytest.warns(DeprecationWarning, match="get_graph_json"):  # TVM v0.13 still unpacks, with a warning
        graph, mod, params = lib
    assert graph == lib.get_graph_json() and mod is lib.get_lib() and params is lib.get_params()


def test_executor_and_runtime_options():
    from kiln.relay.executor import Executor
    from kiln.relay.runtime import Runtime
    lib = relay.build(tvm.IRModule.from_expr(_small_func()), target="llvm", executor=Executor("graph"),
                      runtime=Runtime("cpp"), mod_name="mymod")
    assert lib["mymod"](tvm.cpu(0)).get_num_inputs() == 2
    with pytest.raises(NotImplementedError, match="aot"):
        relay.build(tvm.IRModule.from_expr(_small_func()), target="llvm", executor=Executor("aot"))
    with pytest.raises(KilnError, match="unknown executor"):
        Executor("interp")


# -- executors ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["graph", "vm"])
def test_create_executor_kinds(kind):
    func = _small_func((4, 7))
    mod = tvm.IRModule.from_expr(func)
    x = np.random.randn(4, 7).astype("float32")
    w = np.random.randn(4, 7).astype("float32")
    out = relay.create_executor(kind, mod=mod, device=tvm.cpu(0), target="llvm").evaluate()(x, w)
    np.testing.assert_allclose(out.numpy(), np.maximum(x + w, 0) * 3, rtol=1e-6)
    ref = relay.create_executor("debug", mod=mod).evaluate()(x, w)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["graph", "vm"])
def test_create_executor_params_and_tuples(kind):
    x = relay.var("x", shape=(3,), dtype="float32")
    w = relay.var("w", shape=(3,), dtype="float32")
    func = relay.Function([x, w], relay.Tuple([relay.add(x, w), relay.multiply(x, w)]))
    wv = np.arange(3).astype("float32")
    xv = np.random.randn(3).astype("float32")
    res = relay.create_executor(kind, mod=tvm.IRModule.from_expr(func), target="llvm",
                                params={"w": wv}).evaluate()(xv)
    assert len(res) == 2
    np.testing.assert_allclose(res[0].numpy(), xv + wv, rtol=1e-6)
    np.testing.assert_allclose(res[1].numpy(), xv * wv, rtol=1e-6)


def test_vm_runs_control_flow_and_closures():
    x = relay.var("x", shape=(5,), dtype="float32")
    cond = relay.var("c", shape=(), dtype="bool")
    f_y = relay.var("y", shape=(5,), dtype="float32")
    double = relay.Function([f_y], relay.multiply(f_y, relay.const(2.0)))
    g = relay.var("g")
    body = relay.Let(g, double, relay.If(cond, relay.Call(g, [x]), relay.exp(x)))
    mod = tvm.IRModule.from_expr(relay.Function([x, cond], body))
    xv = np.random.randn(5).astype("float32")
    run = relay.create_executor("vm", mod=mod, target="llvm").evaluate()
    np.testing.assert_allclose(run(xv, np.array(True)).numpy(), xv * 2, rtol=1e-6)
    np.testing.assert_allclose(run(xv, np.array(False)).numpy(), np.exp(xv), rtol=1e-6)
    with pytest.raises(LoweringError, match="vm"):
        relay.create_executor("graph", mod=mod, target="llvm").evaluate()


def test_vm_runs_dynamic_shapes():
    x = relay.var("x", shape=(relay.Any(), 3), dtype="float32")
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.nn.relu(x)))
    run = relay.create_executor("vm", mod=mod, target="llvm").evaluate()
    for n in (1, 4):
        xv = np.random.randn(n, 3).astype("float32")
        np.testing.assert_allclose(run(xv).numpy(), np.maximum(xv, 0))


# -- param dicts --------------------------------------------------------------------------------------
def test_param_dict_roundtrip_and_format():
    params = {"a": np.random.randn(2, 3).astype("float32"), "b": np.arange(5, dtype="int64"),
              "s": np.array(1.5, dtype="float32"), "m": np.array([True, False])}
    blob = relay.save_param_dict(params)
    assert isinstance(blob, bytearray)
    assert int.from_bytes(blob[:8], "little") == 0xF7E58D4F05049CB7
    back = relay.load_param_dict(blob)
    assert list(back) == list(params)
    for k, v in params.items():
        assert back[k].dtype == str(v.dtype) and back[k].shape == v.shape
        np.testing.assert_array_equal(back[k].numpy(), v)
    # the first array record follows TVM's SaveDLTensor layout
    off = 16 + 8 + sum(8 + len(k) for k in params) + 8
    assert int.from_bytes(blob[off:off + 8], "little") == 0xDD5E40F096B4A13F
    with pytest.raises(ModuleLoadError, match="truncated"):
        relay.load_param_dict(bytes(blob[:-3]))
    with pytest.raises(ModuleLoadError, match="magic"):
        relay.load_param_dict(b"\0" * 32)


def test_load_params_and_share_params():
    w = np.random.randn(3, 5).astype("float32")
    lib = _build(_small_func(), params={"w": w}, opt_level=0)
    m1 = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m2 = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    zeroed = {k: np.zeros_like(v.numpy()) for k, v in lib.get_params().items() if v.shape == (3, 5)}
    assert len(zeroed) == 1  # the bound weight (the other param is the scalar 3.0)
    m2.load_params(relay.save_param_dict(zeroed))
    x = np.random.randn(3, 5).astype("float32")
    m2.run(x=x)
    np.testing.assert_allclose(m2.get_output(0).numpy(), np.maximum(x, 0) * 3, rtol=1e-6)
    m2.share_params(m1, relay.save_param_dict(lib.get_params()))
    m2.run(x=x)
    np.testing.assert_allclose(m2.get_output(0).numpy(), np.maximum(x + w, 0) * 3, rtol=1e-6)
    name = next(iter(zeroed))
    assert m2.get_input(name).data_ptr == m1.get_input(name).data_ptr


# -- bad input ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gmod():
    lib = _build(_small_func())
    return graph_executor.GraphModule(lib["default"](tvm.cpu(0)))


def test_unknown_input_name_lists_valid_names(gmod):
    with pytest.raises(ArgumentError, match=r"no input named 'data'.*x, w"):
        gmod.set_input("data", np.zeros((3, 5), "float32"))
    with pytest.raises(ArgumentError, match="no input named"):
        gmod.run(data=np.zeros((3, 5), "float32"))
    assert gmod.get_input_index("data") == -1 and gmod.get_input_index("w") == 1


def test_wrong_shape_or_dtype_gives_expected(gmod):
    with pytest.raises(ArgumentError, match=r"'x'.*expected shape \(3, 5\) and dtype float32.*\(5, 3\)"):
        gmod.set_input("x", np.zeros((5, 3), "float32"))
    with pytest.raises(ArgumentError, match=r"expected shape \(3, 5\) and dtype float32.*float64"):
        gmod.set_input("x", np.zeros((3, 5), "float64"))
    with pytest.raises(ArgumentError, match="float32"):
        gmod.set_input("x", tvm.nd.array(np.zeros((3, 5), "int32")))


def test_output_index_out_of_range(gmod):
    gmod.run(x=np.zeros((3, 5), "float32"), w=np.zeros((3, 5), "float32"))
    with pytest.raises(ArgumentError, match=r"output index 3 is out of range.*1 output"):
        gmod.get_output(3)
    with pytest.raises(ArgumentError, match="out of range"):
        gmod.get_input(7)


def test_dynamic_shape_build_explains_static_requirement():
    x = relay.var("x", shape=(relay.Any(), 4), dtype="float32")
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.nn.relu(x)))
    with pytest.raises(LoweringError, match="static shapes.*%x"):
        relay.build(mod, target="llvm")


def test_graph_module_rejects_the_factory():
    lib = _build(_small_func())
    with pytest.raises(KilnError, match=r"lib\['default'\]\(dev\)"):
        graph_executor.GraphModule(lib)


def test_malformed_graph_json_is_a_clear_error():
    lib = _build(_small_func())
    g = json.loads(lib.get_graph_json())
    del g["attrs"]["storage_id"]
    with pytest.raises(ModuleLoadError, match="storage_id"):
        graph_executor.create(json.dumps(g), lib.get_lib(), tvm.cpu(0))
    g = json.loads(lib.get_graph_json())
    g["nodes"][2]["attrs"]["func_name"] = "nope"
    with pytest.raises(ModuleLoadError, match="nope"):
        graph_executor.create(json.dumps(g), lib.get_lib(), tvm.cpu(0))
    with pytest.raises(ModuleLoadError, match="JSON"):
        graph_executor.create("{not json", lib.get_lib(), tvm.cpu(0))


@pytest.mark.slow
def test_resnet_demo_flow_small():
    from kiln.relay.testing.demo_flow import run_resnet_demo
    res = run_resnet_demo(image_size=33, number=1, repeat=1, verbose=False)
    assert res["max_err"] < 1e-4 and res["export_roundtrip_equal"]
    assert res["planned_bytes"] < res["intermediate_bytes"]


def test_build_runs_passes_under_the_target():
    """relay.build enters the target, so target-dependent hooks (x86 AlterOpLayout: conv2d -> NCHWc) apply."""
    if relay.op.get("nn.conv2d").get_attr("FTVMAlterOpLayout") is None:
        pytest.skip("no AlterOpLayout hook registered for nn.conv2d")
    x = relay.var("data", shape=(1, 8, 10, 10), dtype="float32")
    w = relay.var("w", shape=(16, 8, 3, 3), dtype="float32")
    y = relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1), channels=16, kernel_size=(3, 3)))
    wv = np.random.randn(16, 8, 3, 3).astype("float32")
    lib = _build(relay.Function([x, w], y), params={"w": wv}, opt_level=3)
    assert any("NCHWc" in c.func_name for c in lib.lowered), [c.func_name for c in lib.lowered]
    xv = np.random.randn(1, 8, 10, 10).astype("float32")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.run(data=xv)
    ref = relay.create_executor("debug", mod=tvm.IRModule.from_expr(relay.Function([x, w], y))).evaluate()(xv, wv)
    np.testing.assert_allclose(m.get_output(0).numpy(), ref.numpy(), rtol=1e-4, atol=1e-4)
