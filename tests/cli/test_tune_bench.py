"""``kiln tune`` (tasks, progress bar, TVM-format log, summary, plot), tuned ``kiln compile``, ``kiln bench``."""
from __future__ import annotations

import json
import re
import struct
import zlib

import numpy as np
import pytest

from kiln.cli.plot import render_curves, write_png

from .conftest import run_kiln


def _read_png(path) -> np.ndarray:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, size = 8, b"", None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        assert zlib.crc32(kind + body) & 0xFFFFFFFF == struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0]
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h = size
    raw = zlib.decompress(idat)
    rows = [raw[r * (3 * w + 1) + 1:(r + 1) * (3 * w + 1)] for r in range(h)]
    return np.frombuffer(b"".join(rows), np.uint8).reshape(h, w, 3)


def test_builtin_png_renderer_draws_each_curve(tmp_path):
    curves = [np.array([1e9, 2e9, 2e9, 4e9]), np.array([0.5e9, 3e9])]
    img = render_curves(curves, width=320, height=200)
    write_png(tmp_path / "c.png", img)
    back = _read_png(tmp_path / "c.png")
    np.testing.assert_array_equal(back, img)
    colors = {tuple(c) for c in back.reshape(-1, 3)}
    assert (31, 119, 180) in colors and (255, 127, 14) in colors   # one colour per task
    # the best curve reaches the top of the plot area (y max = 4 GFLOPS) at the last trial
    blue = np.argwhere(np.all(back == (31, 119, 180), axis=-1))
    assert blue[:, 0].min() <= 21 and blue[:, 1].max() >= 320 - 21


@pytest.mark.slow
def test_tune_writes_log_table_plot_then_compile_uses_it(onnx_models, tmp_path):
    log, png = tmp_path / "tune.log", tmp_path / "curve.png"
    log.write_text("")  # the log is appended to, never truncated
    res = run_kiln("tune", onnx_models["conv"], "--target", "llvm", "-o", log, "--trials", "2", "--tuner", "random",
                   "--number", "1", "--repeat", "1", "--plot", png, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    n_tasks = int(re.search(r"extracted (\d+) tunable task", res.stdout).group(1))
    assert n_tasks >= 1
    assert f"[Task  1/{n_tasks:2d}]" in res.stdout and "Progress: (2/2)" in res.stdout     # the progress bar
    assert "conv2d_NCHWc.x86" in res.stdout and "best GFLOPS" in res.stdout  # the summary table
    assert f"tuned {n_tasks} task(s)" in res.stdout
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) == 2 * n_tasks
    for rec in lines:     # TVM's log format, version 0.2
        assert rec["version"] == 0.2 and rec["input"][1] in ("conv2d_NCHWc.x86", "conv2d_NCHWc_winograd.x86")
        assert set(rec) >= {"input", "config", "result"} and len(rec["result"]) == 4
    from kiln import autotvm
    assert len(list(autotvm.record.load_from_file(str(log)))) == 2 * n_tasks
    assert _read_png(png).shape[2] == 3

    so = tmp_path / "tuned.so"
    res = run_kiln("compile", onnx_models["conv"], "-o", so, "--tuning-records", log)
    assert res.returncode == 0, res.stderr
    assert "tuned workload(s)" in res.stdout
    x = np.random.default_rng(4).standard_normal((1, 3, 7, 9)).astype("float32")
    np.savez(tmp_path / "in.npz", x=x)
    res = run_kiln("run", so, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "o.npz")
    assert res.returncode == 0, res.stderr
    from .test_compile_run import conv_relu_ref
    with np.load(tmp_path / "o.npz") as data:
        np.testing.assert_allclose(data["output_0"], conv_relu_ref(x, onnx_models["conv_w"]), rtol=1e-4, atol=1e-4)


def test_tune_model_without_tunable_ops(relay_model, tmp_path):
    res = run_kiln("tune", relay_model["path"], "-o", tmp_path / "t.log", "--trials", "2", "--tuner", "random")
    assert res.returncode == 0, res.stderr
    assert "no tunable operators" in res.stdout
    assert not (tmp_path / "t.log").exists()


