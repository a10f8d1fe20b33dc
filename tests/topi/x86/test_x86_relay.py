"""The x86 strategies and AlterOpLayout hooks through relay.build: implementation choice, NCHW -> NCHWc -> NCHW
layout rewrites with layout_transform at the graph boundary only, weights packed at compile time."""
import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.runtime.graph_executor import GraphModule
from kiln.target.x86 import host_can_run

# the layouts AlterOpLayout picks name the ISA: 16 input channels -> one block of 16; 24 output channels -> blocks
# of 8 with AVX2 (one vector), one block of 24 with AVX-512 (a zmm and a ymm; 12 of its 16 lanes is no machine
# vector)
ISA = {"avx2": ("llvm -mcpu=core-avx2", "NCHW16c", "OIHW16i8o", "NCHW8c"),
       "avx512": ("llvm -mcpu=skylake-avx512", "NCHW16c", "OIHW16i24o", "NCHW24c")}


def _net(rng):
    x = relay.var("x", shape=(1, 16, 13, 11))
    w1 = relay.const(rng.standard_normal((24, 16, 3, 3)).astype("float32"))
    w2 = relay.const(rng.standard_normal((24, 1, 3, 3)).astype("float32"))
    w3 = relay.const(rng.standard_normal((16, 24)).astype("float32"))
    w4 = relay.const(rng.standard_normal((5, 16)).astype("float32"))
    y = relay.nn.relu(relay.nn.conv2d(x, w1, padding=(1, 1), channels=24, kernel_size=(3, 3)))
    y = relay.nn.conv2d(y, w2, padding=(1, 1), strides=(2, 2), groups=24, channels=24, kernel_size=(3, 3))
    y = relay.nn.batch_flatten(relay.nn.global_avg_pool2d(y))
    y = relay.nn.relu(relay.nn.dense(y, w3))
    y = relay.nn.softmax(relay.nn.dense(y, w4))
    return tvm.IRModule.from_expr(relay.Function([x], y))


def _build(mod, with_target: bool, target: str = "llvm"):
    with tvm.transform.PassContext(opt_level=3):
        if with_target:
            with tvm.target.Target(target):
                return relay.build(mod, target=target)
        return relay.build(mod, target=target)


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_x86_implementations_and_nchwc_rewrite_match_reference(isa):
    target, data_layout, kernel_layout, out_layout = ISA[isa]
    rng = np.random.default_rng(0)
    mod = _net(rng)
    x = rng.standard_normal((1, 16, 13, 11)).astype("float32")
    ref = relay.create_executor("debug", mod=mod).evaluate()(x).numpy()
    for with_target in (False, True):  # relay.build enters its target, so the x86 hooks run either way
        lib = _build(mod, with_target, target)
        impls = {c.anchor_op: c.implementation for c in lib.lowered}
        text = lib.optimized_mod["main"].astext()
        # AlterOpLayout: packed convs, dense_pack with a folded packed weight
        assert impls["nn.contrib_conv2d_NCHWc"] == "conv2d_NCHWc.x86"
        assert impls["nn.contrib_depthwise_conv2d_NCHWc"] == "depthwise_conv2d_NCHWc.x86"
        assert impls["nn.contrib_dense_pack"] == "dense_pack.x86"
        assert f'src_layout="NCHW", dst_layout="{data_layout}"' in text     # graph input boundary
        assert f'data_layout="{data_layout}", kernel_layout="{kernel_layout}", out_layout="{out_layout}"' in text
        assert text.count("layout_transform(") == 2               # in and out of the conv chain only
        assert 'src_layout="OIHW"' not in text and 'src_layout="NC"' not in text  # weights folded
        assert impls["nn.softmax"] == "softmax.x86"
        if not host_can_run(target):
            continue  # code for an ISA this CPU lacks is compiled, not run
        m = GraphModule(lib["default"](tvm.cpu()))
        m.set_input("x", x)
        m.run()
        np.testing.assert_allclose(m.get_output(0).numpy(), ref, rtol=1e-4, atol=1e-5)


def test_host_build_matches_reference():
    """The same network built for the host (whatever its ISA) runs and matches the reference."""
    rng = np.random.default_rng(0)
    mod = _net(rng)
    x = rng.standard_normal((1, 16, 13, 11)).astype("float32")
    ref = relay.create_executor("debug", mod=mod).evaluate()(x).numpy()
    m = GraphModule(_build(mod, False)["default"](tvm.cpu()))
    m.set_input("x", x)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), ref, rtol=1e-4, atol=1e-5)


def test_dense_pack_op_reference_and_type():
    from kiln.relay.op.nn import contrib_dense_pack
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 7)).astype("float32")
    w = rng.standard_normal((16, 7)).astype("float32")
    packed = w.reshape(2, 8, 7).transpose(0, 2, 1).copy()
    x = relay.var("x", shape=(3, 7))
    f = relay.Function([x], contrib_dense_pack(x, relay.const(packed), units=16, weight_layout="NC8n"))
    out = relay.create_executor("debug", mod=tvm.IRModule.from_expr(f)).evaluate()(a).numpy()
    np.testing.assert_allclose(out, a @ w.T, rtol=1e-5, atol=1e-5)
