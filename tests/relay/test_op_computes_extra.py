"""relay.build (target llvm) + graph executor for the ops whose TOPI computes came last: conv1d, pool1d,
cumsum/cumprod, argsort/sort/topk, instance_norm, l2_normalize, lrn, depth_to_space/space_to_depth,
slice_like, collapse_sum_like, ndarray_size. Each compiled result is checked against the op's numpy
reference (the debug interpreter) and against numpy / PyTorch directly."""
import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.contrib import graph_executor
from kiln.error import KilnError, TypeInferenceError

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _rand(*shape, dtype="float32", seed=0):
    rng = np.random.default_rng(seed + 7 * len(shape) + sum(shape))
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-4, 5, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _func(build, arrays):
    xs = [relay.var(f"x{i}", shape=a.shape, dtype=str(a.dtype)) for i, a in enumerate(arrays)]
    body = build(*xs)
    if isinstance(body, relay.TupleWrapper):
        body = body.astuple()
    return kiln.IRModule.from_expr(relay.Function(xs, body))


def compiled(build, *arrays, opt_level=3, disabled_pass=None):
    """Outputs of ``build(*vars)`` compiled by relay.build for llvm and run by the graph executor."""
    mod = _func(build, arrays)
    with kiln.transform.PassContext(opt_level=opt_level, disabled_pass=disabled_pass):
        lib = relay.build(mod, target="llvm")
    m = graph_executor.GraphModule(lib["default"](kiln.cpu(0)))
    for i, a in enumerate(arrays):
        m.set_input(f"x{i}", a)
    m.run()
    outs = [m.get_output(i).numpy() for i in range(m.get_num_outputs())]
    return outs if len(outs) > 1 else outs[0]


def reference(build, *arrays):
    """The same function on the debug interpreter (each op's numpy reference)."""
    res = relay.create_executor("debug", mod=_func(build, arrays)).evaluate()(*arrays)
    return [r.numpy() for r in res] if isinstance(res, tuple) else res.numpy()


def check(build, *arrays, expect=None, rtol=1e-5, atol=1e-6, **kw):
    got = compiled(build, *arrays, **kw)
    ref = reference(build, *arrays)
    got_l, ref_l = (got, ref) if isinstance(got, list) else ([got], [ref])
    for g, r in zip(got_l, ref_l):
        assert g.shape == r.shape and g.dtype == r.dtype, (g.shape, g.dtype, r.shape, r.dtype)
        np.testing.assert_allclose(g, r, rtol=rtol, atol=atol)
    if expect is not None:
        exp_l = expect if isinstance(expect, list) else [expect]
        for g, e in zip(got_l, exp_l):
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)
    return got


# -- conv1d / pool1d ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("w,k,stride,pad,dil,groups", [(7, 3, 1, (1, 1), 1, 1), (37, 5, 2, (2, 1), 2, 2),
                                                       (1, 1, 1, (0, 0), 1, 1), (9, 3, 3, (0, 2), 1, 4)])
