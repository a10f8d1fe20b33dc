"""TVM v0.13's test_forward_nms, test_forward_roi_align and test_custom_conversion_map, re-expressed for kiln.

The last two trace ``torchvision::roi_align``. torchvision's C++ ops may not load against this environment's torch (then
``torchvision.ops.roi_align`` traces its Python fallback instead of the op), so the op is declared here with
torchvision's schema when missing and computed in PyTorch from ``grid_sample`` (``torch_roi_align``): the
reference for the converter, for ``relay.vision.roi_align`` and for kiln's numpy reference alike.
``torchvision::nms`` (which has no Python fallback) is declared the same way, computed by a greedy loop in
PyTorch."""
import math

import numpy as np
import pytest

from torch_frontend_util import torch, torchvision_op

import kiln
from kiln import relay
from kiln.contrib import graph_executor
from kiln.error import KilnError, OpNotImplemented
from kiln.topi.testing import roi_align_nchw_python

_SCHEMA = ("roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, "
           "int sampling_ratio, bool aligned) -> Tensor")


def torch_roi_align(x, rois, scale, ph, pw, ratio, aligned):
    """torchvision's C++ roi_align kernel in PyTorch: per ROI, bilinear samples from ``grid_sample`` (border
    padding, align_corners=True: coordinates clamped into the image, torchvision's rule) zeroed beyond one pixel
    outside, averaged per bin. (torchvision's own pure-Python fallback ``_roi_align`` does not zero those samples,
    so it differs from the C++ op for ROIs past the edges; TVM's test compares with the C++ op.)"""
    F = torch.nn.functional
    n, c, h, w = x.shape
    out = torch.zeros(rois.shape[0], c, ph, pw, dtype=x.dtype)
    off = 0.5 if aligned else 0.0
    for k, roi in enumerate(rois.tolist()):
        x1, y1, x2, y2 = (v * scale - off for v in roi[1:])
        rh, rw = y2 - y1, x2 - x1
        if not aligned:
            rh, rw = max(rh, 1.0), max(rw, 1.0)
        gh = ratio if ratio > 0 else math.ceil(rh / ph)
        gw = ratio if ratio > 0 else math.ceil(rw / pw)
        if gh <= 0 or gw <= 0:  # an empty ROI (aligned=True, x2 < x1): no samples, 0 as torchvision
            continue
        ys = y1 + (torch.arange(ph * gh, dtype=torch.float64) + 0.5) * (rh / ph / gh)  # bin i, sample s: i*gh+s
        xs = x1 + (torch.arange(pw * gw, dtype=torch.float64) + 0.5) * (rw / pw / gw)
        gy, gx = torch.meshgrid(ys, xs, indexing="ij")
        valid = ((gy >= -1) & (gy <= h) & (gx >= -1) & (gx <= w)).to(x.dtype)
        grid = torch.stack([2 * gx.clamp(min=0) / (w - 1) - 1, 2 * gy.clamp(min=0) / (h - 1) - 1], -1)
        s = F.grid_sample(x[int(roi[0])][None], grid[None].to(x.dtype), mode="bilinear", padding_mode="border",
                          align_corners=True)[0] * valid
        out[k] = s.reshape(c, ph, gh, pw, gw).mean(dim=(2, 4))
    return out


def roi_align_op():
    """``torch.ops.torchvision.roi_align``, declared (with a PyTorch implementation) if torchvision's C++ library
    did not load."""
    return torchvision_op("roi_align", _SCHEMA, torch_roi_align)


class ROIAlign(torch.nn.Module):
    """TVM's ROIAlign test module: what ``torchvision.ops.roi_align`` calls when the C++ ops are loaded."""

    def __init__(self, output_size, spatial_scale=1.0, sampling_ratio=-1, aligned=False):
        super().__init__()
        self.output_size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
        self.spatial_scale, self.sampling_ratio, self.aligned = spatial_scale, sampling_ratio, aligned

    def forward(self, x, rois):
        return roi_align_op()(x, rois, self.spatial_scale, self.output_size[0], self.output_size[1],
                              self.sampling_ratio, self.aligned)


