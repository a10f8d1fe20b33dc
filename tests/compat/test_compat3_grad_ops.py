"""Every registered op gradient (FPrimalGradient) against central finite differences (relay.testing.check_grad)."""
import numpy as np
import pytest

from kiln import relay
from kiln.relay.testing import check_grad

MODES = ["higher_order", "first_order"]
F64 = "float64"


def _var(name, shape, dtype=F64):
    return relay.var(name, shape=shape, dtype=dtype)


def _const(arr):
    return relay.const(np.asarray(arr, dtype=F64), F64)


def _weights(shape, seed=7):
    """Distinct weights, so a gradient permuted or summed wrongly is caught (a plain sum would hide it)."""
    return _const(np.random.RandomState(seed).uniform(0.5, 1.5, size=shape))


def _check(func, inputs, mode, eps=1e-5, atol=1e-6, rtol=1e-4, **kw):
    check_grad(func, inputs=[np.array(i, dtype=F64) for i in inputs], mode=mode, eps=eps, atol=atol, rtol=rtol,
               **kw)


rng = np.random.RandomState(0)

# (op, input sampler): values kept inside each op's domain and away from kinks
UNARY = [
    ("negative", relay.negative, lambda s: rng.randn(*s)),
    ("exp", relay.exp, lambda s: rng.randn(*s)),
    ("log", relay.log, lambda s: rng.uniform(0.5, 2.0, s)),
    ("log2", relay.log2, lambda s: rng.uniform(0.5, 2.0, s)),
    ("log10", relay.log10, lambda s: rng.uniform(0.5, 2.0, s)),
    ("sqrt", relay.sqrt, lambda s: rng.uniform(0.5, 2.0, s)),
    ("rsqrt", relay.rsqrt, lambda s: rng.uniform(0.5, 2.0, s)),
    ("sigmoid", relay.sigmoid, lambda s: rng.randn(*s)),
    ("tanh", relay.tanh, lambda s: rng.randn(*s)),
    ("sin", relay.sin, lambda s: rng.randn(*s)),
    ("cos", relay.cos, lambda s: rng.randn(*s)),
    ("tan", relay.tan, lambda s: rng.uniform(-1.0, 1.0, s)),
    ("sinh", relay.sinh, lambda s: rng.randn(*s)),
    ("cosh", relay.cosh, lambda s: rng.randn(*s)),
    ("atan", relay.atan, lambda s: rng.randn(*s)),
    ("erf", relay.erf, lambda s: rng.randn(*s)),
    ("abs", relay.abs, lambda s: np.where(rng.rand(*s) < 0.5, -1, 1) * rng.uniform(0.1, 1.0, s)),
    ("nn.relu", relay.nn.relu, lambda s: np.where(rng.rand(*s) < 0.5, -1, 1) * rng.uniform(0.1, 1.0, s)),
    ("nn.leaky_relu", lambda x: relay.nn.leaky_relu(x, alpha=0.3),
     lambda s: np.where(rng.rand(*s) < 0.5, -1, 1) * rng.uniform(0.1, 1.0, s)),
    ("clip", lambda x: relay.clip(x, -0.5, 0.7), lambda s: rng.uniform(-1.0, 1.0, s)),
    ("copy", relay.copy, lambda s: rng.randn(*s)),
    ("sign", relay.sign, lambda s: rng.uniform(0.1, 1.0, s)),
    ("round", relay.round, lambda s: rng.uniform(0.1, 0.4, s)),
    ("floor", relay.floor, lambda s: rng.uniform(0.1, 0.9, s)),
    ("ceil", relay.ceil, lambda s: rng.uniform(0.1, 0.9, s)),
    ("trunc", relay.trunc, lambda s: rng.uniform(0.1, 0.9, s)),
    ("zeros_like", relay.zeros_like, lambda s: rng.randn(*s)),
    ("ones_like", relay.ones_like, lambda s: rng.randn(*s)),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,fn,sample", UNARY, ids=[u[0] for u in UNARY])
def test_unary_gradients(name, fn, sample, mode):
    shape = (3, 5)
    x = _var("x", shape)
    body = fn(x)
    if name == "clip":  # keep values off the clip bounds
        data = sample(shape)
        data[np.abs(data - 0.7) < 0.05] = 0.2
        data[np.abs(data + 0.5) < 0.05] = 0.1
    else:
        data = sample(shape)
    _check(relay.Function([x], body * _weights(shape)), [data], mode)


BINARY = [
    ("add", relay.add, None), ("subtract", relay.subtract, None), ("multiply", relay.multiply, None),
    ("divide", relay.divide, "positive"), ("power", relay.power, "positive"),
    ("maximum", relay.maximum, "apart"), ("minimum", relay.minimum, "apart"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 3, 4), (3, 1))],
                         ids=["same", "row", "outer", "rank3"])
