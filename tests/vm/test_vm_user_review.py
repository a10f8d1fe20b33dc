"""Found by a new-user review of issue 18: VM call conventions, dtype checks, shape functions of common ops,
full_like and dyn.image.resize2d over unknown dims."""
import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.error import ArgumentError
from kiln.runtime import vm as vm_rt
from relay_exec_util import vm_of

A = relay.Any


def test_invoke_without_args_uses_set_input():
    x = relay.var("x", shape=(A(), 3))
    vm = vm_of(x * relay.const(2.0))
    a = np.random.rand(5, 3).astype("float32")
    vm.set_input("main", x=a)
    np.testing.assert_allclose(vm.invoke("main").numpy(), a * 2)
    np.testing.assert_allclose(vm.run().numpy(), a * 2)
    fresh = vm_of(x * relay.const(2.0))
    with pytest.raises(ArgumentError, match="missing input 'x'"):
        fresh.run()


def test_wrong_dtype_and_unknown_name_are_refused():
    x = relay.var("x", shape=(A(), 3))
    vm = vm_of(x + relay.const(1.0))
    with pytest.raises(ArgumentError, match="float32.*float64.*astype"):
        vm.run(np.zeros((2, 3)))
    with pytest.raises(ArgumentError, match="float32.*int32"):
        vm.run(tvm.nd.array(np.zeros((2, 3), "int32")))
    with pytest.raises(ArgumentError, match=r"unknown inputs \['y'\]"):
        vm.set_input("main", y=np.zeros((2, 3), "float32"))
    # python lists are data, not arrays with a dtype: converted to the input's dtype
    np.testing.assert_allclose(vm.run([[1, 2, 3]]).numpy(), [[2, 3, 4]])


_Y = np.random.RandomState(0).randn(7, 5).astype("float32")
_X = np.random.RandomState(1).randn(3, 8, 5, 6).astype("float32")


@pytest.mark.parametrize("name,make,inp,ref", [
    ("pad", lambda y: relay.nn.pad(y, ((0, 1), (2, 0))), _Y, lambda a: np.pad(a, ((0, 1), (2, 0)))),
    ("tile", lambda y: relay.tile(y, (2, 1)), _Y, lambda a: np.tile(a, (2, 1))),
    ("topk", lambda y: relay.topk(y, 2, ret_type="values"), _Y, lambda a: -np.sort(-a, 1)[:, :2]),
    ("sort", lambda y: relay.sort(y), _Y, lambda a: np.sort(a, 1)),
    ("argsort", lambda y: relay.argsort(y, dtype="int32"), _Y, lambda a: np.argsort(a, 1, kind="stable").astype("int32")),
    ("repeat", lambda y: relay.repeat(y, 3, 0), _Y, lambda a: np.repeat(a, 3, 0)),
    ("variance", lambda y: relay.variance(y, axis=[1]), _Y, lambda a: a.var(1)),
    ("cast_like", lambda y: relay.cast_like(y, relay.const(np.int32(1))), _Y, lambda a: a.astype("int32")),
    ("full_like", lambda y: relay.full_like(y, relay.const(1.5)), _Y, lambda a: np.full_like(a, 1.5)),
    ("one_hot", lambda y: relay.one_hot(relay.cast(y > relay.const(0.0), "int32"), relay.const(1.0),
                                        relay.const(0.0), 2, -1, "float32"), _Y,
     lambda a: np.eye(2, dtype="float32")[(a > 0).astype(int)]),
    ("upsampling", lambda x: relay.nn.upsampling(x, 2, 3), _X, lambda a: a.repeat(2, 2).repeat(3, 3)),
    ("resize2d", lambda x: relay.image.resize2d(x, (10, 12), method="nearest_neighbor",
                                                 coordinate_transformation_mode="asymmetric"), _X,
     lambda a: a.repeat(2, 2).repeat(2, 3)),
    ("depth_to_space", lambda x: relay.nn.depth_to_space(x, 2, mode="DCR"), _X,
     lambda a: a.reshape(-1, 2, 2, 2, 5, 6).transpose(0, 3, 4, 1, 5, 2).reshape(-1, 2, 10, 12)),
])
def test_shape_funcs_of_common_ops(name, make, inp, ref):
    var = relay.var("v", shape=(A(),) + inp.shape[1:])
    vm = vm_of(make(var))
    for n in (inp.shape[0], 1, 0):
        want = ref(inp[:n])
        got = vm.run(inp[:n]).numpy()
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("method,mode", [("nearest_neighbor", "asymmetric"), ("linear", "half_pixel"),
                                         ("linear", "align_corners")])
