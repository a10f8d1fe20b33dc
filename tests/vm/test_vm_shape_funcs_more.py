"""Shape functions of the conv/pool/transposed-conv, indexing, scan and vision ops: a VM build with relay.Any()
dims run at several sizes (odd and size-1 included) vs numpy / PyTorch, and vs the static graph-executor build."""
import numpy as np
import pytest
import torch

import kiln as tvm
from kiln import relay
from relay_exec_util import graph_run, vm_of, vm_outputs

A = relay.Any()
rng = np.random.default_rng(7)
F = torch.nn.functional


def check(make, specs, size_list, gen, ref, rtol=1e-5, atol=1e-5, static_sizes=None):
    """``specs``: (shape with None for an unknown dim, dtype) per input; ``size_list``: per run, the concrete
    shapes; ``gen(shapes)`` the inputs; ``ref(*arrays)`` the expected outputs (one array or a list)."""
    params = [relay.var(f"p{i}", shape=tuple(A if d is None else d for d in s), dtype=dt)
              for i, (s, dt) in enumerate(specs)]
    vm = vm_of(relay.Function(params, make(*params)))
    for k, shapes in enumerate(size_list):
        arrays = gen(shapes)
        got = vm_outputs(vm.run(*arrays))
        want = ref(*arrays)
        want = list(want) if isinstance(want, (list, tuple)) else [want]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == tuple(w.shape), (shapes, g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        if static_sizes is None or k in static_sizes:
            sparams = [relay.var(f"p{i}", shape=tuple(a.shape), dtype=dt) for i, (a, (_, dt)) in
                       enumerate(zip(arrays, specs))]
            for g, s in zip(got, graph_run(relay.Function(sparams, make(*sparams)), arrays)):
                np.testing.assert_allclose(g, s, rtol=rtol, atol=atol)


def _f32(*shapes):
    return [rng.standard_normal(s).astype("float32") for s in shapes]


def _t(a):
    return torch.from_numpy(a)


# -- convolutions ------------------------------------------------------------------------------------------------
def test_conv2d_transpose_unknown_batch_and_spatial():
    w = rng.standard_normal((4, 3, 3, 3)).astype("float32")
    wc = relay.const(w)
    check(lambda x: relay.nn.conv2d_transpose(x, wc, strides=(2, 2), padding=(1, 1), output_padding=(1, 0),
                                              channels=3, kernel_size=(3, 3)),
          [((None, 4, None, None), "float32")], [[(1, 4, 5, 7)], [(3, 4, 4, 1)], [(2, 4, 1, 6)]],
          lambda s: _f32(*s),
          lambda x: F.conv_transpose2d(_t(x), _t(w), stride=2, padding=1, output_padding=(1, 0)).numpy(),
          rtol=1e-4, atol=1e-4, static_sizes=(0,))


def test_conv1d_and_conv1d_transpose():
    w = rng.standard_normal((5, 3, 3)).astype("float32")
    check(lambda x: relay.nn.conv1d(x, relay.const(w), strides=2, padding=1, dilation=1),
          [((None, 3, None), "float32")], [[(1, 3, 9)], [(4, 3, 2)], [(2, 3, 16)]], lambda s: _f32(*s),
          lambda x: F.conv1d(_t(x), _t(w), stride=2, padding=1).numpy(), rtol=1e-4, atol=1e-4, static_sizes=(0,))
    wt = rng.standard_normal((3, 2, 3)).astype("float32")
    check(lambda x: relay.nn.conv1d_transpose(x, relay.const(wt), strides=(2,), padding=(1, 1),
                                              output_padding=(1,)),
          [((None, 3, None), "float32")], [[(1, 3, 7)], [(2, 3, 1)]], lambda s: _f32(*s),
          lambda x: F.conv_transpose1d(_t(x), _t(wt), stride=2, padding=1, output_padding=1).numpy(),
          rtol=1e-4, atol=1e-4, static_sizes=(0,))


def test_conv3d_and_conv3d_transpose():
    w = rng.standard_normal((4, 2, 3, 3, 3)).astype("float32")
    check(lambda x: relay.nn.conv3d(x, relay.const(w), strides=(1, 2, 1), padding=(1, 1, 1)),
          [((None, 2, None, 5, None), "float32")], [[(1, 2, 3, 5, 4)], [(2, 2, 1, 5, 7)]], lambda s: _f32(*s),
          lambda x: F.conv3d(_t(x), _t(w), stride=(1, 2, 1), padding=1).numpy(), rtol=1e-4, atol=1e-4,
          static_sizes=(0,))
    wt = rng.standard_normal((2, 3, 2, 3, 3)).astype("float32")
    check(lambda x: relay.nn.conv3d_transpose(x, relay.const(wt), strides=(2, 1, 2), padding=(0, 1, 1)),
          [((None, 2, None, 4, None), "float32")], [[(1, 2, 3, 4, 5)], [(2, 2, 1, 4, 1)]], lambda s: _f32(*s),
          lambda x: F.conv_transpose3d(_t(x), _t(wt), stride=(2, 1, 2), padding=(0, 1, 1)).numpy(),
          rtol=1e-4, atol=1e-4, static_sizes=(0,))


# -- pools -------------------------------------------------------------------------------------------------------
def test_pool1d_family():
    sizes = [[(1, 3, 9)], [(2, 3, 4)], [(3, 3, 16)]]
    spec = [((None, 3, None), "float32")]
    check(lambda x: relay.nn.max_pool1d(x, (3,), (2,), padding=(1,), ceil_mode=True), spec, sizes,
          lambda s: _f32(*s), lambda x: F.max_pool1d(_t(x), 3, 2, padding=1, ceil_mode=True).numpy(),
          static_sizes=(0,))
    check(lambda x: relay.nn.avg_pool1d(x, (2,), (2,), padding=(1,), count_include_pad=False), spec, sizes,
          lambda s: _f32(*s), lambda x: F.avg_pool1d(_t(x), 2, 2, padding=1, count_include_pad=False).numpy(),
          static_sizes=(0,))
    check(lambda x: relay.nn.adaptive_max_pool1d(x, output_size=(3,)), spec, sizes, lambda s: _f32(*s),
          lambda x: F.adaptive_max_pool1d(_t(x), 3).numpy(), static_sizes=(0,))
    check(lambda x: relay.nn.adaptive_avg_pool1d(x, output_size=(2,)), spec, sizes, lambda s: _f32(*s),
          lambda x: F.adaptive_avg_pool1d(_t(x), 2).numpy(), static_sizes=(0,))


def test_pool3d_family():
    sizes = [[(1, 2, 5, 4, 7)], [(2, 2, 3, 4, 1)]]
    spec = [((None, 2, None, 4, None), "float32")]
    check(lambda x: relay.nn.max_pool3d(x, (2, 2, 2), (2, 1, 2), padding=(1, 0, 1)), spec, sizes,
          lambda s: _f32(*s), lambda x: F.max_pool3d(_t(x), 2, (2, 1, 2), padding=(1, 0, 1)).numpy(),
          static_sizes=(0,))
    check(lambda x: relay.nn.avg_pool3d(x, (1, 2, 1), (1, 2, 1)), spec, sizes, lambda s: _f32(*s),
          lambda x: F.avg_pool3d(_t(x), (1, 2, 1), (1, 2, 1)).numpy(), static_sizes=(0,))
    check(lambda x: relay.nn.adaptive_avg_pool3d(x, output_size=(1, 2, 1)), spec, sizes, lambda s: _f32(*s),
          lambda x: F.adaptive_avg_pool3d(_t(x), (1, 2, 1)).numpy(), static_sizes=(0,))
    check(lambda x: relay.nn.adaptive_max_pool3d(x, output_size=(2, 2, 2)), spec, sizes, lambda s: _f32(*s),
          lambda x: F.adaptive_max_pool3d(_t(x), 2).numpy(), static_sizes=(0,))


# -- indexing ----------------------------------------------------------------------------------------------------
def test_gather_nd_unknown_data_and_index_dims():
    def gen(s):
        (d, i) = s
        data = rng.standard_normal(d).astype("float32")
        idx = np.stack([rng.integers(0, d[0], i[1]), rng.integers(0, d[1], i[1])]).astype("int64")
        return [data, idx]
    check(lambda x, i: relay.gather_nd(x, i), [((None, None, 4), "float32"), ((2, None), "int64")],
          [[(3, 5, 4), (2, 7)], [(1, 1, 4), (2, 1)], [(6, 2, 4), (2, 3)]], gen,
          lambda x, i: x[i[0], i[1]], static_sizes=(0,))
    # an unknown first index dimension: index_rank says how many data axes it indexes
    check(lambda x, i: relay.gather_nd(x, i, index_rank=2), [((None, None, 4), "float32"), ((None, None), "int64")],
          [[(3, 5, 4), (2, 7)], [(1, 1, 4), (2, 1)]], gen, lambda x, i: x[i[0], i[1]], static_sizes=(0,))


def test_gather_nd_unknown_index_rank_is_refused_clearly():
    x = relay.var("x", shape=(A, 4))
    i = relay.var("i", shape=(A, A), dtype="int64")
    with pytest.raises(tvm.error.TypeInferenceError, match="index_rank"):
        relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x, i], relay.gather_nd(x, i))))


