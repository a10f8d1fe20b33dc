"""relay.transform.gradient (first_order / higher_order), FirstOrderGradient and check_grad on programs."""
import warnings

import numpy as np
import pytest
import torch

import kiln as tvm
from kiln import relay
from kiln.contrib import graph_executor
from kiln.error import KilnError, OpNotImplemented
from kiln.ir.type import TensorType, TupleType
from kiln.relay.testing import check_grad

F64 = "float64"


def _first_order(f):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return relay.transform.gradient(f, mode="first_order")


def _eval(func, *args):
    return relay.create_executor("debug").evaluate(func)(*args)


def test_result_type_is_output_paired_with_param_gradients():
    x = relay.var("x", shape=(2, 3), dtype=F64)
    y = relay.var("y", shape=(3,), dtype=F64)
    f = relay.Function([x, y], relay.tanh(x * y))
    for mode in ("first_order", "higher_order"):
        g = _first_order(f) if mode == "first_order" else relay.transform.gradient(f)
        assert len(g.params) == 2
        ret = g.checked_type.ret_type
        assert isinstance(ret, TupleType) and isinstance(ret.fields[0], TensorType)
        assert [tuple(t.shape) for t in ret.fields[1].fields] == [(2, 3), (3,)]
        xv, yv = np.random.randn(2, 3), np.random.randn(3)
        out, (gx, gy) = _eval(g, xv, yv)
        t = np.tanh(xv * yv)
        np.testing.assert_allclose(out.numpy(), t, rtol=1e-12)
        np.testing.assert_allclose(gx.numpy(), (1 - t * t) * yv, rtol=1e-10)  # seed: ones_like(output)
        np.testing.assert_allclose(gy.numpy(), ((1 - t * t) * xv).sum(0), rtol=1e-10)


def test_first_order_mode_warns_and_refuses_a_module():
    x = relay.var("x", shape=(3,), dtype=F64)
    f = relay.Function([x], relay.sum(x * x))
    with pytest.warns(DeprecationWarning, match="FirstOrderGradient"):
        relay.transform.gradient(f, mode="first_order")
    with pytest.raises(KilnError, match="FirstOrderGradient"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            relay.transform.gradient(f, tvm.IRModule(), mode="first_order")
    with pytest.raises(KilnError, match="unknown mode"):
        relay.transform.gradient(f, mode="second_order")


def test_first_order_gradient_module_pass():
    x = relay.var("x", shape=(3,), dtype=F64)
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.sum(relay.exp(x))))
    mod = relay.transform.FirstOrderGradient()(mod)
    xv = np.random.randn(3)
    out, (gx,) = relay.create_executor("debug", mod=mod).evaluate()(xv)
    np.testing.assert_allclose(gx.numpy(), np.exp(xv), rtol=1e-12)


def test_unused_and_integer_parameters_get_zero_gradients():
    x = relay.var("x", shape=(3,), dtype=F64)
    unused = relay.var("u", shape=(2,), dtype=F64)
    idx = relay.var("i", shape=(2,), dtype="int32")
    f = relay.Function([x, unused, idx], relay.sum(relay.take(x, idx) * relay.const(np.array([2.0, 5.0]), F64)))
    for g in (_first_order(f), relay.transform.gradient(f)):
        _, (gx, gu, gi) = _eval(g, np.arange(3.0), np.ones(2), np.array([2, 2], "int32"))
        np.testing.assert_allclose(gx.numpy(), [0, 0, 7.0])
        np.testing.assert_array_equal(gu.numpy(), 0)
        assert gi.numpy().dtype == np.int32 and not gi.numpy().any()


def test_shared_subexpression_and_tuple_output():
    x = relay.var("x", shape=(4,), dtype=F64)
    s = relay.sin(x)  # used three times
    f = relay.Function([x], relay.Tuple([s * s, relay.sum(s)]))
    xv = np.random.randn(4)
    for g in (_first_order(f), relay.transform.gradient(f)):
        (o0, o1), (gx,) = _eval(g, xv)
        np.testing.assert_allclose(o0.numpy(), np.sin(xv) ** 2)
        # seed is ones for each output: d/dx [sum(sin^2) + sum(sin)]
        np.testing.assert_allclose(gx.numpy(), 2 * np.sin(xv) * np.cos(xv) + np.cos(xv), rtol=1e-10)