def test_dyn_resize2d_with_unknown_input_hw(method, mode):
    x = relay.var("x", shape=(1, 2, A(), A()))
    size = relay.var("size", shape=(2,), dtype="int64")
    vm = vm_of(relay.image.resize2d(x, size, method=method, coordinate_transformation_mode=mode))
    for h, w, oh, ow in ((4, 6, 8, 12), (5, 3, 7, 2)):
        data = np.random.rand(1, 2, h, w).astype("float32")
        xs = relay.var("xs", shape=(1, 2, h, w))
        ref = relay.create_executor("graph", mod=tvm.IRModule.from_expr(relay.Function(
            [xs], relay.image.resize2d(xs, (oh, ow), method=method, coordinate_transformation_mode=mode))),
            device=tvm.cpu(), target="llvm").evaluate()(data).numpy()
        got = vm.run(data, np.array([oh, ow], "int64")).numpy()
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_relay_exports_tvm_adt_names():
    """TVM v0.13 spells these ``relay.Match``, ``relay.Clause``, ``relay.PatternConstructor``, ..."""
    from kiln.relay import adt
    from kiln.relay.prelude import Prelude
    for name in ("Pattern", "PatternWildcard", "PatternVar", "PatternConstructor", "PatternTuple", "Constructor",
                 "TypeData", "Clause", "Match"):
        assert getattr(relay, name) is getattr(adt, name)
    mod = tvm.IRModule()
    p = Prelude(mod)
    _, cons, nil = p.mod.get_type("List")
    a = relay.var("a")
    lst = cons(relay.const(4), cons(relay.const(5), nil()))
    mod["main"] = relay.Function([], relay.Match(lst, [
        relay.Clause(relay.PatternConstructor(cons, [relay.PatternVar(a), relay.PatternWildcard()]), a),
        relay.Clause(relay.PatternConstructor(nil, []), relay.const(-1))]))
    assert relay.create_executor("vm", mod=mod, device=tvm.cpu(), target="llvm").evaluate()().numpy() == 4
    assert relay.scalar_type("int8") == relay.TensorType((), "int8")