def test_scatter_elements_update_and_add():
    def gen(s):
        d, i = s
        data = rng.standard_normal(d).astype("float32")
        # distinct indices per row (update order is not defined for duplicates)
        idx = np.stack([rng.permutation(d[1])[:i[1]] for _ in range(i[0])]).astype("int64")
        return [data, idx, rng.standard_normal(i).astype("float32")]

    def ref(x, i, u, add=False):
        out = x.copy()
        for r in range(i.shape[0]):
            for c in range(i.shape[1]):
                out[r, i[r, c]] = out[r, i[r, c]] + u[r, c] if add else u[r, c]
        return out
    spec = [((None, 5), "float32"), ((None, 3), "int64"), ((None, 3), "float32")]
    sizes = [[(4, 5), (4, 3)], [(1, 5), (1, 3)], [(3, 5), (2, 3)]]
    check(lambda x, i, u: relay.scatter_elements(x, i, u, axis=1), spec, sizes, gen, ref, static_sizes=(0,))
    check(lambda x, i, u: relay.scatter_elements(x, i, u, axis=1, reduction="add"), spec, sizes, gen,
          lambda x, i, u: ref(x, i, u, True), static_sizes=(0,))


def test_slice_like_and_broadcast_to_like():
    check(lambda x, y: relay.slice_like(x, y), [((None, 7), "float32"), ((None, 4), "float32")],
          [[(5, 7), (3, 4)], [(1, 7), (1, 4)], [(4, 7), (4, 4)]], lambda s: _f32(*s),
          lambda x, y: x[:y.shape[0], :4], static_sizes=(0,))
    check(lambda x, y: relay.slice_like(x, y, axes=[1]), [((None, None), "float32"), ((2, None), "float32")],
          [[(5, 7), (2, 3)], [(1, 3), (2, 1)]], lambda s: _f32(*s),
          lambda x, y: x[:, :y.shape[1]], static_sizes=(0,))
    check(lambda x, y: relay.broadcast_to_like(x, y), [((1, 5), "float32"), ((None, 5), "float32")],
          [[(1, 5), (3, 5)], [(1, 5), (1, 5)]], lambda s: _f32(*s),
          lambda x, y: np.broadcast_to(x, y.shape), static_sizes=(0,))
    check(lambda x, y: relay.broadcast_to_like(x, y), [((None, 1), "float32"), ((None, None), "float32")],
          [[(3, 1), (3, 6)], [(1, 1), (1, 1)]], lambda s: _f32(*s),
          lambda x, y: np.broadcast_to(x, y.shape), static_sizes=(0,))