def test_missing_gradients_are_listed():
    x = relay.var("x", shape=(3, 4), dtype=F64)
    f = relay.Function([x], relay.cumprod(relay.nn.l2_normalize(x, 1e-6, axis=[1]), axis=0))
    for mode in ("first_order", "higher_order"):
        with pytest.raises(OpNotImplemented, match="cumprod, nn.l2_normalize"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                relay.transform.gradient(f, mode=mode)


def test_non_float_ops_need_no_gradient():
    x = relay.var("x", shape=(5,), dtype=F64)
    mask = relay.greater(x, relay.const(0.0, F64))  # bool: carries no gradient
    f = relay.Function([x], relay.sum(relay.where(mask, x * x, relay.negative(x))))
    check_grad(f, inputs=[np.array([-1.0, 0.5, 2.0, -0.3, 1.0])], mode="first_order", eps=1e-6)
    check_grad(f, inputs=[np.array([-1.0, 0.5, 2.0, -0.3, 1.0])], mode="higher_order", eps=1e-6)


def test_first_order_refuses_control_flow():
    x = relay.var("x", shape=(), dtype=F64)
    f = relay.Function([x], relay.If(relay.greater(x, relay.const(0.0, F64)), x * x, relay.negative(x)))
    with pytest.raises(OpNotImplemented, match="higher_order"):
        _first_order(f)


def test_register_gradient_is_used():
    calls = []

    def fake_exp_grad(orig, grad):
        calls.append(orig.op.name)
        return [grad * relay.const(3.0, F64)]

    x = relay.var("x", shape=(2,), dtype=F64)
    f = relay.Function([x], relay.sum(relay.exp(x)))
    with relay.testing.TempOpAttr("exp", "FPrimalGradient", fake_exp_grad):
        g = _first_order(f)
    _, (gx,) = _eval(g, np.zeros(2))
    np.testing.assert_allclose(gx.numpy(), [3.0, 3.0])
    assert calls == ["exp"]


def _control_flow_program():
    """Closures, a let-bound function called twice, a reference cell and an If."""
    x = relay.var("x", shape=(3,), dtype=F64)
    y = relay.var("y", shape=(3,), dtype=F64)
    a = relay.var("a", shape=(3,), dtype=F64)
    scale = relay.var("scale")
    r = relay.var("r")
    cond = relay.greater(relay.sum(x), relay.const(0.0, F64))
    body = relay.Let(scale, relay.Function([a], a * y),
                     relay.Let(r, relay.RefCreate(x),
                               relay.Let(relay.var("_"), relay.RefWrite(r, scale(scale(relay.RefRead(r)))),
                                         relay.If(cond, relay.sum(relay.sin(relay.RefRead(r))),
                                                  relay.sum(relay.exp(relay.RefRead(r)) * x)))))
    return relay.Function([x, y], body)


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["then", "else"])
def test_higher_order_closures_references_and_if(sign):
    f = _control_flow_program()
    xv = sign * np.random.uniform(0.2, 1.0, 3)
    yv = np.random.uniform(0.5, 1.5, 3)
    check_grad(f, inputs=[xv, yv], eps=1e-6, atol=1e-6, rtol=1e-5)


def test_higher_order_gradient_of_a_gradient():
    """Second derivative: differentiate a program that itself runs the backpropagator."""
    x = relay.var("x", shape=(4,), dtype=F64)
    inner = relay.transform.gradient(relay.Function([x], relay.sum(x * x * x)))  # d/dx = 3x^2
    x2 = relay.var("x2", shape=(4,), dtype=F64)
    outer = relay.Function([x2], relay.sum(relay.TupleGetItem(relay.TupleGetItem(inner(x2), 1), 0)))
    g2 = relay.transform.gradient(outer)
    xv = np.random.randn(4)
    out, (gx,) = _eval(g2, xv)
    np.testing.assert_allclose(out.numpy(), np.sum(3 * xv * xv), rtol=1e-12)
    np.testing.assert_allclose(gx.numpy(), 6 * xv, rtol=1e-12)


def test_check_grad_detects_a_wrong_gradient():
    x = relay.var("x", shape=(3,), dtype=F64)
    f = relay.Function([x], relay.sum(relay.sin(x)))
    with relay.testing.TempOpAttr("sin", "FPrimalGradient", lambda orig, grad: [grad * relay.sin(orig.args[0])]):
        with pytest.raises(AssertionError):
            check_grad(f, inputs=[np.random.randn(3)], eps=1e-6)


