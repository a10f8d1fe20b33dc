"""Helpers for the ONNX frontend tests: build one-node models, run them with kiln and ONNX Runtime."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

import kiln
from kiln import relay
from kiln.contrib import graph_executor

NP_TO_ONNX = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "int64": TensorProto.INT64,
              "int32": TensorProto.INT32, "bool": TensorProto.BOOL, "uint8": TensorProto.UINT8,
              "int8": TensorProto.INT8, "float16": TensorProto.FLOAT16}


def make_model(nodes, inputs: dict, outputs: dict, initializers: dict | None = None, opset: int = 17,
               name: str = "g") -> onnx.ModelProto:
    """A model from nodes; ``inputs``/``outputs`` map name -> (shape, dtype); shapes may be None (unknown)."""
    vin = [helper.make_tensor_value_info(n, NP_TO_ONNX[d], s) for n, (s, d) in inputs.items()]
    vout = [helper.make_tensor_value_info(n, NP_TO_ONNX[d], s) for n, (s, d) in outputs.items()]
    inits = [onnx.numpy_helper.from_array(np.asarray(v), n) for n, v in (initializers or {}).items()]
    graph = helper.make_graph(nodes, name, vin, vout, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    if any(s is None for s, _ in outputs.values()):
        model = onnx.shape_inference.infer_shapes(model)  # fills in the output shapes the checker requires
    return model


def run_ort(model, feeds: dict) -> list:
    import onnxruntime as ort
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def build(mod, params=None):
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    return graph_executor.GraphModule(lib["default"](kiln.cpu(0)))


def run_kiln(model, feeds: dict, shape=None, freeze_params=True) -> list:
    """from_onnx + relay.build + graph executor."""
    mod, params = relay.frontend.from_onnx(model, shape=shape, freeze_params=freeze_params)
    m = build(mod, params)
    for n, v in feeds.items():
        m.set_input(n, v)
    m.run()
    return [m.get_output(k).numpy() for k in range(m.get_num_outputs())]


def run_debug(model, feeds: dict, shape=None) -> list:
    """from_onnx + the reference interpreter."""
    mod, params = relay.frontend.from_onnx(model, shape=shape)
    names = [p.name_hint for p in mod["main"].params]
    out = relay.create_executor("debug", mod=mod, device=kiln.cpu(0), target="llvm").evaluate()(
        *[feeds[n] for n in names])
    vals = list(out) if isinstance(out, (tuple, list)) else [out]
    return [v.numpy() for v in vals]


def check_against_ort(model, feeds: dict, rtol=1e-5, atol=1e-5, debug_too=True):
    """Kiln (compiled, and the interpreter) matches ONNX Runtime, dtypes and shapes included."""
    ref = run_ort(model, feeds)
    results = [run_kiln(model, feeds)]
    if debug_too:
        results.append(run_debug(model, feeds))
    for outs in results:
        assert len(outs) == len(ref)
        for o, r in zip(outs, ref):
            assert o.shape == r.shape, (o.shape, r.shape)
            assert o.dtype == r.dtype, (o.dtype, r.dtype)
            np.testing.assert_allclose(o, r, rtol=rtol, atol=atol)
    return ref
