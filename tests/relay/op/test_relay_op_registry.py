import numpy as np
import pytest

import kiln
from kiln import relay, te
from kiln.error import OpNotImplemented
from kiln.ir import Op, OpPattern, TensorType
from kiln.relay.backend.te_compiler import select_implementation
from kiln.relay.op import OpStrategy
from kiln.relay.op.strategy import generic

EXPECTED_PATTERNS = {
    "add": OpPattern.BROADCAST, "exp": OpPattern.ELEMWISE, "sum": OpPattern.COMM_REDUCE,
    "argmax": OpPattern.COMM_REDUCE, "reshape": OpPattern.INJECTIVE, "concatenate": OpPattern.INJECTIVE,
    "expand_dims": OpPattern.BROADCAST, "tile": OpPattern.BROADCAST, "where": OpPattern.BROADCAST,
    "nn.conv2d": OpPattern.OUT_ELEMWISE_FUSABLE, "nn.dense": OpPattern.OUT_ELEMWISE_FUSABLE,
    "nn.batch_matmul": OpPattern.OUT_ELEMWISE_FUSABLE, "nn.max_pool2d": OpPattern.OUT_ELEMWISE_FUSABLE,
    "nn.bias_add": OpPattern.BROADCAST, "nn.relu": OpPattern.ELEMWISE, "nn.softmax": OpPattern.OUT_ELEMWISE_FUSABLE,
    "nn.batch_norm": OpPattern.OUT_ELEMWISE_FUSABLE, "nn.pad": OpPattern.INJECTIVE, "nn.batch_flatten": OpPattern.INJECTIVE,
    "layout_transform": OpPattern.INJECTIVE, "image.resize2d": OpPattern.INJECTIVE, "nn.dropout": OpPattern.OPAQUE,
}


def test_patterns_as_tvm():
    for name, pattern in EXPECTED_PATTERNS.items():
        assert relay.op.get(name).get_attr("TOpPattern") == pattern, name


def test_every_op_is_complete():
    from kiln.relay.op._define import DEFINED_OPS
    assert len(DEFINED_OPS) > 100
    for name in DEFINED_OPS:
        op = Op.get(name)
        for key in ("FTypeRelation", "TOpPattern", "FReference", "FTVMStrategy"):
            assert op.has_attr(key), f"{name} lacks {key}"


def test_attrs_type_keys():
    assert Op.get("nn.conv2d").attrs_type_key == "relay.attrs.Conv2DAttrs"
    assert Op.get("nn.max_pool2d").attrs_type_key == "relay.attrs.MaxPool2DAttrs"
    assert Op.get("nn.avg_pool2d").attrs_type_key == "relay.attrs.AvgPool2DAttrs"
    assert Op.get("sum").attrs_type_key == "relay.attrs.ReduceAttrs"
    assert Op.get("image.resize2d").attrs_type_key == "relay.attrs.Resize2DAttrs"
    assert kiln.ir.make_node("relay.attrs.SoftmaxAttrs", axis=1).axis == 1


def _te_stack_works() -> str:
    """'' when TE lowering + the TIR interpreter run a trivial compute (they are built by another part of kiln)."""
    try:
        from kiln.topi.testing import run_te
        a = te.placeholder((2,), name="a")
        b = te.compute((2,), lambda i: a[i] + 1.0, name="b")
        out = run_te([a], [b], [np.zeros(2, "float32")])[0]
        return "" if np.allclose(out, 1.0) else "wrong result"
    except Exception as err:  # noqa: BLE001
        return f"{type(err).__name__}: {err}"


def _te_inputs(*shapes):
    return [te.placeholder(s, name=f"p{i}") for i, s in enumerate(shapes)]


