"""torch.compile(backend="kiln") with dynamo's default (automatic dynamic) shapes: new batch sizes work."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from kiln.contrib.torch_backend import KilnCompiledGraph, kiln_backend  # noqa: E402


class _Net(torch.nn.Module):
    """Uses the batch size in the graph (x.view(x.size(0), -1)), so dynamo passes it as a SymInt."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        return torch.softmax(self.fc(y.view(y.size(0), -1)), dim=-1)


def test_default_torch_compile_three_batch_sizes():
    torch._dynamo.reset()
    torch.manual_seed(3)
    model = _Net().eval()
    graphs = []

    def backend(gm, example_inputs):
        g = kiln_backend(gm, example_inputs)
        graphs.append(g)
        return g

    compiled = torch.compile(model, backend=backend)  # default settings: automatic dynamic shapes
    with torch.no_grad():
        for batch in (2, 5, 3, 1, 5):
            x = torch.randn(batch, 3, 6, 6)
            got = compiled(x)
            np.testing.assert_allclose(got.numpy(), model(x).numpy(), rtol=1e-4, atol=1e-5)
    assert all(isinstance(g, KilnCompiledGraph) for g in graphs)
    # dynamo recompiled once with a symbolic batch (batch 1 it specializes itself); kiln built one static
    # graph per batch size the dynamic graph saw, and reused it when a size came back
    dynamic = [g for g in graphs if g.scalar_idx]
    assert len(dynamic) == 1 and sorted(k[-1] for k in dynamic[0]._builds) == [3, 5]


def test_weight_update_rebuilds_every_specialization():
    torch._dynamo.reset()
    torch.manual_seed(4)
    model = torch.nn.Sequential(torch.nn.Linear(7, 3), torch.nn.Tanh())
    compiled = torch.compile(model, backend=kiln_backend)
    with torch.no_grad():
        for batch in (3, 4, 6):
            compiled(torch.randn(batch, 7))
        model[0].weight.mul_(2.0)
        for batch in (4, 6):
            x = torch.randn(batch, 7)
            np.testing.assert_allclose(compiled(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-6)
