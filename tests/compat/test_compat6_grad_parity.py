"""Gradients added for TVM v0.13 parity (its ``_tensor_grad.py`` list) and beyond it, checked with
``relay.testing.check_grad`` (central differences): higher order on the debug interpreter, first order compiled
for llvm and run on the graph executor (ops bundled per build to keep the file fast)."""
import warnings

import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.ir.op import Op
from kiln.relay.testing import check_grad

F64 = "float64"
rng = np.random.RandomState(11)
GRAPH = [("llvm", tvm.cpu())]


def _var(name, shape, dtype=F64):
    return relay.var(name, shape=shape, dtype=dtype)


def _weights(shape, seed=5):
    """Distinct weights, so a gradient permuted or summed wrongly is caught."""
    return relay.const(np.random.RandomState(seed).uniform(0.5, 1.5, size=shape), F64)


def _out_shape(expr):
    return tuple(int(d) for d in relay.testing.run_infer_type(expr).checked_type.shape)


def _weighted(expr):
    return expr * _weights(_out_shape(expr))


def _check_ho(func, inputs, eps=1e-5, atol=1e-6, rtol=1e-4):
    check_grad(func, inputs=[np.array(i, dtype=F64) for i in inputs], eps=eps, atol=atol, rtol=rtol)


def _check_graph(func, inputs, eps=1e-5, atol=1e-6, rtol=1e-4):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        check_grad(func, inputs=[np.array(i, dtype=F64) for i in inputs], eps=eps, atol=atol, rtol=rtol,
                   mode="first_order", executor_kind="graph", target_devices=GRAPH)


UNARY = [
    ("asin", relay.asin, lambda s: rng.uniform(-0.8, 0.8, s)),
    ("acos", relay.acos, lambda s: rng.uniform(-0.8, 0.8, s)),
    ("asinh", relay.asinh, lambda s: rng.randn(*s)),
    ("acosh", relay.acosh, lambda s: rng.uniform(1.2, 3.0, s)),
    ("atanh", relay.atanh, lambda s: rng.uniform(-0.8, 0.8, s)),
    ("fast_exp", relay.fast_exp, lambda s: rng.uniform(-2.0, 2.0, s)),
    ("fast_tanh", relay.fast_tanh, lambda s: rng.uniform(-2.0, 2.0, s)),
    ("fast_erf", relay.fast_erf, lambda s: rng.uniform(-2.0, 2.0, s)),
]


@pytest.mark.parametrize("name,fn,sample", UNARY, ids=[u[0] for u in UNARY])
def test_unary_higher_order(name, fn, sample):
    x = _var("x", (3, 5))
    data = sample((3, 5))
    if name.startswith("fast_"):  # fast_* are float32 approximations: check their float32 gradient loosely
        x = relay.var("x", shape=(3, 5), dtype="float32")
        f = relay.Function([x], relay.sum(fn(x) * relay.const(rng.uniform(0.5, 1.5, (3, 5)).astype("float32"))))
        check_grad(f, inputs=[data.astype("float32")], eps=1e-2, atol=2e-3, rtol=2e-2)
        return
    _check_ho(relay.Function([x], _weighted(fn(x))), [data])


def test_inverse_trig_first_order_graph():
    xs = [_var(f"x{i}", (3, 5)) for i in range(5)]
    body = None
    for k, (x, (name, fn, _)) in enumerate(zip(xs, UNARY[:5])):
        term = fn(x) * _weights((3, 5), k)
        body = term if body is None else body + term
    data = [sample((3, 5)) for _, _, sample in UNARY[:5]]
    _check_graph(relay.Function(xs, body), data)


