"""Ops whose output shape or attributes are decided by run-time values, on the VM: ``relay.arange`` with
tensor bounds (a data-dependent shape function) and the ONNX converters that use it or compare against
run-time values (Range, OneHot depth, Trilu k, TopK k, Resize sizes), checked against numpy / ONNX Runtime."""
from __future__ import annotations

import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.runtime.vm import VirtualMachine
from relay_exec_util import vm_of


@pytest.mark.parametrize("dtype", ["int64", "int32", "float32"])
def test_arange_with_runtime_bounds(dtype):
    a, b, c = (relay.var(n, shape=(), dtype=dtype) for n in "abc")
    body = relay.arange(a, b, c, dtype=dtype)
    mod = relay.transform.InferType()(kiln.IRModule.from_expr(relay.Function([a, b, c], body)))
    assert "?" in str(mod["main"].ret_type)  # the length is unknown until run time
    vm = vm_of(relay.Function([a, b, c], body + relay.const(1, dtype)))
    cases = [(0, 10, 1), (3, -7, -2), (4, 4, 1), (5, 2, 1), (-3, 11, 4)]
    if dtype == "float32":
        cases += [(0.5, 3.2, 0.7), (1.0, -1.0, -0.25)]
    for s, e, st in cases:
        args = [np.array(v, dtype) for v in (s, e, st)]
        got = vm.run(*args).numpy()
        ref = np.arange(*args).astype(dtype) + np.array(1, dtype)
        assert got.shape == ref.shape, (s, e, st)
        np.testing.assert_allclose(got, ref, rtol=1e-6)


def test_arange_zero_step_fails_the_run():
    a, b, c = (relay.var(n, shape=(), dtype="int64") for n in "abc")
    vm = vm_of(relay.Function([a, b, c], relay.arange(a, b, c, dtype="int64")))
    with pytest.raises(kiln.error.KilnError, match="step must not be 0"):
        vm.run(np.array(0, "int64"), np.array(5, "int64"), np.array(0, "int64"))


def test_arange_constant_bounds_stay_static():
    f = relay.Function([], relay.arange(relay.const(1.0), relay.const(7.0), relay.const(2.0)))
    mod = relay.transform.InferType()(kiln.IRModule.from_expr(f))
    assert str(mod["main"].ret_type) == str(relay.TensorType((3,), "float32"))


# -- ONNX nodes with run-time operands ------------------------------------------------------------------------------
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402


def _model(node, inputs, outputs, opset):
    graph = helper.make_graph([node], "g", inputs, outputs)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _check(model, feeds, rtol=1e-6):
    """Import with every input a run-time value (dynamic mode), run on the VM, compare with ONNX Runtime."""
    mod, params = relay.frontend.from_onnx(model, freeze_params=True)
    exe = relay.vm.compile(mod, target="llvm", params=params)
    vm = VirtualMachine(exe, kiln.cpu())
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in model.graph.input]
    for feed in feeds:
        out = vm.run(*[feed[n] for n in names])
        outs = [o.numpy() for o in (out if isinstance(out, (list, tuple)) else [out])]
        refs = sess.run(None, feed)
        for o, r in zip(outs, refs):
            assert o.shape == r.shape and o.dtype == r.dtype
            np.testing.assert_allclose(o, r, rtol=rtol, atol=1e-6)


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


@pytest.mark.parametrize("elem,dtype", [(TensorProto.INT64, "int64"), (TensorProto.FLOAT, "float32"),
                                        (TensorProto.INT32, "int32")])
def test_onnx_range_runtime_bounds(elem, dtype):
    node = helper.make_node("Range", ["s", "l", "d"], ["y"])
    model = _model(node, [_vi("s", elem, []), _vi("l", elem, []), _vi("d", elem, [])], [_vi("y", elem, ["n"])], 11)
    feeds = [{"s": np.array(s, dtype), "l": np.array(e, dtype), "d": np.array(st, dtype)}
             for s, e, st in [(1, 10, 3), (10, 6, -3), (0, 0, 1), (-2, 9, 1)]]
    _check(model, feeds)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_onnx_onehot_runtime_depth(axis):
    node = helper.make_node("OneHot", ["i", "depth", "v"], ["y"], axis=axis)
    model = _model(node, [_vi("i", TensorProto.INT64, [2, 3]), _vi("depth", TensorProto.INT64, [1]),
                          _vi("v", TensorProto.FLOAT, [2])], [_vi("y", TensorProto.FLOAT, ["a", "b", "c"])], 11)
    rng = np.random.default_rng(0)
    feeds = [{"i": rng.integers(-d, d + 2, (2, 3)).astype("int64"), "depth": np.array([d], "int64"),
              "v": np.array([-1.5, 4.0], "float32")} for d in (1, 5, 10)]  # d + 1 is out of range: all off
    _check(model, feeds)


@pytest.mark.parametrize("upper", [0, 1])
def test_onnx_trilu_runtime_k(upper):
    node = helper.make_node("Trilu", ["x", "k"], ["y"], upper=upper)
    model = _model(node, [_vi("x", TensorProto.FLOAT, [2, 4, 7]), _vi("k", TensorProto.INT64, [])],
                   [_vi("y", TensorProto.FLOAT, [2, 4, 7])], 14)
    x = np.random.default_rng(1).standard_normal((2, 4, 7)).astype("float32")
    _check(model, [{"x": x, "k": np.array(k, "int64")} for k in (-9, -2, 0, 3, 8)])


def test_onnx_trilu_runtime_k_and_unknown_dims():
    node = helper.make_node("Trilu", ["x", "k"], ["y"], upper=1)
    model = _model(node, [_vi("x", TensorProto.FLOAT, ["n", "m"]), _vi("k", TensorProto.INT64, [])],
                   [_vi("y", TensorProto.FLOAT, ["n", "m"])], 14)
    rng = np.random.default_rng(2)
    _check(model, [{"x": rng.standard_normal(s).astype("float32"), "k": np.array(k, "int64")}
                   for s, k in (((3, 5), 1), ((6, 2), -1), ((1, 1), 0))])


def test_onnx_topk_runtime_k():
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1)
    model = _model(node, [_vi("x", TensorProto.FLOAT, [3, 9]), _vi("k", TensorProto.INT64, [1])],
                   [_vi("v", TensorProto.FLOAT, [3, "k"]), _vi("i", TensorProto.INT64, [3, "k"])], 11)
    x = np.random.default_rng(3).permutation(27).reshape(3, 9).astype("float32")
    _check(model, [{"x": x, "k": np.array([k], "int64")} for k in (1, 4, 9)])
