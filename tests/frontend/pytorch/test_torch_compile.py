"""torch.compile(model, backend="kiln") matches eager; the backend is registered by entry point."""
import pathlib

import numpy as np
import pytest

from torch_frontend_util import import_torchvision, torch

from kiln.contrib.torch_backend import kiln_backend
from kiln.error import FrontendError

REPO = pathlib.Path(__file__).resolve().parents[3]


def _backend():
    """"kiln" when the installed package exposes the entry point (pip install -e .), else the function."""
    from importlib.metadata import entry_points
    names = [ep.name for ep in entry_points(group="torch_dynamo_backends")]
    return "kiln" if "kiln" in names else kiln_backend


def test_entry_point_declared():
    import tomllib
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    target = meta["project"]["entry-points"]["torch_dynamo_backends"]["kiln"]
    mod_name, _, attr = target.partition(":")
    import importlib
    assert getattr(importlib.import_module(mod_name), attr) is kiln_backend


def test_entry_point_resolves_when_installed():
    from importlib.metadata import entry_points
    eps = [ep for ep in entry_points(group="torch_dynamo_backends") if ep.name == "kiln"]
    if not eps:
        pytest.skip("kiln is not pip-installed here, so its entry points are not visible")
    from torch._dynamo.backends.registry import lookup_backend
    assert lookup_backend("kiln") is kiln_backend


def _compile_and_compare(model, inputs_list, options=None):
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=_backend(), options=options or {"opt_level": 3}, dynamic=False)
    with torch.no_grad():
        for inputs in inputs_list:
            got = compiled(*inputs)
            want = model(*inputs)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-4)
    return compiled


def test_resnet18_matches_eager():
    tv = import_torchvision()
    torch.manual_seed(0)
    model = tv.models.resnet18().eval()
    x = torch.randn(1, 3, 64, 64)
    _compile_and_compare(model, [(x,), (x * 0.5 + 1,)])


class BertEncoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        import_torchvision()
        tf = pytest.importorskip("transformers")
        cfg = tf.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                            intermediate_size=37, max_position_embeddings=64)
        self.bert = tf.BertModel(cfg).eval()

    def forward(self, ids, mask):
        return self.bert(input_ids=ids, attention_mask=mask).last_hidden_state


def test_bert_encoder_matches_eager():
    torch.manual_seed(0)
    model = BertEncoder().eval()
    ids = torch.randint(0, 100, (2, 9))
    mask = torch.ones(2, 9, dtype=torch.int64)
    mask[1, 6:] = 0
    _compile_and_compare(model, [(ids, mask), (torch.randint(0, 100, (2, 9)), mask)])


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(5, 3)

    def forward(self, x):
        return torch.tanh(self.fc(x)) * 2


def test_weight_update_rebuilds_and_outputs_are_fresh():
    torch.manual_seed(0)
    model = Small().eval()
    x = torch.randn(4, 5)
    compiled = _compile_and_compare(model, [(x,)])
    with torch.no_grad():
        first = compiled(x)
        second = compiled(x + 1)  # the first result must not be overwritten by the second run
        np.testing.assert_allclose(first.numpy(), model(x).numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(second.numpy(), model(x + 1).numpy(), rtol=1e-5, atol=1e-5)
        model.fc.weight.mul_(-1.0)  # in-place update: the compiled graph must follow
        np.testing.assert_allclose(compiled(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-5)


def test_graph_break_handled_by_dynamo():
    torch.manual_seed(0)

    class Breaks(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(4, 4)
            self.b = torch.nn.Linear(4, 2)

        def forward(self, x):
            y = torch.relu(self.a(x))
            print("", end="")  # a graph break
            return self.b(y)

    model = Breaks().eval()
    _compile_and_compare(model, [(torch.randn(3, 4),)])


def test_unknown_option_rejected():
    gm = torch.fx.symbolic_trace(Small())
    with pytest.raises(FrontendError, match="unknown option 'opt'"):
        kiln_backend(gm, [torch.randn(2, 5)], options={"opt": 1})