def test_collapse_sum_like_and_to():
    check(lambda x, y: relay.collapse_sum_like(x, y), [((None, 5), "float32"), ((1, 5), "float32")],
          [[(4, 5), (1, 5)], [(1, 5), (1, 5)], [(7, 5), (1, 5)]], lambda s: _f32(*s),
          lambda x, y: x.sum(0, keepdims=True), rtol=1e-5, atol=1e-5, static_sizes=(0,))
    check(lambda x: relay.collapse_sum_to(x, (5,)), [((None, None, 5), "float32")],
          [[(2, 3, 5)], [(1, 1, 5)]], lambda s: _f32(*s), lambda x: x.sum((0, 1)), atol=1e-5, static_sizes=(0,))
    check(lambda x, y: relay.collapse_sum_like(x, y), [((None, 5), "float32"), ((None, 5), "float32")],
          [[(4, 5), (4, 5)], [(3, 5), (3, 5)]], lambda s: _f32(*s), lambda x, y: x, static_sizes=(0,))


def test_sequence_mask():
    def gen(s):
        d, (b,) = s
        return [rng.standard_normal(d).astype("float32"), rng.integers(0, d[0] + 1, b).astype("int32")]

    def ref(x, v):
        keep = np.arange(x.shape[0])[:, None] < v[None, :]
        return np.where(keep[:, :, None], x, np.float32(-1.5))
    check(lambda x, v: relay.sequence_mask(x, v, mask_value=-1.5, axis=0),
          [((None, None, 3), "float32"), ((None,), "int32")],
          [[(5, 2, 3), (2,)], [(1, 1, 3), (1,)], [(4, 3, 3), (3,)]], gen, ref, static_sizes=(0,))


