"""``kiln.runtime.profiling.Report`` and ``debug_executor.profile()`` / ``run()`` (TVM's profiling API)."""
from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.runtime.profiling import Count, Duration, Percent, Report


def _report() -> Report:
    calls = [{"Name": "fused_nn_conv2d_add", "Duration (us)": Duration(30.0), "Percent": Percent(30.0),
              "Count": Count(1), "Device": "cpu0", "Argument Shapes": "float32[1, 3, 7, 9]"},
             {"Name": "fused_nn_relu", "Duration (us)": Duration(10.0), "Percent": Percent(10.0),
              "Count": Count(1), "Device": "cpu0", "Argument Shapes": "float32[1, 4, 7, 9]"},
             {"Name": "fused_nn_conv2d_add", "Duration (us)": Duration(50.0), "Percent": Percent(50.0),
              "Count": Count(1), "Device": "cpu0", "Argument Shapes": "float32[1, 4, 7, 9]"}]
    return Report(calls, {"cpu0": {"Duration (us)": Duration(100.0), "Percent": Percent(100.0)}},
                  {"Number of threads": Count(2), "Executor": "Graph"})


def test_table_aggregates_sorts_and_sums():
    lines = _report().table(sort=True, aggregate=True, col_sums=True).splitlines()
    assert lines[0].split()[:5] == ["Name", "Duration", "(us)", "Percent", "Count"]
    assert lines[1].split()[:4] == ["fused_nn_conv2d_add", "80.00", "80.00", "2"]   # 30 + 50, two calls
    assert lines[1].split()[-1] == "(various)"                                    # shapes differ
    assert lines[2].split()[:4] == ["fused_nn_relu", "10.00", "10.00", "1"]
    assert [ln.split()[:3] for ln in lines if ln.startswith(("Sum", "Total"))] == \
        [["Sum", "90.00", "90.00"], ["Total", "100.00", "100.00"]]
    assert "Number of threads: 2" in lines and "Executor: Graph" in lines


def test_table_without_aggregation_keeps_every_call_in_order():
    lines = _report().table(sort=False, aggregate=False, col_sums=False).splitlines()
    names = [ln.split()[0] for ln in lines[1:4]]
    assert names == ["fused_nn_conv2d_add", "fused_nn_relu", "fused_nn_conv2d_add"]
    assert not any(ln.startswith("Sum") for ln in lines)


def test_table_fits_the_width():
    r = _report()
    r.calls[0]["Name"] = "fused_" + "very_long_op_name_" * 10
    r.calls[0]["Argument Shapes"] = ", ".join(["float32[1, 64, 56, 56]"] * 8)
    for agg in (True, False):
        assert max(len(ln) for ln in r.table(aggregate=agg).splitlines()) <= 120


def test_csv_and_json_round_trip():
    r = _report()
    rows = list(csv.DictReader(io.StringIO(r.csv())))
    assert len(rows) == 3 and float(rows[2]["Duration (us)"]) == 50.0 and rows[0]["Device"] == "cpu0"
    data = json.loads(r.json())
    assert data["calls"][0]["Duration (us)"] == {"microseconds": 30.0}                 # TVM's JSON layout
    assert data["calls"][0]["Name"] == {"string": "fused_nn_conv2d_add"}
    assert data["configuration"]["Number of threads"] == {"count": 2}
    back = Report.from_json(r.json())
    assert back.table() == r.table() and back.calls[1]["Percent"].percent == 10.0


@pytest.fixture(scope="module")
def debug_module():
    x = relay.var("x", shape=(1, 3, 7, 9), dtype="float32")
    w = relay.var("w", shape=(4, 3, 3, 3), dtype="float32")
    y = relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1), channels=4, kernel_size=(3, 3)))
    y = relay.nn.relu(relay.nn.conv2d(y, relay.const(np.ones((4, 4, 3, 3), "float32")), padding=(1, 1),
                                      channels=4, kernel_size=(3, 3)))
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(tvm.IRModule.from_expr(relay.Function([x, w], y)), target="llvm",
                          params={"w": np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype("float32")})
    m = lib["debug_create"]("default", tvm.cpu(0))
    m.set_input("x", np.random.default_rng(1).standard_normal((1, 3, 7, 9)).astype("float32"))
    return m


def test_profile_returns_a_report(debug_module):
    report = debug_module.profile()
    assert isinstance(report, Report)
    kernels = [n for n in debug_module._exec.spec.nodes if n["op"] == "tvm_op"]
    assert len(report.calls) == len(kernels)
    assert all(not c["Name"].startswith("tvmgen_") for c in report.calls)
    assert sum(c["Percent"].percent for c in report.calls) == pytest.approx(100.0)
    assert report.device_metrics["cpu0"]["Duration (us)"].microseconds == \
        pytest.approx(sum(c["Duration (us)"].microseconds for c in report.calls))
    assert report.configuration["Executor"] == "Graph"
    assert all(c["Argument Shapes"].startswith("float32[") for c in report.calls)


def test_run_prints_the_per_node_table(debug_module, capsys):
    debug_module.run()
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:4] == ["Node", "Name", "Ops", "Time(us)"]
    assert "Total time:" in out