@pytest.mark.parametrize("name,fn,domain", BINARY, ids=[b[0] for b in BINARY])
def test_broadcast_binary_gradients(name, fn, domain, shapes, mode):
    x, y = _var("x", shapes[0]), _var("y", shapes[1])
    out_shape = np.broadcast_shapes(*shapes)
    func = relay.Function([x, y], fn(x, y) * _weights(out_shape))
    if domain == "positive":
        inputs = [rng.uniform(0.5, 2.0, s) for s in shapes]
    elif domain == "apart":
        # max/min have no derivative at a tie: x on the grid 0.2k, y on 0.2k + 0.1, so |x - y| >= 0.1 always
        # (central differences of step eps never cross the kink, whatever order xdist runs the tests in)
        inputs = [rng.randint(-10, 10, shapes[0]) * 0.2, rng.randint(-10, 10, shapes[1]) * 0.2 + 0.1]
    else:
        inputs = [rng.randn(*s) for s in shapes]
    _check(func, inputs, mode)


@pytest.mark.parametrize("mode", MODES)
def test_where_gradient(mode):
    cond = relay.const(rng.rand(3, 4) < 0.5)
    x, y = _var("x", (3, 4)), _var("y", (4,))
    _check(relay.Function([x, y], relay.where(cond, x, y) * _weights((3, 4))), [rng.randn(3, 4), rng.randn(4)],
           mode)


@pytest.mark.parametrize("mode", MODES)
def test_like_op_gradients(mode):
    x, y, z = _var("x", (3, 1)), _var("y", (2, 3, 4)), _var("z", (4, 3))
    body = relay.collapse_sum_like(y, relay.zeros((3, 4), F64)) * _weights((3, 4))
    body = body + relay.broadcast_to_like(x, relay.zeros((3, 4), F64)) + relay.broadcast_to(x, (3, 4))
    body = body + relay.reshape_like(z, relay.zeros((3, 4), F64)) * relay.reshape(relay.cast_like(z, y), (3, 4))
    func = relay.Function([x, y, z], body * _weights((3, 4), 3))
    _check(func, [rng.randn(3, 1), rng.randn(2, 3, 4), rng.randn(4, 3)], mode)


@pytest.mark.parametrize("mode", MODES)
def test_cast_gradient(mode):
    x = relay.var("x", shape=(2, 3), dtype="float32")
    func = relay.Function([x], relay.cast(relay.cast(x, F64) * _weights((2, 3)), "float32"))
    data = rng.randn(2, 3).astype("float32")
    check_grad(func, inputs=[data], eps=1e-2, atol=1e-3, rtol=1e-2, mode=mode)


