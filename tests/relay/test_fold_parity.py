"""FoldConstant parity with TVM v0.13: TVM's test_pass_fold_constant.py cases (expected graphs built by
hand, compared with ``structural_equal``) plus the folding rules of fold_constant.cc: an ``If`` with a
constant condition becomes its taken branch, tuples of constants fold through field accesses, stateful
and zero-argument ops and ``shape_of`` of a dynamic shape are left alone."""
import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.relay import transform
from kiln.relay.testing import create_workload, run_infer_type


def run_opt_pass(expr, opt_pass):
    mod = tvm.IRModule.from_expr(expr)
    mod = relay.transform.InferType()(mod)
    mod = opt_pass(mod)
    entry = mod["main"]
    return entry if isinstance(expr, relay.Function) else entry.body


def check(before, expected):
    zz = run_opt_pass(before, transform.FoldConstant())
    zexpected = run_opt_pass(expected, transform.InferType())
    tvm.ir.assert_structural_equal(zz, zexpected)
    return zz


def test_concatenate_const():
    const = relay.const(tvm.nd.array(np.array([1.0, 2.0, 3.0])))
    before = relay.Function([], relay.op.concatenate([const, const], axis=0))
    expected = relay.Function([], relay.const(tvm.nd.array(np.array([1.0, 2.0, 3.0, 1.0, 2.0, 3.0]))))
    check(before, expected)


def test_fold_const():
    c_data = np.array([1, 2, 3]).astype("float32")
    t = relay.TensorType([1, 2, 3], "float32")
    c = relay.const(c_data)
    x = relay.var("x", t)
    y = relay.add(x, relay.multiply(relay.add(c, c), relay.const(2, "float32")))
    before = relay.Function([x], relay.add(y, c))
    x = relay.var("x", t)
    expected = relay.Function([x], relay.add(relay.add(x, relay.const((c_data + c_data) * 2)), relay.const(c_data)))
    check(before, expected)


def test_fold_let():
    c_data = np.array(1).astype("float32")
    t = relay.TensorType([1], "float32")
    sb = relay.ScopeBuilder()
    x = relay.var("x", t)
    t1 = sb.let("t1", relay.const(c_data))
    t2 = sb.let("t2", relay.add(t1, t1))
    sb.ret(sb.let("t3", relay.add(t2, x)))
    before = relay.Function([x], sb.get())
    sb = relay.ScopeBuilder()
    x = relay.var("x", t)
    sb.ret(sb.let("t3", relay.add(relay.const(c_data + c_data), x)))
    check(before, relay.Function([x], sb.get()))


def test_fold_tuple():
    c_data = np.array(1).astype("float32")
    t = relay.TensorType([1], "float32")
    c = relay.const(c_data)
    x = relay.var("x", t)
    y = relay.Tuple([x, c])
    before = relay.Function([x], relay.add(relay.add(y[1], c), y[0]))
    x = relay.var("x", t)
    check(before, relay.Function([x], relay.add(relay.const(c_data + c_data), x)))


def test_fold_concat():
    c_data = np.array([[1, 2, 3]]).astype("float32")
    before = relay.Function([], relay.concatenate((relay.const(c_data), relay.const(c_data)), axis=0))
    check(before, relay.Function([], relay.const(np.concatenate((c_data, c_data), axis=0))))


@pytest.mark.parametrize("cond", [True, False])
def test_fold_if(cond):
    x_data = np.array([[1, 2, 3]]).astype("float32")
    x, y = relay.const(x_data), relay.const(x_data)
    before = relay.Function([], relay.If(relay.const(np.array(cond)), x + y, x - y))
    expected = relay.Function([], relay.const(x_data + x_data if cond else x_data - x_data))
    check(before, expected)


@pytest.mark.parametrize("cond", [True, False])
def test_fold_if_with_variable_branches(cond):
    """The condition folds from constants; the branches stay computations on the parameters."""
    x = relay.var("x", shape=(3,))
    c = relay.greater(relay.const(2.0), relay.const(1.0 if cond else 3.0))
    before = relay.Function([x], relay.If(c, relay.exp(x), relay.negative(x)))
    x = relay.var("x", shape=(3,))
    expected = relay.Function([x], relay.exp(x) if cond else relay.negative(x))
    out = check(before, expected)
    xd = np.random.randn(3).astype("float32")
    res = relay.create_executor("graph", mod=tvm.IRModule.from_expr(out), target="llvm").evaluate()(xd)
    np.testing.assert_allclose(res.numpy(), np.exp(xd) if cond else -xd, rtol=1e-5)


def test_if_with_variable_condition_is_kept():
    x = relay.var("x", shape=())
    c1, c2 = relay.const(np.ones(2, "float32")), relay.const(np.zeros(2, "float32"))
    before = relay.Function([x], relay.If(relay.greater(x, relay.const(0.0)), c1 + c1, c2 - c1))
    x = relay.var("x", shape=())
    expected = relay.Function([x], relay.If(relay.greater(x, relay.const(0.0)),
                                            relay.const(np.full(2, 2, "float32")),
                                            relay.const(np.full(2, -1, "float32"))))
    check(before, expected)