@pytest.mark.parametrize("build,shapes", [
    (lambda a, b: relay.add(a, b), [(3, 4), (4,)]),
    (lambda a: relay.nn.relu(a), [(2, 5)]),
    (lambda a: relay.sum(a, axis=1), [(3, 5)]),
    (lambda a: relay.transpose(a, (1, 0)), [(3, 2)]),
    (lambda a, b: relay.nn.conv2d(a, b, padding=1), [(1, 2, 5, 5), (3, 2, 3, 3)]),
    (lambda a, b: relay.nn.dense(a, b), [(2, 3), (4, 3)]),
])
def test_strategy_compute_matches_reference(build, shapes):
    """The FTVMStrategy implementation (TOPI compute + generic schedule) agrees with FReference."""
    from kiln.topi.testing import run_te
    problem = _te_stack_works()
    if problem:
        pytest.skip(f"the TE lowering stack is not usable right now ({problem})")
    vars_ = [relay.var(f"x{i}", shape=s) for i, s in enumerate(shapes)]
    call = relay.testing.run_infer_type(build(*vars_))
    arrays = [np.random.default_rng(i).uniform(-1, 1, s).astype("float32") for i, s in enumerate(shapes)]
    inputs = _te_inputs(*shapes)
    impl, outs = select_implementation(call.op, call.attrs, inputs, call.checked_type, kiln.target.Target("llvm"))
    sched = impl.schedule(call.attrs, outs, "llvm")
    got = run_te(inputs, outs, arrays, schedule=sched)[0]
    expect = call.op.get_attr("FReference")(call.attrs, arrays, call.checked_type)
    np.testing.assert_allclose(got, expect, rtol=1e-4, atol=1e-5)


def test_missing_compute_raises_op_not_implemented_at_compile_time():
    call = relay.testing.run_infer_type(relay.nn.dropout_raw(relay.var("x", shape=(2,))))
    with pytest.raises(OpNotImplemented, match="nn.dropout"):
        select_implementation(call.op, call.attrs, _te_inputs((2,)), call.checked_type, "llvm")
    # the generic (non-CPU) strategy of a packed conv names the op and the TOPI function it lacks
    x = relay.var("x", shape=(1, 4, 4, 4, 4))
    w = relay.var("w", shape=(1, 4, 3, 3, 4, 4))
    call = relay.testing.run_infer_type(relay.nn.contrib_conv2d_nchwc(x, w, padding=1, data_layout="NCHW4c",
                                                                      kernel_layout="OIHW4i4o"))
    ins = _te_inputs((1, 4, 4, 4, 4), (1, 4, 3, 3, 4, 4))
    if not hasattr(kiln.topi.nn, "conv2d_NCHWc"):
        with pytest.raises(OpNotImplemented, match=r"nn.contrib_conv2d_NCHWc.*kiln.topi.nn.conv2d_NCHWc"):
            select_implementation(call.op, call.attrs, ins, call.checked_type, kiln.target.Target("cuda"))
    # a layout the generic conv2d compute does not cover
    call = relay.testing.run_infer_type(relay.nn.conv2d(relay.var("a", shape=(1, 4, 4, 8)),
                                                        relay.var("b", shape=(3, 3, 2, 8)), data_layout="NHWC",
                                                        kernel_layout="HWOI"))
    with pytest.raises(OpNotImplemented, match="data_layout=NHWC, kernel_layout=HWOI"):
        select_implementation(call.op, call.attrs, _te_inputs((1, 4, 4, 8), (3, 3, 2, 8)), call.checked_type,
                              kiln.target.Target("cuda"))


def test_generic_strategy_dispatches_on_target_keys():
    calls = []

    @kiln.target.override_native_generic_func("test_demo_strategy")
    def strat(attrs, inputs, out_type, target):
        calls.append("default")
        return OpStrategy()

    @strat.register("cpu")
    def _cpu(attrs, inputs, out_type, target):
        calls.append("cpu")
        return OpStrategy()
    for name in ("llvm", "cuda"):
        with kiln.target.Target(name) as tgt:
            strat(None, [], None, tgt)
    strat(None, [], None, None)  # no current target: the default
    assert calls == ["cpu", "default", "default"]
    assert kiln.target.get_native_generic_func("test_demo_strategy") is strat


