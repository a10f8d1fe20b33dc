"""ONNX models exported with dynamic axes: from_onnx keeps the axis as relay.Any(); the VM runs any batch."""
import io

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

import kiln as tvm  # noqa: E402
from kiln import relay  # noqa: E402
from kiln.error import FrontendError  # noqa: E402
from kiln.runtime.vm import VirtualMachine  # noqa: E402


class _CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8 * 5 * 5, 7)

    def forward(self, x):
        y = torch.nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
        return self.fc(torch.flatten(y, 1))


def _export(model, example) -> bytes:
    torch.manual_seed(0)
    f = io.BytesIO()
    torch.onnx.export(model.eval(), example, f, input_names=["input"], output_names=["out"],
                      dynamic_axes={"input": {0: "batch"}, "out": {0: "batch"}}, opset_version=13, dynamo=False)
    return f.getvalue()


def _mlp():
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(13, 32), torch.nn.ReLU(), torch.nn.Linear(32, 5),
                               torch.nn.Softmax(-1))


def _cnn():
    torch.manual_seed(2)
    m = _CNN()
    with torch.no_grad():  # non-trivial batch-norm statistics
        m.bn.running_mean.uniform_(-1, 1)
        m.bn.running_var.uniform_(0.5, 2)
    return m


@pytest.mark.parametrize("make, feat", [(_mlp, (13,)), (_cnn, (3, 10, 10))], ids=["mlp", "cnn"])
def test_dynamic_batch_vs_onnxruntime(make, feat):
    data = _export(make(), torch.randn(2, *feat))
    mod, params = relay.frontend.from_onnx(onnx.load_from_string(data), freeze_params=True)
    assert mod["main"].params[0].type_annotation.astext() == "Tensor[(?, %s), float32]" % ", ".join(map(str, feat))
    exe = relay.vm.compile(mod, "llvm", params=params)
    vm = VirtualMachine(exe, tvm.cpu())
    sess = ort.InferenceSession(data)
    rng = np.random.default_rng(5)
    for batch in (1, 3, 8):
        x = rng.standard_normal((batch,) + feat).astype("float32")
        got = vm.run(x).numpy()
        want = sess.run(None, {"input": x})[0]
        assert got.shape == want.shape == (batch, want.shape[1])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_partial_shape_pins_some_axes():
    data = _export(_mlp(), torch.randn(2, 13))
    model = onnx.load_from_string(data)
    mod, _ = relay.frontend.from_onnx(model, shape={"input": (None, 13)})
    assert mod["main"].params[0].type_annotation.astext() == "Tensor[(?, 13), float32]"
    mod, _ = relay.frontend.from_onnx(model, shape={"input": (4, 13)})
    assert mod["main"].params[0].type_annotation.astext() == "Tensor[(4, 13), float32]"
    with pytest.raises(FrontendError, match="not an int"):
        relay.frontend.from_onnx(model, shape={"input": (1.5, 13)})


def test_dynamic_spatial_size_with_same_padding_is_a_clear_error():
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.ones((2, 1, 3, 3), "float32"), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", auto_pad="SAME_UPPER")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, "h", 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, "h", 5])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(tvm.KilnError, match="'conv'.*auto_pad=SAME_UPPER over a dynamic spatial size"):
        relay.frontend.from_onnx(model)
