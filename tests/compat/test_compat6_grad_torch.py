"""The gradients added for TVM parity and beyond, against torch.autograd on random float32 inputs of odd sizes:
first order compiled for llvm and run on the graph executor, higher order on the debug interpreter. Each test
bundles several ops into one scalar loss so one build covers them."""
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kiln as tvm
from kiln import relay
from kiln.contrib import graph_executor

F32 = "float32"


def _var(name, shape):
    return relay.var(name, shape=shape, dtype=F32)


def _w(shape, seed):
    return np.random.RandomState(seed).uniform(0.5, 1.5, size=shape).astype(F32)


def _compare(params, body, arrays, torch_loss, rtol=1e-4, atol=1e-5):
    """d body / d params (first order on the graph executor, higher order on the interpreter) vs PyTorch."""
    func = relay.Function(params, body)
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    loss = torch_loss(*ts)
    loss.backward()
    want = [t.grad.numpy() for t in ts]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        first = relay.transform.gradient(relay.testing.run_infer_type(func), mode="first_order")
    lib = relay.build(tvm.IRModule.from_expr(first), target="llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    for p, a in zip(params, arrays):
        m.set_input(p.name_hint, a)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), loss.item(), rtol=rtol)
    for k, wgrad in enumerate(want):
        np.testing.assert_allclose(m.get_output(1 + k).numpy(), wgrad, rtol=rtol, atol=atol,
                                   err_msg=f"first order, d/d{params[k].name_hint}")

    higher = relay.transform.gradient(relay.testing.run_infer_type(func))
    out, grads = relay.create_executor("debug").evaluate(higher)(*arrays)
    np.testing.assert_allclose(out.numpy(), loss.item(), rtol=rtol)
    for k, wgrad in enumerate(want):
        np.testing.assert_allclose(grads[k].numpy(), wgrad, rtol=rtol, atol=atol,
                                   err_msg=f"higher order, d/d{params[k].name_hint}")


def test_inverse_trig_and_losses_match_torch():
    rng = np.random.RandomState(0)
    shape = (5, 7)
    arrays = [rng.uniform(-0.8, 0.8, shape), rng.uniform(-0.8, 0.8, shape), rng.randn(*shape),
              rng.uniform(1.2, 3.0, shape), rng.uniform(-0.8, 0.8, shape), rng.uniform(0.1, 1.0, shape),
              rng.randn(*shape), rng.uniform(0.0, 1.0, shape)]
    arrays = [a.astype(F32) for a in arrays]
    names = ["a", "b", "c", "d", "e", "p", "z", "y"]
    ps = [_var(n, shape) for n in names]
    a, b, c, d, e, p, z, y = ps
    ws = [_w(shape, k) for k in range(5)]
    terms = [relay.asin(a), relay.acos(b), relay.asinh(c), relay.acosh(d), relay.atanh(e)]
    body = relay.nn.cross_entropy(p, y) + relay.nn.cross_entropy_with_logits(relay.nn.log_softmax(z), y)
    for t, w in zip(terms, ws):
        body = body + relay.sum(t * relay.const(w))

    def torch_loss(a, b, c, d, e, p, z, y):
        n = p.shape[0]
        out = -(torch.log(p) * y).sum() / n + F.cross_entropy(z, y, reduction="mean")
        for t, w in zip([torch.asin(a), torch.acos(b), torch.asinh(c), torch.acosh(d), torch.atanh(e)], ws):
            out = out + (t * torch.tensor(w, dtype=torch.float64)).sum()
        return out
    _compare(ps, body, arrays, torch_loss)


