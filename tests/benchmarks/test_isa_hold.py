"""benchmarks/isa_hold.py: ONNX Runtime and PyTorch held to AVX2 for `benchmarks.run --isa avx2`.

The patch is checked on a library built here (its XCR0 read, run before and after; a data constant that
looks like xgetbv stays as it was), then end to end in a fresh interpreter: the held ONNX Runtime loads from
the copy and computes the same MatMul as numpy, PyTorch reports AVX2."""
import ctypes
import json
import os
import subprocess
import sys
import textwrap

import pytest

from benchmarks import isa_hold

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

C_SRC = r"""
/* three bytes that spell xgetbv, in read-only data: not an instruction, must not change */
const unsigned char kiln_fake_xgetbv[3] = {0x0f, 0x01, 0xd0};
unsigned kiln_xcr0_low(void) {
  unsigned lo, hi;
  __asm__ volatile("xor %%ecx, %%ecx\n\txgetbv" : "=a"(lo), "=d"(hi) : : "ecx");
  return lo;
}
"""


@pytest.fixture
def probe_lib(tmp_path):
    src = tmp_path / "probe.c"
    src.write_text(C_SRC)
    lib = tmp_path / "probe.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return lib


def _call(path):
    lib = ctypes.CDLL(str(path))
    lib.kiln_xcr0_low.restype = ctypes.c_uint
    fake = bytes((ctypes.c_ubyte * 3).in_dll(lib, "kiln_fake_xgetbv"))
    return lib.kiln_xcr0_low(), fake


def test_patch_makes_the_xcr0_read_report_no_avx512_state(probe_lib, tmp_path):
    before, fake = _call(probe_lib)
    assert before & 0x7 == 0x7, f"an x86-64 host with AVX enables x87, SSE and AVX state; XCR0 = {before:#x}"
    assert fake == isa_hold.XGETBV
    patched = tmp_path / "probe_held.so"
    patched.write_bytes(probe_lib.read_bytes())
    assert len(isa_hold.xgetbv_offsets(str(patched))) == 1
    assert isa_hold.patch_xcr0_reads(str(patched)) == 1
    after, fake_after = _call(patched)
    assert after == 0x7, f"held XCR0 read {after:#x}: the AVX-512 bits 5-7 must be off"
    assert fake_after == isa_hold.XGETBV, "a data constant was patched"
    # patched twice: nothing left to patch, the first result stands
    assert isa_hold.patch_xcr0_reads(str(patched)) == 0
    assert _call(probe_lib)[0] == before, "the original library changed"


def test_patch_refuses_bytes_that_are_not_xgetbv(probe_lib, monkeypatch):
    (off,) = isa_hold.xgetbv_offsets(str(probe_lib))
    monkeypatch.setattr(isa_hold, "xgetbv_offsets", lambda path: [off + 1])
    with pytest.raises(isa_hold.HoldError, match="not xgetbv"):
        isa_hold.patch_xcr0_reads(str(probe_lib))


def test_unknown_isa_and_late_hold_are_refused(monkeypatch):
    with pytest.raises(isa_hold.HoldError, match="unknown ISA 'sse2'.*avx2"):
        isa_hold.hold("sse2")
    monkeypatch.setitem(sys.modules, "torch", object())
    with pytest.raises(isa_hold.HoldError, match="torch is already imported"):
        isa_hold.hold("avx2", onnxruntime=False)


def test_held_onnxruntime_and_pytorch_in_a_fresh_process():
    code = textwrap.dedent("""
        import json, os, sys
        import numpy as np
        from benchmarks import isa_hold
        done = isa_hold.hold("avx2")
        import onnxruntime as ort, torch
        from onnx import helper, TensorProto
        n, k, m = 37, 61, 29
        g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["c"])], "g",
            [helper.make_tensor_value_info("a", TensorProto.FLOAT, [n, k]),
             helper.make_tensor_value_info("b", TensorProto.FLOAT, [k, m])],
            [helper.make_tensor_value_info("c", TensorProto.FLOAT, [n, m])])
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(0)
        a, b = rng.standard_normal((n, k), dtype=np.float32), rng.standard_normal((k, m), dtype=np.float32)
        a[3, 5] = np.nan
        c = sess.run(None, {"a": a, "b": b})[0]
        ref = a.astype(np.float64) @ b
        print(json.dumps({"ort": os.path.dirname(ort.__file__), "held": done["onnxruntime_path"],
                          "err": float(np.nanmax(np.abs(c - ref))), "nan_rows": np.isnan(c).any(1).tolist(),
                          "status": isa_hold.status(), "line": isa_hold.status_line(isa_hold.status())}))
    """)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["ort"].startswith(res["held"]), res
    assert res["err"] < 1e-4
    assert res["nan_rows"] == [i == 3 for i in range(37)]
    assert res["status"]["pytorch_cpu_capability"] == "AVX2"
    assert "xgetbv" in res["status"]["onnxruntime"]
    assert res["line"].startswith("Contenders held to AVX2")


def test_benchmark_run_with_isa_avx2_holds_onnxruntime_and_builds_kiln_for_core_avx2():
    code = textwrap.dedent("""
        import json
        from benchmarks import run
        data = run.main(["--isa", "avx2", "--models", "mlp_b1", "--rounds", "2", "--number", "1", "--warmup", "1",
                         "--skip", "pytorch,torch_compile", "--no-write"])
        row = data["rows"][0]
        print(json.dumps({"targets": data["targets"], "held": data["held_isa"],
                          "contenders": sorted(row["results"]), "vs_ort": row["results"]["kiln"].get("vs_onnxruntime"),
                          "err": row["results"]["kiln"]["max_abs_err"]}))
    """)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["targets"] == ["llvm -mcpu=core-avx2"]
    assert res["held"]["isa"] == "avx2" and "xgetbv" in res["held"]["onnxruntime"]
    assert "pytorch" not in res["held"]          # not a contender: left as it is
    assert {"kiln", "onnxruntime"} <= set(res["contenders"])
    assert res["vs_ort"]["rounds"] == 2 and res["err"] < 1e-4