def test_cumprod_and_cumsum():
    check(lambda x: relay.cumprod(x, axis=1), [((None, None), "float32")], [[(3, 5)], [(1, 1)], [(2, 7)]],
          lambda s: [rng.uniform(0.5, 1.5, s[0]).astype("float32")], lambda x: np.cumprod(x, 1),
          rtol=1e-5, static_sizes=(0,))
    check(lambda x: relay.cumprod(x, axis=0, exclusive=True), [((None, 4), "float32")], [[(3, 4)], [(1, 4)]],
          lambda s: [rng.uniform(0.5, 1.5, s[0]).astype("float32")],
          lambda x: np.concatenate([np.ones((1, 4), "float32"), np.cumprod(x, 0)[:-1]]), static_sizes=(0,))
    check(lambda x: relay.cumsum(x), [((None, 3), "float32")], [[(3, 3)], [(1, 3)]], lambda s: _f32(*s),
          lambda x: np.cumsum(x), atol=1e-5, static_sizes=(0,))


def test_strided_set():
    def ref(x, v):
        out = x.copy()
        out[1:5:2, :] = v
        return out
    check(lambda x, v: relay.strided_set(x, v, [1, 0], [5, 3], [2, 1]),
          [((None, 3), "float32"), ((2, 3), "float32")], [[(6, 3), (2, 3)], [(5, 3), (2, 3)]],
          lambda s: _f32(*s), ref, static_sizes=(0,))


# -- image / vision ----------------------------------------------------------------------------------------------
def test_resize1d_and_resize3d():
    check(lambda x: relay.image.resize1d(x, (7,), method="linear", coordinate_transformation_mode="align_corners"),
          [((None, 2, None), "float32")], [[(1, 2, 4)], [(3, 2, 1)]], lambda s: _f32(*s),
          lambda x: F.interpolate(_t(x), size=7, mode="linear", align_corners=True).numpy(),
          rtol=1e-4, atol=1e-5, static_sizes=(0,))
    check(lambda x: relay.image.resize3d(x, (2, 3, 4), method="nearest_neighbor",
                                         coordinate_transformation_mode="asymmetric", rounding_method="floor"),
          [((None, 2, None, None, 3), "float32")], [[(1, 2, 4, 5, 3)], [(2, 2, 1, 3, 3)]], lambda s: _f32(*s),
          lambda x: F.interpolate(_t(x), size=(2, 3, 4), mode="nearest").numpy(), static_sizes=(0,))