def test_cross_entropy_ops_forward():
    x, y = _var("x", (4, 7)), _var("y", (4, 7))
    xv, yv = rng.uniform(0.1, 1.0, (4, 7)), rng.uniform(0.0, 1.0, (4, 7))
    for fn, ref in ((relay.nn.cross_entropy, -np.sum(np.log(xv) * yv) / 4),
                    (relay.nn.cross_entropy_with_logits, -np.sum(xv * yv) / 4)):
        f = relay.Function([x, y], fn(x, y))
        assert relay.testing.run_infer_type(f).body.checked_type == relay.TensorType((), F64)
        np.testing.assert_allclose(relay.create_executor("debug").evaluate(f)(xv, yv).numpy(), ref, rtol=1e-12)
        lib = relay.build(tvm.IRModule.from_expr(f), target="llvm")
        m = tvm.contrib.graph_executor.GraphModule(lib["default"](tvm.cpu()))
        m.set_input("x", xv)
        m.set_input("y", yv)
        m.run()
        np.testing.assert_allclose(m.get_output(0).numpy(), ref, rtol=1e-12)


def test_cross_entropy_type_errors():
    with pytest.raises(tvm.error.KilnError, match="must have one shape"):
        relay.testing.run_infer_type(relay.nn.cross_entropy(_var("x", (2, 3)), _var("y", (3, 2))))
    with pytest.raises(tvm.error.KilnError, match="2-d"):
        relay.testing.run_infer_type(relay.nn.cross_entropy(_var("x", (6,)), _var("y", (6,))))


def test_cross_entropy_gradients_higher_order():
    x, y = _var("x", (3, 5)), _var("y", (3, 5))
    f = relay.Function([x, y], relay.nn.cross_entropy(x, y) * relay.const(1.7, F64))
    _check_ho(f, [rng.uniform(0.2, 1.0, (3, 5)), rng.uniform(0.0, 1.0, (3, 5))])
    f = relay.Function([x, y], relay.nn.cross_entropy_with_logits(relay.nn.log_softmax(x), y))
    _check_ho(f, [rng.randn(3, 5), rng.uniform(0.0, 1.0, (3, 5))])


def test_cross_entropy_gradients_first_order_graph():
    x, y, z = _var("x", (3, 5)), _var("y", (3, 5)), _var("z", (3, 5))
    body = relay.nn.cross_entropy(x, y) + relay.nn.cross_entropy_with_logits(relay.nn.log_softmax(z), y)
    _check_graph(relay.Function([x, y, z], body),
                 [rng.uniform(0.2, 1.0, (3, 5)), rng.uniform(0.0, 1.0, (3, 5)), rng.randn(3, 5)])


def _shape_cases():
    idx_nd = relay.const(np.array([[0, 2, 2, 1], [1, 0, 0, 3]], "int32"))
    gather_idx = relay.const(np.array([[0, 2, 1], [2, 2, 0], [1, 0, 0]], "int32"))
    return [
        ("strided_slice_step2", (7, 5), lambda x: relay.strided_slice(x, [1, 0], [7, 5], [2, 2])),
        ("strided_slice_negative", (7, 5), lambda x: relay.strided_slice(x, [5, 4], [0, -6], [-2, -1])),
        ("strided_slice_to_zero", (6,), lambda x: relay.strided_slice(x, [-1], [-7], [-2])),
        ("strided_slice_axes", (4, 6, 3), lambda x: relay.strided_slice(x, [1, 0], [6, 2], [3, 1], axes=[1, 2])),
        ("strided_slice_size", (5, 6), lambda x: relay.strided_slice(x, [1, 2], [3, -1], slice_mode="size")),
        ("reverse_reshape", (2, 3, 4), lambda x: relay.reverse_reshape(x, (-1, 0))),
        ("collapse_sum_to", (2, 3, 4), lambda x: relay.collapse_sum_to(x, (3, 1))),
        ("gather_nd", (3, 4, 2), lambda x: relay.gather_nd(x, idx_nd)),
        ("gather", (3, 4), lambda x: relay.gather(x, 1, gather_idx)),
        ("cumsum", (3, 4), lambda x: relay.cumsum(x, axis=1)),
        ("cumsum_exclusive", (3, 4), lambda x: relay.cumsum(x, axis=0, exclusive=True)),
        ("cumsum_flat", (3, 4), lambda x: relay.cumsum(x)),
        ("variance", (3, 5), lambda x: relay.variance(x, axis=[1])),
        ("variance_unbiased", (3, 5), lambda x: relay.variance(x, axis=[0], keepdims=True, unbiased=True)),
        ("variance_all", (3, 5), lambda x: relay.variance(x)),
        ("std", (3, 5), lambda x: relay.std(x, axis=[1])),
        ("dropout", (3, 5), lambda x: relay.nn.dropout(x, 0.3)),
        ("global_avg_pool_nhwc", (2, 3, 4, 5), lambda x: relay.nn.global_avg_pool2d(x, layout="NHWC")),
        ("global_max_pool_nhwc", (2, 3, 4, 5), lambda x: relay.nn.global_max_pool2d(x, layout="NHWC")),
    ]


