"""FuseOps parity with TVM v0.13: TVM's own test_pass_fuse_ops.py cases, expected graphs built by hand
with relay (as TVM's tests do) and compared with ``structural_equal``; the fused programs also run."""
import numpy as np

import kiln as tvm
from kiln import relay
from kiln.relay import transform
from kiln.relay.testing import run_opt_pass


def _prim(f):
    return f.with_attr("Primitive", tvm.tir.IntImm("int32", 1))


def fuse0(mod):
    mod = relay.transform.InferType()(mod)
    return relay.transform.FuseOps(fuse_opt_level=0)(mod)


def fuse2(mod):
    mod = relay.transform.InferType()(mod)
    return relay.transform.FuseOps(fuse_opt_level=2)(mod)


def _run(func, *inputs):
    mod = tvm.IRModule.from_expr(func)
    ex = relay.create_executor("graph", mod=mod, device=tvm.cpu(), target="llvm")
    return ex.evaluate()(*inputs)


def test_fuse_simple():
    def before():
        x = relay.var("x", shape=(10, 20))
        y = relay.add(x, relay.const(1, "float32"))
        z = relay.exp(y)
        w = relay.squeeze(z)
        return relay.Function([x], w)

    def expected():
        x = relay.var("p", shape=(10, 20))
        w = relay.squeeze(relay.exp(relay.add(x, relay.const(1, "float32"))))
        f1 = _prim(relay.Function([x], w))
        x = relay.var("x", shape=(10, 20))
        return relay.Function([x], relay.Call(f1, [x]))

    zz = run_opt_pass(before(), transform.FuseOps())
    after = run_opt_pass(expected(), transform.InferType())
    assert tvm.ir.structural_equal(zz, after)


def test_tuple_intermediate():
    dshape = (1, 16, 6, 6)

    def before(x):
        inj = relay.squeeze(x)
        y1 = relay.add(inj, relay.const(1, "float32"))
        tmp = relay.squeeze(inj)
        tmp = relay.add(tmp, relay.const(1, "float32"))
        y2 = relay.add(tmp, relay.const(1, "float32"))
        y3 = relay.add(inj, relay.const(1, "float32"))
        concat = relay.concatenate((y1, y2, y3), axis=1)
        out_inj = relay.squeeze(concat)
        out = relay.add(out_inj, relay.const(1, "float32"))
        return relay.Function(relay.analysis.free_vars(out), out)

    def expected(p0):
        f1 = _prim(before(p0))
        x = relay.var("x", shape=dshape)
        return relay.Function([x], relay.Call(f1, [x]))

    x = relay.var("x", shape=dshape)
    orig = before(x)
    fuse0(tvm.IRModule.from_expr(orig))
    m = fuse2(tvm.IRModule.from_expr(orig))
    after = run_opt_pass(expected(x), transform.InferType())
    assert tvm.ir.structural_equal(m["main"], after)
    xd = np.random.randn(*dshape).astype("float32")
    s = np.squeeze(xd)
    ref = np.squeeze(np.concatenate([s + 1, np.squeeze(s) + 2, s + 1], axis=1)) + 1
    np.testing.assert_allclose(_run(orig, xd).numpy(), ref, rtol=1e-6)


def _gen_intermediate_tuple(x):
    y1 = relay.add(x, relay.const(1, "float32"))
    y2 = relay.add(x, relay.const(1, "float32"))
    y3 = relay.add(x, relay.const(1, "float32"))
    concat = relay.concatenate((y1, y2, y3), axis=1)
    return relay.add(concat, relay.const(1, "float32"))


def _gen_consecutive_tuple(x):
    y1 = _gen_intermediate_tuple(x)
    y2 = _gen_intermediate_tuple(x)
    y3 = _gen_intermediate_tuple(x)
    return relay.concatenate((y1, y2, y3), axis=1)


