"""Quantized ONNX models (ONNX Runtime's quantizer: QDQ and QOperator formats, dynamic quantization, and
hand-built QLinear* / *Integer nodes) through relay.frontend.from_onnx, against ONNX Runtime's int8 session."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,  # noqa: E402
                                      quantize_static)

import kiln  # noqa: E402
from kiln import relay  # noqa: E402
from kiln.contrib import graph_executor  # noqa: E402

RNG = np.random.default_rng(3)


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.c3 = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x):
        x = torch.relu(self.c1(x))
        y = torch.relu(self.c2(x))
        y = torch.relu(self.c3(y)) + y
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1))


class SmallMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(23, 40)
        self.l2 = torch.nn.Linear(40, 10)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))


def _export(model_cls, shape, path, seed=0):
    torch.manual_seed(seed)
    model = model_cls().eval()
    torch.onnx.export(model, torch.randn(*shape), str(path), input_names=["x"], output_names=["y"], opset_version=13,
                      dynamo=False)
    return str(path)


class _Reader(CalibrationDataReader):
    def __init__(self, shape, n=8):
        self.data = iter([{"x": RNG.standard_normal(shape).astype("float32")} for _ in range(n)])

    def get_next(self):
        return next(self.data, None)


def _ort(path, x):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def _kiln(path, x):
    model = onnx.load(path)
    mod, params = relay.frontend.from_onnx(model, shape={"x": x.shape})
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    m.set_input("x", x)
    m.run()
    return m.get_output(0).numpy(), mod


def _output_step(path):
    """The scale of the quantized tensor feeding the model's float output (one quantization step)."""
    model = onnx.load(path)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    prod = {o: n for n in model.graph.node for o in n.output}
    node = prod[model.graph.output[0].name]
    if node.op_type == "DequantizeLinear":
        return float(inits[node.input[1]])
    return None


# reduce_range: 7-bit weights. Without it ONNX Runtime's u8s8 kernels on AVX2 CPUs without VNNI (vpmaddubsw)
# saturate int16 pair sums and drift from the exact integer result (it warns about this itself); kiln's
# arithmetic is exact, so the comparison would measure ORT's saturation.
@pytest.mark.parametrize("fmt", ["QDQ", "QOperator"])
def test_quantize_static_cnn(tmp_path, fmt):
    f32 = _export(SmallCNN, (1, 3, 12, 12), tmp_path / "cnn.onnx")
    q = str(tmp_path / f"cnn_{fmt}.onnx")
    quantize_static(f32, q, _Reader((1, 3, 12, 12)), quant_format=getattr(QuantFormat, fmt),
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=(fmt == "QDQ"), reduce_range=True)
    ops = {n.op_type for n in onnx.load(q).graph.node}
    if fmt == "QOperator":
        assert {"QLinearConv", "QLinearAdd", "QLinearGlobalAveragePool"} <= ops, ops
    for _ in range(3):
        x = RNG.standard_normal((1, 3, 12, 12)).astype("float32")
        want = _ort(q, x)
        got, _ = _kiln(q, x)
        assert got.argmax() == want.argmax()
        step = _output_step(q)
        assert np.max(np.abs(got - want)) <= step * 1.001, (np.max(np.abs(got - want)), step)


def test_quantize_static_mlp_qoperator(tmp_path):
    f32 = _export(SmallMLP, (3, 23), tmp_path / "mlp.onnx")
    q = str(tmp_path / "mlp_q.onnx")
    quantize_static(f32, q, _Reader((3, 23)), quant_format=QuantFormat.QOperator,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, reduce_range=True)
    assert {"QLinearMatMul", "QGemm"} & {n.op_type for n in onnx.load(q).graph.node}
    x = RNG.standard_normal((3, 23)).astype("float32")
    want = _ort(q, x)
    got, _ = _kiln(q, x)
    np.testing.assert_array_equal(got.argmax(1), want.argmax(1))
    assert np.max(np.abs(got - want)) <= _output_step(q) * 1.001