SHAPE = _shape_cases()


@pytest.mark.parametrize("name,shape,fn", SHAPE, ids=[s[0] for s in SHAPE])
def test_shape_and_reduce_gradients_higher_order(name, shape, fn):
    x = _var("x", shape)
    _check_ho(relay.Function([x], _weighted(fn(x))), [rng.randn(*shape)])


def test_shape_and_reduce_gradients_first_order_graph():
    xs, body = [], None
    for k, (name, shape, fn) in enumerate(SHAPE):
        x = _var(f"x{k}", shape)
        xs.append(x)
        term = relay.sum(_weighted(fn(x)))
        body = term if body is None else body + term
    _check_graph(relay.Function(xs, body), [rng.randn(*x.type_annotation.shape) for x in xs])


def test_variance_with_an_independent_mean():
    """Both partial derivatives, with a mean argument that is not the data's mean."""
    x, m = _var("x", (3, 5)), _var("m", (3, 1))
    call = relay.Call(Op.get("variance"), [x, m], Op.get("variance").make_attrs(axis=[1], keepdims=False,
                                                                                 exclude=False, unbiased=False))
    _check_ho(relay.Function([x, m], _weighted(call)), [rng.randn(3, 5), rng.randn(3, 1)])


def test_arange_gradient():
    start, stop, step = (relay.const(2.5, F64), relay.const(9.5, F64), relay.const(1.75, F64))
    call = relay.arange(start, stop, step, dtype=F64)
    f = relay.Function([], call)
    f = relay.testing.run_infer_type(f)
    grads = Op.get("arange").get_attr("FPrimalGradient")(f.body, relay.const(np.arange(1.0, 5.0), F64))
    g = relay.Function([], relay.Tuple(grads))
    out = relay.create_executor("debug").evaluate(g)()
    np.testing.assert_allclose(out[0].numpy(), 10.0)  # d/dstart: sum of the gradient
    np.testing.assert_allclose(out[1].numpy(), 0.0)
    np.testing.assert_allclose(out[2].numpy(), 0 * 1 + 1 * 2 + 2 * 3 + 3 * 4)  # sum(i * grad)


def test_one_hot_gradient():
    idx = relay.const(np.array([[0, 3], [2, 2], [1, 0]], "int32"))
    on, off = _var("on", ()), _var("off", ())
    f = relay.Function([on, off], _weighted(relay.one_hot(idx, on, off, depth=4, axis=1, dtype=F64)))
    _check_ho(f, [np.array(1.3), np.array(-0.4)])
    _check_graph(f, [np.array(1.3), np.array(-0.4)])


def test_zero_gradient_ops_registered_as_tvm():
    for name in ("less_equal", "not_equal", "shape_of", "dyn.zeros", "dyn.ones", "argmax", "less"):
        assert Op.get(name).get_attr("FPrimalGradient") is not None, name
    x = _var("x", (3, 4))
    body = relay.where(relay.less_equal(x, relay.zeros_like(x)), x * x, relay.exp(x)) + \
        relay.cast(relay.take(relay.shape_of(x), relay.const(1)), F64)
    _check_ho(relay.Function([x], _weighted(body)), [rng.randn(3, 4)])