def test_tuple_consecutive():
    dshape = (1, 3, 6, 6)

    def before(x):
        concat = _gen_consecutive_tuple(x)
        pooled = relay.nn.max_pool2d(concat, pool_size=(2, 2), strides=(2, 2), padding=(0, 0))
        out = relay.add(pooled, relay.const(1, "float32"))
        out2 = relay.add(out, relay.const(1, "float32"))
        out_tup = relay.Tuple((out, out2))
        return relay.Function(relay.analysis.free_vars(out_tup), out_tup)

    def expected():
        p0 = relay.var("p0", shape=dshape)
        f0 = _prim(relay.Function([p0], _gen_consecutive_tuple(p0)))
        p01 = relay.var("p01", shape=(1, dshape[1] * 9, dshape[2], dshape[3]))
        pooled = relay.nn.max_pool2d(p01, pool_size=(2, 2), strides=(2, 2), padding=(0, 0))
        f1 = _prim(relay.Function([p01], relay.add(pooled, relay.const(1, "float32"))))
        p02 = relay.var("p02", shape=(1, dshape[1] * 9, dshape[2] // 2, dshape[3] // 2))
        f2 = _prim(relay.Function([p02], relay.add(p02, relay.const(1, "float32"))))
        x = relay.var("x", shape=dshape)
        y = relay.Call(f0, [x])
        z = relay.Call(f1, [y])
        z2 = relay.Call(f2, [z])
        return relay.Function([x], relay.Tuple((z, z2)))

    x = relay.var("x", shape=dshape)
    orig = before(x)
    fuse0(tvm.IRModule.from_expr(orig))
    m = fuse2(tvm.IRModule.from_expr(orig))
    after = run_opt_pass(expected(), transform.InferType())
    assert tvm.ir.structural_equal(m["main"], after)
    xd = np.random.randn(*dshape).astype("float32")
    inter = np.concatenate([xd + 1] * 3, axis=1) + 1
    cat = np.concatenate([inter] * 3, axis=1)
    pooled = cat.reshape(1, 27, 3, 2, 3, 2).max(axis=(3, 5))
    res = _run(orig, xd)
    np.testing.assert_allclose(res[0].numpy(), pooled + 1, rtol=1e-6)
    np.testing.assert_allclose(res[1].numpy(), pooled + 2, rtol=1e-6)


def test_inception_like():
    dshape = (1, 4, 5, 5)

    def conv(data):
        y = relay.nn.conv2d(data, relay.var("w"), kernel_size=(3, 3), padding=(1, 1), channels=4)
        return relay.nn.relu(data=y)

    def inception_like(data):
        return relay.concatenate((conv(data), conv(data)), axis=1)

    def before():
        x = relay.var("x", shape=dshape)
        in2 = inception_like(inception_like(x))
        return relay.Function(relay.analysis.free_vars(in2), in2)

    def expected():
        def conv_fn(shape):
            p = relay.var("p", shape=shape)
            c = conv(p)
            return _prim(relay.Function(relay.analysis.free_vars(c), c))

        def concat_fn(shape):
            a, b = relay.var("a", shape=shape), relay.var("b", shape=shape)
            return _prim(relay.Function([a, b], relay.concatenate((a, b), axis=1)))

        dshape2 = (dshape[0], dshape[1] * 2, dshape[2], dshape[3])
        x = relay.var("x", shape=dshape)
        c1 = relay.Call(conv_fn(dshape), [x, relay.var("w1")])
        c2 = relay.Call(conv_fn(dshape), [x, relay.var("w2")])
        concat = relay.Call(concat_fn(dshape), [c1, c2])
        c3 = relay.Call(conv_fn(dshape2), [concat, relay.var("w3")])
        c4 = relay.Call(conv_fn(dshape2), [concat, relay.var("w4")])
        out = relay.Call(concat_fn(dshape), [c3, c4])
        return relay.Function(relay.analysis.free_vars(out), out)

    m = fuse2(tvm.IRModule.from_expr(before()))
    after = run_opt_pass(expected(), transform.InferType())
    assert tvm.ir.structural_equal(m["main"], after)


def test_fuse_parallel_injective():
    def before():
        x = relay.var("x", shape=(10, 20), dtype="int32")
        y = relay.add(x, relay.const(1, "int32"))
        z = relay.squeeze(y)
        u = relay.transpose(y, axes=[0, 1])
        w = relay.left_shift(z, u)
        return relay.Function([x], w)

    def expected():
        x = relay.var("p", shape=(10, 20), dtype="int32")
        y = relay.add(x, relay.const(1, "int32"))
        w = relay.left_shift(relay.squeeze(y), relay.transpose(y, axes=[0, 1]))
        f1 = _prim(relay.Function([x], w))
        x = relay.var("x", shape=(10, 20), dtype="int32")
        return relay.Function([x], relay.Call(f1, [x]))

    zz = run_opt_pass(before(), transform.FuseOps(fuse_opt_level=2))
    assert not relay.analysis.free_vars(zz)
    after = run_opt_pass(expected(), transform.InferType())
    assert tvm.ir.structural_equal(zz, after)


def test_fuse_take():
    def before():
        x = relay.var("x", shape=(10, 1))
        concat = relay.concatenate([x, x], axis=-1)
        out = relay.op.take(concat, indices=relay.const([0], dtype="int64"))
        return relay.Function(relay.analysis.free_vars(out), out)

    def expected():
        x = relay.var("x", shape=(10, 1))
        p0 = relay.var("p0", shape=(10, 1))
        p1 = relay.var("p1", shape=(1,), dtype="int64")
        c = relay.const([0], dtype="int64")
        out = relay.op.take(relay.concatenate([p0, p0], axis=-1), indices=p1)
        f0 = _prim(relay.Function([p0, p1], out))
        return relay.Function([x], relay.Call(f0, [x, c]))

    after = run_opt_pass(expected(), transform.InferType())
    with tvm.transform.PassContext(opt_level=2):
        m = run_opt_pass(before(), transform.FuseOps())
    assert tvm.ir.structural_equal(m, after)
    xd = np.random.randn(10, 1).astype("float32")
    np.testing.assert_allclose(_run(before(), xd).numpy(), xd[0:1, 0], rtol=1e-6)


def test_fuse_bcast_reduce_scalar():
    def before():
        x = relay.var("x", shape=(), dtype="int32")
        less = relay.less(x, relay.const(10, dtype="int32"))
        return relay.Function([x], relay.min(less))

    def expected():
        p0 = relay.var("p0", shape=(), dtype="int32")
        z0 = relay.min(relay.less(p0, relay.const(10, dtype="int32")))
        f0 = _prim(relay.Function([p0], z0))
        x = relay.var("x", shape=(), dtype="int32")
        return relay.Function([x], relay.Call(f0, [x]))

    m = fuse2(tvm.IRModule.from_expr(before()))
    after = run_opt_pass(expected(), transform.InferType())
    assert tvm.ir.structural_equal(m["main"], after)
    for v in (3, 10, 11, -7):
        assert bool(_run(before(), np.array(v, "int32")).numpy()) == (v < 10)


def test_fuse_max_diamond():
    def create_diamond(x, branch_len):
        x1 = x2 = x
        for _ in range(branch_len):
            x1 = relay.exp(x1)
            x2 = relay.exp(x2)
        return relay.add(x1, x2)

    def before(branch_len, num_diamond):
        x = relay.var("x", shape=(10, 20))
        out = x
        for _ in range(num_diamond):
            out = create_diamond(out, branch_len)
        return relay.Function([x], out)

    def after(branch_len, num_diamond):
        inp = relay.var("x", shape=(10, 20))
        out = inp
        for _ in range(num_diamond):
            p = relay.var("p", shape=(10, 20))
            f = _prim(relay.Function([p], create_diamond(p, branch_len)))
            out = relay.Call(f, [out])
        return relay.Function([inp], out)

    with tvm.transform.PassContext(config={"relay.FuseOps.max_depth": 11}):
        fused = run_opt_pass(before(5, 3), transform.FuseOps())
    expected = run_opt_pass(after(5, 3), transform.InferType())
    assert tvm.ir.structural_equal(fused, expected)
