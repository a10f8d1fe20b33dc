"""Tutorial flow: "Compile PyTorch Models" (from_pytorch).

A ResNet-style network written here (torchvision is not needed; random weights, eval mode) is traced
with torch.jit.trace, imported with relay.frontend.from_pytorch(scripted_model, [(name, shape)]),
built at opt_level=3, run with the graph executor, and compared with PyTorch (values and top-1).
"""
import numpy as np
import pytest
import torch
from torch import nn

import kiln as tvm
import kiln.testing
from kiln import relay
from kiln.contrib import graph_executor

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit.trace, as the tutorial uses


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class SmallResNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.layer1 = BasicBlock(16, 16, 1)
        self.layer2 = BasicBlock(16, 32, 2)
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


def _randomize_bn(model, seed):
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.bias.data.copy_(torch.randn(m.num_features, generator=g) * 0.1)


@pytest.mark.parametrize("input_shape", [[1, 3, 32, 32], [2, 3, 27, 33]])
def test_compile_pytorch_model(input_shape):
    torch.manual_seed(0)
    model = SmallResNet().eval()
    _randomize_bn(model, 1)
    input_data = torch.randn(input_shape)
    scripted_model = torch.jit.trace(model, input_data).eval()

    input_name = "input0"
    shape_list = [(input_name, input_shape)]
    mod, params = relay.frontend.from_pytorch(scripted_model, shape_list)
    assert "nn.conv2d" in mod.astext(show_meta_data=False)

    target = tvm.target.Target("llvm", host="llvm")
    dev = tvm.cpu(0)
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target=target, params=params)
    m = graph_executor.GraphModule(lib["default"](dev))
    img = np.random.default_rng(2).standard_normal(input_shape).astype("float32")
    m.set_input(input_name, tvm.nd.array(img))
    m.run()
    tvm_output = m.get_output(0).numpy()

    with torch.no_grad():
        torch_output = model(torch.from_numpy(img)).numpy()
    tvm.testing.assert_allclose(tvm_output, torch_output, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(tvm_output.argmax(axis=1), torch_output.argmax(axis=1))
