"""Smoke tests of benchmarks.mlp_processes (fresh processes, variants alternating) and benchmarks.pool_spin (spin
times interleaved in one process): they run end to end and render their tables; no speed is asserted."""
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")


def test_mlp_processes_two_variants(tmp_path, monkeypatch):
    from benchmarks import common, mlp_processes
    monkeypatch.setattr(common, "RESULTS_DIR", str(tmp_path))
    data = mlp_processes.main(["--batch", "3", "--processes", "1", "--rounds", "2", "--number", "1",
                               "--policy", "fixed", "--variant", "a:", "--variant", "b:KILN_POOL_SPIN_US=0",
                               "--out", "smoke"])
    assert set(data["processes"]) == {"a", "b"} and data["variants"]["b"] == {"KILN_POOL_SPIN_US": "0"}
    for runs in data["processes"].values():
        (r,) = runs
        assert r["max_abs_err"] < 1e-3 and r["kiln_median_ms"] > 0 and r["ort_median_ms"] > 0
        assert r["policy"] == "fixed" and r["pool"]["spin_us"] in (0, 50)
    assert data["processes"]["b"][0]["pool"]["spin_us"] == 0
    md = (tmp_path / "smoke.md").read_text()
    assert md.startswith("# MLP 784-512-512-10 batch 3") and "## b (KILN_POOL_SPIN_US=0)" in md


def test_pool_spin_table(tmp_path, monkeypatch):
    from benchmarks import common, pool_spin
    import kiln
    from kiln.runtime import thread_pool
    monkeypatch.setattr(common, "RESULTS_DIR", str(tmp_path))
    policy = kiln.runtime.get_thread_policy()
    before = thread_pool.set_spin_us(50)
    try:
        data = pool_spin.main(["--batch", "3", "--spins", "0,20", "--rounds", "2", "--number", "1", "--out", "smoke"])
        assert thread_pool.pool_stats()["spin_us"] == 50  # left as found
        assert kiln.runtime.get_thread_policy() == policy and kiln.runtime.library._threads_override == []
    finally:
        thread_pool.set_spin_us(before)
    assert set(data["spins_us"]) == {"0", "20"} and all(r["median_ms"] > 0 for r in data["spins_us"].values())
    assert "| 20 |" in (tmp_path / "smoke.md").read_text()
