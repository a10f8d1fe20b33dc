"""A transformers BertModel exported to ONNX with dynamic (batch, seq) axes, for the VM's BERT tests."""
from __future__ import annotations

import warnings


def export_bert_encoder(model, path: str, torch):
    """Writes ``model`` (a BertModel) as an encoder ``x`` (int64 ids [b, s]) -> ``y`` (last hidden state) with
    both axes dynamic; returns the wrapped encoder module (eval mode) for reference runs."""
    class Enc(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, ids):
            return self.m(input_ids=ids).last_hidden_state
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Enc().eval(), (torch.randint(0, 100, (2, 8)),), path, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "b", 1: "s"}, "y": {0: "b", 1: "s"}},
                          opset_version=14, dynamo=False)
    return Enc().eval()
