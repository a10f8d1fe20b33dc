"""FakeQuantizationToInteger: QDQ regions become integer QNN ops and compute what the float graph computes
(within one quantization step: the float region rounds once, the integer one at each requantize)."""
import numpy as np

import kiln
from kiln import relay
from kiln.contrib import graph_executor
from kiln.relay import qnn

RNG = np.random.default_rng(11)


def _ops(mod):
    names = set()

    def visit(e):
        if isinstance(e, relay.Call) and hasattr(e.op, "name"):
            names.add(e.op.name)
    relay.analysis.post_order_visit(mod["main"], visit)
    return names


def _run(mod, **inputs):
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm")
    m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    m.set_input(**inputs)
    m.run()
    return m.get_output(0).numpy()


def _qdq_block():
    x = relay.var("x", shape=(1, 4, 9, 9), dtype="uint8")
    w = relay.const(RNG.integers(-60, 60, (8, 4, 3, 3)).astype("int8"))
    b = relay.const(RNG.integers(-500, 500, (8,)).astype("int32"))
    w_scale = RNG.uniform(0.005, 0.02, 8).astype("float32")
    xf = qnn.op.dequantize(x, 0.05, 120)
    wf = qnn.op.dequantize(w, w_scale, 0, axis=0)
    bf = qnn.op.dequantize(b, np.float32(0.05) * w_scale, 0, axis=0)
    y = relay.nn.bias_add(relay.nn.conv2d(xf, wf, padding=(1, 1), channels=8, kernel_size=(3, 3)), bf)
    y = relay.nn.max_pool2d(relay.nn.relu(y), pool_size=(2, 2), strides=(2, 2))
    q = qnn.op.quantize(y, 0.08, 3, out_dtype="uint8")
    # a second region: a residual add of two quantized tensors; a third: global pooling
    qf = qnn.op.dequantize(q, 0.08, 3)
    s = qnn.op.quantize(relay.add(qf, qf), 0.16, 3, out_dtype="uint8")
    z = relay.nn.global_avg_pool2d(qnn.op.dequantize(s, 0.16, 3))
    out = qnn.op.dequantize(qnn.op.quantize(z, 0.16, 3, out_dtype="uint8"), 0.16, 3)
    return kiln.IRModule.from_expr(relay.Function([x], out))


def test_fq2i_rewrites_the_float_regions():
    mod = relay.transform.InferType()(_qdq_block())
    new = relay.transform.FakeQuantizationToInteger()(mod)
    ops = _ops(new)
    assert {"qnn.conv2d", "qnn.requantize", "qnn.add", "qnn.avg_pool2d"} <= ops, ops
    assert not {"nn.conv2d", "add", "nn.global_avg_pool2d"} & ops, ops
    x = RNG.integers(0, 256, (1, 4, 9, 9)).astype("uint8")
    want = _run(mod, x=x)
    got = _run(new, x=x)
    assert np.max(np.abs(got - want)) <= 0.16 * 1.001 + 1e-6


def test_fq2i_leaves_unconvertible_regions():
    x = relay.var("x", shape=(3, 5), dtype="int8")
    y = relay.exp(qnn.op.dequantize(x, 0.1, 0))  # no integer rule for exp
    mod = relay.transform.InferType()(kiln.IRModule.from_expr(relay.Function([x], qnn.op.quantize(y, 0.2, 0))))
    new = relay.transform.FakeQuantizationToInteger()(mod)
    assert kiln.ir.structural_equal(new["main"], mod["main"])
    import pytest
    from kiln.error import KilnError
    with pytest.raises(KilnError, match="integer rule"):
        relay.transform.FakeQuantizationToInteger(hard_fail=True)(mod)


def test_fq2i_on_ort_qdq_model(tmp_path):
    import pytest
    pytest.importorskip("onnxruntime")
    import onnx
    import test_qnn_onnx as T
    f32 = T._export(T.SmallCNN, (1, 3, 12, 12), tmp_path / "cnn.onnx", seed=4)
    q = str(tmp_path / "cnn_qdq.onnx")
    T.quantize_static(f32, q, T._Reader((1, 3, 12, 12)), quant_format=T.QuantFormat.QDQ,
                      activation_type=T.QuantType.QUInt8, weight_type=T.QuantType.QInt8, per_channel=True,
                      reduce_range=True)
    x = RNG.standard_normal((1, 3, 12, 12)).astype("float32")
    mod, _ = relay.frontend.from_onnx(onnx.load(q), shape={"x": x.shape}, freeze_params=True)
    mod = relay.transform.InferType()(mod)
    new = relay.transform.FakeQuantizationToInteger()(mod)
    assert "qnn.conv2d" in _ops(new)
    got = _run(new, x=x)
    want = T._ort(q, x)
    assert got.argmax() == want.argmax()
    assert np.max(np.abs(got - want)) <= 2 * T._output_step(q)