NORM = [
    ("batch_norm", lambda x, g, b, m, v: relay.nn.batch_norm(x, g, b, m, v, axis=1, epsilon=1e-3)[0]),
    ("batch_norm_tuple", lambda x, g, b, m, v: _tuple_sum(relay.nn.batch_norm(x, g, b, m, v, axis=1))),
    ("batch_norm_axis3_noscale", lambda x, g, b, m, v: relay.nn.batch_norm(
        relay.transpose(x, (0, 2, 3, 1)), g, b, m, v, axis=3, scale=False, center=False)[0]),
    ("layer_norm", lambda x, g, b, m, v: relay.nn.layer_norm(x, g, b, axis=1, epsilon=1e-3)),
    ("instance_norm", lambda x, g, b, m, v: relay.nn.instance_norm(x, g, b, axis=1)),
    ("group_norm", lambda x, g, b, m, v: relay.nn.group_norm(relay.concatenate([x, x * x], 1),
                                                             relay.concatenate([g, b], 0),
                                                             relay.concatenate([b, g], 0), num_groups=2)),
]


def _tuple_sum(t):
    w = _weights((3,), 9)
    return relay.sum(_weighted(t[0])) + relay.sum(t[1] * w) + relay.sum(t[2] * w * w)


def _norm_inputs():
    return [rng.randn(2, 3, 4, 5), rng.uniform(0.5, 1.5, 3), rng.randn(3), rng.randn(3) * 0.1,
            rng.uniform(0.5, 1.5, 3)]


@pytest.mark.parametrize("name,fn", NORM, ids=[n[0] for n in NORM])
def test_normalization_gradients_higher_order(name, fn):
    x, g, b, m, v = _var("x", (2, 3, 4, 5)), _var("g", (3,)), _var("b", (3,)), _var("m", (3,)), _var("v", (3,))
    _check_ho(relay.Function([x, g, b, m, v], _weighted(fn(x, g, b, m, v))), _norm_inputs(), eps=1e-5, atol=1e-5)


def test_normalization_gradients_first_order_graph():
    x, g, b, m, v = _var("x", (2, 3, 4, 5)), _var("g", (3,)), _var("b", (3,)), _var("m", (3,)), _var("v", (3,))
    body = None
    for _, fn in NORM:
        term = relay.sum(_weighted(fn(x, g, b, m, v)))
        body = term if body is None else body + term
    _check_graph(relay.Function([x, g, b, m, v], body), _norm_inputs(), atol=1e-5)


CONV = [  # data layout, kernel layout, data shape, weight shape, kwargs
    ("NHWC", "HWIO", (1, 6, 5, 3), (3, 2, 3, 4), dict(strides=(2, 1), padding=(1, 0, 1, 1))),
    ("NHWC", "OHWI", (2, 5, 5, 4), (6, 3, 3, 2), dict(padding=(1, 1), groups=2)),
    ("NCHW", "HWIO", (1, 3, 5, 6), (2, 3, 3, 4), dict(dilation=(2, 1))),
    ("NHWC", "HWIO", (1, 5, 4, 4), (3, 2, 2, 6), dict(strides=(1, 2), padding=(1, 1), groups=2)),
]


@pytest.mark.parametrize("dl,kl,dshape,wshape,kw", CONV,
                         ids=["nhwc_hwio", "nhwc_ohwi_groups", "nchw_hwio", "nhwc_hwio_groups"])
def test_conv2d_layout_gradients_higher_order(dl, kl, dshape, wshape, kw):
    x, w = _var("x", dshape), _var("w", wshape)
    conv = relay.nn.conv2d(x, w, data_layout=dl, kernel_layout=kl, **kw)
    _check_ho(relay.Function([x, w], _weighted(conv)), [rng.randn(*dshape), rng.randn(*wshape)], eps=1e-4)