@pytest.mark.parametrize("model,shape", [(SmallMLP, (4, 23)), (SmallCNN, (1, 3, 10, 10))])
def test_quantize_dynamic(tmp_path, model, shape):
    f32 = _export(model, shape, tmp_path / "m.onnx")
    q = str(tmp_path / "m_dyn.onnx")
    quantize_dynamic(f32, q, weight_type=QuantType.QUInt8 if model is SmallCNN else QuantType.QInt8, reduce_range=True)
    ops = {n.op_type for n in onnx.load(q).graph.node}
    assert "DynamicQuantizeLinear" in ops and ("MatMulInteger" in ops or "ConvInteger" in ops), ops
    x = RNG.standard_normal(shape).astype("float32")
    want = _ort(q, x)
    got, _ = _kiln(q, x)
    np.testing.assert_array_equal(got.argmax(-1), want.argmax(-1))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.max(np.abs(want)))


# -- single nodes, built with onnx.helper -------------------------------------------------------------------------
def _single(node, inputs, outputs, inits, opset=13, ms=False):
    graph = helper.make_graph([node], "g", inputs, outputs, initializer=inits)
    imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid("com.microsoft", 1)] if ms else [])
    return helper.make_model(graph, opset_imports=imports)


def _run_pair(model, feeds):
    path = "/dev/null"
    del path
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    mod, params = relay.frontend.from_onnx(model, shape={k: v.shape for k, v in feeds.items()})
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    m.set_input(**feeds)
    m.run()
    return want, [m.get_output(k).numpy() for k in range(m.get_num_outputs())]


def _init(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def test_qlinear_matmul_exact():
    a = RNG.integers(0, 256, (5, 7)).astype("uint8")
    b = RNG.integers(-64, 64, (7, 6)).astype("int8")  # 7-bit: ORT's AVX2 u8s8 kernel saturates otherwise
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])
    inits = [_init("as", np.float32(0.02)), _init("az", np.uint8(120)), _init("b", b), _init("bs", np.float32(0.01)),
             _init("bz", np.int8(0)), _init("ys", np.float32(0.07)), _init("yz", np.uint8(128))]
    model = _single(node, [helper.make_tensor_value_info("a", TensorProto.UINT8, a.shape)],
                    [helper.make_tensor_value_info("y", TensorProto.UINT8, (5, 6))], inits)
    (want,), (got,) = _run_pair(model, {"a": a})
    assert np.max(np.abs(got.astype(int) - want.astype(int))) <= 1
    assert np.mean(got == want) > 0.95


def test_conv_integer_and_matmul_integer():
    x = RNG.integers(0, 256, (1, 3, 7, 6)).astype("uint8")
    w = RNG.integers(0, 256, (4, 3, 3, 3)).astype("uint8")
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[1, 0, 1, 2], strides=[2, 1])
    model = _single(node, [helper.make_tensor_value_info("x", TensorProto.UINT8, x.shape)],
                    [helper.make_tensor_value_info("y", TensorProto.INT32, (1, 4, 4, 6))],
                    [_init("w", w), _init("xz", np.uint8(100)), _init("wz", np.uint8(130))], opset=13)
    (want,), (got,) = _run_pair(model, {"x": x})
    np.testing.assert_array_equal(got, want)
    a = RNG.integers(0, 256, (2, 3, 9)).astype("uint8")
    b = RNG.integers(-64, 64, (9, 5)).astype("int8")  # 7-bit: ORT's AVX2 u8s8 kernel saturates otherwise
    node = helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])
    model = _single(node, [helper.make_tensor_value_info("a", TensorProto.UINT8, a.shape)],
                    [helper.make_tensor_value_info("y", TensorProto.INT32, (2, 3, 5))],
                    [_init("b", b), _init("az", np.uint8(3)), _init("bz", np.array([1, 0, -2, 3, 0], "int8"))])
    (want,), (got,) = _run_pair(model, {"a": a})
    np.testing.assert_array_equal(got, want)
    exact = (a.astype(np.int64) - 3) @ (b.astype(np.int64) - np.array([1, 0, -2, 3, 0]))
    np.testing.assert_array_equal(got, exact)


