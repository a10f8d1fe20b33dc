"""scatter_nd, get_valid_counts, all_class_non_max_suppression, multibox_prior / multibox_transform_loc: the
compiled kernels (graph executor and VM, relay.Any() dims included) vs numpy references written from the
TVM / ONNX definitions, on random inputs with odd sizes; bad indices fail with a clear error."""
import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.relay.op.scatter_nd import scatter_nd_python
from kiln.runtime import vm as rvm
from kiln.topi.testing import all_class_nms_python, get_valid_counts_python
from kiln.topi.testing.multibox_python import multibox_prior_python, multibox_transform_loc_python
from relay_exec_util import graph_run, vm_of, vm_outputs

A = relay.Any()
rng = np.random.default_rng(11)


# -- scatter_nd ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["update", "add", "mul", "min", "max"])
def test_scatter_nd_modes_graph_executor(mode):
    data = rng.standard_normal((5, 3, 7)).astype("float32")
    idx = rng.integers(-5, 5, (2, 9)).astype("int64")
    idx[1] = rng.integers(-3, 3, 9)
    idx[:, 4] = idx[:, 1]  # a duplicate coordinate: "add" sums both, "update" keeps the later one
    upd = rng.standard_normal((9, 7)).astype("float32")
    x, i, u = relay.var("x", shape=data.shape), relay.var("i", shape=idx.shape, dtype="int64"), \
        relay.var("u", shape=upd.shape)
    (got,) = graph_run(relay.Function([x, i, u], relay.scatter_nd(x, i, u, mode)), [data, idx, upd])
    np.testing.assert_allclose(got, scatter_nd_python(data, idx, upd, mode), rtol=1e-5, atol=1e-6)


def test_scatter_nd_add_duplicates_match_numpy_add_at():
    data = np.zeros((11,), "int32")
    idx = rng.integers(0, 11, (1, 40)).astype("int32")
    upd = rng.integers(-9, 9, (40,)).astype("int32")
    want = data.copy()
    np.add.at(want, idx[0], upd)
    x, i, u = relay.var("x", shape=(11,), dtype="int32"), relay.var("i", shape=idx.shape, dtype="int32"), \
        relay.var("u", shape=(40,), dtype="int32")
    (got,) = graph_run(relay.Function([x, i, u], relay.scatter_nd(x, i, u, "add")), [data, idx, upd])
    np.testing.assert_array_equal(got, want)


def test_scatter_nd_on_the_vm_with_unknown_dims():
    x = relay.var("x", shape=(A, 4), dtype="float32")
    i = relay.var("i", shape=(1, A), dtype="int64")
    u = relay.var("u", shape=(A, 4), dtype="float32")
    vm = vm_of(relay.Function([x, i, u], relay.scatter_nd(x, i, u, "add")))
    for n, k in ((7, 3), (1, 5), (13, 13)):
        data = rng.standard_normal((n, 4)).astype("float32")
        idx = rng.integers(-n, n, (1, k)).astype("int64")
        upd = rng.standard_normal((k, 4)).astype("float32")
        (got,) = vm_outputs(vm.run(data, idx, upd))
        np.testing.assert_allclose(got, scatter_nd_python(data, idx, upd, "add"), rtol=1e-5, atol=1e-6)


def test_scatter_nd_out_of_range_index_is_a_clear_error():
    x, i, u = relay.var("x", shape=(4, 3)), relay.var("i", shape=(2, 2), dtype="int64"), relay.var("u", shape=(2,))
    data, upd = np.zeros((4, 3), "float32"), np.ones(2, "float32")
    for bad in ([[0, 4], [0, 0]], [[0, 1], [2, -4]]):
        with pytest.raises(tvm.error.KilnError, match="scatter_nd: an index on axis [01] is out of range"):
            graph_run(relay.Function([x, i, u], relay.scatter_nd(x, i, u)), [data, np.array(bad, "int64"), upd])


def test_scatter_nd_type_errors():
    x, u = relay.var("x", shape=(4, 3)), relay.var("u", shape=(5,))
    i = relay.var("i", shape=(2, 2), dtype="int64")
    with pytest.raises(tvm.error.KilnError, match="updates"):
        relay.testing.run_infer_type(relay.scatter_nd(x, i, u))
    with pytest.raises(tvm.error.KilnError, match="integers"):
        relay.testing.run_infer_type(relay.scatter_nd(x, relay.var("f", shape=(2, 2)), relay.var("v", shape=(2,))))


# -- get_valid_counts ---------------------------------------------------------------------------------------------
def _detections(b, n, k=6):
    data = rng.uniform(0, 1, (b, n, k)).astype("float32")
    data[..., 0] = rng.integers(-1, 3, (b, n))
    return data


