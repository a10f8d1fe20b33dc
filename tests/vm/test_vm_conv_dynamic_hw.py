"""Convolutions over an unknown height and width (``relay.Any()``) through ``relay.vm.compile`` run on the x86
NCHWc kernels (direct ``conv2d_NCHWc``, ``depthwise_conv2d_NCHWc``, Winograd for wide 3x3 stride-1 layers) with
symbolic output sizes: one kernel serves every size, the register row of output pixels over the run-time
width with a guarded last tile. Checked against PyTorch at sizes that do and do not divide the tiles (7x9,
13x5, outputs of 1x1 after a stride), and a small CNN end to end from ONNX with dynamic H/W."""
import os
import tempfile

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kiln
from kiln import relay
from kiln.runtime.cpu_features import host_features
from kiln.runtime.vm import VirtualMachine

ANY = relay.Any
RNG = np.random.default_rng(11)
AVX2 = "llvm -mcpu=core-avx2"
T = torch.tensor


def _w(*shape):
    return (RNG.standard_normal(shape) * 0.2).astype("float32")


# name: (channels in, weight, conv kwargs, the kernel the VM must use, run-time (H, W) sizes)
CASES = {
    "3x3": (16, _w(32, 16, 3, 3), dict(padding=(1, 1)), "conv2d_NCHWc", [(7, 9), (13, 5), (1, 1)]),
    "3x3_stride2": (16, _w(16, 16, 3, 3), dict(padding=(1, 1), strides=(2, 2)), "conv2d_NCHWc",
                    [(7, 9), (13, 5), (2, 1)]),
    "1x1_stride2": (32, _w(16, 32, 1, 1), dict(strides=(2, 2)), "conv2d_NCHWc", [(7, 9), (13, 5), (1, 2)]),
    "3x3_dilated": (16, _w(16, 16, 3, 3), dict(padding=(2, 2), dilation=(2, 2)), "conv2d_NCHWc",
                    [(7, 9), (13, 5), (3, 3)]),
    "stem_7x7_stride2": (3, _w(16, 3, 7, 7), dict(padding=(3, 3), strides=(2, 2)), "conv2d_NCHWc",
                         [(15, 9), (13, 5), (2, 2)]),
    "asym_pad": (8, _w(16, 8, 3, 3), dict(padding=(0, 1, 2, 0)), "conv2d_NCHWc", [(7, 9), (13, 5), (1, 2)]),
    "depthwise": (32, _w(32, 1, 3, 3), dict(padding=(1, 1), groups=32), "depthwise_conv2d_NCHWc",
                  [(7, 9), (13, 5), (1, 1)]),
    "depthwise_stride2": (32, _w(32, 1, 3, 3), dict(padding=(1, 1), strides=(2, 2), groups=32),
                          "depthwise_conv2d_NCHWc", [(7, 9), (13, 5), (1, 2)]),
    "winograd": (32, _w(40, 32, 3, 3), dict(padding=(1, 1)), "winograd", [(7, 9), (13, 5), (1, 1), (9, 11)]),
}


def _torch_conv(x, w, kw):
    pad = kw.get("padding", (0, 0))
    if len(pad) == 4:  # (top, left, bottom, right) -> F.pad's (left, right, top, bottom)
        x = F.pad(x, (pad[1], pad[3], pad[0], pad[2]))
        pad = (0, 0)
    return F.conv2d(x, T(w), padding=pad, stride=kw.get("strides", (1, 1)), dilation=kw.get("dilation", (1, 1)),
                    groups=kw.get("groups", 1))


def _compile(ic, w, kw, target):
    x = relay.var("x", shape=(1, ic, ANY(), ANY()))
    y = relay.nn.relu(relay.nn.conv2d(x, relay.const(w), channels=w.shape[0], kernel_size=w.shape[2:], **kw))
    with kiln.transform.PassContext(opt_level=3):
        return relay.vm.compile(kiln.IRModule.from_expr(relay.Function([x], y)), target=target)