def test_dynamic_quantize_linear():
    x = (RNG.standard_normal((3, 11)) * 2 + 0.5).astype("float32")
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "ys", "yz"])
    model = _single(node, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                    [helper.make_tensor_value_info("y", TensorProto.UINT8, x.shape),
                     helper.make_tensor_value_info("ys", TensorProto.FLOAT, ()),
                     helper.make_tensor_value_info("yz", TensorProto.UINT8, ())], [])
    want, got = _run_pair(model, {"x": x})
    np.testing.assert_allclose(got[1], want[1], rtol=1e-7)
    np.testing.assert_array_equal(got[2], want[2])
    assert np.max(np.abs(got[0].astype(int) - want[0].astype(int))) <= 1


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearConcat",
                                "QLinearLeakyRelu"])
def test_contrib_ops(op):
    a = RNG.integers(0, 256, (2, 3, 5)).astype("uint8")
    b = RNG.integers(0, 256, (2, 3, 5)).astype("uint8")
    qa = [_init("as", np.float32(0.03)), _init("az", np.uint8(110))]
    qb = [_init("bs", np.float32(0.05)), _init("bz", np.uint8(140))]
    qy = [_init("ys", np.float32(0.06 if op != "QLinearSigmoid" else 1 / 256)), _init("yz", np.uint8(125 if op != "QLinearSigmoid" else 0))]
    inputs = [helper.make_tensor_value_info("a", TensorProto.UINT8, a.shape)]
    feeds = {"a": a}
    attrs = {}
    if op in ("QLinearAdd", "QLinearMul"):
        names = ["a", "as", "az", "b", "bs", "bz", "ys", "yz"]
        inputs.append(helper.make_tensor_value_info("b", TensorProto.UINT8, b.shape))
        feeds["b"] = b
    elif op == "QLinearConcat":
        names = ["ys", "yz", "a", "as", "az", "b", "bs", "bz"]
        inputs.append(helper.make_tensor_value_info("b", TensorProto.UINT8, b.shape))
        feeds["b"] = b
        attrs["axis"] = 1
    else:
        names = ["a", "as", "az", "ys", "yz"]
        qb = []
        if op == "QLinearLeakyRelu":
            attrs["alpha"] = 0.1
    node = helper.make_node(op, names, ["y"], domain="com.microsoft", **attrs)
    oshape = (2, 6, 5) if op == "QLinearConcat" else a.shape
    model = _single(node, inputs, [helper.make_tensor_value_info("y", TensorProto.UINT8, oshape)], qa + qb + qy,
                    ms=True)
    (want,), (got,) = _run_pair(model, feeds)
    assert got.shape == want.shape
    assert np.max(np.abs(got.astype(int) - want.astype(int))) <= 1


@pytest.mark.parametrize("op", ["QLinearAveragePool", "QLinearSoftmax"])
def test_contrib_pool_and_softmax(op):
    a = RNG.integers(0, 256, (1, 3, 7, 6)).astype("uint8")
    if op == "QLinearAveragePool":
        attrs = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=0)
        oshape, ys, yz = (1, 3, 4, 3), 0.04, 120
    else:
        attrs = dict(axis=-1, opset=13)
        oshape, ys, yz = a.shape, 1 / 256, 0
    node = helper.make_node(op, ["a", "as", "az", "ys", "yz"], ["y"], domain="com.microsoft", **attrs)
    inits = [_init("as", np.float32(0.05)), _init("az", np.uint8(128)), _init("ys", np.float32(ys)),
             _init("yz", np.uint8(yz))]
    model = _single(node, [helper.make_tensor_value_info("a", TensorProto.UINT8, a.shape)],
                    [helper.make_tensor_value_info("y", TensorProto.UINT8, oshape)], inits, ms=True)
    (want,), (got,) = _run_pair(model, {"a": a})
    assert got.shape == want.shape
    assert np.max(np.abs(got.astype(int) - want.astype(int))) <= 1