def _run(model, inputs, custom_convert_map=None):
    with torch.no_grad():
        traced = torch.jit.trace(model, tuple(inputs))
    assert "torchvision::roi_align" in str(traced.graph)
    infos = [(f"input{i}", tuple(x.shape)) for i, x in enumerate(inputs)]
    mod, params = relay.frontend.from_pytorch(traced, infos, custom_convert_map)
    assert "vision.roi_align" in mod.astext()
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](kiln.cpu(0)))
    for i, x in enumerate(inputs):
        m.set_input(f"input{i}", x.numpy())
    m.run()
    return m.get_output(0).numpy()


def _boxes(n, lo, hi, batch, seed):
    rng = np.random.default_rng(seed)
    boxes = rng.uniform(lo, hi, size=(n, 4)).astype("float32")  # x2 < x1 happens: a 1-pixel ROI, as torchvision
    index = rng.integers(0, batch, size=(n, 1)).astype("float32")
    return torch.from_numpy(np.concatenate([index, boxes], 1))


# TVM: data (1, 8, 100, 100), 35 boxes in [0, 100]; ROIAlign(7), ((10, 10), 0.7, 5), (15, 0.9, 3). kiln: smaller
# odd-sized data, two images, boxes reaching past the edges.
CASES = [(7, 1.0, -1), ((10, 10), 0.7, 5), (15, 0.9, 3), ((3, 5), 0.5, -1), (2, 1.3, 0)]


