"""Tutorial flow: "How to Use TVM Pass Infra" (use_pass_infra).

A small conv2d + constant-arithmetic program goes through FoldConstant, EliminateCommonSubexpr and
FuseOps one by one, then through a Sequential under PassContexts with different opt levels and a
disabled pass, AlterOpLayout with a user alter-layout hook, a user function pass written as a class
(with an ExprMutator), PrintIR, and a pass instrument. Every transformed module must compute what
the original does (checked with the debug interpreter).
"""
from collections import Counter

import numpy as np
import pytest

import kiln as tvm
import kiln.testing
from kiln import relay
from kiln.ir.op import Op

C = 16
DATA_SHAPE = (1, C, 9, 9)
OUT_SHAPE = (1, C, 7, 7)


def example(seed=0):
    c_data = np.random.default_rng(seed).uniform(-1, 1, OUT_SHAPE).astype("float32")
    c = relay.const(c_data)
    weight = relay.var("weight", shape=(C, C, 3, 3))
    x = relay.var("x", relay.TensorType(DATA_SHAPE, "float32"))
    conv = relay.nn.conv2d(x, weight)
    y = relay.add(c, c)
    y = relay.multiply(y, relay.const(2, "float32"))
    y = relay.add(conv, y)
    z = relay.add(y, c)
    z1 = relay.add(y, c)
    z2 = relay.add(z, z1)
    return relay.Function([x, weight], z2)


def _inputs():
    rng = np.random.default_rng(7)
    return (rng.uniform(-1, 1, DATA_SHAPE).astype("float32"),
            rng.uniform(-1, 1, (C, C, 3, 3)).astype("float32"))


def _run(mod):
    x, w = _inputs()
    return relay.create_executor("debug", mod=mod, device=tvm.cpu(), target="llvm").evaluate()(x, w).numpy()


def _ops(mod):
    counts = Counter()

    def visit(node):
        if isinstance(node, relay.Call) and isinstance(node.op, tvm.ir.Op):
            counts[node.op.name] += 1
    relay.analysis.post_order_visit(mod["main"], visit)
    return counts


def _primitive_functions(mod):
    found = []

    def visit(node):
        if isinstance(node, relay.Function) and node.attrs and node.attrs.get("Primitive"):
            found.append(node)
    relay.analysis.post_order_visit(mod["main"], visit)
    return found


@pytest.fixture(scope="module")
def reference():
    return _run(tvm.IRModule.from_expr(example()))


def test_passes_one_by_one(reference):
    mod = tvm.IRModule.from_expr(example())
    assert _ops(mod)["add"] == 5
    mod = relay.transform.FoldConstant()(mod)
    assert _ops(mod)["multiply"] == 0 and _ops(mod)["add"] == 4  # add(c, c) * 2 folded
    tvm.testing.assert_allclose(_run(mod), reference, rtol=1e-5, atol=1e-5)
    mod = relay.transform.EliminateCommonSubexpr()(mod)
    assert _ops(mod)["add"] == 3  # z and z1 merged
    tvm.testing.assert_allclose(_run(mod), reference, rtol=1e-5, atol=1e-5)
    mod = relay.transform.FuseOps(fuse_opt_level=0)(mod)
    assert len(_primitive_functions(mod)) == 4  # level 0: every op on its own
    tvm.testing.assert_allclose(_run(mod), reference, rtol=1e-5, atol=1e-5)


def test_sequential_under_pass_contexts(reference):
    mod = tvm.IRModule.from_expr(example())
    seq = tvm.transform.Sequential([
        relay.transform.FoldConstant(),
        relay.transform.EliminateCommonSubexpr(),
        relay.transform.FuseOps(fuse_opt_level=2),
    ])
    # the default context is opt_level 2: EliminateCommonSubexpr (level 3) does not run
    mod1 = seq(mod)
    assert len(_primitive_functions(mod1)) == 1
    assert _ops(mod1)["add"] == 4
    with tvm.transform.PassContext(opt_level=3):
        mod2 = seq(mod)
    assert _ops(mod2)["add"] == 3
    with tvm.transform.PassContext(opt_level=3, disabled_pass=["EliminateCommonSubexpr"]):
        mod3 = seq(mod)
    assert _ops(mod3)["add"] == 4
    with tvm.transform.PassContext(opt_level=2, required_pass=["EliminateCommonSubexpr"]):
        mod4 = seq(mod)
    assert _ops(mod4)["add"] == 3  # required passes run below their opt level
    for m in (mod1, mod2, mod3, mod4):
        tvm.testing.assert_allclose(_run(m), reference, rtol=1e-5, atol=1e-5)


