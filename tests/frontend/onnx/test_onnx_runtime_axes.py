"""Axes, split sizes and scan axes that are graph inputs (kiln/relay/frontend/onnx_dynamic_axes.py), run as
ONNX Runtime runs them (no value bound into the model) and compared with ONNX Runtime on random inputs of odd
sizes; with the operand bound to a constant, DynamicToStatic removes every dyn.* op."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

from kiln import relay  # noqa: E402
from kiln.contrib.onnx_backend import KilnBackendRep  # noqa: E402
from kiln.relay.expr import bind, const  # noqa: E402
from kiln.relay.transform.dynamic_to_static import dynamic_to_static, has_dyn_ops  # noqa: E402

from onnx_helpers import make_model, run_ort  # noqa: E402

RNG = np.random.default_rng(18)


def _check(model, feeds_list, rtol=1e-5, atol=1e-5):
    """Every feed of ``feeds_list`` through one prepared model (one compile, several run-time values)."""
    rep = KilnBackendRep(model, specialize=False)
    for feeds in feeds_list:
        ref = run_ort(model, feeds)
        outs = rep.run(feeds)
        assert len(outs) == len(ref)
        for o, r in zip(outs, ref):
            assert o.shape == r.shape, (o.shape, r.shape, feeds)
            assert o.dtype == r.dtype
            np.testing.assert_allclose(o, r, rtol=rtol, atol=atol)
    return rep


def _folds_back(model, feeds: dict, runtime: str):
    """Binding the run-time operand to its value leaves no dyn.* op after DynamicToStatic."""
    mod, _ = relay.frontend.from_onnx(model, shape={n: v.shape for n, v in feeds.items()})
    assert has_dyn_ops(mod)
    fn = mod["main"]
    var = next(p for p in fn.params if p.name_hint == runtime)
    body = bind(fn.body, {var: const(feeds[runtime], str(feeds[runtime].dtype))})
    folded = dynamic_to_static(relay.transform.InferType()(
        type(mod).from_expr(relay.Function([p for p in fn.params if p is not var], body))))
    assert not has_dyn_ops(folded)


def _sym(rank: int) -> list:
    """An output shape of ``rank`` symbolic dims (the values decide the sizes)."""
    return [f"d{k}" for k in range(rank)]


def _x(shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                                "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_runtime_axes(op, keepdims):
    opset = 13 if op == "ReduceSum" else 18
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims)
    model = make_model([node], {"x": ((3, 5, 7), "float32"), "axes": ((2,), "int64")}, {"y": (_sym(3 if keepdims else 1), "float32")},
                       opset=opset)
    base = np.abs(_x((3, 5, 7))) + 0.5 if op in ("ReduceLogSum", "ReduceProd") else _x((3, 5, 7))
    if op == "ReduceProd":
        base = np.clip(base, 0.5, 1.5).astype("float32")
    feeds = [{"x": base, "axes": np.array(a, "int64")} for a in ([0, 2], [-1, 1], [1, 0])]
    _check(model, feeds, rtol=1e-4, atol=1e-4)
    if op == "ReduceSum":
        _folds_back(model, feeds[0], "axes")


def test_reduce_runtime_axes_empty_dim_and_int():
    """An axis of size 0 (sum over nothing = 0, kept as size 1) and an integer input (ReduceL2 in float64)."""
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1)
    model = make_model([node], {"x": ((2, 0, 3), "float32"), "axes": ((1,), "int64")}, {"y": (_sym(3), "float32")},
                       opset=13)
    _check(model, [{"x": np.zeros((2, 0, 3), "float32"), "axes": np.array([a], "int64")} for a in (1, 2)])
    node = helper.make_node("ReduceL2", ["x", "axes"], ["y"], keepdims=0)
    model = make_model([node], {"x": ((4, 3), "int64"), "axes": ((1,), "int64")}, {"y": (_sym(1), "int64")}, opset=18)
    _check(model, [{"x": RNG.integers(-9, 9, (4, 3)).astype("int64"), "axes": np.array([a], "int64")}
                   for a in (0, 1)])


@pytest.mark.parametrize("op", ["CumSum", "CumProd"])
def test_scan_runtime_axis(op):
    opset = 14 if op == "CumSum" else 26
    node = helper.make_node(op, ["x", "axis"], ["y"], exclusive=1, reverse=1)
    model = make_model([node], {"x": ((3, 5), "float32"), "axis": ((), "int32")}, {"y": ((3, 5), "float32")},
                       opset=opset)
    rep = _check(model, [{"x": _x((3, 5)), "axis": np.array(a, "int32")} for a in (0, 1, -1)])
    assert rep._compiled  # one model for every axis value: no VM needed (static shapes)


def test_squeeze_unsqueeze_runtime_axes():
    sq = helper.make_node("Squeeze", ["x", "axes"], ["y"])
    model = make_model([sq], {"x": ((1, 3, 1, 5), "float32"), "axes": ((2,), "int64")}, {"y": (_sym(2), "float32")},
                       opset=13)
    _check(model, [{"x": _x((1, 3, 1, 5)), "axes": np.array(a, "int64")} for a in ([0, 2], [-2, 0])])
    _folds_back(model, {"x": _x((1, 3, 1, 5)), "axes": np.array([0, 2], "int64")}, "axes")
    un = helper.make_node("Unsqueeze", ["x", "axes"], ["y"])
    model = make_model([un], {"x": ((3, 5), "float32"), "axes": ((2,), "int64")}, {"y": (_sym(4), "float32")},
                       opset=13)
    _check(model, [{"x": _x((3, 5)), "axes": np.array(a, "int64")} for a in ([0, 3], [-1, 1], [2, 0])])


def test_split_runtime_sizes():
    node = helper.make_node("Split", ["x", "split"], ["a", "b", "c"], axis=1)
    model = make_model([node], {"x": ((2, 9), "float32"), "split": ((3,), "int64")},
                       {"a": (_sym(2), "float32"), "b": (_sym(2), "float32"), "c": (_sym(2), "float32")}, opset=13)
    _check(model, [{"x": _x((2, 9)), "split": np.array(s, "int64")} for s in ([2, 3, 4], [0, 9, 0], [7, 1, 1])])


def test_slice_runtime_axes_and_pad_runtime_axes():
    node = helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])
    ins = {"x": ((5, 7, 3), "float32"), "starts": ((2,), "int64"), "ends": ((2,), "int64"),
           "axes": ((2,), "int64"), "steps": ((2,), "int64")}
    model = make_model([node], ins, {"y": (_sym(3), "float32")}, opset=13)
    feeds = [{"x": _x((5, 7, 3)), "starts": np.array(s, "int64"), "ends": np.array(e, "int64"),
              "axes": np.array(a, "int64"), "steps": np.array(st, "int64")}
             for s, e, a, st in (([1, -1], [4, -100], [0, 1], [2, -2]), ([0, 1], [9, 3], [-1, 0], [1, 1]))]
    _check(model, feeds)
    node = helper.make_node("Pad", ["x", "pads", "", "axes"], ["y"], mode="constant")
    model = make_model([node], {"x": ((3, 5), "float32"), "pads": ((2,), "int64"), "axes": ((1,), "int64")},
                       {"y": (_sym(2), "float32")}, opset=18)
    _check(model, [{"x": _x((3, 5)), "pads": np.array(p, "int64"), "axes": np.array(a, "int64")}
                   for p, a in (([1, 2], [1]), ([-1, 3], [-2]))])


@pytest.mark.parametrize("mode", ["edge", "reflect", "wrap"])
def test_pad_modes_runtime_pads(mode):
    node = helper.make_node("Pad", ["x", "pads"], ["y"], mode=mode)
    model = make_model([node], {"x": ((3, 5), "float32"), "pads": ((4,), "int64")}, {"y": (_sym(2), "float32")},
                       opset=18)
    _check(model, [{"x": _x((3, 5)), "pads": np.array(p, "int64")} for p in ([1, 2, 2, 1], [0, 4, 1, 0])])


def test_resize_runtime_sizes_with_axes_and_upsample_scales():
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest", axes=[3, 2],
                            keep_aspect_ratio_policy="not_larger")
    model = make_model([node], {"x": ((1, 2, 5, 7), "float32"), "sizes": ((2,), "int64")},
                       {"y": (_sym(4), "float32")}, opset=18)
    _check(model, [{"x": _x((1, 2, 5, 7)), "sizes": np.array(s, "int64")} for s in ([10, 9], [3, 3])])
    node = helper.make_node("Upsample", ["x", "scales"], ["y"], mode="nearest")
    model = make_model([node], {"x": ((1, 1, 3, 5), "float32"), "scales": ((4,), "float32")},
                       {"y": (_sym(4), "float32")}, opset=9)
    _check(model, [{"x": _x((1, 1, 3, 5)), "scales": np.array([1, 1, 2, 3], "float32")}])


@pytest.mark.parametrize("freeze", [True, False])
def test_initializer_axes_stay_static(freeze):
    """Axes held by an initializer are known at import time with either freeze_params (TVM evaluates shape
    operands from params too): no dyn.* op either way."""
    node = helper.make_node("ReduceMax", ["x", "axes"], ["y"], keepdims=0)
    model = make_model([node], {"x": ((3, 4, 5), "float32")}, {"y": ((3, 5), "float32")},
                       initializers={"axes": np.array([1], "int64")}, opset=18)
    mod, _ = relay.frontend.from_onnx(model, freeze_params=freeze)
    assert not has_dyn_ops(mod)
    x = _x((3, 4, 5))
    np.testing.assert_allclose(KilnBackendRep(model, specialize=False).run({"x": x})[0], x.max(axis=1))


def test_runtime_axes_on_dynamic_input_dims():
    """Input dims left dynamic (``?`` in the model, no shape=): one VM executable serves several sizes."""
    import kiln
    from kiln.runtime.vm import VirtualMachine
    nodes = [helper.make_node("ReduceMean", ["x", "axes"], ["m"], keepdims=0),
             helper.make_node("Unsqueeze", ["m", "axes"], ["y"])]
    model = make_model(nodes, {"x": (["n", "c", 3], "float32"), "axes": ((1,), "int64")},
                       {"y": (_sym(3), "float32")}, opset=18)
    mod, params = relay.frontend.from_onnx(model)
    with kiln.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, target="llvm", params=params)
    vm = VirtualMachine(exe, kiln.cpu(0))
    for shape, axes in (((2, 5, 3), [1]), ((7, 1, 3), [-1]), ((1, 4, 3), [0])):
        feeds = {"x": _x(shape), "axes": np.array(axes, "int64")}
        ref = run_ort(model, feeds)[0]
        out = vm.run(**feeds).numpy()
        assert out.shape == ref.shape
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,dtype,density", [((3, 5, 7), "float32", 0.3), ((11,), "bool", 0.5),
                                                 ((2, 3), "int32", 0.0), ((4, 1, 3), "int64", 1.0)])
def test_nonzero_of_runtime_data(shape, dtype, density):
    """NonZero of a graph input: [rank, count] coordinates, count known at run time only (none, all, some)."""
    node = helper.make_node("NonZero", ["x"], ["y"])
    model = make_model([node], {"x": (shape, dtype)}, {"y": ([len(shape), "n"], "int64")}, opset=13)
    vals = RNG.standard_normal(shape) * (RNG.random(shape) < density)
    x = (vals != 0) if dtype == "bool" else np.round(vals * 4).astype(dtype) if dtype != "float32" else \
        vals.astype(dtype)
    _check(model, [{"x": np.asarray(x)}, {"x": np.ones(shape, dtype)}])


@pytest.mark.parametrize("axis", [None, 0, -1])
def test_compress_runtime_condition(axis):
    kw = {} if axis is None else {"axis": axis}
    node = helper.make_node("Compress", ["x", "c"], ["y"], **kw)
    n = 3 if axis is None else (5 if axis == 0 else 3)
    out = [None] if axis is None else (["k", 7, 3] if axis == 0 else [5, 7, "k"])
    model = make_model([node], {"x": ((5, 7, 3), "float32"), "c": ((n,), "bool")},
                       {"y": ([d or "k" for d in out], "float32")}, opset=13)
    _check(model, [{"x": _x((5, 7, 3)), "c": RNG.random(n) < 0.5} for _ in range(3)]
           + [{"x": _x((5, 7, 3)), "c": np.zeros(n, bool)}])


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_stack_of_dynamic_tensors_on_vm(axis):
    import kiln
    from kiln.runtime.vm import VirtualMachine
    a = relay.var("a", shape=(relay.Any(), 3), dtype="float32")
    b = relay.var("b", shape=(relay.Any(), relay.Any()), dtype="float32")
    mod = kiln.IRModule.from_expr(relay.Function([a, b], relay.stack([a, b, a], axis)))
    with kiln.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, target="llvm")
    vm = VirtualMachine(exe, kiln.cpu(0))
    for n in (5, 1, 7):
        x, y = _x((n, 3)), _x((n, 3))
        x[0, 0] = np.nan
        np.testing.assert_allclose(vm.run(x, y).numpy(), np.stack([x, y, x], axis))


@pytest.mark.parametrize("axes", [None, [0, 2], [-1, 0]])
def test_center_crop_pad(axes):
    """CenterCropPad (odd differences: the crop window rounds down, the odd pad pixel goes to the end), with
    the target shape a run-time input, and as an initializer (the static converter)."""
    kw = {} if axes is None else {"axes": axes}
    k = 3 if axes is None else 2
    node = helper.make_node("CenterCropPad", ["x", "s"], ["y"], **kw)
    model = make_model([node], {"x": ((5, 4, 7), "float32"), "s": ((k,), "int64")}, {"y": (_sym(3), "float32")},
                       opset=18)
    targets = ([2, 7, 4], [5, 1, 10]) if k == 3 else ([2, 10], [8, 3])
    _check(model, [{"x": _x((5, 4, 7)), "s": np.array(t, "int64")} for t in targets])
    for t in targets:
        static = make_model([node], {"x": ((5, 4, 7), "float32")}, {"y": (_sym(3), "float32")},
                            initializers={"s": np.array(t, "int64")}, opset=18)
        mod, _ = relay.frontend.from_onnx(static)
        assert not has_dyn_ops(mod)
        _check(static, [{"x": _x((5, 4, 7))}])


@pytest.mark.parametrize("mode", ["edge", "reflect", "wrap"])
def test_dyn_pad_modes_against_numpy(mode):
    """dyn.nn.pad's edge/reflect/wrap modes (widths wider than the axis too) against numpy.pad on the VM; with
    constant widths DynamicToStatic folds edge into nn.pad and leaves wrap (nn.pad has no wrap) dynamic."""
    import kiln
    from kiln.relay.op import dyn
    from kiln.runtime.vm import VirtualMachine
    x = relay.var("x", shape=(3, 4), dtype="float32")
    w = relay.var("w", shape=(2, 2), dtype="int64")
    mod = kiln.IRModule.from_expr(relay.Function([x, w], dyn.nn.pad(x, w, 0.0, pad_mode=mode)))
    with kiln.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, target="llvm")
    vm = VirtualMachine(exe, kiln.cpu(0))
    data = _x((3, 4))
    for widths in ([[1, 2], [0, 3]], [[5, 0], [2, 9]]):
        ref = np.pad(data, widths, mode=mode)
        np.testing.assert_allclose(vm.run(data, np.array(widths, "int64")).numpy(), ref)
    body = dyn.nn.pad(x, const(np.array([[1, 2], [0, 3]], "int64")), 0.0, pad_mode=mode)
    folded = dynamic_to_static(relay.transform.InferType()(kiln.IRModule.from_expr(relay.Function([x], body))))
    assert has_dyn_ops(folded) == (mode != "edge")


@pytest.mark.parametrize("sorted_", [1, 0])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_unique_of_runtime_data(sorted_, dtype):
    """Unique (no axis) of a graph input: values, first indices, inverse indices and counts, in sorted order or
    in order of first occurrence; repeats, one distinct value, all distinct."""
    node = helper.make_node("Unique", ["x"], ["y", "i", "inv", "c"], sorted=sorted_)
    shape = (3, 7)
    model = make_model([node], {"x": (shape, dtype)},
                       {"y": (["m"], dtype), "i": (["m"], "int64"), "inv": (["n"], "int64"), "c": (["m"], "int64")},
                       opset=11)
    feeds = [{"x": RNG.integers(-4, 5, shape).astype(dtype)}, {"x": np.full(shape, 3, dtype)},
             {"x": RNG.permutation(21).reshape(shape).astype(dtype)}]
    _check(model, feeds)


def test_unique_of_constant_is_static():
    node = helper.make_node("Unique", ["x"], ["y", "i", "inv", "c"], sorted=0)
    model = make_model([node], {}, {"y": ([5], "int64"), "i": ([5], "int64"), "inv": ([9], "int64"),
                                    "c": ([5], "int64")},
                       initializers={"x": np.array([4, 1, 4, 0, 9, 1, 7, 7, 7], "int64")}, opset=11)
    mod, _ = relay.frontend.from_onnx(model)
    assert not has_dyn_ops(mod)
    _check(model, [{}])
