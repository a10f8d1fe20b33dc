"""The artifact knows its CPU: a library records its target and the ISA features its code may use; loading it
on a CPU without them raises ModuleLoadError naming them before dlopen (never SIGILL). Also the thread-count
API (kiln.runtime.set_num_threads / num_threads)."""
import numpy as np
import pytest

import kiln as tvm
from kiln import te
from kiln.error import ModuleLoadError
from kiln.runtime import cpu_features
from kiln.runtime.library import read_blob_from_file
from kiln.runtime.module import check_blob_runnable
from kiln.target import x86

AVX512 = "llvm -mcpu=skylake-avx512"


def _add_one(target, n=37):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    return tvm.build(s, [A, B], target=target, name="add_one")


def _without(monkeypatch, *features):
    """Pretend this CPU lacks ``features``."""
    have = cpu_features.host_features()
    monkeypatch.setattr(cpu_features, "host_features", lambda: frozenset(have - set(features)))


def _run(f, n=37):
    a = np.arange(n, dtype="float32")
    b = tvm.nd.empty((n,))
    f(tvm.nd.array(a), b)
    np.testing.assert_allclose(b.numpy(), a + 1)


def test_blob_records_target_and_features(tmp_path):
    f = _add_one("llvm -mcpu=core-avx2")
    assert f.target_info["target"].startswith("llvm") and "-mcpu=core-avx2" in f.target_info["target"]
    assert {"avx2", "fma", "avx"} <= set(f.target_info["required_features"])
    assert "avx512f" not in f.target_info["required_features"]
    path = str(tmp_path / "m.so")
    f.export_library(path)
    loaded = tvm.runtime.load_module(path)
    assert loaded.target_info == f.target_info
    # the blob is read from the ELF file itself, before any code is mapped
    assert read_blob_from_file(path) == loaded.library.read_blob()
    if x86.host_can_run("llvm -mcpu=core-avx2"):
        _run(loaded)


def test_missing_feature_is_a_load_error_not_sigill(tmp_path, monkeypatch):
    """A library built for this machine, loaded on a CPU pretending to lack AVX2 / FMA."""
    f = _add_one("llvm")
    path = str(tmp_path / "host.so")
    f.export_library(path)
    have = cpu_features.host_features()
    lacking = [x for x in ("avx2", "fma") if x in have] or ["sse2"]
    _without(monkeypatch, *lacking)
    with pytest.raises(ModuleLoadError, match=f"needs CPU features this machine lacks: {', '.join(sorted(lacking))}"):
        tvm.runtime.load_module(path)
    tar = str(tmp_path / "host.tar")
    f.export_library(tar)
    with pytest.raises(ModuleLoadError, match="lacks"):
        tvm.runtime.load_module(tar)
    monkeypatch.undo()
    _run(tvm.runtime.load_module(path))


def test_avx512_library_is_compiled_not_run(tmp_path, monkeypatch):
    """Code for skylake-avx512 builds anywhere; where AVX-512 is missing (this AVX2 machine, or pretended) its
    kernels and its exported file refuse to run, naming the features."""
    if x86.host_can_run(AVX512):
        _without(monkeypatch, "avx512f", "avx512bw")
    f = _add_one(AVX512)
    assert "add_one" in f.get_source()
    assert "avx512f" in f.target_info["required_features"]
    with pytest.raises(ModuleLoadError, match="skylake-avx512.*avx512"):
        _run(f)
    path = str(tmp_path / "avx512.so")
    f.export_library(path)
    with pytest.raises(ModuleLoadError, match=r"compiled for 'llvm .*-mcpu=skylake-avx512'.*lacks: .*avx512f"):
        tvm.runtime.load_module(path)


def test_feature_names_of_cpuinfo():
    assert cpu_features.features_from_cpuinfo_flags({"avx512_vnni", "bmi1", "pni", "sse4_2", "hypervisor"}) == \
        {"avx512vnni", "bmi", "sse3", "sse4.2"}
    assert cpu_features.missing_features(["avx2", "not-an-isa-feature"]) == \
        ([] if "avx2" in cpu_features.host_features() else ["avx2"])


def test_set_num_threads(monkeypatch):
    """set_num_threads reaches the OpenMP team of kernels loaded before and after the call (OpenMP backend;
    the thread pool's side: tests/runtime/test_thread_pool.py)."""
    import importlib
    monkeypatch.setattr(importlib.import_module("kiln.target.codegen_c"), "PARALLEL_BACKEND", "openmp")
    n = 64
    A = te.compute((n,), lambda i: tvm.tir.call_extern("int32", "omp_get_num_threads"), name="A")
    s = te.create_schedule(A.op)
    s[A].parallel(A.op.axis[0])
    before = tvm.build(s, [A], target="llvm", name="team")

    def team(f):
        out = tvm.nd.array(np.zeros(n, "int32"))
        f(out)
        return set(out.numpy().tolist())
    try:
        tvm.runtime.set_num_threads(1)
        assert tvm.runtime.num_threads() == 1 and team(before) == {1}
        tvm.runtime.set_num_threads(2)
        assert tvm.runtime.num_threads() == 2 and team(before) == {2}
        after = tvm.build(s, [A], target="llvm -opt-level=2", name="team")
        assert team(after) == {2}
        with pytest.raises(tvm.error.KilnError, match="positive integer"):
            tvm.runtime.set_num_threads(0)
    finally:
        tvm.runtime.set_num_threads(None)
    assert tvm.runtime.num_threads() >= 1


SPR = "llvm -mcpu=sapphirerapids"
SPR_COMPILED_OUT = {"amx-tile", "amx-int8", "amx-bf16", "avx512fp16"}


def _as_cpu(monkeypatch, features):
    """Pretend this CPU has exactly ``features``."""
    monkeypatch.setattr(cpu_features, "host_features", lambda: frozenset(features))


def test_sapphirerapids_library_does_not_require_amx_or_fp16(tmp_path, monkeypatch):
    """kiln compiles without AMX and AVX512-FP16 (-mno-...): code for sapphirerapids cannot contain them, so it
    loads on a CPU (or a VM) that hides them, and is refused, naming the feature, where AVX-512 itself is missing."""
    f = _add_one(SPR)   # compiled on any host; run only where this CPU can
    required = set(f.target_info["required_features"])
    assert {"avx512f", "avx512bw", "avx512vl", "avx512vnni", "avx512bf16", "avx2", "fma"} <= required
    assert not required & (SPR_COMPILED_OUT | {"avx512vp2intersect"})
    assert SPR_COMPILED_OUT <= set(f.target_info["unused_features"])   # recorded, not checked
    path = str(tmp_path / "spr.so")
    f.export_library(path)
    if x86.host_can_run(SPR):   # e.g. Zen 5: AVX-512 with VNNI and BF16, AVX-VNNI, no AMX, no FP16
        _without(monkeypatch, *SPR_COMPILED_OUT)   # (hidden as well where the CPU has them)
        loaded = tvm.runtime.load_module(path)
        assert loaded.target_info == f.target_info
        _run(loaded)
    # any host: a CPU with exactly the features the code may use (no AMX, no FP16) passes the load-time check
    _as_cpu(monkeypatch, required)
    check_blob_runnable(read_blob_from_file(path), path)
    # the same CPU without AVX-512F: refused before the library is mapped, naming avx512f
    _as_cpu(monkeypatch, required - {"avx512f"})
    with pytest.raises(ModuleLoadError, match=r"compiled for 'llvm .*-mcpu=sapphirerapids'.*lacks: avx512f\. "):
        tvm.runtime.load_module(path)
