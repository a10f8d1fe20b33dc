"""User mistakes end with one clear line on stderr and a non-zero exit code, never a traceback."""
from __future__ import annotations

import numpy as np
import pytest

from kiln.cli import main
from kiln.cli.common import CLIError, parse_input_shapes

from .conftest import run_kiln


def _fails(capsys, argv, *needles, code=1):
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == code, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err
    return err


def test_no_command_prints_help(capsys):
    assert main([]) == 2
    assert "compile" in capsys.readouterr().err


@pytest.mark.parametrize("cmd", ["compile", "run", "tune", "bench", "rpc"])
def test_every_subcommand_has_help(cmd, capsys):
    assert main([cmd, "--help"]) == 0
    assert f"usage: kiln {cmd}" in capsys.readouterr().out


def test_missing_model_file(capsys, tmp_path):
    _fails(capsys, ["compile", str(tmp_path / "nope.onnx")], "nope.onnx", "does not exist")


def test_missing_compiled_module(capsys, tmp_path):
    _fails(capsys, ["run", str(tmp_path / "nope.so")], "does not exist")


def test_unknown_extension(capsys, tmp_path):
    p = tmp_path / "model.bin"
    p.write_bytes(b"\0")
    _fails(capsys, ["compile", str(p)], "cannot tell the format", "--model-format")


def test_bad_shape_string(capsys, onnx_models):
    _fails(capsys, ["compile", str(onnx_models["conv"]), "--input-shapes", "x:1x3xfoo"],
           "dimension 'foo' is not an integer")
    _fails(capsys, ["compile", str(onnx_models["conv"]), "--input-shapes", "1x3x7x9"], "is not NAME:SHAPE")


def test_shape_for_unknown_input(capsys, onnx_models):
    _fails(capsys, ["compile", str(onnx_models["conv"]), "--input-shapes", "data:1x3x7x9"],
           "['data']", "inputs are ['x']")


def test_unknown_target(capsys, onnx_models):
    _fails(capsys, ["compile", str(onnx_models["conv"]), "--target", "tpu9000"], "unknown target kind 'tpu9000'")


def test_gpu_target_is_refused_clearly(capsys, onnx_models):
    _fails(capsys, ["compile", str(onnx_models["conv"]), "--target", "cuda"], "host CPU only")


def test_bad_opt_level_is_a_usage_error(capsys, onnx_models):
    _fails(capsys, ["compile", str(onnx_models["conv"]), "--opt-level", "9"], "invalid choice", code=2)


def test_bad_output_name(capsys, onnx_models, tmp_path):
    _fails(capsys, ["compile", str(onnx_models["conv"]), "-o", str(tmp_path / "m.bin")], "must end in .so")
    _fails(capsys, ["compile", str(onnx_models["conv"]), "-o", str(tmp_path / "no" / "m.so")], "does not exist")


def test_corrupt_onnx(capsys, tmp_path):
    p = tmp_path / "bad.onnx"
    p.write_bytes(b"this is not protobuf \xff\xff\xff")
    _fails(capsys, ["compile", str(p)], "is not a valid ONNX model")


def test_not_a_torchscript_file(capsys, tmp_path):
    pytest.importorskip("torch")
    p = tmp_path / "bad.pt"
    p.write_bytes(b"nope")
    _fails(capsys, ["compile", str(p), "--input-shapes", "x:1x2"], "is not a TorchScript archive", "torch.jit.save")


@pytest.mark.slow
def test_torchscript_needs_shapes(capsys, torch_model):
    _fails(capsys, ["compile", str(torch_model["path"])], "do not record input shapes", "--input-shapes x:")
    _fails(capsys, ["compile", str(torch_model["path"]), "--input-shapes", "a:1x5,b:1x5"], "takes 1 input(s)")


def test_relay_text_syntax_error_points_at_it(capsys, tmp_path):
    p = tmp_path / "bad.relay"
    p.write_text("def @main(%x: Tensor[(3), float32]) { nn.relu(%x, }\n")
    _fails(capsys, ["compile", str(p)], "bad.relay:1:", "^")