TCONV = [  # data shape, weight (IOHW) shape, kwargs
    ((1, 3, 4, 5), (3, 2, 3, 3), dict()),
    ((2, 2, 3, 4), (2, 3, 3, 2), dict(strides=(2, 2), padding=(1, 0), output_padding=(1, 1))),
    ((1, 4, 3, 3), (4, 1, 3, 3), dict(strides=(2, 1), padding=(1, 1, 0, 2), dilation=(1, 2), groups=2)),
]


@pytest.mark.parametrize("dshape,wshape,kw", TCONV, ids=["plain", "stride_outpad", "groups_dilated"])
def test_conv2d_transpose_gradients_higher_order(dshape, wshape, kw):
    x, w = _var("x", dshape), _var("w", wshape)
    conv = relay.nn.conv2d_transpose(x, w, **kw)
    _check_ho(relay.Function([x, w], _weighted(conv)), [rng.randn(*dshape), rng.randn(*wshape)], eps=1e-4)


def test_conv_gradients_first_order_graph():
    args, inputs, body = [], [], None
    for k, (dl, kl, dshape, wshape, kw) in enumerate(CONV):
        if (dl, kl) not in (("NCHW", "OIHW"), ("NHWC", "HWIO")):
            continue  # kiln compiles conv2d forward in these two layouts only
        x, w = _var(f"x{k}", dshape), _var(f"w{k}", wshape)
        term = relay.sum(_weighted(relay.nn.conv2d(x, w, data_layout=dl, kernel_layout=kl, **kw)))
        args += [x, w]
        inputs += [rng.randn(*dshape), rng.randn(*wshape)]
        body = term if body is None else body + term
    for k, (dshape, wshape, kw) in enumerate(TCONV):
        x, w = _var(f"tx{k}", dshape), _var(f"tw{k}", wshape)
        term = relay.sum(_weighted(relay.nn.conv2d_transpose(x, w, **kw)))
        args += [x, w]
        inputs += [rng.randn(*dshape), rng.randn(*wshape)]
        body = body + term
    _check_graph(relay.Function(args, body), inputs, eps=1e-4)


def test_unsupported_layouts_name_what_is_missing():
    x, w = _var("x", (1, 4, 4, 3)), _var("w", (3, 3, 3, 2))
    f = relay.Function([x, w], relay.nn.conv2d_transpose(x, w, data_layout="NHWC", kernel_layout="HWIO"))
    with pytest.raises(tvm.error.OpNotImplemented, match="conv2d_transpose"):
        relay.transform.gradient(relay.testing.run_infer_type(f))


def test_take_gradient_with_run_time_index_count():
    """Indices of type (Any,): the gradient avoids static reshapes of the index-shaped tensors."""
    data = _var("data", (3, 4, 5))
    indices = relay.var("indices", relay.TensorType((relay.Any(),), "int32"))
    inputs = [rng.randn(3, 4, 5), np.array([1, 3, 1], dtype="int32")]
    for axis in (1, None, -1):
        f = relay.Function([data, indices], relay.take(data, indices, axis=axis) * relay.const(1.5, F64))
        check_grad(f, inputs=inputs, test_inputs=[inputs[0]], eps=1e-5, atol=1e-6, rtol=1e-4)


def test_arange_gradient_with_run_time_bounds():
    """start/stop/step as parameters (a run-time length): d/dstart = sum(g), d/dstop = 0, d/dstep = sum(i g)."""
    start, stop, step = (relay.var(n, relay.TensorType((), F64)) for n in ("start", "stop", "step"))
    f = relay.Function([start, stop, step], relay.arange(start, stop, step, F64) * relay.const(2.0, F64))
    check_grad(f, inputs=[np.array(2.5), np.array(9.5), np.array(1.8)], eps=1e-5, atol=1e-6, rtol=1e-4)
    out, grads = relay.create_executor("debug").evaluate(relay.transform.gradient(
        relay.testing.run_infer_type(f)))(np.array(2.5), np.array(9.5), np.array(1.8))
    np.testing.assert_allclose(out.numpy(), 2 * (2.5 + 1.8 * np.arange(4)))
    np.testing.assert_allclose([g.numpy() for g in grads], [8.0, 0.0, 2.0 * (0 + 1 + 2 + 3)])


