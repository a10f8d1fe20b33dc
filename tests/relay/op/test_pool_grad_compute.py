"""nn.max_pool2d_grad / nn.avg_pool2d_grad compiled through topi.nn.pool_grad: against the numpy reference,
PyTorch autograd, and inside a first-order gradient graph built for llvm and run on the graph executor."""
import warnings

import numpy as np
import pytest
import torch

import kiln as tvm
from kiln import relay, te, topi
from kiln.error import KilnError
from kiln.topi.testing.pool_grad import pool2d_grad_nchw_python
from relay_exec_util import graph_run

CASES = [  # shape, pool_size, strides, padding (t, l, b, r), dilation, ceil_mode, count_include_pad
    ((2, 3, 7, 9), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False, True),
    ((1, 2, 8, 5), (2, 3), (1, 2), (0, 1, 1, 0), (2, 1), True, False),
    ((1, 2, 5, 7), (3, 2), (3, 1), (1, 0, 1, 1), (1, 1), True, True),
]


@pytest.mark.parametrize("pool_type", ["max", "avg"])
@pytest.mark.parametrize("case", CASES)
def test_relay_pool_grad_op_compiles_and_matches_reference(pool_type, case):
    shape, k, s, p, d, ceil, cip = case
    rng = np.random.default_rng(7)
    x = relay.var("x", shape=shape)
    kw = dict(pool_size=k, strides=s, padding=p, dilation=d, ceil_mode=ceil)
    if pool_type == "avg":
        kw["count_include_pad"] = cip
    fwd = (relay.nn.max_pool2d if pool_type == "max" else relay.nn.avg_pool2d)(x, **kw)
    out_shape = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x], fwd)))["main"].ret_type.shape
    g = relay.var("g", shape=[int(v) for v in out_shape])
    op = relay.nn.max_pool2d_grad if pool_type == "max" else relay.nn.avg_pool2d_grad
    func = relay.Function([g, x], op(g, x, **kw))
    gv = rng.standard_normal([int(v) for v in out_shape]).astype("float32")
    xv = rng.standard_normal(shape).astype("float32")
    (res,) = graph_run(func, [gv, xv])
    ref = pool2d_grad_nchw_python(gv, xv, k, s, p, pool_type, ceil, cip if pool_type == "avg" else False, d)
    np.testing.assert_allclose(res, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("pool_type", ["max", "avg"])
def test_gradient_graph_with_pooling_builds_and_matches_pytorch(pool_type):
    shape = (2, 3, 9, 7)
    x = relay.var("x", shape=shape)
    w = relay.var("w", shape=(4, 3, 3, 3))
    y = relay.nn.conv2d(x, w, padding=(1, 1))
    if pool_type == "max":
        pooled = relay.nn.max_pool2d(y, pool_size=(3, 3), strides=(2, 2), padding=(1, 1))
    else:
        pooled = relay.nn.avg_pool2d(y, pool_size=(3, 3), strides=(2, 2), padding=(1, 1), count_include_pad=False)
    f = relay.Function([x, w], relay.sum(relay.tanh(pooled)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        g = relay.transform.gradient(f, mode="first_order")
    rng = np.random.RandomState(2)
    xv, wv = rng.randn(*shape).astype("float32"), rng.randn(4, 3, 3, 3).astype("float32")
    out, gx, gw = graph_run(g, [xv, wv])

    tx, tw = torch.tensor(xv, requires_grad=True), torch.tensor(wv, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, padding=1)
    if pool_type == "max":
        tp = torch.nn.functional.max_pool2d(ty, 3, 2, 1)
    else:
        tp = torch.nn.functional.avg_pool2d(ty, 3, 2, 1, count_include_pad=False)
    loss = torch.tanh(tp).sum()
    loss.backward()
    np.testing.assert_allclose(out, loss.item(), rtol=1e-5)
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gw, tw.grad.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("nsp", [1, 3])
@pytest.mark.parametrize("pool_type", ["max", "avg"])
def test_topi_pool_grad_1d_3d_matches_pytorch(nsp, pool_type):
    shape = (2, 2, 7) if nsp == 1 else (1, 2, 5, 6, 4)
    k, s, p = (3,) * nsp, (2,) * nsp, (1,) * nsp
    layout = "NCW" if nsp == 1 else "NCDHW"
    A = te.placeholder(shape, name="A")
    fwd = topi.nn.pool_impl_nd(A, k, s, (1,) * nsp, p, pool_type, False, layout, True)
    G = te.placeholder([int(v) for v in fwd.shape], name="G")
    out = topi.nn.pool_grad(G, A, k, s, p, pool_type, False, True, layout)
    f = tvm.build(te.create_schedule(out.op), [G, A, out], "llvm")
    rng = np.random.default_rng(3)
    xv = rng.standard_normal(shape).astype("float32")
    gv = rng.standard_normal([int(v) for v in G.shape]).astype("float32")
    res = tvm.nd.empty(shape)
    f(tvm.nd.array(gv), tvm.nd.array(xv), res)
    tx = torch.tensor(xv, requires_grad=True)
    tf = torch.nn.functional
    pool = {(1, "max"): tf.max_pool1d, (3, "max"): tf.max_pool3d, (1, "avg"): tf.avg_pool1d,
            (3, "avg"): tf.avg_pool3d}[(nsp, pool_type)]
    pool(tx, k, s, p).backward(torch.tensor(gv))
    np.testing.assert_allclose(res.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_topi_pool_grad_rejects_bad_arguments():
    A = te.placeholder((1, 1, 6, 6), name="A")
    G = te.placeholder((1, 1, 2, 2), name="G")
    with pytest.raises(KilnError, match="pool_type"):
        topi.nn.pool_grad(G, A, (2, 2), (2, 2), (0, 0), "min")
    with pytest.raises(KilnError, match="grads has shape"):
        topi.nn.pool_grad(G, A, (2, 2), (2, 2), (0, 0), "max")
