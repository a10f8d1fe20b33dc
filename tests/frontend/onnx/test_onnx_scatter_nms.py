"""ONNX ScatterND / ScatterElements / NonMaxSuppression vs ONNX Runtime on single-node models whose indices,
updates and NMS limits are run-time graph inputs (not specialized), and a small detection graph (boxes, scores ->
NonMaxSuppression -> Gather) on the VM at two input sizes."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import kiln as tvm
from kiln import relay
from kiln.runtime.vm import VirtualMachine
from onnx_helpers import make_model, run_kiln, run_ort

rng = np.random.default_rng(5)


def _vm_run(model, feeds, shape=None):
    mod, params = relay.frontend.from_onnx(model, shape=shape)
    vm = VirtualMachine(relay.vm.compile(mod, "llvm", params=params), tvm.cpu())
    names = [p.name_hint for p in mod["main"].params if p.name_hint in feeds]
    out = vm.run(*[feeds[n] for n in names])
    return [out.numpy()] if hasattr(out, "numpy") else [o.numpy() for o in out]


# -- ScatterND ----------------------------------------------------------------------------------------------------
def _scatter_nd_case(dshape, ishape, reduction, dtype="float32"):
    data = rng.standard_normal(dshape).astype(dtype)
    m = ishape[-1]
    idx = np.stack([rng.integers(-dshape[k], dshape[k], ishape[:-1]) for k in range(m)], -1).astype("int64")
    if reduction == "none":  # ONNX: no duplicates without a reduction
        flat = np.ravel_multi_index(tuple(np.moveaxis(idx % np.array(dshape[:m]), -1, 0)), dshape[:m])
        keep = np.unique(flat.reshape(-1), return_index=True)[1]
        idx = idx.reshape(-1, m)[np.sort(keep)]
    else:
        idx = idx.reshape(-1, m)
        idx[-1] = idx[0]  # a duplicated coordinate: reduced twice
    upd = rng.standard_normal((idx.shape[0],) + tuple(dshape[m:])).astype(dtype)
    return data, idx, upd


@pytest.mark.parametrize("dshape,ishape,reduction,opset", [
    ((7,), (5, 1), "none", 13), ((5, 3, 4), (3, 2), "add", 16), ((4, 6), (9, 2), "mul", 16),
    ((3, 5, 2), (7, 1), "max", 18), ((9, 3), (4, 1), "min", 18), ((2, 3, 5), (2, 3), "add", 18)])
def test_scatter_nd_vs_onnxruntime(dshape, ishape, reduction, opset):
    data, idx, upd = _scatter_nd_case(dshape, ishape, reduction)
    attrs = {} if reduction == "none" else {"reduction": reduction}
    node = helper.make_node("ScatterND", ["d", "i", "u"], ["y"], **attrs)
    model = make_model([node], {"d": (data.shape, "float32"), "i": (idx.shape, "int64"),
                                "u": (upd.shape, "float32")}, {"y": (data.shape, "float32")}, opset=opset)
    feeds = {"d": data, "i": idx, "u": upd}
    want = run_ort(model, feeds)[0]
    np.testing.assert_allclose(run_kiln(model, feeds)[0], want, rtol=1e-5, atol=1e-6)


def test_scatter_nd_out_of_range_run_time_index_fails():
    node = helper.make_node("ScatterND", ["d", "i", "u"], ["y"])
    model = make_model([node], {"d": ((4, 3), "float32"), "i": ((2, 1), "int64"), "u": ((2, 3), "float32")},
                       {"y": ((4, 3), "float32")}, opset=13)
    feeds = {"d": np.zeros((4, 3), "float32"), "i": np.array([[1], [4]], "int64"), "u": np.ones((2, 3), "float32")}
    with pytest.raises(tvm.error.KilnError, match="scatter_nd: an index on axis 0 is out of range"):
        run_kiln(model, feeds)


# -- ScatterElements ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("axis,reduction,opset", [(0, "none", 13), (1, "add", 16), (-1, "mul", 16),
                                                  (0, "max", 18), (1, "min", 18)])
def test_scatter_elements_vs_onnxruntime(axis, reduction, opset):
    data = rng.standard_normal((5, 7)).astype("float32")
    ishape = (3, 4)
    n = data.shape[axis]
    if reduction == "none":  # distinct targets per column/row
        idx = np.stack([rng.permutation(np.arange(-n, 0) if k % 2 else np.arange(n))[:ishape[axis % 2]]
                        for k in range(ishape[1 - axis % 2])], 1 - axis % 2).astype("int64")
    else:
        idx = rng.integers(-n, n, ishape).astype("int64")
    upd = rng.standard_normal(ishape).astype("float32")
    attrs = {"axis": axis} if reduction == "none" else {"axis": axis, "reduction": reduction}
    node = helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], **attrs)
    model = make_model([node], {"d": (data.shape, "float32"), "i": (ishape, "int64"), "u": (ishape, "float32")},
                       {"y": (data.shape, "float32")}, opset=opset)
    feeds = {"d": data, "i": idx, "u": upd}
    np.testing.assert_allclose(run_kiln(model, feeds)[0], run_ort(model, feeds)[0], rtol=1e-5, atol=1e-6)


def test_scatter_elements_out_of_range_run_time_index_fails():
    node = helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], axis=0)
    model = make_model([node], {"d": ((4,), "float32"), "i": ((2,), "int64"), "u": ((2,), "float32")},
                       {"y": ((4,), "float32")}, opset=13)
    feeds = {"d": np.zeros(4, "float32"), "i": np.array([1, -5], "int64"), "u": np.ones(2, "float32")}
    with pytest.raises(tvm.error.KilnError, match="out of range"):
        run_kiln(model, feeds)


# -- NonMaxSuppression --------------------------------------------------------------------------------------------
def _nms_inputs(b, c, n, center):
    lo = rng.uniform(0, 3, (b, n, 2))
    size = rng.uniform(0.5, 2.5, (b, n, 2))
    if center:
        boxes = np.concatenate([lo + size / 2, size], -1)
    else:
        boxes = np.concatenate([lo, lo + size], -1)
        flip = rng.random((b, n)) < 0.3
        boxes[flip] = boxes[flip][:, [2, 3, 0, 1]]  # corners in either order
    if n > 3:
        boxes[:, 3] = boxes[:, 2]  # identical boxes
    scores = np.round(rng.uniform(0, 1, (b, c, n)) * 6) / 6  # ties
    return boxes.astype("float32"), scores.astype("float32")


def _nms_model(center, with_score=True, b=None, c=None, n=None):
    ins = ["boxes", "scores", "max_out", "iou", "score_thr"] if with_score else ["boxes", "scores", "max_out", "iou"]
    node = helper.make_node("NonMaxSuppression", ins, ["sel"], center_point_box=int(center))
    inputs = {"boxes": ((b, n, 4), "float32"), "scores": ((b, c, n), "float32"), "max_out": ((1,), "int64"),
              "iou": ((1,), "float32")}
    if with_score:
        inputs["score_thr"] = ((1,), "float32")
    return make_model([node], inputs, {"sel": (None, "int64")}, opset=11)


@pytest.mark.parametrize("center", [0, 1])
def test_non_max_suppression_vs_onnxruntime_run_time_limits(center):
    b, c, n = 2, 3, 9
    model = _nms_model(center, b=b, c=c, n=n)
    boxes, scores = _nms_inputs(b, c, n, center)
    mod, params = relay.frontend.from_onnx(model)
    vm = VirtualMachine(relay.vm.compile(mod, "llvm", params=params), tvm.cpu())
    order = [p.name_hint for p in mod["main"].params]
    seen = set()
    for mx, iou, sth in ((3, 0.3, 0.2), (0, 0.5, 0.0), (100, 0.0, 0.5), (2, 0.6, 0.9), (-1, 0.5, 0.0),
                         (5, 1.0, 0.0)):
        feeds = {"boxes": boxes, "scores": scores, "max_out": np.array([mx], "int64"),
                 "iou": np.array([iou], "float32"), "score_thr": np.array([sth], "float32")}
        want = run_ort(model, feeds)[0]
        got = vm.run(*[feeds[k] for k in order]).numpy()
        assert got.shape == want.shape, (mx, iou, sth)
        np.testing.assert_array_equal(got, want)
        seen.add(len(want))
    assert 0 in seen and len(seen) > 2  # empty, and several selected counts


def test_non_max_suppression_without_score_threshold_and_dynamic_box_count():
    model = _nms_model(0, with_score=False, b=1, c=2, n="n")
    mod, params = relay.frontend.from_onnx(model)
    vm = VirtualMachine(relay.vm.compile(mod, "llvm", params=params), tvm.cpu())
    order = [p.name_hint for p in mod["main"].params]
    for n in (1, 6, 13):
        boxes, scores = _nms_inputs(1, 2, n, False)
        feeds = {"boxes": boxes, "scores": scores, "max_out": np.array([4], "int64"),
                 "iou": np.array([0.4], "float32")}
        np.testing.assert_array_equal(vm.run(*[feeds[k] for k in order]).numpy(), run_ort(model, feeds)[0])


def test_non_max_suppression_of_constants_folds_at_import():
    boxes, scores = _nms_inputs(1, 2, 7, False)
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_out", "iou"], ["sel"])
    model = make_model([node], {"x": ((1,), "float32")}, {"sel": (None, "int64")}, opset=11,
                       initializers={"boxes": boxes, "scores": scores, "max_out": np.array([3], "int64"),
                                     "iou": np.array([0.3], "float32")})
    model.graph.input.pop()  # no graph input at all
    want = run_ort(model, {})[0]
    got = run_kiln(model, {})[0]
    np.testing.assert_array_equal(got, want)


def test_detection_graph_on_the_vm_at_two_sizes():
    """boxes [1, N, 4], scores [1, 1, N] -> NonMaxSuppression -> the selected box indices (column 2) ->
    Gather of the boxes and of the scores: N is a dynamic axis, the limits are graph inputs."""
    nodes = [
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_out", "iou", "score_thr"], ["sel"]),
        helper.make_node("Constant", [], ["two"], value=helper.make_tensor("two", 7, [], [2])),
        helper.make_node("Gather", ["sel", "two"], ["box_idx"], axis=1),
        helper.make_node("Squeeze", ["boxes", "zero"], ["boxes2d"]),
        helper.make_node("Gather", ["boxes2d", "box_idx"], ["kept_boxes"], axis=0),
        helper.make_node("Reshape", ["scores", "minus1"], ["flat_scores"]),
        helper.make_node("Gather", ["flat_scores", "box_idx"], ["kept_scores"], axis=0),
    ]
    model = make_model(nodes, {"boxes": ((1, "n", 4), "float32"), "scores": ((1, 1, "n"), "float32"),
                               "max_out": ((1,), "int64"), "iou": ((1,), "float32"),
                               "score_thr": ((1,), "float32")},
                       {"kept_boxes": (None, "float32"), "kept_scores": (None, "float32")}, opset=13,
                       initializers={"zero": np.array([0], "int64"), "minus1": np.array([-1], "int64")})
    mod, params = relay.frontend.from_onnx(model)
    vm = VirtualMachine(relay.vm.compile(mod, "llvm", params=params), tvm.cpu())
    order = [p.name_hint for p in mod["main"].params]
    for n in (8, 21):
        boxes, scores = _nms_inputs(1, 1, n, False)
        feeds = {"boxes": boxes, "scores": scores, "max_out": np.array([6], "int64"),
                 "iou": np.array([0.35], "float32"), "score_thr": np.array([0.1], "float32")}
        want = run_ort(model, feeds)
        got = [o.numpy() for o in vm.run(*[feeds[k] for k in order])]
        assert len(want[0]) > 0
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


# -- Unique with an axis, of run-time data (VM) -------------------------------------------------------------------
@pytest.mark.parametrize("shape,axis,sort", [((5, 3), 0, 1), ((5, 3), 0, 0), ((2, 7, 3), 1, 0), ((3, 2, 5), -1, 1),
                                             ((1, 4), 0, 0)])
def test_unique_with_axis_vs_onnxruntime(shape, axis, sort):
    x = rng.integers(0, 2, shape).astype("float32")
    nd = len(shape)
    a = axis % nd
    src = np.take(x, [0] * 1, axis=a)  # a duplicated slice: the first one copied over the last
    idx = [slice(None)] * nd
    idx[a] = slice(shape[a] - 1, shape[a])
    x[tuple(idx)] = src
    node = helper.make_node("Unique", ["x"], ["y", "first", "inverse", "counts"], axis=axis, sorted=sort)
    model = make_model([node], {"x": (shape, "float32")},
                       {"y": (None, "float32"), "first": (None, "int64"), "inverse": (None, "int64"),
                        "counts": (None, "int64")}, opset=11)
    want = run_ort(model, {"x": x})
    got = _vm_run(model, {"x": x})
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_scatter_elements_dynamic_axis_on_the_vm_checks_indices():
    node = helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], axis=0, reduction="add")
    model = make_model([node], {"d": (("n", 3), "float32"), "i": (("k", 3), "int64"), "u": (("k", 3), "float32")},
                       {"y": (("n", 3), "float32")}, opset=16)
    mod, params = relay.frontend.from_onnx(model)
    vm = VirtualMachine(relay.vm.compile(mod, "llvm", params=params), tvm.cpu())
    for n, k in ((5, 4), (2, 7)):
        feeds = {"d": rng.standard_normal((n, 3)).astype("float32"),
                 "i": rng.integers(-n, n, (k, 3)).astype("int64"), "u": rng.standard_normal((k, 3)).astype("float32")}
        np.testing.assert_allclose(vm.run(feeds["d"], feeds["i"], feeds["u"]).numpy(), run_ort(model, feeds)[0],
                                   rtol=1e-5, atol=1e-6)
    with pytest.raises(tvm.error.KilnError, match="out of range"):
        vm.run(np.zeros((3, 3), "float32"), np.array([[0, 3, 1]], "int64"), np.ones((1, 3), "float32"))