def test_gather_nd_gradient_with_index_parameter():
    data = _var("data", (2, 3))
    indices = relay.var("indices", shape=(2, 4), dtype="int64")
    f = relay.Function([data, indices], _weighted(relay.gather_nd(data, indices)))
    inputs = [rng.rand(2, 3), np.array([[0, 1, 1, 0], [0, 1, 0, 0]], dtype="int64")]
    check_grad(f, inputs=inputs, test_inputs=[inputs[0]], eps=1e-5, atol=1e-6, rtol=1e-4)


def test_checkpoint_and_stop_fusion_gradients():
    xs = [_var(f"x{i}", (2,)) for i in range(4)]
    prod = relay.multiply(relay.add(xs[0], xs[1]), relay.add(xs[2], xs[3]))
    _check_ho(relay.Function(xs, _weighted(relay.annotation.checkpoint(prod))), [rng.randn(2) for _ in xs])
    scope = relay.ScopeBuilder()
    pair = scope.let("pair", relay.Tuple([relay.add(xs[0], xs[1]), relay.multiply(xs[2], xs[3])]))
    scope.ret(relay.subtract(relay.annotation.checkpoint(relay.TupleGetItem(pair, 0)),
                             relay.annotation.stop_fusion(relay.TupleGetItem(pair, 1))))
    _check_ho(relay.Function(xs, _weighted(scope.get())), [rng.randn(2) for _ in xs])


def test_first_order_gradient_of_parsed_depthwise_conv_types():
    """A parsed depthwise conv + bias_add: the first-order gradient function type-checks (TVM PR 10439)."""
    src = '''#[version = "0.0.5"]
    fn (%input0: Tensor[(1, 3, 9, 9), float32], %w: Tensor[(3, 1, 3, 3), float32], %b: Tensor[(3), float32]) {
      %0 = nn.conv2d(%input0, %w, padding=[1, 1, 1, 1], groups=3, channels=3, kernel_size=[3, 3]);
      nn.bias_add(%0, %b)
    }'''
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.parse_expr(src)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        bwd = relay.transform.gradient(mod["main"], mode="first_order")
    ty = relay.transform.InferType()(tvm.IRModule.from_expr(bwd))["main"].ret_type
    assert [tuple(int(d) for d in t.shape) for t in ty.fields[1].fields] == [(1, 3, 9, 9), (3, 1, 3, 3), (3,)]


def test_conv2d_backward_weight_against_topi_testing():
    from kiln.topi.testing import conv2d_backward_weight_python
    for dy_shape, x_shape, ks, st, pad, groups in [((2, 8, 9, 9), (2, 4, 9, 9), (3, 3), (1, 1), (1, 1), 1),
                                                   ((2, 6, 5, 5), (2, 3, 11, 11), (3, 3), (2, 2), (0, 0), 1),
                                                   ((1, 4, 7, 7), (1, 4, 7, 7), (3, 3), (1, 1), (1, 1), 4)]:
        dy, x = relay.var("dy", shape=dy_shape), relay.var("x", shape=x_shape)
        f = relay.Function([dy, x], relay.nn.conv2d_backward_weight(dy, x, strides=st, padding=pad, kernel_size=ks,
                                                                    groups=groups, channels=dy_shape[1]))
        dy_np, x_np = rng.randn(*dy_shape).astype("float32"), rng.randn(*x_shape).astype("float32")
        want = conv2d_backward_weight_python(dy_np, x_np, ks, st, pad, groups=groups, channels=dy_shape[1])
        got = relay.create_executor("debug").evaluate(f)(dy_np, x_np).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        nhwc = conv2d_backward_weight_python(dy_np.transpose(0, 2, 3, 1), x_np.transpose(0, 2, 3, 1), ks, st, pad,
                                             layout="NHWC", groups=groups)
        np.testing.assert_allclose(nhwc, want.transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-5)