def test_register_helpers_and_op_strategy():
    name = "test.relay_op_registry_tmp"
    relay.op.register(name, "tmp")
    relay.op.register_pattern(name, OpPattern.INJECTIVE)
    relay.op.register_compute(name, lambda attrs, inputs, out_type: [kiln.topi.identity(inputs[0])])
    relay.op.register_injective_schedule(name)
    relay.op.register_legalize(name, lambda attrs, inputs, types: None)
    relay.op.register_alter_op_layout(name, lambda attrs, inputs, tinfos, out_type: None)
    op = relay.op.get(name)
    assert op.get_attr("TOpPattern") == OpPattern.INJECTIVE
    assert op.has_attr("FTVMLegalize") and op.has_attr("FTVMAlterOpLayout")
    impl, outs = select_implementation(op, None, _te_inputs((3,)), TensorType((3,)), "llvm")
    assert impl.plevel == 10 and len(outs) == 1
    s = OpStrategy()
    s.add_implementation(lambda *a: [], lambda *a: None, name="low", plevel=5)
    s.add_implementation(lambda *a: [], lambda *a: None, name="high", plevel=15)
    assert s.best().name == "high"
    kiln.ir.op._remove_op_for_tests(name)


def test_arg_type_hooks_for_unannotated_parameters():
    conv = relay.nn.conv2d(relay.var("x"), relay.var("w"), channels=8, kernel_size=(3, 1), groups=2)
    hook = Op.get("nn.conv2d").get_attr("FInferArgTypes")
    assert hook([TensorType((1, 4, 9, 9)), None], conv.attrs) == {1: TensorType((8, 2, 3, 1))}
    assert hook([TensorType((1, 4, 9, 9)), TensorType((8, 2, 3, 1))], conv.attrs) == {}
    nhwc = relay.nn.conv2d(relay.var("x"), relay.var("w"), channels=8, kernel_size=3, data_layout="NHWC",
                           kernel_layout="HWIO")
    assert hook([TensorType((1, 9, 9, 4)), None], nhwc.attrs) == {1: TensorType((3, 3, 4, 8))}
    dense = relay.nn.dense(relay.var("x"), relay.var("w"), units=6)
    assert Op.get("nn.dense").get_attr("FInferArgTypes")([TensorType((2, 5)), None], dense.attrs) == \
        {1: TensorType((6, 5))}
    bn = relay.nn.batch_norm(*[relay.var(n) for n in "xgbmv"]).astuple()
    got = Op.get("nn.batch_norm").get_attr("FInferArgTypes")([TensorType((1, 3, 2, 2))] + [None] * 4, bn.attrs)
    assert got == {i: TensorType((3,)) for i in range(1, 5)}
    ba = relay.nn.bias_add(relay.var("x"), relay.var("b"), axis=-1)
    assert Op.get("nn.bias_add").get_attr("FInferArgTypes")([TensorType((2, 7)), None], ba.attrs) == \
        {1: TensorType((7,))}


def test_interpreter_reports_bad_indices_clearly():
    from kiln.error import ArgumentError
    x = relay.var("x", shape=(3,))
    i = relay.var("i", shape=(2,), dtype="int32")
    mod = kiln.IRModule.from_expr(relay.Function([x, i], relay.gather(x, 0, i)))
    with pytest.raises(ArgumentError, match="gather: an index is out of range"):
        relay.create_executor("debug", mod=mod).evaluate()(np.zeros(3, "float32"), np.array([0, 7], "int32"))


def test_tvm_style_custom_strategy():
    """A user strategy written as in TVM: wrap_compute_* + wrap_topi_schedule, registered at a higher level."""
    from kiln import topi
    from kiln.relay.op.strategy import wrap_compute_dense, wrap_topi_schedule

    def my_dense_strategy(attrs, inputs, out_type, target):
        s = OpStrategy()
        s.add_implementation(wrap_compute_dense(topi.nn.dense), wrap_topi_schedule(topi.generic.schedule_dense),
                             name="my_dense", plevel=30)
        return s
    from kiln.relay.testing import TempOpAttr
    call = relay.testing.run_infer_type(relay.nn.dense(relay.var("x", shape=(2, 3)), relay.var("w", shape=(4, 3))))
    with TempOpAttr("nn.dense", "FTVMStrategy", my_dense_strategy):
        impl, outs = select_implementation(call.op, call.attrs, _te_inputs((2, 3), (4, 3)), call.checked_type,
                                           "llvm")
        assert impl.name == "my_dense" and tuple(int(d) for d in outs[0].shape) == (2, 4)
    impl, _ = select_implementation(call.op, call.attrs, _te_inputs((2, 3), (4, 3)), call.checked_type, "llvm")
    assert impl.name != "my_dense"
