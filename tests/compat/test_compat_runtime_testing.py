"""GraphModule.benchmark's BenchmarkResult and tvm.testing's CPU-feature markers."""
import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.contrib import graph_executor
from kiln.runtime.profiling import BenchmarkResult


def test_graph_module_benchmark_returns_benchmark_result():
    x = relay.var("x", shape=(16,))
    lib = relay.build(tvm.IRModule.from_expr(relay.Function([x], relay.exp(x))), "llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    res = m.benchmark(tvm.cpu(), repeat=4, number=3, x=np.ones(16, "float32"))
    assert isinstance(res, BenchmarkResult) and len(res.results) == 4
    assert res.min <= res.median <= res.max and res.min <= res.mean <= res.max and res.std >= 0
    assert "mean (ms)" in str(res)
    e2e = m.benchmark(tvm.cpu(), func_name="run", repeat=2, number=1, end_to_end=True, x=np.ones(16, "float32"))
    assert len(e2e.results) == 2


@pytest.mark.parametrize("flags,expect", [
    ({"avx2", "fma"}, {"skylake_avx512": False, "cascadelake": False, "x86_vnni": False}),
    ({"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"},
     {"skylake_avx512": True, "cascadelake": False, "x86_vnni": False}),
    ({"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512_vnni"},
     {"skylake_avx512": True, "cascadelake": True, "x86_vnni": True}),
    ({"avx2", "avx_vnni"}, {"skylake_avx512": False, "cascadelake": False, "x86_vnni": True}),
])
def test_cpu_feature_markers_follow_host_flags(monkeypatch, flags, expect):
    from kiln.testing import cpu_features
    monkeypatch.setattr(cpu_features, "host_cpu_flags", lambda: frozenset(flags))
    monkeypatch.setattr(tvm.testing.requires_x86, "_check", lambda: True)
    for name, present in expect.items():
        assert getattr(tvm.testing, f"requires_{name}").run_time_check() is present


def test_feature_marker_skips_when_missing():
    marks = tvm.testing.requires_dnnl.marks()
    assert any(m.name == "skipif" and m.args[0] for m in marks)
    assert callable(tvm.testing.requires_cascadelake(lambda: None))
