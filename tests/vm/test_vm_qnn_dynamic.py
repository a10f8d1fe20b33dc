"""Quantized models with an unknown batch on the VM. QNN ops canonicalize to integer Relay ops before lowering;
what reaches the VM compiler is those ops plus requantize's ``fixed_point_multiply_broadcast`` (its shape
function is the data's). The x86 int8/int16 kernels serve an unknown batch (test_vm_qnn_dynamic_kernels.py); a
kernel over unknown H/W (conv2d) takes the generic integer compute; the results are the same integers."""
import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.relay import qnn
from kiln.runtime.vm import VirtualMachine

ANY = relay.Any
RNG = np.random.default_rng(11)
W_CONV = RNG.integers(-100, 100, (6, 4, 3, 3)).astype("int8")
W_DENSE = RNG.integers(-100, 100, (5, 12)).astype("int8")


def _f(v):
    return relay.const(np.float32(v))


def _i(v):
    return relay.const(np.int32(v))


# name: (data shape with Any, dtype, body, run shapes)
OPS = {
    "quantize": ((ANY(), 12), "float32", lambda x: qnn.op.quantize(x, _f(0.05), _i(3), out_dtype="uint8"),
                 [(1, 12), (3, 12), (5, 12)]),
    "dequantize": ((ANY(), 12), "uint8", lambda x: qnn.op.dequantize(x, _f(0.05), _i(3)), [(1, 12), (4, 12)]),
    "requantize": ((ANY(), 12), "int32", lambda x: qnn.op.requantize(x, _f(0.013), _i(0), _f(0.05), _i(3),
                                                                     out_dtype="uint8"), [(1, 12), (5, 12)]),
    "dense": ((ANY(), 12), "uint8", lambda x: qnn.op.dense(x, relay.const(W_DENSE), _i(3), _i(0), _f(0.05),
                                                           _f(0.02), units=5), [(1, 12), (3, 12), (7, 12)]),
    "conv2d_batch": ((ANY(), 4, 6, 6), "uint8",
                     lambda x: qnn.op.conv2d(x, relay.const(W_CONV), _i(3), _i(0), _f(0.05), _f(0.02),
                                             kernel_size=(3, 3), channels=6, padding=(1, 1)),
                     [(1, 4, 6, 6), (3, 4, 6, 6)]),
    "conv2d_spatial": ((1, 4, ANY(), ANY()), "uint8",
                       lambda x: qnn.op.conv2d(x, relay.const(W_CONV), _i(3), _i(0), _f(0.05), _f(0.02),
                                               kernel_size=(3, 3), channels=6, padding=(1, 1)),
                       [(1, 4, 5, 7), (1, 4, 8, 3)]),
    "add": ((ANY(), 12), "uint8", lambda x: qnn.op.add(x, x, _f(0.05), _i(3), _f(0.05), _i(3), _f(0.11), _i(2)),
            [(1, 12), (3, 12)]),
    "mul": ((ANY(), 12), "uint8", lambda x: qnn.op.mul(x, x, _f(0.05), _i(3), _f(0.05), _i(3), _f(0.7), _i(2)),
            [(1, 12), (3, 12)]),
    "concatenate": ((ANY(), 12), "uint8",
                    lambda x: qnn.op.concatenate([x, x], [_f(0.05), _f(0.04)], [_i(3), _i(1)], _f(0.1), _i(2),
                                                 axis=0), [(1, 12), (3, 12)]),
    "subtract": ((ANY(), 12), "uint8",
                 lambda x: qnn.op.subtract(x, relay.const(np.arange(12, dtype="uint8")), _f(0.05), _i(3), _f(0.04),
                                           _i(1), _f(0.11), _i(120)), [(1, 12), (3, 12)]),
    "leaky_relu": ((ANY(), 12), "uint8", lambda x: qnn.op.leaky_relu(x, 0.1, _f(0.05), _i(60), _f(0.04), _i(20)),
                   [(1, 12), (3, 12)]),
    "sigmoid": ((ANY(), 12), "uint8", lambda x: qnn.op.sigmoid(x, _f(0.05), _i(60), _f(1 / 256), _i(0)),
                [(1, 12), (3, 12)]),
    "tanh": ((ANY(), 12), "uint8", lambda x: qnn.op.tanh(x, _f(0.05), _i(60), _f(1 / 128), _i(128)),
             [(1, 12), (3, 12)]),
    "hardswish": ((ANY(), 12), "uint8", lambda x: qnn.op.hardswish(x, _f(0.05), _i(60), _f(0.04), _i(20)),
                  [(1, 12), (3, 12)]),
    "avg_pool2d": ((ANY(), 4, ANY(), ANY()), "uint8",
                   lambda x: qnn.op.avg_pool2d(x, _f(0.05), _i(3), _f(0.04), _i(2), (2, 2), (2, 2), (0, 0), (1, 1)),
                   [(1, 4, 6, 6), (2, 4, 5, 7)]),
    "conv2d_transpose": ((ANY(), 4, ANY(), ANY()), "uint8",
                         lambda x: qnn.op.conv2d_transpose(x, relay.const(W_CONV.transpose(1, 0, 2, 3).copy()), _i(3),
                                                           _i(0), _f(0.05), _f(0.02), strides=(2, 2),
                                                           kernel_size=(3, 3), channels=6),
                         [(1, 4, 3, 3), (2, 4, 4, 2)]),
    "batch_matmul": ((ANY(), 3, 12), "int8",
                     lambda x: qnn.op.batch_matmul(x, x, _i(0), _i(0), _f(0.05), _f(0.05)), [(1, 3, 12), (4, 3, 12)]),
}


