"""tvmc's flags on the ``kiln`` command: how each one parses, subcommand usage errors, and a real compile/run
of a small ONNX model with -O, --desired-layout, --dump-code, -i .npy, --print-time, --profile, -q."""
from __future__ import annotations

import os

import numpy as np
import pytest

from kiln.cli import build_parser, main

from .conftest import REPO, run_kiln
from .test_compile_run import conv_relu_ref


def _parse(*argv):
    return build_parser().parse_args(list(argv))


def test_compile_flags_parse():
    a = _parse("compile", "m.onnx", "--target", "llvm -mcpu=core-avx2", "-o", "m.so", "-O1", "--desired-layout",
               "nhwc", "--dump-code", "c,relay,tir", "--tuning-records", "t.log", "--input-shapes",
               "data:[1,3,224,224] mask:[1,128]")
    assert (a.target, a.output, a.opt_level, a.desired_layout, a.dump_code, a.tuning_records) == \
        ("llvm -mcpu=core-avx2", "m.so", 1, "NHWC", "c,relay,tir", "t.log")
    from kiln.cli.common import parse_input_shapes
    assert [(s.name, s.shape) for s in parse_input_shapes(a.input_shapes)] == \
        [("data", (1, 3, 224, 224)), ("mask", (1, 128))]
    assert _parse("compile", "m.onnx", "--opt-level", "2", "--output", "x.so").opt_level == 2


def test_run_flags_parse():
    a = _parse("run", "m.so", "-i", "in.npy", "-o", "out.npz", "--print-time", "--print-top", "5", "--repeat", "4",
               "--number", "3", "--profile", "--fill-mode", "ones", "--threads", "2")
    assert (a.inputs, a.outputs, a.print_time, a.print_top, a.repeat, a.number, a.profile, a.fill_mode,
            a.threads) == ("in.npy", "out.npz", True, 5, 4, 3, True, "ones", 2)
    a = _parse("run", "m.so", "--inputs", "in.npz", "--outputs", "o.npz")
    assert (a.inputs, a.outputs, a.print_time, a.repeat) == ("in.npz", "o.npz", False, None)


def test_tune_and_bench_flags_parse():
    a = _parse("tune", "m.onnx", "--target", "llvm", "-o", "t.log", "--trials", "7", "--early-stopping", "3",
               "--tuner", "random", "--timeout", "4.5", "--repeat", "2", "--number", "5", "--min-repeat-ms", "10",
               "--parallel", "2", "--threads", "1", "--desired-layout", "NCHW")
    assert (a.output, a.trials, a.early_stopping, a.tuner, a.timeout, a.repeat, a.number, a.min_repeat_ms,
            a.parallel, a.threads, a.desired_layout) == ("t.log", 7, 3, "random", 4.5, 2, 5, 10, 2, 1, "NCHW")
    assert _parse("bench", "m.onnx", "--threads", "3").threads == 3
    assert _parse("plot", "t.log", "-o", "c.png").output == "c.png"


@pytest.mark.parametrize("argv, verbose, quiet", [
    (["-v", "run", "m.so"], 1, False), (["run", "-vv", "m.so"], 2, False), (["-vv", "run", "m.so"], 2, False),
    (["run", "m.so", "-q"], 0, True), (["-q", "compile", "m.onnx"], 0, True), (["run", "m.so"], 0, False),
])
def test_verbosity_before_or_after_the_subcommand(argv, verbose, quiet):
    a = _parse(*argv)
    assert (a.verbose, a.quiet) == (verbose, quiet)


@pytest.mark.parametrize("cmd, bad", [("run", "--bogus"), ("compile", "--dump-code-x"), ("tune", "--trails")])
def test_unknown_flag_shows_the_subcommands_usage(capsys, cmd, bad):
    rc = main([cmd, "x.onnx", bad] + (["-o", "t.log"] if cmd == "tune" else []))
    err = capsys.readouterr().err
    assert rc == 2
    assert f"usage: kiln {cmd}" in err and f"kiln {cmd}: error: unrecognized arguments: {bad}" in err


def test_bad_choice_shows_the_subcommands_usage(capsys):
    assert main(["compile", "m.onnx", "--desired-layout", "NCWH"]) == 2
    err = capsys.readouterr().err
    assert "usage: kiln compile" in err and "invalid choice: 'NCWH'" in err


def test_quiet_and_verbose_together_is_refused(capsys):
    assert main(["-q", "-v", "run", "m.so"]) == 2
    assert "-q and -v" in capsys.readouterr().err


def test_bad_dump_format_and_threads(capsys, onnx_models, compiled_conv):
    assert main(["compile", str(onnx_models["conv"]), "--dump-code", "asm"]) == 1
    assert "c, relay, tir" in capsys.readouterr().err
    assert main(["run", str(compiled_conv), "--threads", "0"]) == 1
    assert "--threads 0" in capsys.readouterr().err