REDUCE = [
    ("sum_all", lambda x: relay.sum(x)),
    ("sum_axis", lambda x: relay.sum(x, axis=[1]) * _weights((2, 4))),
    ("sum_keepdims", lambda x: relay.sum(x, axis=[0, 2], keepdims=True) * _weights((1, 3, 1))),
    ("sum_exclude", lambda x: relay.sum(x, axis=[1], exclude=True) * _weights((3,))),
    ("mean", lambda x: relay.mean(x, axis=[2]) * _weights((2, 3))),
    ("mean_all", lambda x: relay.mean(x)),
    ("max", lambda x: relay.max(x, axis=[1]) * _weights((2, 4))),
    ("max_all", lambda x: relay.max(x)),
    ("min", lambda x: relay.min(x, axis=[0, 2], keepdims=True) * _weights((1, 3, 1))),
    ("prod", lambda x: relay.prod(x, axis=[2]) * _weights((2, 3))),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,fn", REDUCE, ids=[r[0] for r in REDUCE])
def test_reduce_gradients(name, fn, mode):
    x = _var("x", (2, 3, 4))
    _check(relay.Function([x], fn(x)), [rng.uniform(0.5, 1.5, (2, 3, 4))], mode)


SHAPE = [
    ("reshape", (2, 3, 4), lambda x: relay.reshape(x, (4, 6)), (4, 6)),
    ("batch_flatten", (2, 3, 4), relay.nn.batch_flatten, (2, 12)),
    ("expand_dims", (3, 4), lambda x: relay.expand_dims(x, 1, 2), (3, 1, 1, 4)),
    ("squeeze", (3, 1, 4), lambda x: relay.squeeze(x, [1]), (3, 4)),
    ("transpose", (2, 3, 4), lambda x: relay.transpose(x, (2, 0, 1)), (4, 2, 3)),
    ("transpose_default", (2, 3, 4), relay.transpose, (4, 3, 2)),
    ("tile", (2, 3), lambda x: relay.tile(x, (2, 1, 3)), (2, 2, 9)),
    ("strided_slice", (5, 4), lambda x: relay.strided_slice(x, [1, 1], [4, 3]), (3, 2)),
    ("pad", (2, 3), lambda x: relay.nn.pad(x, ((1, 0), (2, 1))), (3, 6)),
    ("take_axis0", (5, 3), lambda x: relay.take(x, relay.const(np.array([[0, 4], [2, 2]], "int32")), axis=0),
     (2, 2, 3)),
    ("take_axis1", (4, 5, 3), lambda x: relay.take(x, relay.const(np.array([4, -1, 0], "int32")), axis=1),
     (4, 3, 3)),
    ("take_flat", (4, 3), lambda x: relay.take(x, relay.const(np.array([11, 0, 5, 5], "int32"))), (4,)),
    ("take_wrap", (5,), lambda x: relay.take(x, relay.const(np.array([7, -1], "int32")), mode="wrap"), (2,)),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,in_shape,fn,out_shape", SHAPE, ids=[s[0] for s in SHAPE])
def test_shape_gradients(name, in_shape, fn, out_shape, mode):
    x = _var("x", in_shape)
    _check(relay.Function([x], fn(x) * _weights(out_shape)), [rng.randn(*in_shape)], mode)


@pytest.mark.parametrize("mode", MODES)
def test_concatenate_split_stack_gradients(mode):
    a, b = _var("a", (2, 3)), _var("b", (4, 3))
    cat = relay.concatenate([a, b * b, a], axis=0)  # (8, 3)
    parts = relay.split(cat, [3, 5], axis=0)  # (3,3), (2,3), (3,3); field 1 unused below
    st = relay.stack([parts[0], parts[2]], axis=1)  # (3, 2, 3)
    _check(relay.Function([a, b], st * _weights((3, 2, 3))), [rng.randn(2, 3), rng.randn(4, 3)], mode)


@pytest.mark.parametrize("mode", MODES)
def test_dense_matmul_bias_gradients(mode):
    x, w, b = _var("x", (3, 5)), _var("w", (4, 5)), _var("b", (4,))
    body = relay.nn.bias_add(relay.nn.dense(x, w), b)
    _check(relay.Function([x, w, b], body * _weights((3, 4))), [rng.randn(3, 5), rng.randn(4, 5), rng.randn(4)],
           mode)


@pytest.mark.parametrize("mode", MODES)
def test_dense_3d_and_bias_axis(mode):
    x, w, b = _var("x", (2, 3, 5)), _var("w", (4, 5)), _var("b", (3,))
    body = relay.nn.bias_add(relay.nn.dense(x, w), b, axis=1)
    _check(relay.Function([x, w, b], body * _weights((2, 3, 4))),
           [rng.randn(2, 3, 5), rng.randn(4, 5), rng.randn(3)], mode)


@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)])
def test_matmul_gradients(ta, tb):
    a = _var("a", (5, 3) if ta else (3, 5))
    b = _var("b", (4, 5) if tb else (5, 4))
    body = relay.nn.matmul(a, b, transpose_a=ta, transpose_b=tb)
    _check(relay.Function([a, b], body * _weights((3, 4))),
           [rng.randn(*a.type_annotation.shape), rng.randn(*b.type_annotation.shape)], "first_order")


@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)])
def test_batch_matmul_gradients(ta, tb):
    a = _var("a", (2, 5, 3) if ta else (2, 3, 5))
    b = _var("b", (1, 4, 5) if tb else (1, 5, 4))  # broadcast batch
    body = relay.nn.batch_matmul(a, b, transpose_a=ta, transpose_b=tb)
    _check(relay.Function([a, b], body * _weights((2, 3, 4))),
           [rng.randn(*a.type_annotation.shape), rng.randn(*b.type_annotation.shape)], "higher_order")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_gradients(op, axis, mode):
    x = _var("x", (3, 5))
    body = getattr(relay.nn, op)(x, axis=axis)
    _check(relay.Function([x], body * _weights((3, 5))), [rng.randn(3, 5)], mode)