def _data(shape, dtype):
    if dtype == "float32":
        return (RNG.random(shape) * 12 - 2).astype(dtype)
    lo = 0 if dtype in ("uint8", "int32") else -100
    hi = 4000 if dtype == "int32" else 100
    return RNG.integers(lo, hi, shape).astype(dtype)


def _static_run(body, x):
    v = relay.var("x", shape=x.shape, dtype=str(x.dtype))
    mod = kiln.IRModule.from_expr(relay.Function([v], body(v)))
    return relay.create_executor("graph", mod=mod, device=kiln.cpu(), target="llvm").evaluate()(x).numpy()


@pytest.mark.parametrize("name", sorted(OPS))
def test_qnn_op_with_unknown_dims_on_the_vm_matches_the_static_build(name):
    shape, dtype, body, runs = OPS[name]
    x = relay.var("x", shape=shape, dtype=dtype)
    vm = VirtualMachine(relay.vm.compile(kiln.IRModule.from_expr(relay.Function([x], body(x))), "llvm"), kiln.cpu())
    for run in runs:
        xv = _data(run, dtype)
        got, want = vm.invoke("main", xv).numpy(), _static_run(body, xv)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want, err_msg=f"{name} at {run}")


# -- a QDQ ONNX model (onnxruntime.quantization) with a dynamic batch --------------------------------------------
def _qdq_model(kind: str, tmp_path):
    torch = pytest.importorskip("torch")
    quant = pytest.importorskip("onnxruntime.quantization")
    torch.manual_seed(0)
    if kind == "mlp":
        model, shape = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)), (16,)
    else:
        class CNN(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
                self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1, stride=2)
                self.fc = torch.nn.Linear(8 * 4 * 4, 10)

            def forward(self, x):
                y = torch.relu(self.c2(torch.relu(self.c1(x))))
                return self.fc(torch.flatten(y + y * 0.5, 1))
        model, shape = CNN(), (3, 8, 8)
    f32, q8 = str(tmp_path / f"{kind}.onnx"), str(tmp_path / f"{kind}_q.onnx")
    torch.onnx.export(model.eval(), torch.rand(2, *shape), f32, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=13, dynamo=False)
    rng = np.random.default_rng(5)

    class Reader(quant.CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": rng.random((2, *shape)).astype("float32")} for _ in range(8)])

        def get_next(self):
            return next(self.it, None)
    # reduce_range: 7-bit weights, so ORT's u8s8 kernels never saturate their int16 pair sums on AVX2 machines
    # (without it ORT's int8 output is several steps off its own QDQ float semantics there, not on VNNI ones)
    quant.quantize_static(f32, q8, Reader(), quant_format=quant.QuantFormat.QDQ,
                          activation_type=quant.QuantType.QUInt8, weight_type=quant.QuantType.QInt8,
                          reduce_range=True)
    return q8, shape


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_qdq_onnx_model_with_a_dynamic_batch_on_the_vm_matches_onnxruntime(kind, tmp_path):
    import onnx
    ort = pytest.importorskip("onnxruntime")
    path, shape = _qdq_model(kind, tmp_path)
    model = onnx.load(path)
    mod, params = relay.frontend.from_onnx(model, freeze_params=True)
    mod = relay.transform.InferType()(mod)
    assert str(mod["main"].params[0].checked_type).startswith("Tensor[(?, ")  # the batch is left unknown
    init = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    step = float(init[[n for n in model.graph.node if n.op_type == "QuantizeLinear"][-1].input[1]])
    integer = relay.transform.FakeQuantizationToInteger()(mod)
    text = str(integer)
    for op in (("qnn.dense",) if kind == "mlp" else ("qnn.conv2d", "qnn.dense", "qnn.add")) + ("qnn.requantize",):
        assert op + "(" in text, op
    sess = ort.InferenceSession(path)
    rng = np.random.default_rng(9)
    for label, m in (("QDQ as imported", mod), ("integer (FakeQuantizationToInteger)", integer)):
        vm = VirtualMachine(relay.vm.compile(m, "llvm", params=params), kiln.cpu())
        for b in (1, 3, 5):
            x = rng.random((b, *shape)).astype("float32")
            got, want = vm.invoke("main", x).numpy(), sess.run(None, {"x": x})[0]
            assert got.shape == want.shape
            assert np.abs(got - want).max() <= step * 1.001, f"{kind} {label} batch {b}: off by " \
                f"{np.abs(got - want).max() / step:.2f} quantization steps"