def test_onnx_resize_with_run_time_hw_and_size():
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper
    node = helper.make_node("Resize", ["x", "", "", "sz"], ["y"], mode="linear")
    graph = helper.make_graph([node], "resize", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, "h", "w"]),
        helper.make_tensor_value_info("sz", TensorProto.INT64, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, "oh", "ow"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    mod, params = relay.frontend.from_onnx(model, freeze_params=True)
    vm = vm_rt.VirtualMachine(relay.vm.compile(mod, "llvm", params=params), tvm.cpu())
    sess = ort.InferenceSession(model.SerializeToString())
    for (h, w), size in (((4, 5), (1, 1, 8, 3)), ((3, 3), (1, 1, 6, 6)), ((1, 7), (1, 1, 2, 7))):
        feeds = {"x": np.random.rand(1, 1, h, w).astype("float32"), "sz": np.array(size, "int64")}
        np.testing.assert_allclose(vm.run(feeds["x"], feeds["sz"]).numpy(), sess.run(None, feeds)[0],
                                   rtol=1e-5, atol=1e-6)


def test_broadcast_of_two_unknown_dims_that_disagree_is_refused():
    """(3, 4) + (2, 4) through two unknown batch dims: an error naming the shapes, never an out-of-bounds read."""
    a = relay.var("a", shape=(A(), 4))
    b = relay.var("b", shape=(A(), 4))
    vm = vm_of(a + b)
    x, y = np.random.rand(3, 4).astype("float32"), np.random.rand(1, 4).astype("float32")
    np.testing.assert_allclose(vm.run(x, y).numpy(), x + y, rtol=1e-6)
    np.testing.assert_allclose(vm.run(y, x).numpy(), x + y, rtol=1e-6)
    np.testing.assert_allclose(vm.run(x, x).numpy(), x + x, rtol=1e-6)
    with pytest.raises(ArgumentError, match=r"\(3, 4\) and \(2, 4\) do not broadcast: dimension 0 is 3 in one and 2"):
        vm.run(x, np.random.rand(2, 4).astype("float32"))
    np.testing.assert_allclose(vm.run(x, y).numpy(), x + y, rtol=1e-6)  # the VM is still usable


def test_tvm_helpers_set_one_input_arity_param_names_num_outputs():
    a = relay.var("a", shape=(A(), 2))
    b = relay.var("b", shape=(A(), 2))
    mod = tvm.IRModule.from_expr(relay.Function([a, b], relay.Tuple([a + b, a * b])))
    exe = relay.vm.compile(mod, target="llvm")
    assert exe.get_function_arity("main") == 2 and exe.get_function_arity("nope") == -1
    assert [exe.get_function_param_name("main", i) for i in range(2)] == ["a", "b"]
    vm = vm_rt.VirtualMachine(exe, tvm.cpu())
    x, y = np.random.rand(3, 2).astype("float32"), np.random.rand(3, 2).astype("float32")
    vm.set_one_input("main", 0, x)
    with pytest.raises(ArgumentError, match=r"inputs \['b'\] were never set"):
        vm.invoke_stateful("main")
    vm.set_one_input("main", "b", y)
    vm.invoke_stateful("main")
    assert vm.get_num_outputs() == 2
    np.testing.assert_allclose(vm.get_outputs()[1].numpy(), x * y, rtol=1e-6)
    with pytest.raises(ArgumentError, match="no input 'c'"):
        vm.set_one_input("main", "c", y)


def test_benchmark_takes_tvm_keywords():
    x = relay.var("x", shape=(A(), 8))
    vm = vm_of(relay.exp(x))
    data = np.random.rand(4, 8).astype("float32")
    res = vm.benchmark(tvm.cpu(), data, func_name="main", repeat=2, number=1, min_repeat_ms=5,
                       limit_zero_time_iterations=10, end_to_end=True, cooldown_interval_ms=1, repeats_to_cooldown=1)
    assert len(res.results) == 2 and all(r > 0 for r in res.results)
    with pytest.raises(ArgumentError, match="at least 1"):
        vm.benchmark(tvm.cpu(), data, repeat=0)


def test_vm_compiler_tvm_methods():
    """TVM's ``VMCompiler``: set_params, lower(mod, target, target_host), optimize, codegen, get_exec."""
    x = relay.var("x", shape=(A(), 3))
    w = relay.var("w", shape=(3,))
    mod = tvm.IRModule.from_expr(relay.Function([x, w], relay.nn.relu(x * w)))
    wv = np.array([1.0, -2.0, 3.0], "float32")
    c = relay.vm.VMCompiler()
    c.set_params({"w": wv})
    opt, params = c.optimize(mod, "llvm")
    assert [p.name_hint for p in opt["main"].params] == ["x"] and params == {}
    c.lower(mod, "llvm", None)
    exe = c.get_exec()
    data = np.random.randn(4, 3).astype("float32")
    out = vm_rt.VirtualMachine(exe, tvm.cpu()).run(data).numpy()
    np.testing.assert_allclose(out, np.maximum(data * wv, 0), rtol=1e-6)