CONV = [  # data, weight, kwargs
    ((2, 3, 5, 5), (4, 3, 3, 3), dict()),
    ((1, 3, 7, 6), (2, 3, 3, 2), dict(strides=(2, 2), padding=(1, 1))),
    ((1, 2, 8, 7), (3, 2, 3, 3), dict(strides=(2, 1), padding=(1, 0, 2, 1), dilation=(1, 2))),
    ((1, 4, 7, 6), (6, 2, 3, 3), dict(strides=(2, 1), padding=(1, 1), groups=2)),
    ((2, 3, 5, 5), (3, 1, 3, 3), dict(padding=(1, 1), groups=3)),  # depthwise
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dshape,wshape,kw", CONV, ids=["plain", "stride_pad", "dilated", "groups", "depthwise"])
def test_conv2d_gradient(dshape, wshape, kw, mode):
    x, w = _var("x", dshape), _var("w", wshape)
    conv = relay.nn.conv2d(x, w, **kw)
    out_shape = relay.testing.run_infer_type(conv).checked_type.shape
    _check(relay.Function([x, w], conv * _weights(tuple(int(d) for d in out_shape))),
           [rng.randn(*dshape), rng.randn(*wshape)], mode, eps=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_global_pool_gradients(mode):
    x = _var("x", (2, 3, 4, 5))
    body = relay.nn.global_avg_pool2d(x) * _weights((2, 3, 1, 1)) + relay.nn.global_max_pool2d(x) * \
        _weights((2, 3, 1, 1), 2)
    _check(relay.Function([x], body), [rng.randn(2, 3, 4, 5)], mode)


POOL = [
    ("max", dict(pool_size=(2, 2), strides=(2, 2))),
    ("max", dict(pool_size=(3, 3), strides=(2, 1), padding=(1, 1))),
    ("max", dict(pool_size=(3, 2), strides=(2, 2), padding=(0, 1, 1, 0), ceil_mode=True)),
    ("max", dict(pool_size=(2, 2), strides=(1, 1), dilation=(2, 1))),
    ("avg", dict(pool_size=(2, 2), strides=(2, 2))),
    ("avg", dict(pool_size=(3, 3), strides=(2, 1), padding=(1, 1), count_include_pad=True)),
    ("avg", dict(pool_size=(3, 3), strides=(2, 1), padding=(1, 1), count_include_pad=False)),
    ("avg", dict(pool_size=(3, 2), strides=(2, 2), padding=(0, 1, 1, 0), ceil_mode=True)),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind,kw", POOL, ids=[f"{k}{i}" for i, (k, _) in enumerate(POOL)])
def test_pool2d_gradients(kind, kw, mode):
    x = _var("x", (1, 2, 7, 6))
    pool = getattr(relay.nn, f"{kind}_pool2d")(x, **kw)
    out_shape = tuple(int(d) for d in relay.testing.run_infer_type(pool).checked_type.shape)
    data = rng.permutation(2 * 7 * 6).reshape(1, 2, 7, 6) * 0.01  # distinct values: no ties within 2*eps
    _check(relay.Function([x], pool * _weights(out_shape)), [data], mode, eps=1e-4)


def test_max_pool2d_grad_ties_go_to_the_first_maximum():
    x = _var("x", (1, 1, 2, 4))
    g = _var("g", (1, 1, 1, 2))
    f = relay.Function([g, x], relay.nn.max_pool2d_grad(g, x, pool_size=(2, 2), strides=(2, 2)))
    out = relay.create_executor("debug").evaluate(f)(np.array([[[[3.0, 5.0]]]]),
                                                      np.array([[[[1.0, 1.0, 0.0, 2.0], [0.0, 1.0, 2.0, 2.0]]]]))
    np.testing.assert_array_equal(out.numpy(), [[[[3.0, 0, 0, 5.0], [0, 0, 0, 0]]]])


def test_compiled_max_pool2d_grad_ties_go_to_the_first_maximum():
    import kiln
    from kiln.contrib import graph_executor
    x = relay.var("x", shape=(1, 1, 2, 4))
    g = relay.var("g", shape=(1, 1, 1, 2))
    f = relay.Function([g, x], relay.nn.max_pool2d_grad(g, x, pool_size=(2, 2), strides=(2, 2)))
    lib = relay.build(kiln.IRModule.from_expr(f), target="llvm")
    m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    m.set_input("g", np.array([[[[3.0, 5.0]]]], "float32"))
    m.set_input("x", np.array([[[[1.0, 1.0, 0.0, 2.0], [0.0, 1.0, 2.0, 2.0]]]], "float32"))
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), [[[[3.0, 0, 0, 5.0], [0, 0, 0, 0]]]])
