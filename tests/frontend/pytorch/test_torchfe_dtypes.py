"""Input dtypes follow the traced model (float16, float64, int8, uint8, bool), logical / bitwise ops on bools
and on other dtypes compile and load, and from_pytorch's naming options behave as in TVM v0.13."""
import os

import numpy as np
import pytest

from torch_frontend_util import Fn, relay, run_relay, torch, verify_model

nn = torch.nn
pytestmark = pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")


def _bools(*shape):
    return torch.rand(*shape) > 0.5


DTYPE_CASES = {
    "float16": (lambda a: a * 2 + 1, [torch.randn(3, 5).half()], 1e-2),
    "float64": (lambda a: torch.exp(a) + a.sum(), [torch.randn(3, 5).double()], 1e-6),
    "int8": (lambda a: a + 3, [torch.randint(-50, 50, (3, 5), dtype=torch.int8)], 0),
    "uint8": (lambda a: a * 2, [torch.randint(0, 100, (3, 7), dtype=torch.uint8)], 0),
    "bitwise_not_bool": (lambda a: ~a, [_bools(3, 5)], 0),
    "bitwise_not_int": (lambda a: ~a, [torch.randint(-9, 9, (3, 5))], 0),
    "logical_and_bool": (lambda a, b: torch.logical_and(a, b), [_bools(3, 5), _bools(3, 5)], 0),
    "logical_xor_bool": (lambda a, b: torch.logical_xor(a, b), [_bools(3, 5), _bools(5)], 0),
    "logical_xor_float": (lambda a, b: torch.logical_xor(a, b), [torch.randn(3, 5).relu(), torch.randn(3, 5)], 0),
    "logical_and_mixed": (lambda a, b: torch.logical_and(a, b), [torch.randint(0, 2, (3, 5)), torch.randn(3, 5)], 0),
    "logical_or_not": (lambda a, b: torch.logical_or(a, torch.logical_not(b)), [_bools(4), _bools(4)], 0),
}


@pytest.mark.parametrize("executor", ["debug", "graph"])
@pytest.mark.parametrize("name", sorted(DTYPE_CASES))
def test_input_dtypes_and_bool_ops(name, executor):
    f, xs, tol = DTYPE_CASES[name]
    verify_model(Fn(f), xs, executor=executor, rtol=tol or 1e-7, atol=tol or 1e-7)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float64, torch.int8, torch.uint8, torch.bool])
def test_input_infos_without_dtype_take_the_traced_dtype(dtype):
    x = (torch.rand(2, 3) * 5).to(dtype)
    traced = torch.jit.trace(Fn(lambda a: a.clone()), (x,))
    mod, _ = relay.frontend.from_pytorch(traced, [("x", (2, 3))])
    assert mod["main"].params[0].type_annotation.dtype == str(dtype).replace("torch.", "")
    mod, _ = relay.frontend.from_pytorch(traced, [("x", ((2, 3), "float32"))])  # an explicit dtype wins
    assert mod["main"].params[0].type_annotation.dtype == "float32"


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Sequential(nn.Linear(4, 3), nn.ReLU())

    def forward(self, x):
        return self.block(x) + 1


def test_use_parser_friendly_name_params_round_trip_through_the_parser():
    torch.manual_seed(0)
    model = Small().eval()
    x = torch.randn(2, 4)
    traced = torch.jit.trace(model, (x,))
    mod, params = relay.frontend.from_pytorch(traced, [("x", (2, 4))], use_parser_friendly_name=True)
    assert sorted(params) == ["block_0_bias", "block_0_weight"]
    import kiln
    reparsed = kiln.parser.parse(mod.astext())
    (out,) = run_relay(reparsed, params, [x.numpy()])
    np.testing.assert_allclose(out, model(x).detach().numpy(), rtol=1e-5, atol=1e-5)
    _, plain = relay.frontend.from_pytorch(traced, [("x", (2, 4))])
    assert sorted(plain) == ["block.0.bias", "block.0.weight"]


def test_export_renamed_c_graph_path(tmp_path):
    torch.manual_seed(0)
    model = Small().eval()
    x = torch.randn(2, 4)
    traced = torch.jit.trace(model, (x,))
    out_dir = tmp_path / "graphs"
    mod, params = relay.frontend.from_pytorch(traced, [("x", (2, 4))], export_renamed_c_graph_path=str(out_dir))
    files = os.listdir(out_dir)
    assert len(files) == 1 and files[0].startswith("tvm_exported_c_graph_") and files[0].endswith(".txt")
    text = (out_dir / files[0]).read_text()
    assert "aten::linear_0_0" in text and "aten::relu_0_0" in text and "aten::add_0_0" in text
    (got,) = run_relay(mod, params, [x.numpy()])
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-5, atol=1e-5)