def test_normalizations_match_torch():
    rng = np.random.RandomState(1)
    n, c, h, w = 3, 6, 5, 7
    arrays = [rng.randn(n, c, h, w), rng.uniform(0.5, 1.5, c), rng.randn(c), rng.randn(c) * 0.1,
              rng.uniform(0.5, 1.5, c), rng.randn(n, h, w, c)]
    arrays = [x.astype(F32) for x in arrays]
    x, g, b, mu, var, xl = ps = [_var("x", (n, c, h, w)), _var("g", (c,)), _var("b", (c,)), _var("mu", (c,)),
                                 _var("var", (c,)), _var("xl", (n, h, w, c))]
    wt = _w((n, c, h, w), 3)
    wl = _w((n, h, w, c), 4)
    k = relay.const(wt)
    # batch norm as Relay defines it (statistics are inputs), and training mode: batch statistics from
    # mean/variance feeding the op
    bn = relay.nn.batch_norm(x, g, b, mu, var, epsilon=1e-3)
    body = relay.sum(bn[0] * k) + relay.sum(bn[1] * relay.const(_w((c,), 5))) + relay.sum(bn[2])
    bmean = relay.mean(x, axis=[0, 2, 3])
    bvar = relay.variance(x, axis=[0, 2, 3])
    train_bn = relay.nn.batch_norm(x, g, b, bmean, bvar, epsilon=1e-3)[0]
    body = body + relay.sum(train_bn * relay.const(_w((n, c, h, w), 6)))
    body = body + relay.sum(relay.nn.layer_norm(xl, b, g, axis=-1) * relay.const(wl))
    body = body + relay.sum(relay.nn.instance_norm(x, g, b) * relay.const(_w((n, c, h, w), 7)))
    body = body + relay.sum(relay.nn.group_norm(x, b, g, num_groups=3) * relay.const(_w((n, c, h, w), 8)))
    body = body + relay.sum(relay.nn.dropout(x * x, 0.4) * k)

    def torch_loss(x, g, b, mu, var, xl):
        t = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731
        shape = (1, c, 1, 1)
        inf = (x - mu.view(shape)) / torch.sqrt(var.view(shape) + 1e-3) * g.view(shape) + b.view(shape)
        out = (inf * t(wt)).sum() + (mu * t(_w((c,), 5))).sum() + var.sum()
        train = F.batch_norm(x, None, None, g, b, training=True, eps=1e-3)
        out = out + (train * t(_w((n, c, h, w), 6))).sum()
        out = out + (F.layer_norm(xl, (c,), b, g) * t(wl)).sum()
        out = out + (F.instance_norm(x, weight=g, bias=b) * t(_w((n, c, h, w), 7))).sum()
        out = out + (F.group_norm(x, 3, b, g) * t(_w((n, c, h, w), 8))).sum()
        out = out + (x * x * t(wt)).sum()
        return out
    _compare(ps, body, arrays, torch_loss, rtol=2e-4, atol=5e-5)


def test_indexing_and_scans_match_torch():
    rng = np.random.RandomState(2)
    arrays = [rng.randn(5, 7).astype(F32), rng.randn(3, 5, 4).astype(F32), rng.randn(9, 7).astype(F32),
              rng.randn(4, 6).astype(F32)]
    x, t3, s, v = ps = [_var("x", (5, 7)), _var("t3", (3, 5, 4)), _var("s", (9, 7)), _var("v", (4, 6))]
    gidx = rng.randint(0, 7, size=(5, 3)).astype("int64")
    nd = np.stack([rng.randint(0, 3, size=(2, 5)), rng.randint(0, 5, size=(2, 5))]).astype("int32")
    ws = {k: _w(shp, i) for i, (k, shp) in enumerate([("cs", (5, 7)), ("cx", (5, 7)), ("g", (5, 3)),
                                                       ("nd", (2, 5, 4)), ("ss", (4, 4)), ("sn", (3, 7)),
                                                       ("var", (4,)), ("cf", (24,))])}
    cw = {k: relay.const(a) for k, a in ws.items()}
    body = relay.sum(relay.cumsum(x, axis=1) * cw["cs"])
    body = body + relay.sum(relay.cumsum(x, axis=0, exclusive=True) * cw["cx"])
    body = body + relay.sum(relay.gather(x, 1, relay.const(gidx)) * cw["g"])
    body = body + relay.sum(relay.gather_nd(t3, relay.const(nd)) * cw["nd"])
    body = body + relay.sum(relay.strided_slice(s, [1, 0], [9, 7], [2, 2]) * cw["ss"])
    body = body + relay.sum(relay.strided_slice(s, [7, 6], [0, -8], [-3, -1]) * cw["sn"])
    body = body + relay.sum(relay.variance(v, axis=[1], unbiased=True) * cw["var"])
    body = body + relay.sum(relay.cumsum(v) * cw["cf"])

    def torch_loss(x, t3, s, v):
        t = {k: torch.tensor(a, dtype=torch.float64) for k, a in ws.items()}
        out = (torch.cumsum(x, 1) * t["cs"]).sum()
        excl = torch.cat([torch.zeros(1, 7, dtype=x.dtype), torch.cumsum(x, 0)[:-1]], 0)
        out = out + (excl * t["cx"]).sum()
        out = out + (torch.gather(x, 1, torch.tensor(gidx)) * t["g"]).sum()
        out = out + (t3[torch.tensor(nd[0]).long(), torch.tensor(nd[1]).long()] * t["nd"]).sum()
        out = out + (s[1:9:2, 0:7:2] * t["ss"]).sum()
        out = out + (torch.flip(s, [0, 1])[1::3, 0:7] * t["sn"]).sum()  # rows 7, 4, 1; columns reversed
        out = out + (torch.var(v, 1, unbiased=True) * t["var"]).sum()
        out = out + (torch.cumsum(v.reshape(-1), 0) * t["cf"]).sum()
        return out
    _compare(ps, body, arrays, torch_loss)


