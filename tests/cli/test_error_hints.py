"""Error messages that point to the right fix: TorchScript hints, converters, xgboost, bf16 / float16."""
from __future__ import annotations

import sys

import pytest

from kiln.cli import main


@pytest.fixture(scope="module")
def torch_models(tmp_path_factory):
    torch = pytest.importorskip("torch")
    d = tmp_path_factory.mktemp("hint_models")

    class Lin(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(5, 3)

        def forward(self, x):
            return torch.relu(self.fc(x))

    class Odd(torch.nn.Module):
        def forward(self, x):
            return torch.special.i0e(x)

    torch.manual_seed(0)
    torch.jit.save(torch.jit.trace(Odd(), torch.rand(2, 5)), str(d / "odd.pt"))
    torch.jit.save(torch.jit.trace(Lin().half(), torch.rand(2, 5).half()), str(d / "f16.pt"))
    torch.jit.save(torch.jit.trace(Lin().to(torch.bfloat16), torch.rand(2, 5).to(torch.bfloat16)), str(d / "bf16.pt"))
    return d


def _err(capsys, argv, code=1) -> str:
    assert main(argv) == code
    return capsys.readouterr().err


def test_a_saved_trace_is_not_told_to_use_trace(capsys, torch_models):
    err = _err(capsys, ["compile", str(torch_models / "odd.pt"), "--input-shapes", "x:2x5"])
    assert "aten::special_i0e" in err
    assert "use torch.jit.trace" not in err               # it was traced: the hint would be wrong
    assert "pass custom_convert_map=" not in err          # the command cannot take one ...
    assert "relay.frontend.from_pytorch(" in err and "kiln compile model.txt" in err   # ... so say where it goes


def test_frontend_keeps_the_converter_hint_for_python_users(torch_models):
    torch = pytest.importorskip("torch")
    from kiln import relay
    from kiln.error import OpNotImplemented
    with pytest.raises(OpNotImplemented) as info:
        relay.frontend.from_pytorch(torch.jit.load(str(torch_models / "odd.pt")), [("x", ((2, 5), "float32"))])
    text = str(info.value)
    assert "hint: pass custom_convert_map=" in text and "torch.jit.trace" not in text


def test_xgboost_hint_names_kilns_extra(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "xgboost", None)     # import xgboost -> ImportError
    from kiln.cli.cmd_tune import make_tuner
    from kiln.cli.common import CLIError
    with pytest.raises(CLIError) as info:
        make_tuner("xgb", task=None)
    assert 'pip install "kiln-compiler[autotvm]"' in str(info.value)
    from kiln.autotvm.tuner import xgboost_cost_model
    monkeypatch.setattr(xgboost_cost_model, "xgb", None)
    with pytest.raises(ImportError, match=r'kiln-compiler\[autotvm\]'):
        xgboost_cost_model._import_xgboost()


def test_bfloat16_input_is_refused_with_the_fix(capsys, torch_models):
    err = _err(capsys, ["compile", str(torch_models / "bf16.pt"), "--input-shapes", "x:2x5:bfloat16"])
    assert "bfloat16" in err and "--input-shapes x:2x5:float32" in err


def test_bfloat16_model_runs_in_float32(torch_models, tmp_path, capsys):
    assert main(["-q", "compile", str(torch_models / "bf16.pt"), "--input-shapes", "x:2x5",
                 "-o", str(tmp_path / "bf16.so")]) == 0
    assert main(["-q", "run", str(tmp_path / "bf16.so")]) == 0
    assert "output 0: shape [2, 3] float32" in capsys.readouterr().out


def test_float16_model_works_and_mismatch_names_the_dtype(torch_models, tmp_path, capsys):
    torch = pytest.importorskip("torch")
    import numpy as np
    err = _err(capsys, ["compile", str(torch_models / "f16.pt"), "--input-shapes", "x:2x5:float32"])
    assert "weights are float16" in err and "--input-shapes x:2x5:float16" in err
    assert main(["-q", "compile", str(torch_models / "f16.pt"), "--input-shapes", "x:2x5",
                 "-o", str(tmp_path / "f16.so")]) == 0
    x = np.random.default_rng(0).random((2, 5)).astype("float16") - np.float16(0.5)
    np.save(tmp_path / "x.npy", x)
    assert main(["-q", "run", str(tmp_path / "f16.so"), "-i", str(tmp_path / "x.npy"),
                 "-o", str(tmp_path / "o.npz")]) == 0
    ref = torch.jit.load(str(torch_models / "f16.pt"))(torch.from_numpy(x)).detach().float().numpy()
    with np.load(tmp_path / "o.npz") as data:
        np.testing.assert_allclose(data["output_0"].astype("float32"), ref, rtol=2e-2, atol=2e-2)
