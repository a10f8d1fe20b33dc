"""Bad input to the PyTorch frontends gives one clear error: unsupported ops (all of them), missing or
inconsistent shapes, unsupported dtypes, scripted control flow; and custom_convert_map fills gaps."""
import numpy as np
import pytest

from torch_frontend_util import run_relay, torch

import kiln
from kiln import relay
from kiln.error import FrontendError, KilnError, OpNotImplemented

nn = torch.nn


class Unsupported(nn.Module):
    def forward(self, x):
        a = torch.fft.fft(x).real          # aten::fft_fft, aten::real
        b = torch.special.bessel_j0(x)     # aten::special_bessel_j0
        return torch.relu(a + b)


def _trace(model, *xs):
    return torch.jit.trace(model.eval(), xs, check_trace=False)


def test_unsupported_ops_listed_together_torchscript():
    x = torch.randn(2, 8)
    with pytest.raises(OpNotImplemented) as info:
        relay.frontend.from_pytorch(_trace(Unsupported(), x), [("x", (2, 8))])
    msg = str(info.value)
    for op in ("aten::fft_fft", "aten::real", "aten::special_bessel_j0"):
        assert op in msg
    assert "aten::relu" not in msg and "aten::add" not in msg
    assert "3 operator(s)" in msg
    assert isinstance(info.value, KilnError)


def test_unsupported_ops_listed_together_export():
    x = torch.randn(2, 8)
    ep = torch.export.export(Unsupported(), (x,))
    with pytest.raises(OpNotImplemented) as info:
        relay.frontend.from_exported_program(ep)
    msg = str(info.value)
    assert "aten::special_bessel_j0" in msg and ("aten::fft_fft" in msg or "aten::_fft" in msg)
    assert "aten::relu" not in msg


class Loopy(nn.Module):
    def forward(self, x):
        for _ in range(int(x.shape[0])):
            x = torch.special.bessel_j0(x) * 2
        if x.sum() > 0:
            x = x + 1
        return x


def test_scripted_control_flow_hint():
    """Scripted loops/ifs convert (tests/frontend/pytorch/test_pytorch_script_control.py); an op kiln lacks
    inside them is still reported by name, with a note that the control flow itself is not the problem."""
    scripted = torch.jit.script(Loopy())
    with pytest.raises(OpNotImplemented) as info:
        relay.frontend.from_pytorch(scripted, [("x", (3, 4))])
    msg = str(info.value)
    assert "aten::special_bessel_j0 (1 node)" in msg and "prim::Loop (" not in msg
    assert "which kiln converts for the VM" in msg


def test_custom_convert_map():
    def bessel(inputs, input_types):
        assert input_types[0] == "float32"
        return relay.op.multiply(inputs[0], relay.const(3.0))  # a stand-in with a known result

    class M(nn.Module):
        def forward(self, x):
            return torch.special.bessel_j0(x) + 1

    x = torch.randn(2, 5)
    mod, params = relay.frontend.from_pytorch(_trace(M(), x), [("x", (2, 5))],
                                              custom_convert_map={"aten::special_bessel_j0": bessel})
    (out,) = run_relay(mod, params, [x.numpy()])
    np.testing.assert_allclose(out, x.numpy() * 3 + 1, rtol=1e-6)


def test_missing_input_infos():
    x = torch.randn(2, 3)
    traced = _trace(nn.Linear(3, 4), x)
    with pytest.raises(FrontendError, match="needs input_infos"):
        relay.frontend.from_pytorch(traced, None)
    with pytest.raises(FrontendError, match="shape is missing"):
        relay.frontend.from_pytorch(traced, [("x", None)])
    with pytest.raises(FrontendError, match="gives 2 input"):
        relay.frontend.from_pytorch(traced, [("x", (2, 3)), ("y", (2, 3))])
    with pytest.raises(FrontendError, match=r"expected \(name, shape\)"):
        relay.frontend.from_pytorch(traced, [(2, 3)])