def test_convolutions_match_torch():
    rng = np.random.RandomState(3)
    arrays = [rng.randn(2, 7, 5, 4), rng.randn(3, 3, 2, 6), rng.randn(2, 4, 5, 3), rng.randn(4, 3, 3, 3),
              rng.randn(1, 4, 3, 5), rng.randn(4, 1, 3, 2)]
    arrays = [a.astype(F32) for a in arrays]
    xn, wh, xt, wt, xg, wg = ps = [_var("xn", (2, 7, 5, 4)), _var("wh", (3, 3, 2, 6)), _var("xt", (2, 4, 5, 3)),
                                   _var("wt", (4, 3, 3, 3)), _var("xg", (1, 4, 3, 5)), _var("wg", (4, 1, 3, 2))]
    conv = relay.nn.conv2d(xn, wh, strides=(2, 1), padding=(1, 1), groups=2, data_layout="NHWC",
                           kernel_layout="HWIO")
    tconv = relay.nn.conv2d_transpose(xt, wt, strides=(2, 2), padding=(1, 0), output_padding=(1, 1))
    gconv = relay.nn.conv2d_transpose(xg, wg, strides=(1, 2), padding=(0, 1), dilation=(2, 1), groups=2)
    shapes = [tuple(int(d) for d in relay.testing.run_infer_type(e).checked_type.shape) for e in (conv, tconv, gconv)]
    ws = [_w(s, 10 + i) for i, s in enumerate(shapes)]
    body = relay.sum(conv * relay.const(ws[0])) + relay.sum(tconv * relay.const(ws[1])) + \
        relay.sum(gconv * relay.const(ws[2]))

    def torch_loss(xn, wh, xt, wt, xg, wg):
        t = [torch.tensor(w, dtype=torch.float64) for w in ws]
        y = F.conv2d(xn.permute(0, 3, 1, 2), wh.permute(3, 2, 0, 1), stride=(2, 1), padding=(1, 1), groups=2)
        out = (y.permute(0, 2, 3, 1) * t[0]).sum()
        out = out + (F.conv_transpose2d(xt, wt, stride=2, padding=(1, 0), output_padding=1) * t[1]).sum()
        out = out + (F.conv_transpose2d(xg, wg, stride=(1, 2), padding=(0, 1), dilation=(2, 1), groups=2)
                     * t[2]).sum()
        return out
    _compare(ps, body, arrays, torch_loss, rtol=2e-4, atol=5e-5)


