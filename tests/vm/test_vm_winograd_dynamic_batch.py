"""A conv that Winograd serves when its batch is static (3x3, stride 1, >= 32 channels, >= 7x7 output) is
served by Winograd for the VM with an unknown batch too: its tiles run over batch x tile rows x tile columns,
a symbolic count padded to whole GEMM blocks (the extra tiles are zeros, so the reduction has no guard); results match numpy and the static build at several
batches (tile counts that are and are not multiples of the GEMM's tile block)."""
import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.runtime.cpu_features import host_features
from kiln.runtime.vm import VirtualMachine
from kiln.topi.testing import conv2d_nchw_python

rng = np.random.default_rng(3)


def _mod(batch):
    x = relay.var("x", shape=(batch, 32, 9, 11))
    w = relay.const(rng.standard_normal((40, 32, 3, 3)).astype("float32") * 0.1)
    y = relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1), channels=40, kernel_size=(3, 3)))
    return kiln.IRModule.from_expr(relay.Function([x], y)), w.data.numpy()


TARGETS = ["llvm -mcpu=core-avx2", "llvm -mcpu=skylake-avx512"]


@pytest.mark.parametrize("target", TARGETS)
def test_unknown_batch_takes_winograd_and_matches_numpy_and_the_static_build(target):
    mod, w = _mod(relay.Any())
    with kiln.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, target=target)
    assert "winograd" in exe.lib.get_source()
    if ("avx512f" if "avx512" in target else "avx2") not in host_features():
        return  # compiled for an ISA this host lacks: checked, not run
    from kiln.contrib import graph_executor
    vm = VirtualMachine(exe, kiln.cpu())
    for n in (1, 3, 2, 3):
        a = rng.standard_normal((n, 32, 9, 11)).astype("float32")
        ref = np.maximum(conv2d_nchw_python(a, w, 1, 1), 0)
        got = vm.run(a).numpy()
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
        if n != 3:
            continue
        static, _ = _mod(n)
        static = kiln.IRModule.from_expr(relay.Function(static["main"].params, relay.nn.relu(relay.nn.conv2d(
            static["main"].params[0], relay.const(w), padding=(1, 1), channels=40, kernel_size=(3, 3)))))
        with kiln.transform.PassContext(opt_level=3):
            lib = relay.build(static, target=target)
        g = graph_executor.GraphModule(lib["default"](kiln.cpu()))
        g.set_input(0, a)
        g.run()
        np.testing.assert_allclose(got, g.get_output(0).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_static_batch_keeps_winograd(target):
    mod, _ = _mod(2)
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target=target)
    assert "winograd" in lib.get_lib().get_source()
