"""A BERT encoder exported with dynamic (batch, seq) runs on one VM build at alternating sizes: results match
ONNX Runtime, PyTorch and the static graph-executor build; the per-signature plans compute the position ids
and attention-mask broadcasts once per size and run the rest as one native call."""
from __future__ import annotations

import os
import sys
import types

import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.runtime.vm import VirtualMachine
from benchmarks.dynamic import export_bert_encoder

pytestmark = pytest.mark.slow


def _bert(tmp_path):
    torch = pytest.importorskip("torch")
    # torchvision (imported by transformers) is a CUDA build here whose meta registrations fail on CPU torch
    sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=128, max_position_embeddings=64)
    model = transformers.BertModel(cfg).eval()

    path = os.path.join(str(tmp_path), "bert.onnx")
    return path, export_bert_encoder(model, path, torch), torch


def test_bert_dynamic_sizes_match_ort_torch_and_static(tmp_path):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    path, enc, torch = _bert(tmp_path)
    mod, params = relay.frontend.from_onnx(onnx.load(path))
    with kiln.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, target="llvm", params=params)
    vm = VirtualMachine(exe, kiln.cpu())
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    sizes = [(1, 5), (2, 7), (1, 5), (3, 1), (2, 7), (1, 5)]
    kept = []
    for b, s in sizes:
        ids = rng.integers(0, 100, (b, s)).astype("int64")
        out = vm.run(ids)
        kept.append((ids, out))
    for ids, out in kept:  # results kept across calls at other sizes are not overwritten
        np.testing.assert_allclose(out.numpy(), sess.run(None, {"x": ids})[0], rtol=1e-4, atol=2e-5)
        with torch.no_grad():
            ref = enc(torch.from_numpy(ids)).numpy()
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=2e-5)
    runner = vm._replay[exe.func_index["main"]]
    plan = runner.plans[(((2, 7), "int64"),)]
    assert plan.precomputed > 0 and plan.skipped_shape_funcs > 0
    assert all(st[0] != "shape_func" for st in plan.steps)
    # the static build at one of the sizes
    from kiln.contrib import graph_executor
    ids = kept[1][0]
    smod, sparams = relay.frontend.from_onnx(onnx.load(path), shape={"x": ids.shape})
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(smod, "llvm", params=sparams)
    g = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    g.set_input("x", ids)
    g.run()
    np.testing.assert_allclose(vm.run(ids).numpy(), g.get_output(0).numpy(), rtol=1e-5, atol=2e-6)