def test_get_valid_counts_graph_and_vm():
    data = _detections(2, 9)
    x = relay.var("x", shape=data.shape)
    out = relay.vision.get_valid_counts(x, 0.4, id_index=0, score_index=1)
    got = graph_run(relay.Function([x], relay.Tuple([out[0], out[1], out[2]])), [data])
    for g, w in zip(got, get_valid_counts_python(data, 0.4, 0, 1)):
        np.testing.assert_array_equal(g, w)
    xv = relay.var("x", shape=(A, A, 6))
    thr = relay.var("t", shape=(), dtype="float32")
    out = relay.vision.get_valid_counts(xv, thr, id_index=-1, score_index=2)
    vm = vm_of(relay.Function([xv, thr], relay.Tuple([out[0], out[1], out[2]])))
    for b, n in ((1, 1), (3, 11)):
        data = _detections(b, n)
        got = vm_outputs(vm.run(data, np.float32(0.5)))
        for g, w in zip(got, get_valid_counts_python(data, 0.5, -1, 2)):
            np.testing.assert_array_equal(g, w)


# -- all_class_non_max_suppression --------------------------------------------------------------------------------
def _boxes(b, n, ties=True):
    """Random corner boxes (corners in either order), some duplicated, scores with ties."""
    lo = rng.uniform(0, 4, (b, n, 2))
    hi = lo + rng.uniform(0.5, 4, (b, n, 2))
    boxes = np.concatenate([lo, hi], -1).astype("float32")
    flip = rng.random((b, n)) < 0.3
    boxes[flip] = boxes[flip][:, [2, 3, 0, 1]]
    if ties and n > 2:
        boxes[:, 1] = boxes[:, 0]
    return boxes


def _scores(b, c, n):
    s = rng.uniform(0, 1, (b, c, n)).astype("float32")
    s = np.round(s * 8) / 8  # many equal scores: ties go to the lower box index
    return s.astype("float32")


def _nms_graph(b, c, n, mx, iou, sth):
    bx, sc = relay.var("b", shape=(b, n, 4)), relay.var("s", shape=(b, c, n))
    out = relay.vision.all_class_non_max_suppression(bx, sc, mx, iou, sth)
    return [bx, sc], relay.Tuple([out[0], out[1]])


@pytest.mark.parametrize("b,c,n,mx,iou,sth", [(1, 1, 7, -1, 0.3, -1.0), (2, 3, 9, 2, 0.5, 0.25),
                                               (3, 2, 5, 0, 0.5, 0.0), (1, 2, 13, 3, 0.0, 0.5),
                                               (1, 2, 301, -1, 0.4, 0.1)])  # several merge-sort passes
def test_all_class_nms_graph_executor(b, c, n, mx, iou, sth):
    boxes, scores = _boxes(b, n), _scores(b, c, n)
    params, out = _nms_graph(b, c, n, mx, iou, sth)
    sel, count = graph_run(relay.Function(params, out), [boxes, scores])
    want = all_class_nms_python(boxes, scores, mx, iou, sth)
    assert sel.shape == (b * c * n, 3) and count.shape == (1,)
    assert count[0] == len(want)
    np.testing.assert_array_equal(sel[:count[0]], want)
    assert not sel[count[0]:].any()


def test_all_class_nms_run_time_limits_on_the_vm():
    bx, sc = relay.var("b", shape=(A, A, 4)), relay.var("s", shape=(A, A, A))
    mx = relay.var("mx", shape=(1,), dtype="int64")
    iou, sth = relay.var("iou", shape=(), dtype="float32"), relay.var("sth", shape=(1,), dtype="float32")
    out = relay.vision.all_class_non_max_suppression(bx, sc, mx, iou, sth)
    vm = vm_of(relay.Function([bx, sc, mx, iou, sth], relay.Tuple([out[0], out[1]])))
    for (b, c, n), m, t, s in (((1, 2, 7), 3, 0.4, 0.1), ((2, 1, 1), 1, 0.5, -1.0), ((2, 3, 11), 0, 0.5, 0.0),
                               ((1, 1, 15), -1, 0.2, 0.6)):
        boxes, scores = _boxes(b, n), _scores(b, c, n)
        sel, count = vm_outputs(vm.run(boxes, scores, np.array([m], "int64"), np.float32(t),
                                       np.array([s], "float32")))
        want = all_class_nms_python(boxes, scores, m, t, s)
        assert sel.shape == (b * c * n, 3)
        np.testing.assert_array_equal(sel[:count[0]], want)


# -- SSD ops ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("h,w,sizes,ratios,steps,clip", [(3, 5, (0.3, 0.6), (1.0, 2.0, 0.5), (-1, -1), False),
                                                         (4, 1, (0.9,), (1.0,), (0.25, 0.5), True)])
def test_multibox_prior(h, w, sizes, ratios, steps, clip):
    x = relay.var("x", shape=(1, 2, h, w))
    out = relay.vision.multibox_prior(x, sizes, ratios, steps, (0.5, 0.25), clip)
    (got,) = graph_run(relay.Function([x], out), [np.zeros((1, 2, h, w), "float32")])
    np.testing.assert_allclose(got, multibox_prior_python((1, 2, h, w), sizes, ratios, steps, (0.5, 0.25), clip),
                               rtol=1e-5, atol=1e-6)