@pytest.fixture
def alter_conv2d_hook():
    """relay.op.register_alter_op_layout at a high level for one test, then the old hook back."""
    op = Op.get("nn.conv2d")
    old = op._attrs.get("FTVMAlterOpLayout")
    calls = []

    @relay.op.register_alter_op_layout("nn.conv2d", level=101)
    def alter_conv2d(attrs, inputs, tinfos, out_type):
        calls.append(out_type)
        data, weight = inputs
        new_attrs = dict(attrs)
        new_attrs["data_layout"] = "NCHW16c"
        return relay.nn.conv2d(data, weight, **new_attrs)

    try:
        yield calls
    finally:
        op.reset_attr("FTVMAlterOpLayout")
        if old is not None:
            op.set_attr("FTVMAlterOpLayout", old[0], old[1], _replace=True)


def test_alter_op_layout_with_user_hook(alter_conv2d_hook, reference):
    mod = tvm.IRModule.from_expr(example())
    seq1 = tvm.transform.Sequential([relay.transform.AlterOpLayout()])
    with tvm.transform.PassContext(opt_level=3):
        with tvm.target.Target("llvm"):
            mod5 = seq1(mod)
    assert len(alter_conv2d_hook) == 1
    text = mod5.astext(show_meta_data=False)
    assert 'data_layout="NCHW16c"' in text and "layout_transform" in text
    tvm.testing.assert_allclose(_run(mod5), reference, rtol=1e-5, atol=1e-5)


def test_custom_function_pass_class():
    @relay.transform.function_pass(opt_level=1)
    class CustomPipeline:
        """Multiply every constant by a given constant."""

        def __init__(self, multiplier):
            self.multiplier = multiplier

        def transform_function(self, func, mod, ctx):
            obj = self

            class ReplaceConstant(tvm.relay.ExprMutator):
                def visit_constant(self, c):
                    return relay.multiply(obj.multiplier, c)

            return ReplaceConstant().visit(func)

    mod = tvm.IRModule.from_expr(example())
    custom_pass = CustomPipeline(multiplier=relay.const(3, "float32"))
    assert custom_pass.info.name == "CustomPipeline"
    assert custom_pass.info.opt_level == 1
    mod3 = custom_pass(mod)
    # two distinct constants (c, shared by its three uses, and 2.0): each gets one multiply
    assert _ops(mod3)["multiply"] == _ops(mod)["multiply"] + 2
    x, w = _inputs()
    c_data = np.random.default_rng(0).uniform(-1, 1, OUT_SHAPE).astype("float32")
    import torch
    conv = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w)).numpy()
    y = conv + (3 * c_data + 3 * c_data) * (3 * 2.0)
    want = 2 * (y + 3 * c_data)
    tvm.testing.assert_allclose(_run(mod3), want, rtol=1e-4, atol=1e-4)


def test_print_ir_and_instrument(capsys, reference):
    mod = tvm.IRModule.from_expr(example())
    seq = tvm.transform.Sequential([
        relay.transform.FoldConstant(),
        tvm.transform.PrintIR(),
        relay.transform.EliminateCommonSubexpr(),
        relay.transform.FuseOps(),
    ])
    names = []

    @tvm.instrument.pass_instrument
    class RecordPasses:
        def run_before_pass(self, mod, info):
            names.append(info.name)

    with tvm.transform.PassContext(opt_level=3, instruments=[RecordPasses()]):
        with tvm.target.Target("llvm"):
            out = seq(mod)
    printed = capsys.readouterr().out
    assert "nn.conv2d" in printed and "def @main" in printed
    for name in ("FoldConstant", "PrintIR", "EliminateCommonSubexpr", "FuseOps"):
        assert name in names
    assert names.index("FoldConstant") < names.index("PrintIR") < names.index("EliminateCommonSubexpr")
    tvm.testing.assert_allclose(_run(out), reference, rtol=1e-5, atol=1e-5)
