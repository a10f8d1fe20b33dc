"""dyn.* ops on the VM: shape operands are run-time tensors; results vs numpy at several values (odd sizes)."""
import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.error import KilnError, TypeInferenceError
from kiln.runtime import vm as rvm

rng = np.random.default_rng(18)
A = relay.Any()


def _vm(params, out):
    mod = tvm.IRModule.from_expr(relay.Function(params, out))
    exe = relay.vm.compile(mod, "llvm")
    return exe, rvm.VirtualMachine(exe, tvm.cpu())


def _i64(v):
    return np.array(v, dtype="int64")


def test_reshape_dispatch_and_types():
    x = relay.var("x", shape=(A, 6))
    s = relay.var("s", shape=(3,), dtype="int64")
    call = relay.reshape(x, s)
    assert call.op.name == "dyn.reshape"
    assert relay.reshape(x, relay.const(_i64([-1, 2]))).op.name == "reshape"
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x, s], call)))
    assert mod["main"].ret_type.is_dynamic() and len(mod["main"].ret_type.shape) == 3
    bad = relay.var("b", shape=(A,), dtype="int64")  # unknown length: the rank is unknown
    with pytest.raises(TypeInferenceError, match="rank"):
        relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x, bad], relay.reshape(x, bad))))


def test_reshape_then_elementwise_on_vm():
    x = relay.var("x", shape=(A, 6))
    s = relay.var("s", shape=(3,), dtype="int64")
    exe, vm = _vm([x, s], relay.nn.relu(relay.reshape(x * relay.const(2.0), s)))
    assert "shape_func dyn.reshape" in exe.bytecode
    for n, target in ((4, [2, -1, 3]), (5, [0, 3, -1]), (7, [1, 1, -1])):
        a = rng.standard_normal((n, 6)).astype("float32")
        ref = np.maximum(a.reshape([d if d else a.shape[k] for k, d in enumerate(target)]) * 2, 0)  # 0 copies
        np.testing.assert_allclose(vm.run(a, _i64(target)).numpy(), ref, rtol=1e-6)
    with pytest.raises(KilnError, match="reshape"):
        vm.run(np.zeros((4, 6), "float32"), _i64([5, 5, -1]))


def test_broadcast_tile_full():
    x = relay.var("x", shape=(A, 1))
    s = relay.var("s", shape=(3,), dtype="int64")
    _, vm = _vm([x, s], relay.broadcast_to(x, s))
    for n, target in ((3, [2, 3, 5]), (1, [4, 7, 3])):
        a = rng.standard_normal((n, 1)).astype("float32")
        np.testing.assert_array_equal(vm.run(a, _i64(target)).numpy(), np.broadcast_to(a, target))
    r = relay.var("r", shape=(2,), dtype="int64")
    y = relay.var("y", shape=(2, 3))
    _, vm = _vm([y, r], relay.tile(y, r))
    b = rng.standard_normal((2, 3)).astype("float32")
    for reps in ([1, 2], [3, 1], [2, 5]):
        np.testing.assert_array_equal(vm.run(b, _i64(reps)).numpy(), np.tile(b, reps))
    v = relay.var("v", shape=(), dtype="float32")
    _, vm = _vm([v, s], relay.full(v, s, "float32") + relay.ones(s, "float32"))
    out = vm.run(np.array(2.5, "float32"), _i64([2, 3, 1])).numpy()
    np.testing.assert_array_equal(out, np.full((2, 3, 1), 3.5, "float32"))


@pytest.mark.parametrize("case", [([1, 0], [4, 3], [1, 1]), ([-3, 0], [100, -1], [1, 2]),
                                  ([5, 2], [0, 0], [-2, 1]), ([0, -1], [7, -100], [3, -1])])
def test_strided_slice(case):
    x = relay.var("x", shape=(A, 5))
    b, e, st = (relay.var(n, shape=(2,), dtype="int64") for n in ("b", "e", "st"))
    _, vm = _vm([x, b, e, st], relay.strided_slice(x, b, e, st))
    a = rng.standard_normal((7, 5)).astype("float32")
    begin, end, strides = case
    ref = a[begin[0]:end[0]:strides[0], begin[1]:end[1]:strides[1]]
    np.testing.assert_array_equal(vm.run(a, _i64(begin), _i64(end), _i64(strides)).numpy(), ref)