def test_roi_align_unknown_batch_and_rois():
    def gen(s):
        d, r = s
        data = rng.standard_normal(d).astype("float32")
        rois = np.zeros(r, "float32")
        rois[:, 0] = rng.integers(0, d[0], r[0])
        xy = rng.uniform(0, 12, (r[0], 4))
        rois[:, 1:3] = np.minimum(xy[:, :2], xy[:, 2:])
        rois[:, 3:5] = np.maximum(xy[:, :2], xy[:, 2:]) + 1
        return [data, rois]

    def ref(x, rois):  # kiln's numpy reference (torchvision's rules; its ops do not load with this torch)
        from kiln.topi.testing import roi_align_nchw_python
        return roi_align_nchw_python(x, rois, (2, 3), 0.5, 2, "avg")
    check(lambda x, r: relay.vision.roi_align(x, r, (2, 3), 0.5, sample_ratio=2),
          [((None, 3, None, None), "float32"), ((None, 5), "float32")],
          [[(2, 3, 8, 8), (3, 5)], [(1, 3, 5, 9), (1, 5)], [(2, 3, 1, 7), (4, 5)]], gen, ref, rtol=1e-4, atol=1e-4,
          static_sizes=(0, 1))


def test_strided_set_over_unknown_axes():
    def ref(x, v):
        out = x.copy()
        out[1:-1:2, 2:] = v
        return out
    check(lambda x, v: relay.strided_set(x, v, [1, 2], [-1, 2 ** 31 - 1], [2, 1]),
          [((None, None), "float32"), ((1, 1), "float32")], [[(6, 5), (1, 1)], [(3, 3), (1, 1)], [(9, 4), (1, 1)]],
          lambda s: _f32(*s), ref, static_sizes=(0,))


def test_non_max_suppression_static_upper_bound():
    from kiln.topi.testing import non_max_suppression_python

    def gen(s):
        (d,) = s
        b, n, _ = d
        data = np.zeros(d, "float32")
        data[..., 0] = rng.integers(0, 2, (b, n))
        data[..., 1] = rng.uniform(0, 1, (b, n))
        xy = rng.uniform(0, 10, (b, n, 2))
        data[..., 2:4] = xy
        data[..., 4:6] = xy + rng.uniform(1, 5, (b, n, 2))
        return [data, np.array([max(n - 1, 1)], "int32"), np.arange(n, dtype="int32")[None]]

    def make(x, valid, idx):
        out = relay.vision.non_max_suppression(x, valid, idx, max_output_size=-1, iou_threshold=0.5)
        return relay.Tuple([out[0], out[1]])

    def ref(x, valid, idx):
        return non_max_suppression_python(x, valid, idx, -1, 0.5, False, -1, 2, 1, 0)
    check(make, [((1, None, 6), "float32"), ((1,), "int32"), ((1, None), "int32")],
          [[(1, 7, 6)], [(1, 1, 6)], [(1, 12, 6)]], gen, ref,
          static_sizes=(0,))