@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_fold_shape_of(dtype):
    c_shape = (8, 9, 10)
    x = relay.var("x", shape=c_shape, dtype="float32")
    y = relay.var("y", shape=c_shape, dtype="float32")
    before = relay.Function([x, y], relay.shape_of(x + y, dtype))
    x = relay.var("x", shape=c_shape, dtype="float32")
    y = relay.var("y", shape=c_shape, dtype="float32")
    expected = relay.Function([x, y], relay.const(np.array(c_shape).astype(dtype), dtype=dtype))
    check(before, expected)


def test_shape_of_dynamic_is_kept():
    x = relay.var("x", shape=(relay.Any(), 4), dtype="float32")
    before = relay.Function([x], relay.shape_of(x))
    x = relay.var("x", shape=(relay.Any(), 4), dtype="float32")
    check(before, relay.Function([x], relay.shape_of(x)))


@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_fold_ndarray_size(dtype):
    c_shape = (8, 9, 10)
    x = relay.var("x", shape=c_shape, dtype="float32")
    y = relay.var("y", shape=c_shape, dtype="float32")
    before = relay.Function([x, y], relay.ndarray_size(x + y, dtype))
    x = relay.var("x", shape=c_shape, dtype="float32")
    y = relay.var("y", shape=c_shape, dtype="float32")
    expected = relay.Function([x, y], relay.const(np.size(np.zeros(c_shape)), dtype=dtype))
    check(before, expected)


def test_fold_batch_norm():
    dshape = (1, 3, 8, 8)
    data = relay.var("data", relay.TensorType(dshape, "float32"))
    weight = relay.const(np.zeros((16, 3, 3, 3), "float32"))
    bias = relay.const(np.zeros((16, 1, 1), "float32"))
    conv = relay.nn.conv2d(data=data, weight=weight, kernel_size=(3, 3), channels=16, padding=(1, 1))
    expected = relay.Function(relay.analysis.free_vars(relay.add(conv, bias)), relay.add(conv, bias))

    remove_bn_pass = tvm.transform.Sequential([relay.transform.InferType(), relay.transform.SimplifyInference(),
                                               relay.transform.FoldConstant(), relay.transform.FoldScaleAxis()])
    data = relay.var("data", relay.TensorType(dshape, "float32"))
    conv = relay.nn.conv2d(data=data, weight=relay.var("weight"), kernel_size=(3, 3), channels=16, padding=(1, 1))
    bn_output = relay.nn.batch_norm(conv, relay.var("bn_gamma"), relay.var("bn_beta"), relay.var("bn_mean"),
                                    relay.var("bn_var"))

    def initializer(_, param):
        param[:] = np.zeros(param.shape)

    mod, params = create_workload(bn_output[0], initializer)
    mod["main"] = relay.build_module.bind_params_by_name(mod["main"], params)
    with tvm.transform.PassContext(opt_level=3):
        mod = remove_bn_pass(mod)
    tvm.ir.assert_structural_equal(mod["main"], run_infer_type(expected))


def test_fold_dropout():
    data = relay.const(np.arange(10).astype(np.float32))
    add = relay.nn.dropout(data) + relay.const(1.0)
    before_mod = tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(add), add))
    passes = tvm.transform.Sequential([relay.transform.InferType(), relay.transform.FoldConstant()])
    with tvm.transform.PassContext(opt_level=3):
        after_mod = passes(before_mod)
    tvm.ir.assert_structural_equal(run_infer_type(before_mod["main"]), after_mod["main"])


def test_zero_argument_ops_are_not_folded():
    """TVM does not fold calls without arguments (folding ``zeros((4, 5))`` only grows the program)."""
    before = relay.Function([], relay.add(relay.zeros((4, 5), "float32"), relay.ones((4, 5), "float32")))
    check(before, relay.Function([], relay.add(relay.zeros((4, 5), "float32"), relay.ones((4, 5), "float32"))))


def test_split_of_constant_folds_through_fields():
    c_data = np.arange(6, dtype="float32")
    x = relay.var("x", shape=(2,))
    parts = relay.split(relay.const(c_data), 3)
    before = relay.Function([x], relay.add(x, relay.multiply(parts[1], parts[2])))
    x = relay.var("x", shape=(2,))
    check(before, relay.Function([x], relay.add(x, relay.const(c_data[2:4] * c_data[4:6]))))


def test_primitive_functions_are_left_alone():
    p = relay.var("p", shape=(3,))
    c = relay.const(np.ones(3, "float32"))
    prim = relay.Function([p], relay.add(p, relay.add(c, c))).with_attr("Primitive", tvm.tir.IntImm("int32", 1))
    x = relay.var("x", shape=(3,))
    before = relay.Function([x], relay.Call(prim, [x]))
    p = relay.var("p", shape=(3,))
    prim2 = relay.Function([p], relay.add(p, relay.add(c, c))).with_attr("Primitive", tvm.tir.IntImm("int32", 1))
    x = relay.var("x", shape=(3,))
    check(before, relay.Function([x], relay.Call(prim2, [x])))
