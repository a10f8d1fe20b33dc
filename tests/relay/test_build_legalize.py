"""relay.build / relay.vm.compile run relay.transform.Legalize (FTVMLegalize) as TVM v0.13's pass prefix does:
after the QNN legalization, before SimplifyInference, at opt level 1."""
import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.contrib import graph_executor
from kiln.relay.testing.temp_op_attr import TempOpAttr
from kiln.topi.testing import conv2d_backward_weight_python

rng = np.random.RandomState(17)


def _bwd_weight_func(dy_shape, x_shape, ks, st, pad, groups):
    dy, x = relay.var("dy", shape=dy_shape), relay.var("x", shape=x_shape)
    return relay.Function([dy, x], relay.nn.conv2d_backward_weight(dy, x, strides=st, padding=pad, kernel_size=ks,
                                                                   groups=groups, channels=dy_shape[1]))


def _op_names(mod):
    names = []

    def visit(e):
        if isinstance(e, relay.Call) and isinstance(e.op, tvm.ir.Op):
            names.append(e.op.name)
        elif isinstance(e, relay.Function) and e.attrs is not None and "Primitive" in e.attrs:
            relay.analysis.post_order_visit(e.body, visit)
    relay.analysis.post_order_visit(mod["main"], visit)
    return names


CASES = [((2, 8, 9, 9), (2, 4, 9, 9), (3, 3), (1, 1), (1, 1), 1),
         ((2, 6, 5, 5), (2, 3, 11, 11), (3, 3), (2, 2), (0, 0), 1),
         ((1, 4, 7, 7), (1, 4, 7, 7), (3, 3), (1, 1), (1, 1), 4)]


@pytest.mark.parametrize("opt_level", [0, 3])
@pytest.mark.parametrize("case", CASES, ids=["s1", "s2_odd", "grouped"])
def test_conv2d_backward_weight_builds_with_relay_build(case, opt_level):
    dy_shape, x_shape, ks, st, pad, groups = case
    mod = tvm.IRModule.from_expr(_bwd_weight_func(*case))
    with tvm.transform.PassContext(opt_level=opt_level):
        lib = relay.build(mod, target="llvm")
    ops = _op_names(lib.optimized_mod)
    # opt level >= 1: legalized to nn.conv2d (as TVM on CPU); opt level 0: Legalize does not run
    assert ("nn.conv2d_backward_weight" in ops) == (opt_level == 0)
    assert any(n in ("nn.conv2d", "nn.contrib_conv2d_NCHWc") for n in ops) == (opt_level >= 1)
    dy_np, x_np = rng.randn(*dy_shape).astype("float32"), rng.randn(*x_shape).astype("float32")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    m.run(dy=dy_np, x=x_np)
    want = conv2d_backward_weight_python(dy_np, x_np, ks, st, pad, groups=groups, channels=dy_shape[1])
    np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-4, atol=1e-4)


def test_conv2d_backward_weight_vm_compile():
    case = CASES[1]
    dy_shape, x_shape, ks, st, pad, groups = case
    mod = tvm.IRModule.from_expr(_bwd_weight_func(*case))
    with tvm.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, target="llvm")
    vm = tvm.runtime.vm.VirtualMachine(exe, tvm.cpu())
    dy_np, x_np = rng.randn(*dy_shape).astype("float32"), rng.randn(*x_shape).astype("float32")
    want = conv2d_backward_weight_python(dy_np, x_np, ks, st, pad, groups=groups, channels=dy_shape[1])
    np.testing.assert_allclose(vm.run(dy_np, x_np).numpy(), want, rtol=1e-4, atol=1e-4)


def test_disabled_legalize_keeps_the_op():
    mod = tvm.IRModule.from_expr(_bwd_weight_func(*CASES[0]))
    with tvm.transform.PassContext(opt_level=3, disabled_pass=["Legalize"]):
        lib = relay.build(mod, target="llvm")
    assert "nn.conv2d_backward_weight" in _op_names(lib.optimized_mod)


def test_build_runs_a_user_legalization_before_fusion():
    """A legalization set with TempOpAttr (TVM's test idiom) is applied by relay.build: nn.relu -> clip."""
    x = relay.var("x", shape=(3, 5))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.nn.relu(x) * relay.const(2.0)))

    def legalize_relu(attrs, inputs, types):
        return relay.clip(inputs[0], 0.0, 1.0)

    data = rng.randn(3, 5).astype("float32") * 2
    with TempOpAttr("nn.relu", "FTVMLegalize", legalize_relu):
        with tvm.transform.PassContext(opt_level=2):
            lib = relay.build(mod, target="llvm")
    ops = _op_names(lib.optimized_mod)
    assert "clip" in ops and "nn.relu" not in ops
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    m.run(x=data)
    np.testing.assert_allclose(m.get_output(0).numpy(), np.clip(data, 0, 1) * 2, rtol=1e-6)


def test_fused_groups_unchanged_without_legalizable_ops():
    """A model with no FTVMLegalize op: the optimized module is structurally the same with and without Legalize."""
    from kiln.relay import testing
    mod, params = testing.resnet.get_workload(num_layers=18, batch_size=1, image_shape=(3, 32, 32))
    with tvm.target.Target("llvm"):
        with tvm.transform.PassContext(opt_level=3):
            with_legalize, _ = relay.optimize(mod, params=params)
        with tvm.transform.PassContext(opt_level=3, disabled_pass=["Legalize"]):
            without, _ = relay.optimize(mod, params=params)
    assert tvm.ir.structural_equal(with_legalize["main"], without["main"])