# every op TVM v0.13's python/tvm/relay/op/_tensor_grad.py registers a gradient for
TVM_GRADIENT_OPS = """log log2 log10 tan cos cosh sin sinh acos acosh asin asinh atan atanh exp sqrt sigmoid tanh
nn.relu add subtract multiply divide zeros dyn.zeros ones dyn.ones zeros_like ones_like collapse_sum_like
collapse_sum_to abs erf clip nn.max_pool2d nn.avg_pool2d nn.global_avg_pool2d concatenate nn.conv2d max nn.softmax
nn.log_softmax nn.bias_add nn.dense nn.matmul nn.batch_matmul reshape dyn.reshape shape_of cast cast_like
nn.batch_flatten transpose negative sum mean variance copy nn.cross_entropy nn.cross_entropy_with_logits take
contrib_reverse_reshape stack squeeze expand_dims arange gather_nd reshape_like where less_equal not_equal
strided_slice one_hot""".split()


def test_every_tvm_gradient_is_registered():
    assert len(TVM_GRADIENT_OPS) == 73
    missing = [n for n in TVM_GRADIENT_OPS if Op.get(n).get_attr("FPrimalGradient") is None]
    assert not missing


EXTRA = [
    ("reverse", (3, 4), lambda x: relay.reverse(x, 1)),
    ("repeat", (3, 4), lambda x: relay.repeat(x, 3, 0)),
    ("repeat_last", (3, 4), lambda x: relay.repeat(x, 2, -1)),
    ("layout_transform", (2, 6, 3, 5), lambda x: relay.layout_transform(x, "NCHW", "NCHW3c")),
    ("fast_softmax", (3, 5), lambda x: relay.nn.fast_softmax(x)),
    ("upsampling", (1, 2, 3, 4), lambda x: relay.nn.upsampling(x, 2, 3)),
    ("upsampling_nhwc", (1, 3, 4, 2), lambda x: relay.nn.upsampling(x, 3, 2, layout="NHWC")),
]


@pytest.mark.parametrize("name,shape,fn", EXTRA, ids=[e[0] for e in EXTRA])
def test_extra_layout_gradients_higher_order(name, shape, fn):
    x = _var("x", shape)
    _check_ho(relay.Function([x], _weighted(fn(x))), [rng.randn(*shape)])


def test_prelu_gradient():
    x, a = _var("x", (2, 3, 4)), _var("a", (3,))
    data = np.where(rng.rand(2, 3, 4) < 0.5, -1, 1) * rng.uniform(0.1, 1.0, (2, 3, 4))
    f = relay.Function([x, a], _weighted(relay.nn.prelu(x, a, axis=1)))
    _check_ho(f, [data, rng.uniform(0.1, 0.5, 3)])


def test_extra_gradients_first_order_graph():
    xs, body = [], None
    for k, (name, shape, fn) in enumerate(EXTRA):
        x = _var(f"x{k}", shape)
        xs.append(x)
        term = relay.sum(_weighted(fn(x)))
        body = term if body is None else body + term
    x, a = _var("px", (2, 3, 4)), _var("pa", (3,))
    body = body + relay.sum(_weighted(relay.nn.prelu(x, a, axis=1)))
    data = [rng.randn(*v.type_annotation.shape) for v in xs]
    data += [np.where(rng.rand(2, 3, 4) < 0.5, -1, 1) * rng.uniform(0.1, 1.0, (2, 3, 4)), rng.uniform(0.1, 0.5, 3)]
    _check_graph(relay.Function(xs + [x, a], body), data)
