"""Siblings of the ONNX Gather clamp (issue 15, defect 10): GatherElements, GatherND and PyTorch's
embedding / index_select / gather / indexing with a run-time index out of range. ONNX Runtime and PyTorch
raise; kiln clamped (take's default "clip" mode) or wrapped silently. They now fail the run with a clear
error through take(mode="raise")'s in-kernel check; in-range and negative indices match the reference."""
import numpy as np
import onnx  # noqa: F401
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper

import kiln
from kiln import relay
from kiln.contrib import graph_executor
from kiln.error import KilnError

RNG = np.random.default_rng(7)
X = RNG.standard_normal((5, 3)).astype("float32")


def _build(mod, params):
    lib = relay.build(mod, target="llvm", params=params)
    return graph_executor.GraphModule(lib["default"](kiln.cpu()))


def _run(m, **inputs):
    for k, v in inputs.items():
        m.set_input(k, v)
    m.run()
    return m.get_output(0).numpy()


def _onnx(op, ishape, oshape, **attrs):
    g = helper.make_graph([helper.make_node(op, ["x", "i"], ["y"], **attrs)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 3]),
                           helper.make_tensor_value_info("i", TensorProto.INT64, ishape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, oshape)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    return model, _build(*relay.frontend.from_onnx(model))


CASES = {
    "GatherElements": (dict(axis=0), [2, 3], [2, 3], np.array([[0, 4, -1], [-5, 2, 3]]), np.array([[0, 5, 1], [1, 1, 1]])),
    "GatherND": ({}, [3, 2], [3], np.array([[0, 2], [-1, -3], [4, 1]]), np.array([[0, 2], [1, 3], [0, 0]])),
}


@pytest.mark.parametrize("op", sorted(CASES))
def test_onnx_siblings_match_onnxruntime_and_raise_out_of_range(op):
    attrs, ishape, oshape, good, bad = CASES[op]
    model, m = _onnx(op, ishape, oshape, **attrs)
    sess = ort.InferenceSession(model.SerializeToString())
    ref = sess.run(None, {"x": X, "i": good})[0]
    np.testing.assert_array_equal(_run(m, x=X, i=good), ref)
    with pytest.raises(Exception):   # the reference runtime refuses the bad index
        sess.run(None, {"x": X, "i": bad})
    with pytest.raises(KilnError, match=r"out of range for an axis of size [35]"):
        _run(m, x=X, i=bad)
    # a negative index past the axis is refused too (wrapping would read a valid-looking element)
    neg = good.copy()
    neg.flat[0] = -6
    with pytest.raises(KilnError, match="out of range"):
        _run(m, x=X, i=neg)


class _Emb(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)

    def forward(self, ids):
        return self.emb(ids)


class _Sel(torch.nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def forward(self, x, i):
        if self.kind == "index_select":
            return torch.index_select(x, 0, i)
        if self.kind == "gather":
            return torch.gather(x, 0, i.reshape(-1, 1).expand(-1, 3))
        return x[i]


def _torch_module(model, *example):
    scripted = torch.jit.trace(model.eval(), example)
    shapes = [(f"input{k}", (tuple(e.shape), str(e.dtype).replace("torch.", ""))) for k, e in enumerate(example)]
    mod, params = relay.frontend.from_pytorch(scripted, shapes)
    return _build(mod, params), [n for n, _ in shapes]


def test_embedding_out_of_range_token_id_raises():
    model = _Emb()
    ids = torch.tensor([[1, 9, 0]])
    m, names = _torch_module(model, ids)
    with torch.no_grad():
        ref = model(ids).numpy()
    np.testing.assert_allclose(_run(m, **{names[0]: ids.numpy()}), ref, rtol=1e-6)
    with pytest.raises(IndexError):
        model(torch.tensor([[1, 10, 0]]))
    with pytest.raises(KilnError, match=r"out of range for an axis of size 10"):
        _run(m, **{names[0]: np.array([[1, 10, 0]], "int64")})


@pytest.mark.parametrize("kind", ["index_select", "gather", "index"])
def test_torch_indexing_out_of_range_raises(kind):
    model = _Sel(kind)
    x = torch.from_numpy(X)
    i = torch.tensor([4, 0, 2])
    m, names = _torch_module(model, x, i)
    np.testing.assert_array_equal(_run(m, **{names[0]: X, names[1]: i.numpy()}), model(x, i).numpy())
    with pytest.raises((IndexError, RuntimeError)):
        model(x, torch.tensor([4, 5, 2]))
    with pytest.raises(KilnError, match=r"out of range for an axis of size 5"):
        _run(m, **{names[0]: X, names[1]: np.array([4, 5, 2], "int64")})