def test_topk_pad_resize():
    x = relay.var("x", shape=(3, 9))
    k = relay.var("k", shape=(), dtype="int64")
    vals, idx = relay.topk(x, k, axis=1)
    _, vm = _vm([x, k], relay.Tuple([vals, idx]))
    a = rng.standard_normal((3, 9)).astype("float32")
    for kk in (1, 4, 9):
        v, i = vm.run(a, _i64(kk))
        order = np.argsort(-a, axis=1, kind="stable")[:, :kk]
        np.testing.assert_array_equal(i.numpy(), order)
        np.testing.assert_array_equal(v.numpy(), np.take_along_axis(a, order, 1))
    p = relay.var("p", shape=(2, 2), dtype="int64")
    _, vm = _vm([x, p], relay.nn.pad(x, p, 1.5))
    for pads in ([[0, 1], [2, 0]], [[1, 1], [0, 3]]):
        np.testing.assert_array_equal(vm.run(a, _i64(pads)).numpy(), np.pad(a, pads, constant_values=1.5))
    img = relay.var("img", shape=(1, 2, 5, 4))
    size = relay.var("size", shape=(2,), dtype="int64")
    _, vm = _vm([img, size], relay.image.resize2d(img, size, method="linear",
                                                   coordinate_transformation_mode="align_corners"))
    im = rng.standard_normal((1, 2, 5, 4)).astype("float32")
    for hw in ((5, 4), (9, 7), (3, 2)):  # static resize2d of the same size is the reference
        s = relay.image.resize2d(relay.const(im), hw, method="linear", coordinate_transformation_mode="align_corners")
        ref = relay.create_executor("debug", tvm.IRModule.from_expr(s)).evaluate()().numpy()
        np.testing.assert_allclose(vm.run(im, _i64(hw)).numpy(), ref, rtol=1e-5, atol=1e-6)


def test_dynamic_to_static_and_graph_build():
    from kiln.contrib import graph_executor
    x = relay.var("x", shape=(4, 6))
    target = relay.concatenate([relay.const(_i64([2])), relay.const(_i64([-1]))], 0)
    y = relay.reshape(x, target)
    z = relay.broadcast_to(relay.const(1.0), relay.shape_of(y, "int64"))
    mod = tvm.IRModule.from_expr(relay.Function([x], y + z))
    static = relay.transform.DynamicToStatic()(mod)
    assert "dyn." not in static["main"].astext() and not static["main"].ret_type.is_dynamic()
    lib = relay.build(mod, "llvm")  # the graph executor after DynamicToStatic
    g = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    a = rng.standard_normal((4, 6)).astype("float32")
    g.set_input("x", a)
    g.run()
    np.testing.assert_allclose(g.get_output(0).numpy(), a.reshape(2, 12) + 1, rtol=1e-6)


def test_shape_of_unknown_dims_and_saved_executable():
    x = relay.var("x", shape=(A, A))
    s = relay.shape_of(x, "int64")
    flat = relay.reshape(x, relay.concatenate([relay.const(_i64([-1]))], 0))
    exe, vm = _vm([x], relay.Tuple([s, flat, relay.zeros(relay.shape_of(x, "int64"), "int32")]))
    code, lib = exe.save()
    vm2 = rvm.VirtualMachine(rvm.Executable.load_exec(code, lib), tvm.cpu())
    for shape in ((3, 5), (1, 7)):
        a = rng.standard_normal(shape).astype("float32")
        sh, fl, zz = vm2.run(a)
        np.testing.assert_array_equal(sh.numpy(), shape)
        np.testing.assert_array_equal(fl.numpy(), a.reshape(-1))
        assert zz.numpy().shape == shape and zz.numpy().dtype == np.int32 and not zz.numpy().any()


def test_reference_interpreter_matches():
    x = relay.var("x", shape=(2, 6))
    s = relay.var("s", shape=(2,), dtype="int64")
    f = relay.create_executor("debug", tvm.IRModule.from_expr(relay.Function([x, s], relay.reshape(x, s)))).evaluate()
    a = rng.standard_normal((2, 6)).astype("float32")
    np.testing.assert_array_equal(f(a, _i64([3, -1])).numpy(), a.reshape(3, 4))
