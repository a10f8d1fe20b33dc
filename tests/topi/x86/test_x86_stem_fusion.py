"""A stem's input packing fused into its conv (FuseOps ``relay.FuseOps.input_transform``: the NCHW input's
``layout_transform`` / ``nn.pad`` computed per row tile inside the x86 conv2d_NCHWc kernel): which graphs fuse,
numerics against PyTorch on odd shapes for both ISAs (NaN and inf included), the generated code, the switch."""
import numpy as np
import pytest
import torch

import kiln as tvm
from kiln import relay
from kiln.relay.transform import fuse_ops
from kiln.runtime.graph_executor import GraphModule
from kiln.target.codegen_c import parallel_loop_marker
from kiln.target.x86 import host_can_run

from conv_fusion_util import build, conv_kernels_with, kernel_source, run

TARGETS = ["llvm -mcpu=core-avx2", "llvm -mcpu=skylake-avx512"]


def _stem(rng, cin, cout, h, w, k=3, stride=2, pad=1, batch=1):
    x = relay.var("x", shape=(batch, cin, h, w))
    wt = (rng.standard_normal((cout, cin, k, k)) / k).astype("float32")
    y = relay.nn.relu(relay.nn.conv2d(x, relay.const(wt), strides=(stride, stride), padding=(pad, pad),
                                      channels=cout, kernel_size=(k, k)))
    mod = tvm.IRModule.from_expr(relay.Function([x], y))

    def reference(a):
        return torch.relu(torch.nn.functional.conv2d(torch.from_numpy(a), torch.from_numpy(wt), stride=stride,
                                                     padding=pad)).numpy()
    return mod, reference


def _build(mod, target="llvm", fuse=True):
    return build(mod, "relay.FuseOps.input_transform", target, fuse)


def _stem_kernels(lib) -> list:
    """The lowered kernels that pack the input and run the conv in one function."""
    return conv_kernels_with(lib, "layout_transform")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("cin,cout,h,w,k,stride,pad,batch", [
    (3, 32, 224, 224, 3, 2, 1, 1),   # mobilenet_v2's stem
    (3, 64, 61, 57, 7, 2, 3, 1),     # resnet's 7x7/2 stem on odd sizes
    (1, 24, 33, 40, 3, 1, 1, 2),     # one channel, stride 1, a batch of two
    (4, 16, 29, 31, 5, 2, 0, 1),     # four channels, no padding
])
def test_fused_stem_matches_torch(target, cin, cout, h, w, k, stride, pad, batch):
    rng = np.random.default_rng(cin * 100 + h)
    mod, reference = _stem(rng, cin, cout, h, w, k, stride, pad, batch)
    lib = _build(mod, target)
    fused = _stem_kernels(lib)
    assert len(fused) == 1 and fused[0].implementation == "conv2d_NCHWc.x86"
    assert not [c for c in lib.lowered if c.anchor_op == "layout_transform" and "nn_pad" in c.func_name]
    body = kernel_source(lib, fused[0].func_name)  # its parallel closure (if any) and its function
    # the packed rows live in a stack array inside the row-tile loop, which stays parallel (a scalar constant of
    # the fused padding once made it serial)
    assert "float T_layout_trans[" in body and "__attribute__((aligned(64)))" in body
    assert "runs serially" not in body
    if h * w >= 224 * 224:
        assert body.count(parallel_loop_marker()) == 1
    if not host_can_run(target):
        return  # code for an ISA this CPU lacks is compiled, not run
    a = rng.standard_normal((batch, cin, h, w)).astype("float32")
    np.testing.assert_allclose(run(lib, a), reference(a), rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("target", TARGETS)
def test_nan_and_inf_propagate_like_torch(target):
    rng = np.random.default_rng(1)
    mod, reference = _stem(rng, 3, 16, 45, 47)
    lib = _build(mod, target)
    assert len(_stem_kernels(lib)) == 1
    if not host_can_run(target):
        return
    a = rng.standard_normal((1, 3, 45, 47)).astype("float32")
    a[0, 0, 0, 0] = np.nan      # a corner, next to the padding
    a[0, 2, 30, 20] = np.inf
    a[0, 1, 44, 46] = -np.inf
    got, want = run(lib, a), reference(a)
    assert np.isnan(want).any() and np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4, equal_nan=True)


def test_switch_off_gives_two_kernels_and_the_same_numbers():
    rng = np.random.default_rng(2)
    mod, reference = _stem(rng, 3, 32, 67, 71)
    on, off = _build(mod, fuse=True), _build(mod, fuse=False)
    assert len(_stem_kernels(on)) == 1 and not _stem_kernels(off)
    assert len(off.lowered) == len(on.lowered) + 1
    a = rng.standard_normal((1, 3, 67, 71)).astype("float32")
    np.testing.assert_array_equal(run(on, a), run(off, a))
    np.testing.assert_allclose(run(on, a), reference(a), rtol=2e-4, atol=2e-4)


def test_what_does_not_fuse():
    rng = np.random.default_rng(4)
    # more input channels than an image has
    mod, _ = _stem(rng, fuse_ops.MAX_TRANSFORM_CHANNELS + 4, 16, 30, 30)
    assert not _stem_kernels(_build(mod))
    # the packed input also feeds another op: the packing stays a kernel of its own
    x = relay.var("x", shape=(1, 3, 30, 30))
    packed = relay.layout_transform(x, "NCHW", "NCHW3c")
    kern = rng.standard_normal((2, 1, 3, 3, 3, 16)).astype("float32")
    conv = relay.nn.contrib_conv2d_nchwc(packed, relay.const(kern), padding=(0, 0), channels=32, kernel_size=(3, 3),
                                         data_layout="NCHW3c", kernel_layout="OIHW3i16o", out_layout="NCHW16c")
    two = tvm.IRModule.from_expr(relay.Function([x], relay.Tuple([conv, relay.multiply(packed, relay.const(2.0))])))
    lib = _build(two)
    assert not _stem_kernels(lib)
    a = rng.standard_normal((1, 3, 30, 30)).astype("float32")
    m = GraphModule(lib["default"](tvm.cpu()))
    m.set_input("x", a)
    m.run()
    w = kern.transpose(0, 5, 1, 4, 2, 3).reshape(32, 3, 3, 3)  # OIHW3i16o -> OIHW
    want = torch.nn.functional.conv2d(torch.from_numpy(a), torch.from_numpy(np.ascontiguousarray(w))).numpy()
    got = m.get_output(0).numpy()  # NCHW16c
    np.testing.assert_allclose(got.transpose(0, 1, 4, 2, 3).reshape(want.shape), want, rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(m.get_output(1).numpy()[0, 0, :, :, 1], 2 * a[0, 1], rtol=1e-6)