@pytest.mark.parametrize("output_size, scale, ratio", CASES)
def test_forward_roi_align(output_size, scale, ratio):
    x = torch.rand(2, 5, 23, 19, generator=torch.Generator().manual_seed(0))
    rois = _boxes(13, -4.0, 30.0, 2, seed=1)
    model = ROIAlign(output_size, scale, ratio).eval()
    with torch.no_grad():
        expected = model(x, rois).numpy()
    np.testing.assert_allclose(_run(model, [x, rois]), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(roi_align_nchw_python(x.numpy(), rois.numpy(), model.output_size, scale, ratio),
                               expected, rtol=1e-5, atol=1e-5)


def test_roi_align_aligned_is_refused():
    x, rois = torch.rand(1, 2, 8, 8), _boxes(3, 0.0, 8.0, 1, seed=2)
    traced = torch.jit.trace(ROIAlign(2, aligned=True), (x, rois))
    with pytest.raises(OpNotImplemented, match="aligned=True"):
        relay.frontend.from_pytorch(traced, [("x", (1, 2, 8, 8)), ("rois", (3, 5))])


def test_roi_align_relation_checks_rois():
    data, rois = relay.var("d", shape=(1, 2, 8, 8)), relay.var("r", shape=(3, 4))
    with pytest.raises(KilnError, match=r"rois must have shape \[num_roi, 5\]"):
        relay.transform.InferType()(kiln.IRModule.from_expr(relay.vision.roi_align(data, rois, (2, 2), 1.0)))


def test_roi_align_max_mode_matches_reference():
    """TVM's mode="max" (no torchvision counterpart): the maximum of each bin's samples."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 3, 9, 11)).astype("float32")
    rois = np.array([[0, 1.5, 0.5, 8.0, 7.5], [0, -2.0, 3.0, 12.0, 6.0]], "float32")
    d, r = relay.var("d", shape=x.shape), relay.var("r", shape=rois.shape)
    mod = kiln.IRModule.from_expr(relay.Function([d, r], relay.vision.roi_align(d, r, (3, 2), 0.8, -1,
                                                                                  mode="max")))
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm")
    m = graph_executor.GraphModule(lib["default"](kiln.cpu(0)))
    m.set_input("d", x)
    m.set_input("r", rois)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), roi_align_nchw_python(x, rois, (3, 2), 0.8, -1, "max"),
                               rtol=1e-5, atol=1e-5)


def test_custom_conversion_map():
    """TVM's test: a user converter for ``torchvision::roi_align`` given as ``custom_convert_map``; it is called
    as ``fn(inputs, input_types)`` with the node's inputs (Relay expressions, Python numbers) and their types."""
    pool_size = 5
    x = torch.rand(2, 2 * pool_size ** 2, 10, 10, generator=torch.Generator().manual_seed(4))
    rois = torch.tensor([[0, 0, 0, 9, 9], [0, 0, 5, 4, 9], [0, 5, 5, 9, 9], [1, 0, 0, 9, 9]], dtype=torch.float)
    seen = []

    def convert_roi_align():
        def _impl(inputs, input_types):
            seen.append(list(input_types))
            spatial_scale = inputs[2]
            pooled_size = (inputs[3], inputs[4])
            sampling_ratio = inputs[5]
            return relay.op.vision.roi_align(inputs[0], inputs[1], pooled_size, spatial_scale, sampling_ratio)
        return _impl

    model = ROIAlign(pool_size, spatial_scale=1, sampling_ratio=-1).eval()
    with torch.no_grad():
        expected = model(x, rois).numpy()
    got = _run(model, [x, rois], {"torchvision::roi_align": convert_roi_align()})
    assert seen and seen[0][:2] == ["float32", "float32"]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


# -- nms ------------------------------------------------------------------------------------------
_NMS_SCHEMA = "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"


def torch_nms(boxes, scores, iou_threshold):
    """torchvision's nms: boxes by decreasing score, each kept unless a kept box overlaps it with IoU > thr."""
    order = torch.argsort(scores, descending=True, stable=True)
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    keep = []
    for i in order.tolist():
        if keep:
            k = torch.tensor(keep)
            w = (torch.minimum(boxes[k, 2], boxes[i, 2]) - torch.maximum(boxes[k, 0], boxes[i, 0])).clamp(min=0)
            h = (torch.minimum(boxes[k, 3], boxes[i, 3]) - torch.maximum(boxes[k, 1], boxes[i, 1])).clamp(min=0)
            inter = w * h
            if bool((inter / (area[k] + area[i] - inter) > iou_threshold).any()):
                continue
        keep.append(i)
    return torch.tensor(keep, dtype=torch.int64)


def nms_op():
    return torchvision_op("nms", _NMS_SCHEMA, torch_nms)


class NonMaxSuppression(torch.nn.Module):
    """TVM's NonMaxSupression module: ``torchvision.ops.nms(boxes, scores, iou_threshold)``."""

    def __init__(self, iou_threshold):
        super().__init__()
        self.iou_threshold = iou_threshold

    def forward(self, boxes, scores):
        return nms_op()(boxes, scores, self.iou_threshold)


def _nms_inputs(num_boxes, seed):
    """TVM's _gen_rand_inputs: boxes with corners in [0, 0.5] + extent [0, 0.5]; distinct shuffled scores."""
    gen = torch.Generator().manual_seed(seed)
    boxes = torch.rand(num_boxes, 4, generator=gen) * 0.5
    boxes[:, 2] += boxes[:, 0]
    boxes[:, 3] += boxes[:, 1]
    scores = np.linspace(0, 1, num=num_boxes).astype("float32")
    np.random.default_rng(seed).shuffle(scores)
    return boxes, torch.from_numpy(scores)


@pytest.mark.parametrize("num_boxes, iou_threshold", [(10, 0.3), (100, 0.5), (500, 0.9), (1, 0.5), (37, 0.0)])
def test_forward_nms(num_boxes, iou_threshold):
    """TVM's cases (10, 0.3), (100, 0.5), (500, 0.9), traced and run on the VM (the result's length depends on
    the data), plus a single box and a zero threshold (any overlap suppresses)."""
    from kiln.runtime.vm import VirtualMachine
    boxes, scores = _nms_inputs(num_boxes, seed=num_boxes)
    model = NonMaxSuppression(iou_threshold).eval()
    with torch.no_grad():
        expected = model(boxes, scores).numpy()
        traced = torch.jit.trace(model, (boxes, scores))
    assert "torchvision::nms" in str(traced.graph)
    mod, params = relay.frontend.from_pytorch(traced, [("i0", ((num_boxes, 4), "float32")),
                                                       ("i1", ((num_boxes,), "float32"))])
    assert "vision.non_max_suppression" in mod.astext()
    with kiln.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, "llvm", params=params)
    got = VirtualMachine(exe, kiln.cpu()).run(boxes.numpy(), scores.numpy()).numpy()
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, expected)
    if iou_threshold <= 0.5 and num_boxes > 1:
        assert len(expected) < num_boxes  # boxes were suppressed: the run-time length is exercised