def test_relay_params_for_unknown_names(capsys, tmp_path, relay_model):
    from kiln import relay
    p = tmp_path / "prog.txt"
    p.write_text(relay_model["path"].read_text())
    (tmp_path / "extra.params").write_bytes(bytes(relay.save_param_dict({"zz": np.zeros(2, "float32")})))
    _fails(capsys, ["compile", str(p), "--params", str(tmp_path / "extra.params")], "['zz']")


def test_truncated_module(capsys, compiled_conv, tmp_path):
    p = tmp_path / "trunc.so"
    p.write_bytes(compiled_conv.read_bytes()[:2000])
    _fails(capsys, ["run", str(p)], "trunc.so")


def test_run_inputs_wrong_name_and_shape(capsys, compiled_conv, tmp_path):
    np.savez(tmp_path / "a.npz", data=np.zeros((1, 3, 7, 9), "float32"))
    _fails(capsys, ["run", str(compiled_conv), "--inputs", str(tmp_path / "a.npz")], "['data']", "['x']")
    np.savez(tmp_path / "b.npz", x=np.zeros((1, 3, 9, 7), "float32"))
    _fails(capsys, ["run", str(compiled_conv), "--inputs", str(tmp_path / "b.npz")], "expects [1, 3, 7, 9]")


def test_tune_flag_errors(capsys, onnx_models, tmp_path):
    log = str(tmp_path / "t.log")
    _fails(capsys, ["tune", str(onnx_models["conv"]), "-o", log, "--trials", "0"], "--trials")
    _fails(capsys, ["tune", str(onnx_models["conv"]), "-o", log, "--rpc-key", "k"], "--rpc-tracker")
    _fails(capsys, ["tune", str(onnx_models["conv"]), "-o", log, "--rpc-key", "k", "--rpc-tracker", "nohost"],
           "HOST:PORT")
    _fails(capsys, ["tune", str(onnx_models["conv"]), "-o", log, "--plot", str(tmp_path / "c.jpg")], ".png")
    _fails(capsys, ["tune", str(onnx_models["conv"]), "-o", log, "--ops", "nn.not_an_op"], "not a Relay operator")


def test_missing_tuning_log(capsys, onnx_models, tmp_path):
    _fails(capsys, ["compile", str(onnx_models["conv"]), "-o", str(tmp_path / "m.so"),
                    "--tuning-records", str(tmp_path / "none.log")], "tuning log", "does not exist")


def test_subprocess_exit_code_and_no_traceback(tmp_path):
    res = run_kiln("compile", tmp_path / "missing.onnx", timeout=60)
    assert res.returncode == 1
    assert res.stderr.strip().startswith("kiln compile: error:")
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("text, expected", [
    ("data:1x3x224x224", [("data", (1, 3, 224, 224), None)]),
    ("a:[1, 3],b:2x2:int64", [("a", (1, 3), None), ("b", (2, 2), "int64")]),
    ("a:1x2 b:[]", [("a", (1, 2), None), ("b", (), None)]),
    ("x:(4,5):float16", [("x", (4, 5), "float16")]),
])
def test_parse_input_shapes(text, expected):
    assert [(s.name, s.shape, s.dtype) for s in parse_input_shapes(text)] == expected


@pytest.mark.parametrize("text, needle", [
    ("a:1x2.5", "is not an integer"), ("a:[1,2", "unbalanced"), ("a:1x2,a:3", "twice"),
    ("a:1x2:complex7", "unknown dtype"), (":1x2", "NAME:SHAPE"), (",", "empty"),
])
def test_parse_input_shapes_errors(text, needle):
    with pytest.raises(CLIError, match=None) as info:
        parse_input_shapes(text)
    assert needle in str(info.value)


def test_internal_error_is_labelled_as_a_bug(capsys, monkeypatch):
    """An unexpected exception is reported as a kiln bug (exit 3), with the traceback only under -v."""
    from kiln.cli import cmd_run

    def broken(args):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(cmd_run, "run", broken)
    rc = main(["run", "x.so"])
    err = capsys.readouterr().err
    assert rc == 3 and "internal error (a bug in kiln): ZeroDivisionError: boom" in err and "Traceback" not in err
    rc = main(["-v", "run", "x.so"])
    assert rc == 3 and "Traceback" in capsys.readouterr().err