def test_threads_sets_the_runtime_thread_count(monkeypatch):
    from kiln.cli.common import apply_threads
    from kiln.runtime.library import num_threads
    monkeypatch.setenv("KILN_NUM_THREADS", "5")
    apply_threads(None)
    assert num_threads() == 5
    apply_threads(1)
    assert os.environ["KILN_NUM_THREADS"] == "1" and num_threads() == 1


def test_compile_with_tvmc_flags_and_dump_code(onnx_models, tmp_path):
    so = tmp_path / "conv_nhwc.so"
    res = run_kiln("compile", onnx_models["conv"], "-O3", "--desired-layout", "NHWC", "--dump-code", "c,relay,tir",
                   "-o", so, "-v")
    assert res.returncode == 0, res.stderr
    assert "in layout NHWC" in res.stdout and "kernel tvmgen_default_fused" in res.stdout   # -v lists kernels
    relay_text = (tmp_path / "conv_nhwc.so.relay").read_text()
    assert 'data_layout="NHWC"' in relay_text
    c_text = (tmp_path / "conv_nhwc.so.c").read_text()
    assert "tvmgen_default_fused" in c_text and "#include" in c_text
    assert "for (" in (tmp_path / "conv_nhwc.so.tir").read_text() or "for " in (tmp_path / "conv_nhwc.so.tir").read_text()
    # the NHWC build computes what the model says
    x = np.random.default_rng(5).standard_normal((1, 3, 7, 9)).astype("float32")
    np.save(tmp_path / "x.npy", x)
    res = run_kiln("run", so, "-i", tmp_path / "x.npy", "-o", tmp_path / "out.npz", "--threads", "1")
    assert res.returncode == 0, res.stderr
    with np.load(tmp_path / "out.npz") as data:
        np.testing.assert_allclose(data["output_0"], conv_relu_ref(x, onnx_models["conv_w"]), rtol=1e-4, atol=1e-4)


def test_run_npy_print_time_profile_quiet(onnx_models, compiled_conv, tmp_path):
    x = np.random.default_rng(6).standard_normal((1, 3, 7, 9)).astype("float32")
    np.save(tmp_path / "in.npy", x)
    res = run_kiln("run", compiled_conv, "--inputs", tmp_path / "in.npy", "--print-time", "--repeat", "2",
                   "--profile", "--print-top", "2", "-q")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "ran " not in out and "latency over" not in out          # -q: no progress lines
    assert "Execution time summary:" in out and "median (ms)" in out
    assert "top 2:" in out
    lines = out.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("Name"))
    table = lines[head:lines.index("Configuration", head)]
    assert all(len(ln) <= 120 for ln in table)
    assert "Percent" in table[0] and "Duration (us)" in table[0]
    assert any(ln.startswith("fused_nn_") for ln in table)             # op type, no tvmgen_ node name
    assert not any("tvmgen_default" in ln for ln in table)
    assert any(ln.startswith("Sum") for ln in table) and any(ln.startswith("Total") for ln in table)


def test_inputs_of_another_dtype_are_refused_not_converted(capsys, compiled_conv, tmp_path):
    np.save(tmp_path / "x64.npy", np.zeros((1, 3, 7, 9)))   # float64
    assert main(["run", str(compiled_conv), "-i", str(tmp_path / "x64.npy")]) == 1
    err = capsys.readouterr().err
    assert "is float64, the model expects float32" in err and "astype('float32')" in err
    np.savez(tmp_path / "i64.npz", x=np.zeros((1, 3, 7, 9), "int64"))
    assert main(["run", str(compiled_conv), "-i", str(tmp_path / "i64.npz")]) == 1
    assert "is int64, the model expects float32" in capsys.readouterr().err


def test_npy_for_a_model_with_two_inputs(capsys, tmp_path):
    from kiln import relay
    import kiln as tvm
    x, y = relay.var("x", shape=(2,), dtype="float32"), relay.var("y", shape=(2,), dtype="float32")
    with tvm.transform.PassContext(opt_level=1):
        lib = relay.build(tvm.IRModule.from_expr(relay.Function([x, y], x + y)), target="llvm")
    lib.export_library(str(tmp_path / "two.so"))
    np.save(tmp_path / "a.npy", np.zeros(2, "float32"))
    assert main(["run", str(tmp_path / "two.so"), "-i", str(tmp_path / "a.npy")]) == 1
    assert "model has 2 inputs (x, y)" in capsys.readouterr().err


def test_plot_an_existing_log(tmp_path):
    log = os.path.join(REPO, "benchmarks", "results", "tune_resnet.log")
    lines = open(log, encoding="utf-8").read().splitlines()[:9]     # three tasks of three trials
    (tmp_path / "t.log").write_text("\n".join(lines) + "\n")
    res = run_kiln("plot", tmp_path / "t.log", "-o", tmp_path / "curve.png")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "task 1: conv2d_NCHWc.x86" in res.stdout and "GFLOPS" in res.stdout
    res = run_kiln("plot", tmp_path / "none.log")
    assert res.returncode == 1 and "does not exist" in res.stderr
