"""TVM-era PyTorch frontend cases test_control_flow and test_simple_rnn (v0.13 test_forward.py): scripted models
with data-dependent ifs, counted and while loops, and a traced cell called from a scripted loop; imported with
from_pytorch, run on the VM, compared with PyTorch."""
import pytest
import torch

from torchfe_tvm_era_util import check_script

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


class IfOnSum(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(10, 20))

    def forward(self, x):
        if x.sum() > 0.0:
            out = self.weight + x
        else:
            out = self.weight - x
        return out


class NestedIfs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(10, 20))

    def forward(self, x):
        if x.sum() > 0.0:
            if x.mean() > 0.0:
                out = self.weight + x
            else:
                out = self.weight - x
        else:
            if x.mean() >= 0.0:
                out = self.weight * x
            else:
                out = self.weight / x
        return out


class CountingLoop(torch.nn.Module):
    def forward(self, x):
        a = 0
        for i in range(x.size(0)):
            b = i * i + 1
            a += b
        if a != 0:
            a += 1
        else:
            a += 2
        return a


class TensorLoop(torch.nn.Module):
    def forward(self, x):
        a = x
        for _ in range(x.size(0)):
            a += a + a * 2.0
        return a


class LoopWithBranch(torch.nn.Module):
    def forward(self, x):
        a = x
        for _ in range(x.size(0)):
            b = a + a * 2.0
            if b.sum() > 0.0:
                a += b
            else:
                a -= b
        return a


class LoopInLoop(torch.nn.Module):
    def forward(self, x):
        a = x
        for i in range(x.size(0)):
            b = a * float(i)
            for j in range(x.size(1)):
                a += b * float(j)
        return a


class ScalarWhile(torch.nn.Module):
    def forward(self, x):
        a = 1
        i = 0
        while i <= x.size(0):
            a += i
            i += 2
        i = 0
        while i < 10:
            a += i
            i += 3
        return a


class TensorWhile(torch.nn.Module):
    def forward(self, x):
        a = x
        i = 0
        while i < x.size(0):
            a += a * float(i) * 2.0
            i += 1
        return a


@pytest.mark.parametrize("model", [IfOnSum, NestedIfs, CountingLoop, TensorLoop, LoopWithBranch, LoopInLoop,
                                   ScalarWhile, TensorWhile], ids=lambda m: m.__name__)
def test_tvm_era_control_flow(model):
    # values that grow over the loops: a relative tolerance
    check_script(model(), [(10, 20)], rtol=1e-4, atol=1e-4)


class Gate(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x
        return -x


class Cell(torch.nn.Module):
    def __init__(self, gate):
        super().__init__()
        self.gate = gate
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x, h):
        new_h = torch.tanh(self.gate(self.linear(x)) + h)
        return new_h, new_h


class RNNLoop(torch.nn.Module):
    """A traced cell (whose traced gate froze one branch) called by a scripted loop: PyTorch's
    mixing-tracing-and-scripting example."""

    def __init__(self):
        super().__init__()
        self.cell = torch.jit.trace(Cell(Gate()), (torch.rand(10, 4), torch.rand(10, 4)), check_trace=False)

    def forward(self, xs):
        h = torch.zeros(10, 4)
        y = torch.zeros(10, 4)
        for i in range(xs.size(0)):
            y, h = self.cell(xs[i], h)
        return y


@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")
def test_tvm_era_simple_rnn():
    torch.manual_seed(0)
    check_script(RNNLoop(), [(10, 10, 4)], rtol=1e-5, atol=1e-5)
