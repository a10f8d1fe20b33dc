"""Benchmark workloads: (name -> factory returning a torch module, example inputs, a description).

Models take random weights (nothing is downloaded). torchvision and transformers are imported only when their
models are asked for; a missing package makes that model "n/a" with the reason.
"""
from __future__ import annotations

import sys
import types


def _mlp(batch):
    def make():
        import torch
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                    torch.nn.ReLU(), torch.nn.Linear(512, 10))
        return model.eval(), (torch.randn(batch, 784),)
    return make


def _stub_torchvision_meta():
    """torchvision 0.28 is a CUDA build; its meta registrations fail on the CPU torch wheel. transformers
    imports torchvision too, so every factory that imports either sets this up first."""
    sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))


def _torchvision(name):
    def make():
        import torch
        _stub_torchvision_meta()
        import torchvision
        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(weights=None)
        return model.eval(), (torch.randn(1, 3, 224, 224),)
    return make


class _Tensors:
    """Wrap a transformers model so it returns a plain tensor (traceable, comparable)."""

    @staticmethod
    def wrap(model, key):
        import torch

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, ids):
                # GPT-2 gets an explicit all-ones attention mask: without one, transformers checks position ids
                # for packed sequences with aten::diff, which torch.onnx cannot export (same math either way).
                out = self.model(ids, attention_mask=torch.ones_like(ids), use_cache=False) if key == "logits" \
                    else self.model(ids)
                return out[key] if isinstance(out, dict) or hasattr(out, "keys") else out[0]
        return Wrapped().eval()


def _bert():
    import torch
    _stub_torchvision_meta()
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    model = BertModel(BertConfig()).eval()
    return _Tensors.wrap(model, "last_hidden_state"), (torch.randint(0, 30000, (1, 128)),)


def _gpt2():
    import torch
    _stub_torchvision_meta()
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).eval()
    return _Tensors.wrap(model, "logits"), (torch.randint(0, 50000, (1, 128)),)


def _matmul():
    import torch

    class MatMul(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(1024, 1024))

        def forward(self, x):
            return torch.matmul(x, self.w)
    torch.manual_seed(0)
    return MatMul().eval(), (torch.randn(1024, 1024),)


def _conv(groups):
    def make():
        import torch
        torch.manual_seed(0)
        return torch.nn.Conv2d(64, 64, 3, padding=1, groups=groups, bias=False).eval(), (torch.randn(1, 64, 56, 56),)
    return make


MODELS = {
    "mlp_b1": ("MLP 784-512-512-10, batch 1", _mlp(1)),
    "mlp_b64": ("MLP 784-512-512-10, batch 64", _mlp(64)),
    "resnet18": ("torchvision resnet18, 224x224", _torchvision("resnet18")),
    "resnet50": ("torchvision resnet50, 224x224", _torchvision("resnet50")),
    "mobilenet_v2": ("torchvision mobilenet_v2, 224x224", _torchvision("mobilenet_v2")),
    "bert": ("BERT-base encoder, seq 128", _bert),
    "gpt2": ("GPT-2 small, 128 tokens", _gpt2),
    "matmul1024": ("fp32 matmul 1024^3", _matmul),
    "conv3x3": ("conv2d 3x3, 64->64, 56x56", _conv(1)),
    "dwconv3x3": ("depthwise conv2d 3x3, 64 ch, 56x56", _conv(64)),
}