def test_unknown_extents_that_disagree_at_run_time_raise():
    x, y = relay.var("x", shape=(A, 1)), relay.var("y", shape=(A, A))
    vm = vm_of(relay.Function([x, y], relay.broadcast_to_like(x, y)))
    with pytest.raises(tvm.error.KilnError, match="broadcast"):
        vm.run(np.zeros((3, 1), "float32"), np.zeros((4, 2), "float32"))
    d, i, u = relay.var("d", shape=(A, 5)), relay.var("i", shape=(A, 3), dtype="int64"), relay.var("u", shape=(A, 3))
    vm = vm_of(relay.Function([d, i, u], relay.scatter_elements(d, i, u, axis=1)))
    with pytest.raises(tvm.error.KilnError, match="scatter_elements"):
        vm.run(np.zeros((4, 5), "float32"), np.zeros((4, 3), "int64"), np.zeros((2, 3), "float32"))


def test_sequence_mask_batch_first():
    def gen(s):
        d, (b,) = s
        return [rng.standard_normal(d).astype("float32"), rng.integers(0, d[1] + 1, b).astype("int64")]

    def ref(x, v):
        keep = np.arange(x.shape[1])[None, :] < v[:, None]
        return np.where(keep[:, :, None, None], x, np.float32(0))
    check(lambda x, v: relay.sequence_mask(x, v, axis=1), [((None, None, 2, 3), "float32"), ((None,), "int64")],
          [[(3, 5, 2, 3), (3,)], [(1, 1, 2, 3), (1,)]], gen, ref, static_sizes=(0,))


ANY_TYPES = [
    ("conv1d", lambda x: relay.nn.conv1d(x, relay.var("w", shape=(5, 3, 3)), padding=1), (A, 3, A), (A, 5, A)),
    ("conv2d_transpose", lambda x: relay.nn.conv2d_transpose(x, relay.var("w", shape=(3, 2, 3, 3)), strides=(2, 2)),
     (A, 3, A, 7), (A, 2, A, 15)),
    ("conv3d", lambda x: relay.nn.conv3d(x, relay.var("w", shape=(4, 2, 1, 1, 1))), (A, 2, 3, A, 5), (A, 4, 3, A, 5)),
    ("max_pool1d", lambda x: relay.nn.max_pool1d(x, (2,), (2,)), (A, 3, A), (A, 3, A)),
    ("avg_pool3d", lambda x: relay.nn.avg_pool3d(x, (2, 2, 2), (2, 2, 2)), (A, 3, A, 4, A), (A, 3, A, 2, A)),
    ("adaptive_avg_pool1d", lambda x: relay.nn.adaptive_avg_pool1d(x, (4,)), (A, 3, A), (A, 3, 4)),
    ("cumprod_flat", lambda x: relay.cumprod(x), (A, 3), (A,)),
    ("resize3d", lambda x: relay.image.resize3d(x, (2, 3, 4)), (A, 2, A, A, A), (A, 2, 2, 3, 4)),
]


@pytest.mark.parametrize("name,fn,shape,want", ANY_TYPES, ids=[c[0] for c in ANY_TYPES])
def test_any_type_inference(name, fn, shape, want):
    x = relay.var("x", shape=shape)
    body = fn(x)
    params = [x] + [v for v in relay.analysis.free_vars(body) if v.name_hint != "x"]
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function(params, body)))
    got = mod["main"].ret_type.shape
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert (isinstance(w, int) and int(g) == w) or (not isinstance(w, int) and not isinstance(g, int)
                                                        and "Any" in type(g).__name__), (got, want)


def test_conv2d_transpose_groups_and_dilation():
    w = rng.standard_normal((4, 3, 2, 3)).astype("float32")  # IOHW: 4 input channels, 3 outputs per group
    check(lambda x: relay.nn.conv2d_transpose(x, relay.const(w), strides=(1, 2), padding=(0, 1), dilation=(2, 1),
                                              groups=2),
          [((None, 4, None, 5), "float32")], [[(1, 4, 3, 5)], [(2, 4, 1, 5)]], lambda s: _f32(*s),
          lambda x: F.conv_transpose2d(_t(x), _t(w), stride=(1, 2), padding=(0, 1), dilation=(2, 1),
                                       groups=2).numpy(), rtol=1e-4, atol=1e-4, static_sizes=(0,))