@pytest.mark.parametrize("name", sorted(CASES))
def test_conv_unknown_hw_uses_nchwc_kernel_and_matches_torch(name):
    ic, w, kw, kernel, sizes = CASES[name]
    exe = _compile(ic, w, kw, AVX2)
    names = " ".join(exe.packed_names)
    assert kernel in names, names
    if kernel == "conv2d_NCHWc":
        assert "winograd" not in names and "depthwise" not in names
    if "avx2" not in host_features():
        return  # compiled for an ISA this host lacks: checked, not run
    vm = VirtualMachine(exe, kiln.cpu())
    for h, wd in sizes:
        a = RNG.standard_normal((1, ic, h, wd)).astype("float32")
        ref = torch.relu(_torch_conv(T(a), w, kw)).numpy()
        got = vm.run(a).numpy()
        assert got.shape == ref.shape
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_unknown_hw_compiles_for_avx512():
    exe = _compile(16, CASES["3x3"][1], CASES["3x3"][2], "llvm -mcpu=skylake-avx512")
    assert "conv2d_NCHWc" in " ".join(exe.packed_names)
    exe = _compile(32, CASES["depthwise"][1], CASES["depthwise"][2], "llvm -mcpu=skylake-avx512")
    assert "depthwise_conv2d_NCHWc" in " ".join(exe.packed_names)


class _SmallCNN(torch.nn.Module):
    """resnet / mobilenet pieces: a strided stem with BN, max pool, a residual block, an inverted residual
    (1x1 expand, depthwise, 1x1 project), a strided downsample block, global pool, classifier."""

    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.res = nn.Sequential(nn.Conv2d(32, 32, 3, 1, 1), nn.BatchNorm2d(32), nn.ReLU(), nn.Conv2d(32, 32, 3, 1, 1))
        self.inv = nn.Sequential(nn.Conv2d(32, 64, 1), nn.ReLU6(), nn.Conv2d(64, 64, 3, 1, 1, groups=64),
                                 nn.ReLU6(), nn.Conv2d(64, 32, 1))
        self.down = nn.Conv2d(32, 48, 3, 2, 1)
        self.skip = nn.Conv2d(32, 48, 1, 2)
        self.fc = nn.Linear(48, 10)

    def forward(self, x):
        x = self.pool(self.stem(x))
        x = torch.relu(x + self.res(x))
        x = x + self.inv(x)
        x = torch.relu(self.down(x) + self.skip(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def test_small_cnn_dynamic_hw_from_onnx_matches_torch():
    onnx = pytest.importorskip("onnx")
    torch.manual_seed(0)
    model = _SmallCNN().eval()
    with torch.no_grad():  # non-trivial batch-norm statistics
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
    path = os.path.join(tempfile.mkdtemp(), "cnn.onnx")
    torch.onnx.export(model, torch.randn(1, 3, 32, 32), path, input_names=["x"],
                      dynamic_axes={"x": {2: "h", 3: "w"}}, dynamo=False)
    mod, params = relay.frontend.from_onnx(onnx.load(path))
    with kiln.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, target=AVX2, params=params)
    names = " ".join(exe.packed_names)
    assert "conv2d_NCHWc" in names and "depthwise_conv2d_NCHWc" in names, names
    if "avx2" not in host_features():
        return
    vm = VirtualMachine(exe, kiln.cpu())
    for h, w in [(32, 32), (21, 13), (9, 17)]:
        x = torch.randn(1, 3, h, w)
        with torch.no_grad():
            ref = model(x).numpy()
        np.testing.assert_allclose(vm.run(x.numpy()).numpy(), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name,shape,sizes", [
    ("winograd", (ANY(), 32, ANY(), ANY()), [(2, 7, 9), (3, 5, 13)]),
    ("winograd", (ANY(), 32, ANY(), 10), [(2, 7, 10), (1, 3, 10)]),
    ("3x3", (1, 16, 9, ANY()), [(1, 9, 5), (1, 9, 17)]),
    ("depthwise", (ANY(), 32, ANY(), ANY()), [(2, 7, 9), (1, 5, 13)]),
])
def test_unknown_batch_and_some_spatial_dims(name, shape, sizes):
    ic, w, kw, kernel, _ = CASES[name]
    x = relay.var("x", shape=shape)
    y = relay.nn.relu(relay.nn.conv2d(x, relay.const(w), channels=w.shape[0], kernel_size=w.shape[2:], **kw))
    with kiln.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(kiln.IRModule.from_expr(relay.Function([x], y)), target=AVX2)
    assert kernel in " ".join(exe.packed_names)
    if "avx2" not in host_features():
        return
    vm = VirtualMachine(exe, kiln.cpu())
    for n, h, wd in sizes:
        a = RNG.standard_normal((n, ic, h, wd)).astype("float32")
        ref = torch.relu(_torch_conv(T(a), w, kw)).numpy()
        np.testing.assert_allclose(vm.run(a).numpy(), ref, rtol=1e-4, atol=1e-4)