def test_conv2d_backward_weight_op_matches_torch():
    """TVM's nn.conv2d_backward_weight op (NCHW): the interpreter and the compiled graph against autograd."""
    rng = np.random.RandomState(4)
    for dshape, wshape, kw in [((2, 4, 7, 6), (6, 2, 3, 2), dict(strides=(2, 1), padding=(1, 0, 2, 1),
                                                                 dilation=(1, 2), groups=2)),
                               ((1, 3, 5, 5), (5, 3, 3, 3), dict(padding=(1, 1)))]:
        x = torch.tensor(rng.randn(*dshape), requires_grad=True)
        w = torch.tensor(rng.randn(*wshape), requires_grad=True)
        pt, pl, pb, pr = relay.nn.get_pad_tuple2d(kw.get("padding", 0))
        y = F.conv2d(F.pad(x, (pl, pr, pt, pb)), w, stride=kw.get("strides", 1), dilation=kw.get("dilation", 1),
                     groups=kw.get("groups", 1))
        g = torch.tensor(rng.randn(*y.shape))
        y.backward(g)
        gv, dv = relay.var("g", shape=tuple(y.shape), dtype="float64"), relay.var("d", shape=dshape, dtype="float64")
        f = relay.Function([gv, dv], relay.nn.conv2d_backward_weight(gv, dv, kernel_size=wshape[2:],
                                                                     channels=wshape[0], **kw))
        got = relay.create_executor("debug").evaluate(f)(g.numpy(), x.detach().numpy()).numpy()
        np.testing.assert_allclose(got, w.grad.numpy(), rtol=1e-10, atol=1e-10)
        lib = relay.build(tvm.IRModule.from_expr(f), target="llvm")
        m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
        m.set_input("g", g.numpy())
        m.set_input("d", x.detach().numpy())
        m.run()
        np.testing.assert_allclose(m.get_output(0).numpy(), w.grad.numpy(), rtol=1e-10, atol=1e-10)


def test_conv2d_backward_weight_checks_its_arguments():
    g, d = relay.var("g", shape=(1, 4, 3, 3)), relay.var("d", shape=(1, 3, 5, 5))
    with pytest.raises(tvm.error.KilnError, match="kernel_size"):
        relay.testing.run_infer_type(relay.nn.conv2d_backward_weight(g, d))
    with pytest.raises(tvm.error.KilnError, match="not the output shape"):
        relay.testing.run_infer_type(relay.nn.conv2d_backward_weight(g, d, kernel_size=(2, 2)))


def test_legalize_turns_conv2d_backward_weight_into_conv2d():
    """relay.transform.Legalize (as TVM's tests run it before llvm): the op becomes nn.conv2d, same numbers."""
    from kiln.topi.testing import conv2d_backward_weight_python
    rng = np.random.RandomState(5)
    for dy_shape, x_shape, ks, st, pad, groups in [((2, 8, 9, 9), (2, 4, 9, 9), (3, 3), (1, 1), (1, 1), 1),
                                                   ((2, 6, 5, 5), (2, 3, 11, 11), (3, 3), (2, 2), (0, 0), 1),
                                                   ((1, 4, 7, 7), (1, 4, 7, 7), (3, 3), (1, 1), (1, 1), 4)]:
        dy, x = relay.var("dy", shape=dy_shape), relay.var("x", shape=x_shape)
        f = relay.Function([dy, x], relay.nn.conv2d_backward_weight(dy, x, strides=st, padding=pad, kernel_size=ks,
                                                                    groups=groups, channels=dy_shape[1],
                                                                    out_dtype=F32))
        legal = relay.testing.run_opt_pass(f, relay.transform.Legalize())
        ops = set()
        relay.analysis.post_order_visit(legal, lambda e: ops.add(e.op.name) if isinstance(e, relay.Call) else None)
        assert "nn.conv2d" in ops and "nn.conv2d_backward_weight" not in ops
        dy_np, x_np = rng.randn(*dy_shape).astype(F32), rng.randn(*x_shape).astype(F32)
        want = conv2d_backward_weight_python(dy_np, x_np, ks, st, pad, groups=groups, channels=dy_shape[1])
        got = relay.create_executor("graph", target="llvm").evaluate(legal)(dy_np, x_np).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_legalize_keeps_calls_whose_function_returns_none():
    x = relay.var("x", shape=(2, 3))
    f = relay.Function([x], relay.nn.relu(x))
    with relay.testing.TempOpAttr("nn.relu", "FTVMLegalize", lambda attrs, args, types: None):
        out = relay.testing.run_opt_pass(f, relay.transform.Legalize())
    assert tvm.ir.structural_equal(out, relay.testing.run_infer_type(f))
    seen = []

    def to_sigmoid(attrs, args, types):
        seen.append([str(t) for t in types])
        return relay.sigmoid(args[0])
    with relay.testing.TempOpAttr("nn.relu", "FTVMLegalize", to_sigmoid):
        out = relay.testing.run_opt_pass(f, relay.transform.Legalize())
    assert isinstance(out.body, relay.Call) and out.body.op.name == "sigmoid"
    assert len(seen) == 1 and len(seen[0]) == 2  # the argument's type and the call's