def test_conv1d(w, k, stride, pad, dil, groups):
    x = _rand(2, 4, w)
    wt = _rand(8, 4 // groups, k, seed=1)
    exp = F.conv1d(F.pad(torch.from_numpy(x), pad), torch.from_numpy(wt), stride=stride, dilation=dil,
                   groups=groups).numpy()
    check(lambda a, b: relay.nn.conv1d(a, b, strides=stride, padding=pad, dilation=dil, groups=groups,
                                       channels=8, kernel_size=k), x, wt, expect=exp, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("w,k,stride,pad,ceil", [(7, 3, 2, (1, 1), False), (37, 4, 3, (1, 2), True),
                                                  (1, 1, 1, (0, 0), False), (8, 2, 2, (0, 0), True)])
def test_max_pool1d(w, k, stride, pad, ceil):
    x = _rand(2, 3, w)
    check(lambda a: relay.nn.max_pool1d(a, k, stride, padding=pad, ceil_mode=ceil), x)
    if pad[0] == pad[1]:
        exp = F.max_pool1d(torch.from_numpy(x), k, stride, padding=pad[0], ceil_mode=ceil).numpy()
        np.testing.assert_array_equal(compiled(lambda a: relay.nn.max_pool1d(a, k, stride, padding=pad,
                                                                           ceil_mode=ceil), x), exp)


@pytest.mark.parametrize("count_include_pad", [False, True])
@pytest.mark.parametrize("w,k,stride,pad", [(7, 3, 2, (1, 1)), (37, 5, 1, (2, 2)), (1, 1, 1, (0, 0))])
def test_avg_pool1d(w, k, stride, pad, count_include_pad):
    x = _rand(2, 3, w)
    exp = F.avg_pool1d(torch.from_numpy(x), k, stride, padding=pad[0], count_include_pad=count_include_pad).numpy()
    check(lambda a: relay.nn.avg_pool1d(a, k, stride, padding=pad, count_include_pad=count_include_pad), x,
          expect=exp)


def test_conv1d_pool1d_chain_fused():
    x, wt = _rand(1, 3, 37), _rand(5, 3, 3, seed=2)
    exp = F.max_pool1d(F.relu(F.conv1d(torch.from_numpy(x), torch.from_numpy(wt), padding=1)), 2).numpy()
    check(lambda a, b: relay.nn.max_pool1d(relay.nn.relu(relay.nn.conv1d(a, b, padding=(1, 1))), 2, 2), x, wt,
          expect=exp, rtol=1e-4, atol=1e-5)


# -- cumsum / cumprod -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@pytest.mark.parametrize("shape,axis", [((7,), 0), ((3, 37), -1), ((4, 1, 5), 1), ((2, 3, 4), None), ((5, 6), 0)])
@pytest.mark.parametrize("exclusive", [False, True])
def test_scan_float(op, shape, axis, exclusive):
    x = _rand(*shape) * (0.5 if op == "cumprod" else 1.0) + (1.0 if op == "cumprod" else 0.0)
    fn = getattr(relay, op)
    flat, ax = (x.reshape(-1), 0) if axis is None else (x, axis)
    exp = getattr(np, op)(flat.astype("float64"), axis=ax)
    if exclusive:
        exp = np.concatenate([np.full_like(np.take(exp, [0], ax), 1.0 if op == "cumprod" else 0.0),
                              np.take(exp, np.arange(exp.shape[ax] - 1), ax)], ax)
    check(lambda a: fn(a, axis=axis, exclusive=exclusive), x, expect=exp, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_scan_int_and_dtype(op):
    x = _rand(3, 7, dtype="int32")
    fn = getattr(relay, op)
    got = check(lambda a: fn(a, axis=1), x, expect=getattr(np, op)(x, axis=1))
    assert got.dtype == np.int32
    got = check(lambda a: fn(a, axis=0, dtype="float32", exclusive=True), x)
    assert got.dtype == np.float32
    got = check(lambda a: fn(a, dtype="int64"), x, expect=getattr(np, op)(x.reshape(-1).astype("int64")))
    assert got.dtype == np.int64


def test_cumsum_matches_torch():
    x = _rand(4, 37)
    check(lambda a: relay.cumsum(a, axis=-1), x, expect=torch.cumsum(torch.from_numpy(x), -1).numpy(),
          rtol=1e-5, atol=1e-5)


# -- argsort / sort / topk ------------------------------------------------------------------------------------
def _with_ties(*shape, dtype="float32", seed=0):
    rng = np.random.default_rng(seed + sum(shape))
    return rng.integers(-3, 4, size=shape).astype(dtype)


@pytest.mark.parametrize("shape,axis", [((7,), 0), ((3, 37), -1), ((5, 4), 0), ((1,), 0), ((2, 6, 3), 1)])
@pytest.mark.parametrize("is_ascend", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_argsort_sort_with_ties(shape, axis, is_ascend, dtype):
    x = _with_ties(*shape, dtype=dtype)
    key = x if is_ascend else -x.astype("int64") if dtype == "int32" else -x
    exp_idx = np.argsort(key, axis=axis, kind="stable")
    got = check(lambda a: relay.argsort(a, axis=axis, is_ascend=is_ascend, dtype="int32"), x, expect=exp_idx)
    assert got.dtype == np.int32
    check(lambda a: relay.sort(a, axis=axis, is_ascend=is_ascend), x,
          expect=np.take_along_axis(x, exp_idx, axis))


def test_argsort_float_indices_and_nan_last():
    x = np.array([[3.0, np.nan, -1.0, 3.0, 0.0, np.nan, -0.0]], "float32")
    got = check(lambda a: relay.argsort(a, dtype="float32"), x, expect=np.argsort(x, axis=-1, kind="stable"))
    assert got.dtype == np.float32
    exp = np.argsort(-x, axis=-1, kind="stable")
    check(lambda a: relay.argsort(a, is_ascend=False, dtype="int64"), x, expect=exp)


@pytest.mark.parametrize("shape,k,axis", [((7,), 3, 0), ((3, 37), 5, -1), ((6, 4), 6, 0), ((1,), 1, 0),
                                           ((2, 9, 3), 0, 1)])
@pytest.mark.parametrize("is_ascend", [False, True])
def test_topk_both(shape, k, axis, is_ascend):
    x = _with_ties(*shape)
    out = check(lambda a: relay.topk(a, k=k, axis=axis, is_ascend=is_ascend, dtype="int32"), x)
    vals, idx = out
    kk = k if k >= 1 else shape[axis]
    assert vals.shape[axis] == kk and idx.dtype == np.int32
    t = torch.topk(torch.from_numpy(x), kk, dim=axis, largest=not is_ascend, sorted=True)
    np.testing.assert_array_equal(vals, t.values.numpy())
    np.testing.assert_array_equal(np.take_along_axis(x, idx.astype("int64"), axis), vals)


@pytest.mark.parametrize("ret_type", ["values", "indices"])
def test_topk_single_output(ret_type):
    x = _rand(4, 37)
    got = check(lambda a: relay.topk(a, k=3, ret_type=ret_type, dtype="int64"), x)
    t = torch.topk(torch.from_numpy(x), 3)
    np.testing.assert_array_equal(got, (t.values if ret_type == "values" else t.indices).numpy())


def test_topk_k_too_large_is_an_error():
    with pytest.raises(TypeInferenceError, match="larger than dimension"):
        compiled(lambda a: relay.topk(a, k=8), _rand(2, 7))
    from kiln import te, topi
    with pytest.raises(KilnError, match="larger than axis"):
        topi.topk(te.placeholder((2, 7)), k=8)


# -- normalizations ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,axis", [((2, 3, 7), 1), ((1, 4, 5, 3), 1), ((2, 5, 3), -1)])
@pytest.mark.parametrize("center,scale", [(True, True), (False, True), (True, False)])
def test_instance_norm_compiled_without_simplify(shape, axis, center, scale):
    x = _rand(*shape)
    c = shape[axis]
    g, b = _rand(c, seed=3), _rand(c, seed=4)
    build = lambda a, gg, bb: relay.nn.instance_norm(a, gg, bb, axis=axis, epsilon=1e-5, center=center, scale=scale)
    check(build, x, g, b, rtol=1e-4, atol=1e-5, disabled_pass=["SimplifyInference"])
    if axis == 1 and center and scale:
        exp = F.instance_norm(torch.from_numpy(x), weight=torch.from_numpy(g), bias=torch.from_numpy(b),
                              eps=1e-5).numpy()
        np.testing.assert_allclose(compiled(build, x, g, b, disabled_pass=["SimplifyInference"]), exp,
                                   rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape,axis,eps", [((3, 7), [1], 1e-12), ((2, 4, 5), [1, 2], 1e-3), ((37,), [], 0.0),
                                             ((2, 3), [-1], 10.0)])
def test_l2_normalize(shape, axis, eps):
    x = _rand(*shape)
    build = lambda a: relay.nn.l2_normalize(a, eps, axis=axis)
    check(build, x, rtol=1e-5, disabled_pass=["SimplifyInference"])
    check(build, x, rtol=1e-5)  # SimplifyInference: an empty axis list becomes sum(axis=[]): every axis


@pytest.mark.parametrize("op", ["sum", "max", "min", "prod"])
@pytest.mark.parametrize("exclude", [False, True])
def test_reduce_over_empty_axis_list_reduces_every_axis(op, exclude):
    # TVM's GetReduceAxes: an empty (but given) axis list means all axes, and exclude does not change that
    x = _rand(3, 7)
    check(lambda a: getattr(relay, op)(a, axis=[], exclude=exclude), x,
          expect=np.asarray(getattr(np, op)(x), dtype="float32"), rtol=1e-5)


@pytest.mark.parametrize("shape,size,axis", [((2, 7, 3, 3), 5, 1), ((1, 6, 4), 3, -1), ((2, 4, 5), 4, 1),
                                             ((1, 1, 2, 2), 1, 1)])
def test_lrn(shape, size, axis):
    x = _rand(*shape)
    build = lambda a: relay.nn.lrn(a, size=size, axis=axis, bias=1.5, alpha=1e-2, beta=0.75)
    got = check(build, x, rtol=1e-5, atol=1e-6)
    if axis == 1 and size % 2 == 1:
        exp = F.local_response_norm(torch.from_numpy(x), size, alpha=1e-2, beta=0.75, k=1.5).numpy()
        np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-6)


# -- layout shuffles and shape ops -------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("shape,b", [((1, 8, 3, 5), 2), ((2, 9, 1, 2), 3), ((1, 3, 2, 2), 1)])
def test_depth_to_space(mode, shape, b):
    x = _rand(*shape)
    got = check(lambda a: relay.nn.depth_to_space(a, b, mode=mode), x)
    if mode == "CRD":
        np.testing.assert_array_equal(got, F.pixel_shuffle(torch.from_numpy(x), b).numpy())


@pytest.mark.parametrize("shape,b", [((1, 2, 4, 6), 2), ((2, 3, 3, 9), 3), ((1, 1, 1, 1), 1)])
def test_space_to_depth_and_round_trip(shape, b):
    x = _rand(*shape, dtype="int32")
    check(lambda a: relay.nn.space_to_depth(a, b), x)
    np.testing.assert_array_equal(compiled(lambda a: relay.nn.depth_to_space(relay.nn.space_to_depth(a, b), b), x), x)


@pytest.mark.parametrize("like_shape,axes", [((2, 3), None), ((1, 5, 2), [0, -1]), ((3, 6), [1]), ((2,), None)])
def test_slice_like(like_shape, axes):
    x, like = _rand(3, 7, 4), _rand(*like_shape, seed=5)
    got = check(lambda a, b: relay.slice_like(a, b, axes), x, like)
    ax = range(min(3, len(like_shape))) if not axes else [a % 3 for a in axes]
    exp = x[tuple(slice(0, like_shape[a]) if a in ax else slice(None) for a in range(3))]
    np.testing.assert_array_equal(got, exp)


@pytest.mark.parametrize("shape,target", [((3, 4, 5), (4, 1)), ((2, 3), (2, 3)), ((7, 1, 3), (1, 1, 3)),
                                          ((2, 37), (37,)), ((4, 5), ())])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_collapse_sum_like(shape, target, dtype):
    x, like = _rand(*shape, dtype=dtype), np.zeros(target, dtype)
    lead = len(shape) - len(target)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(target) if d == 1 and shape[lead + i] != 1)
    exp = x.sum(axis=axes, keepdims=True).reshape(target) if axes else x
    check(lambda a, b: relay.collapse_sum_like(a, b), x, like, expect=exp, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,dtype", [((3, 7), "int32"), ((1,), "int64"), ((2, 3, 37), "float32")])
def test_ndarray_size(shape, dtype):
    x = _rand(*shape)
    got = check(lambda a: relay.ndarray_size(a, dtype=dtype), x, expect=np.array(x.size))
    assert got.shape == () and got.dtype == np.dtype(dtype)


# -- frontends ------------------------------------------------------------------------------------------------
def test_pytorch_conv1d_maxpool1d_avgpool1d_model():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv1d(3, 6, 5, stride=1, padding=2)
            self.pool = torch.nn.MaxPool1d(3, stride=2, padding=1)
            self.avg = torch.nn.AvgPool1d(2)

        def forward(self, x):
            return self.avg(self.pool(torch.relu(self.conv(x)))).cumsum(-1)

    torch.manual_seed(0)
    net = Net().eval()
    x = torch.randn(2, 3, 37)
    scripted = torch.jit.trace(net, x)
    mod, params = relay.frontend.from_pytorch(scripted, [("input0", (2, 3, 37))])
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](kiln.cpu(0)))
    m.set_input("input0", x.numpy())
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), net(x).detach().numpy(), rtol=1e-4, atol=1e-5)