def test_multibox_transform_loc():
    b, c, a = 2, 4, 9
    prob = rng.uniform(0, 1, (b, c, a)).astype("float32")
    loc = rng.standard_normal((b, a * 4)).astype("float32") * 0.5
    anchor = multibox_prior_python((1, 1, 3, 3), (0.4,), (1.0,))
    p, l, an = relay.var("p", shape=prob.shape), relay.var("l", shape=loc.shape), relay.var("a", shape=anchor.shape)
    out = relay.vision.multibox_transform_loc(p, l, an, clip=True, threshold=0.5)
    got = graph_run(relay.Function([p, l, an], relay.Tuple([out[0], out[1]])), [prob, loc, anchor])
    want = multibox_transform_loc_python(prob, loc, anchor, True, 0.5)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got[1], want[1])


def test_all_class_nms_types_and_unimplemented_format():
    bx, sc = relay.var("b", shape=(2, 7, 4)), relay.var("s", shape=(2, 3, 7))
    t = relay.testing.run_infer_type(relay.vision.all_class_non_max_suppression(bx, sc, 2, 0.5, 0.1).astuple())
    assert [tuple(int(d) for d in f.shape) for f in t.checked_type.fields] == [(42, 3), (1,)]
    bx = relay.var("b", shape=(A, 7, 4))
    sc = relay.var("s", shape=(A, 3, 7))
    t = relay.testing.run_infer_type(relay.vision.all_class_non_max_suppression(bx, sc).astuple())
    assert isinstance(t.checked_type.fields[0].shape[0], tvm.tir.Any)
    with pytest.raises(tvm.error.OpNotImplemented, match="output_format 'tensorflow' is not implemented"):
        relay.vision.all_class_non_max_suppression(bx, sc, output_format="tensorflow")
    with pytest.raises(tvm.error.KilnError, match="scalar"):
        relay.testing.run_infer_type(relay.vision.all_class_non_max_suppression(
            bx, sc, relay.var("m", shape=(2,), dtype="int64")).astuple())


def test_ssd_ops_on_the_vm_with_unknown_sizes():
    x = relay.var("x", shape=(1, 2, A, A))
    vm = vm_of(relay.Function([x], relay.vision.multibox_prior(x, (0.2, 0.5), (1.0, 3.0), clip=True)))
    for h, w in ((3, 5), (1, 1), (6, 2)):
        (got,) = vm_outputs(vm.run(np.zeros((1, 2, h, w), "float32")))
        np.testing.assert_allclose(got, multibox_prior_python((1, 2, h, w), (0.2, 0.5), (1.0, 3.0), clip=True),
                                   rtol=1e-5, atol=1e-6)
    p, l, an = relay.var("p", shape=(A, 3, A)), relay.var("l", shape=(A, A)), relay.var("a", shape=(1, A, 4))
    out = relay.vision.multibox_transform_loc(p, l, an, clip=False, threshold=0.3, variances=(0.2, 0.1, 0.3, 0.4))
    vm = vm_of(relay.Function([p, l, an], relay.Tuple([out[0], out[1]])))
    for b, a in ((1, 4), (3, 7)):
        prob = rng.uniform(0, 1, (b, 3, a)).astype("float32")
        loc = rng.standard_normal((b, a * 4)).astype("float32") * 0.5
        anchor = rng.uniform(0, 1, (1, a, 4)).astype("float32")
        got = vm_outputs(vm.run(prob, loc, anchor))
        want = multibox_transform_loc_python(prob, loc, anchor, False, 0.3, (0.2, 0.1, 0.3, 0.4))
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(got[1], want[1])


def test_vm_executable_with_nms_and_scatter_nd_saves_and_loads():
    bx, sc = relay.var("b", shape=(1, A, 4)), relay.var("s", shape=(1, 2, A))
    out = relay.vision.all_class_non_max_suppression(bx, sc, 3, 0.5, 0.1)
    end = relay.concatenate([out[1], relay.const(np.array([3], "int64"), "int64")], 0)
    sel = relay.op.dyn.strided_slice(out[0], relay.const(np.zeros(2, "int64"), "int64"), end,
                                     relay.const(np.ones(2, "int64"), "int64"))
    x, i, u = relay.var("x", shape=(A, 3)), relay.var("i", shape=(1, A), dtype="int64"), relay.var("u", shape=(A, 3))
    mod = tvm.IRModule.from_expr(relay.Function([bx, sc, x, i, u], relay.Tuple([sel, relay.scatter_nd(x, i, u, "add")])))
    code, lib = relay.vm.compile(mod, "llvm").save()
    vm = rvm.VirtualMachine(rvm.Executable.load_exec(code, lib), tvm.cpu())
    for n in (6, 11):
        boxes, scores = _boxes(1, n), _scores(1, 2, n)
        data, idx = rng.standard_normal((5, 3)).astype("float32"), np.array([[0, 4, 0]], "int64")
        upd = rng.standard_normal((3, 3)).astype("float32")
        got = vm_outputs(vm.run(boxes, scores, data, idx, upd))
        np.testing.assert_array_equal(got[0], all_class_nms_python(boxes, scores, 3, 0.5, 0.1))
        np.testing.assert_allclose(got[1], scatter_nd_python(data, idx, upd, "add"), rtol=1e-6)