def test_check_grad_compiled_graph_executor_first_order():
    x = relay.var("x", shape=(3, 4), dtype=F64)
    w = relay.var("w", shape=(2, 4), dtype=F64)
    f = relay.Function([x, w], relay.sum(relay.sigmoid(relay.nn.dense(x, w)) * relay.const(np.arange(6.0).reshape(3, 2), F64)))
    check_grad(f, inputs=[np.random.randn(3, 4), np.random.randn(2, 4)], mode="first_order", executor_kind="graph",
               eps=1e-6, atol=1e-6, rtol=1e-5, target_devices=[("llvm", tvm.cpu())])


def _mlp(batch, n_in, n_hidden, n_out):
    x = relay.var("x", shape=(batch, n_in))
    w1 = relay.var("w1", shape=(n_hidden, n_in))
    b1 = relay.var("b1", shape=(n_hidden,))
    w2 = relay.var("w2", shape=(n_out, n_hidden))
    b2 = relay.var("b2", shape=(n_out,))
    labels = relay.var("labels", shape=(batch, n_out))  # one-hot
    h = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, w1), b1))
    logits = relay.nn.bias_add(relay.nn.dense(h, w2), b2)
    loss = relay.negative(relay.sum(relay.nn.log_softmax(logits) * labels)) / relay.const(float(batch))
    return relay.Function([x, w1, b1, w2, b2, labels], loss)


def test_mlp_softmax_cross_entropy_matches_pytorch_compiled():
    batch, n_in, n_hidden, n_out = 5, 7, 9, 4
    rng = np.random.RandomState(3)
    arrays = [rng.randn(batch, n_in), rng.randn(n_hidden, n_in) * 0.5, rng.randn(n_hidden) * 0.1,
              rng.randn(n_out, n_hidden) * 0.5, rng.randn(n_out) * 0.1]
    arrays = [a.astype("float32") for a in arrays]
    target = rng.randint(0, n_out, size=batch)
    onehot = np.eye(n_out, dtype="float32")[target]

    grad_func = _first_order(_mlp(batch, n_in, n_hidden, n_out))
    lib = relay.build(tvm.IRModule.from_expr(grad_func), target="llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    names = ["x", "w1", "b1", "w2", "b2"]
    for name, a in zip(names, arrays):
        m.set_input(name, a)
    m.set_input("labels", onehot)
    m.run()
    assert m.get_num_outputs() == 1 + 6

    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    tx, tw1, tb1, tw2, tb2 = ts
    logits = torch.relu(tx @ tw1.T + tb1) @ tw2.T + tb2
    loss = torch.nn.functional.cross_entropy(logits, torch.tensor(target))
    loss.backward()
    np.testing.assert_allclose(m.get_output(0).numpy(), loss.item(), rtol=1e-5)
    for k, t in enumerate(ts):
        np.testing.assert_allclose(m.get_output(1 + k).numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-6)

    # the higher-order result agrees on the interpreter
    ho = relay.transform.gradient(_mlp(batch, n_in, n_hidden, n_out))
    out, grads = _eval(ho, *arrays, onehot)
    np.testing.assert_allclose(out.numpy(), loss.item(), rtol=1e-5)
    for g, t in zip(list(grads)[:5], ts):
        np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_conv_net_first_order_compiled_matches_interpreter():
    x = relay.var("x", shape=(2, 3, 8, 8))
    w = relay.var("w", shape=(4, 3, 3, 3))
    y = relay.nn.conv2d(x, w, strides=(2, 2), padding=(1, 1))
    f = relay.Function([x, w], relay.sum(relay.tanh(relay.nn.global_avg_pool2d(relay.nn.relu(y)))))
    g = _first_order(f)
    rng = np.random.RandomState(1)
    xv, wv = rng.randn(2, 3, 8, 8).astype("float32"), rng.randn(4, 3, 3, 3).astype("float32")
    ref_out, (ref_gx, ref_gw) = _eval(g, xv, wv)
    lib = relay.build(tvm.IRModule.from_expr(g), target="llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    m.set_input("x", xv)
    m.set_input("w", wv)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), ref_out.numpy(), rtol=1e-5)
    np.testing.assert_allclose(m.get_output(1).numpy(), ref_gx.numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(m.get_output(2).numpy(), ref_gw.numpy(), rtol=1e-4, atol=1e-6)
