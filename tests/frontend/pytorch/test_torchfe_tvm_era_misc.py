"""TVM-era PyTorch frontend cases (v0.13 test_forward.py, after test_forward_clamp) about the importer itself:
parameter names, span annotation, lists of tuples in traced graphs, the renamed-graph export option."""
import os

import numpy as np
import pytest

from torch_frontend_util import import_torchvision, run_relay
from torchfe_tvm_era_util import trace, torch

import kiln as tvm
from kiln import relay

pytestmark = [pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def test_tvm_era_weight_names():
    """Parameters are keyed by attribute path; their last component is the module's parameter name."""
    lin = torch.nn.Linear(3, 4)
    traced = torch.jit.trace(lin, [torch.randn(2, 3)])
    _, params = relay.frontend.from_pytorch(traced, [("input", (2, 3))])
    assert {k.split(".")[-1] for k in params} == {n for n, _ in traced.named_parameters()}


@pytest.mark.slow
def test_tvm_era_annotate_span_on_resnet18():
    """A torchvision resnet18 (random weights) imported with parser-friendly names; AnnotateSpans runs on it
    and the annotated module still computes the model."""
    tv = import_torchvision()
    torch.manual_seed(0)
    model = tv.models.resnet18().eval()
    x = torch.randn(1, 3, 64, 64)
    mod, params = relay.frontend.from_pytorch(trace(model, [x]), [("input", tuple(x.shape))],
                                              use_parser_friendly_name=True)
    assert all("." not in k for k in params)
    annotated = relay.transform.AnnotateSpans()(mod)
    assert tvm.ir.structural_equal(annotated, mod)
    (got,) = run_relay(annotated, params, [x.numpy()], "graph")
    with torch.no_grad():
        np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-4, atol=1e-4)


class ListOfTuples(torch.nn.Module):
    """Python lists of tuples inside forward; traced, they become prim::TupleConstruct / ListConstruct."""

    def forward(self, x):
        merged, masks = [], []
        for _ in range(3):
            s = torch.sigmoid(x)
            merged.append((s, s))
            masks.append(x)
        for i in range(3):
            merged[i] = merged[i][0] + merged[i][1]
        return masks[2], merged


def test_tvm_era_list_tuple():
    x = torch.rand(4, 4, 16, 32)
    model = ListOfTuples().eval()
    traced = torch.jit.trace(model, x, strict=False).eval()
    mod, params = relay.frontend.from_pytorch(traced, [("x", tuple(x.shape))])
    got = run_relay(mod, params, [x.numpy()], "graph")
    with torch.no_grad():
        mask, merged = model(x)
    want = [mask] + list(merged)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-5)


class Conv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 6, 3, bias=True)

    def forward(self, x):
        return self.conv(x)


def test_tvm_era_exporting_renamed_c_graph(tmp_path):
    """export_renamed_c_graph_path writes the TorchScript graph with outputs renamed after their operator."""
    x = torch.rand(1, 3, 10, 10)
    _, _ = relay.frontend.from_pytorch(torch.jit.trace(Conv(), [x]), [("input", (1, 3, 10, 10))],
                                       export_renamed_c_graph_path=str(tmp_path))
    (name,) = os.listdir(tmp_path)
    assert "tvm_exported_c_graph_" in name
    assert "%aten::_convolution_0" in (tmp_path / name).read_text()