def test_bench_onnx_beside_onnxruntime(onnx_models):
    res = run_kiln("bench", onnx_models["conv"], "--rounds", "2", "--number", "2", "--warmup", "1")
    assert res.returncode == 0, res.stderr
    assert "kiln compile time:" in res.stdout
    rows = {line.split()[0]: line.split()[1:] for line in res.stdout.splitlines() if line.startswith(("kiln ", "onnxruntime"))}
    assert float(rows["kiln"][0]) > 0 and float(rows["kiln"][1]) > 0
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return
    assert float(rows["onnxruntime"][0]) > 0
    assert float(rows["kiln"][2]) < 1e-3   # kiln's max |err| against ONNX Runtime
    # the report names the CPU and every contender's thread count (ONNX Runtime runs with kiln's)
    threads = next(line for line in res.stdout.splitlines() if line.startswith("threads: "))
    kiln_n = int(threads.split("kiln ")[1].split()[0])
    assert f"onnxruntime {kiln_n} (intra_op_num_threads)" in threads and "policy" in threads
    assert any(line.startswith("CPU: ") and "fp32 lanes" in line for line in res.stdout.splitlines())


def test_bench_compiled_module_kiln_only(compiled_conv):
    res = run_kiln("bench", compiled_conv, "--rounds", "2", "--number", "3", "--no-peers")
    assert res.returncode == 0, res.stderr
    assert "median ms" in res.stdout and "compile time" not in res.stdout


def test_tune_cache_flush_option_sets_the_runner():
    """--enable-cpu-cache-flush: one cold run a measurement (number 1 by default), refused with more runs."""
    from kiln.cli import build_parser
    from kiln.cli.cmd_tune import make_measure_option
    from kiln.cli.common import CLIError
    parser = build_parser()
    base = ["tune", "model.onnx", "-o", "tune.log"]
    runner = make_measure_option(parser.parse_args(base + ["--enable-cpu-cache-flush"]))["runner"]
    assert runner.enable_cpu_cache_flush and runner.number == 1 and runner.min_repeat_ms == 0
    runner = make_measure_option(parser.parse_args(base))["runner"]
    assert not runner.enable_cpu_cache_flush and runner.number == 4
    for extra, what in ((["--number", "3"], "got 3"), (["--min-repeat-ms", "50"], "got 50")):
        with pytest.raises(CLIError, match=f"needs --number 1.*{what}"):
            make_measure_option(parser.parse_args(base + ["--enable-cpu-cache-flush"] + extra))


def test_tune_hints_cache_flush_when_the_weights_exceed_the_last_level_cache(monkeypatch, capsys):
    import types
    from kiln.cli import build_parser
    from kiln.cli import cmd_tune
    import kiln.runtime.benchmark as bench
    parser = build_parser()
    import kiln
    from kiln import relay
    x = relay.var("x", shape=(1, 512, 7, 7))
    w = relay.var("w", shape=(512, 512, 3, 3))
    y = relay.nn.conv2d(x, w, padding=(1, 1)) + relay.const(np.zeros((512, 1, 1), "float32"))
    model = types.SimpleNamespace(mod=kiln.IRModule.from_expr(relay.Function([x, w], y)),
                                  params={"w": np.zeros((512, 512, 3, 3), "float32")})   # 9 MiB, plus a constant
    monkeypatch.setattr(bench, "last_level_cache_bytes", lambda: 8 << 20)
    cmd_tune._hint_cache_flush(model, parser.parse_args(["tune", "m.onnx", "-o", "t.log"]))
    out = capsys.readouterr().out
    assert "weights (9 MiB) exceed this CPU's last-level cache (8 MiB)" in out and "--enable-cpu-cache-flush" in out
    for extra in (["--enable-cpu-cache-flush"], ["--rpc-key", "k", "--rpc-tracker", "127.0.0.1:9190"]):
        cmd_tune._hint_cache_flush(model, parser.parse_args(["tune", "m.onnx", "-o", "t.log"] + extra))
        assert capsys.readouterr().out == ""
    monkeypatch.setattr(bench, "last_level_cache_bytes", lambda: 32 << 20)
    cmd_tune._hint_cache_flush(model, parser.parse_args(["tune", "m.onnx", "-o", "t.log"]))
    assert capsys.readouterr().out == ""