def test_nms_python_reference_matches_torch():
    from kiln.topi.testing import non_max_suppression_python
    boxes, scores = _nms_inputs(61, seed=5)
    data = torch.cat([scores[:, None], boxes], 1)[None].numpy()
    out, count = non_max_suppression_python(data, np.array([61]), np.arange(61)[None], -1, 0.4, True, -1, 1, 0, -1)
    np.testing.assert_array_equal(out[0, :count[0, 0]], torch_nms(boxes, scores, 0.4).numpy())
    assert (out[0, count[0, 0]:] == -1).all()


def test_nms_relay_op_graph_and_interpreter():
    """``relay.vision.non_max_suppression`` itself: class ids (no force_suppress), a valid_count below N, top_k and
    max_output_size, compiled (graph executor) and interpreted (its numpy reference), against the reference."""
    from kiln.topi.testing import non_max_suppression_python
    rng = np.random.default_rng(7)
    b, n = 2, 23
    boxes = rng.random((b, n, 4)) * 0.5
    boxes[..., 2:] += boxes[..., :2]
    boxes[1, :3] = boxes[1, :3][:, [2, 3, 0, 1]]  # corners given in the other order
    data = np.concatenate([rng.integers(0, 2, (b, n, 1)), rng.permutation(np.linspace(0, 1, b * n)).reshape(b, n, 1),
                           boxes], -1).astype("float32")
    valid, idx = np.array([n, 17], "int32"), np.tile(np.arange(n, dtype="int32")[::-1], (b, 1))
    d = relay.var("d", shape=data.shape)
    v, i = relay.var("v", shape=(b,), dtype="int32"), relay.var("i", shape=(b, n), dtype="int32")
    out = relay.vision.non_max_suppression(d, v, i, max_output_size=6, iou_threshold=0.2, top_k=15)
    mod = kiln.IRModule.from_expr(relay.Function([d, v, i], relay.Tuple([out[0], out[1]])))
    want = non_max_suppression_python(data, valid, idx, 6, 0.2, False, 15, 2, 1, 0)
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm")
    m = graph_executor.GraphModule(lib["default"](kiln.cpu(0)))
    for name, value in (("d", data), ("v", valid), ("i", idx)):
        m.set_input(name, value)
    m.run()
    for k in range(2):
        np.testing.assert_array_equal(m.get_output(k).numpy(), want[k])
    interp = relay.create_executor("debug", mod=mod, device=kiln.cpu(0), target="llvm").evaluate()(data, valid, idx)
    for k in range(2):
        np.testing.assert_array_equal(interp[k].numpy(), want[k])
    assert 0 < want[1].min() and want[1].max() <= 6


def test_nms_return_indices_false_is_refused():
    d = relay.var("d", shape=(1, 4, 6))
    v, i = relay.var("v", shape=(1,), dtype="int32"), relay.var("i", shape=(1, 4), dtype="int32")
    out = relay.vision.non_max_suppression(d, v, i, return_indices=False)
    with pytest.raises(KilnError, match="return_indices=True only"):
        relay.transform.InferType()(kiln.IRModule.from_expr(out))
