"""The ONNX backend's artifact cache keeps specialized and unspecialized builds apart.

A specialized import converts without dyn.* ops and may drop an input whose value decides nothing (ReduceSum with
an empty ``axes`` input reduces everything); the unspecialized build keeps every input. Sharing one cache entry
made the second run load a library without the ``axes`` input."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from kiln.contrib.onnx_backend import KilnBackendRep  # noqa: E402


def _reduce_sum_model(noop: int):
    node = helper.make_node("ReduceSum", ["data", "axes"], ["out"], keepdims=1, noop_with_empty_axes=noop)
    graph = helper.make_graph(
        [node], "reduce_sum_axes_input",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, [3, 5, 2]),
         helper.make_tensor_value_info("axes", TensorProto.INT64, [0])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [3, 5, 2] if noop else [1, 1, 1])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("noop", [0, 1])
def test_specialized_then_unspecialized_share_no_artifact(tmp_path, monkeypatch, noop):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    model = _reduce_sum_model(noop)
    data = np.random.default_rng(0).standard_normal((3, 5, 2)).astype("float32")
    data[1, 2, 0] = np.nan
    axes = np.zeros((0,), "int64")
    want = data.copy() if noop else data.sum(keepdims=True)
    for specialize in (True, False, True, False):
        out = KilnBackendRep(model, specialize=specialize).run([data, axes])[0]
        np.testing.assert_allclose(out, want, rtol=1e-5)
    assert len(list((tmp_path / "onnx_backend").glob("*.so"))) == 2