def test_inconsistent_input_shape():
    x = torch.randn(2, 3)
    traced = _trace(nn.Linear(3, 4), x)
    with pytest.raises(FrontendError, match="rank 3.*traced with shape"):
        relay.frontend.from_pytorch(traced, [("x", (1, 2, 3))])
    # a shape the graph cannot take fails in the node that rejects it, which the message names
    with pytest.raises(FrontendError) as info:
        relay.frontend.from_pytorch(traced, [("x", (2, 5))])
    assert "aten::linear" in str(info.value)


def test_unsupported_dtype():
    class M(nn.Module):
        def forward(self, x):
            return x * 2

    x = torch.randn(2, 3)
    traced = _trace(M(), x)
    with pytest.raises(FrontendError, match="unsupported dtype 'complex64'"):
        relay.frontend.from_pytorch(traced, [("x", ((2, 3), "complex64"))])

    class C(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("w", torch.ones(3, dtype=torch.complex64))

        def forward(self, x):
            return (x + self.w).real

    with pytest.raises(FrontendError) as info:
        relay.frontend.from_pytorch(_trace(C(), x), [("x", (2, 3))], custom_convert_map={
            "aten::real": lambda inputs, types: inputs[0]})
    msg = str(info.value)
    assert "complex" in msg and "'w'" in msg and "prim::GetAttr" in msg


def test_not_a_script_module():
    with pytest.raises(FrontendError, match="trace the model first"):
        relay.frontend.from_pytorch(nn.Linear(3, 4), [("x", (2, 3))])
    with pytest.raises(FrontendError, match="ExportedProgram"):
        relay.frontend.from_exported_program(nn.Linear(3, 4))


def test_training_mode_batch_norm():
    bn = nn.BatchNorm2d(3).train()
    traced = torch.jit.trace(bn, torch.randn(2, 3, 4, 4), check_trace=False)
    with pytest.raises(FrontendError, match="model.eval"):
        relay.frontend.from_pytorch(traced, [("x", (2, 3, 4, 4))])


def test_dynamic_export_rejected():
    m = nn.Linear(3, 4).eval()
    batch = torch.export.Dim("batch", min=2)
    ep = torch.export.export(m, (torch.randn(4, 3),), dynamic_shapes={"input": {0: batch}})
    with pytest.raises(FrontendError, match="symbolic"):
        relay.frontend.from_exported_program(ep)


def test_data_dependent_shape_named():
    """x[mask] imports with a run-time length (for the VM); a data-dependent op over such a result is refused
    naming the node and what is missing."""
    class M(nn.Module):
        def forward(self, x):
            return torch.unique(x[x > 0])

    x = torch.randn(3, 4)
    mod, _ = relay.frontend.from_pytorch(_trace(_Mask(), x), [("x", (3, 4))])
    assert "?" in mod["main"].checked_type.ret_type.astext()
    with pytest.raises(OpNotImplemented) as info:
        relay.frontend.from_pytorch(_trace(M(), x), [("x", (3, 4))])
    assert "aten::_unique2" in str(info.value) and "static shape" in str(info.value)


class _Mask(nn.Module):
    def forward(self, x):
        return x[x > 0]


def test_params_named_like_tvm():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))

        def forward(self, x):
            return self.block(x)

    x = torch.randn(1, 3, 6, 6)
    traced = _trace(M(), x)
    _, params = relay.frontend.from_pytorch(traced, [("data", (1, 3, 6, 6))])
    assert "block.0.weight" in params and "block.1.running_var" in params
    assert isinstance(params["block.0.weight"], kiln.nd.NDArray)
    _, params = relay.frontend.from_pytorch(traced, [("data", (1, 3, 6, 6))], use_parser_friendly_name=True)
    assert "block_0_weight" in params
    mod, params = relay.frontend.from_exported_program(torch.export.export(M().eval(), (x,)))
    assert "block.0.weight" in params
    assert mod["main"].params[0].name_hint == "x"