def _onnx_run(model, inputs):
    mod, params = relay.frontend.from_onnx(model, {k: v.shape for k, v in inputs.items()})
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](kiln.cpu(0)))
    for k, v in inputs.items():
        m.set_input(k, v)
    m.run()
    return [m.get_output(i).numpy() for i in range(m.get_num_outputs())]


@pytest.mark.parametrize("case", ["conv1d_pool1d", "cumsum_d2s_lrn_instnorm"])
def test_onnx_models_compile(case):
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    if case == "conv1d_pool1d":
        x = rng.standard_normal((2, 3, 37)).astype("float32")
        w = rng.standard_normal((4, 3, 5)).astype("float32")
        nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[2, 1], strides=[2]),
                 helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[3], strides=[2], pads=[1, 1]),
                 helper.make_node("AveragePool", ["p"], ["y"], kernel_shape=[2], strides=[1])]
        inits = [numpy_helper.from_array(w, "w")]
    else:
        x = rng.standard_normal((1, 8, 3, 5)).astype("float32")
        g = rng.standard_normal(2).astype("float32")
        b = rng.standard_normal(2).astype("float32")
        nodes = [helper.make_node("DepthToSpace", ["x"], ["d"], blocksize=2, mode="CRD"),
                 helper.make_node("LRN", ["d"], ["l"], size=3, alpha=0.01, beta=0.75, bias=1.0),
                 helper.make_node("InstanceNormalization", ["l", "g", "b"], ["n"], epsilon=1e-5),
                 helper.make_node("CumSum", ["n", "axis"], ["y"], exclusive=1, reverse=0)]
        inits = [numpy_helper.from_array(g, "g"), numpy_helper.from_array(b, "b"),
                 helper.make_tensor("axis", TensorProto.INT32, [], [3])]
    out_shape = [2, 4, 8] if case == "conv1d_pool1d" else [1, 2, 6, 10]
    graph = helper.make_graph(nodes, case, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    exp = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(_onnx_run(model, {"x": x})[0], exp, rtol=1e-4, atol=1e-5)
