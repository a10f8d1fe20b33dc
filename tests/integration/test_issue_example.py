"""The end-to-end example of the issue, exactly as written, plus export -> load in a fresh process."""
import os
import subprocess
import sys
import textwrap

import numpy as np


def test_issue_example(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    import kiln as tvm; from kiln import te; import numpy as np  # noqa: E702
    n = te.var("n"); A = te.placeholder((n,), name="A"); B = te.placeholder((n,), name="B")  # noqa: E702
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    outer, inner = s[C].split(C.op.axis[0], factor=64); s[C].parallel(outer); s[C].vectorize(inner)  # noqa: E702
    print(tvm.lower(s, [A, B, C], simple_mode=True))
    fadd = tvm.build(s, [A, B, C], target="llvm", name="myadd")
    dev = tvm.cpu(0)
    a = tvm.nd.array(np.random.uniform(size=1037).astype("float32"), dev)
    b = tvm.nd.array(np.random.uniform(size=1037).astype("float32"), dev)
    c = tvm.nd.array(np.zeros(1037, dtype="float32"), dev)
    fadd(a, b, c)
    evaluator = fadd.time_evaluator(fadd.entry_name, dev, number=10); print(evaluator(a, b, c).mean)
    print(fadd.get_source())
    fadd.export_library("myadd.so"); f2 = tvm.runtime.load_module("myadd.so")  # noqa: E702

    # checks
    np.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy(), rtol=1e-6)
    assert fadd.entry_name == "myadd"
    out = capsys.readouterr().out
    assert "T.parallel" in out and "int32_t myadd(KilnValue* args, int32_t num_args)" in out
    # target="llvm" is the host: vectors of its SIMD width (8 fp32 lanes with AVX2, 16 with AVX-512)
    lanes = tvm.target.x86.get_simd_width()
    from kiln.target.codegen_c import parallel_loop_marker
    assert parallel_loop_marker() in out and f"kiln_f32x{lanes}" in out
    assert evaluator(a, b, c).mean > 0
    c2 = tvm.nd.array(np.zeros(1037, dtype="float32"), dev)
    f2["myadd"](a, b, c2)
    np.testing.assert_array_equal(c2.numpy(), c.numpy())

    # the exported library loads and runs in a fresh interpreter
    script = textwrap.dedent(f"""
        import numpy as np, kiln as tvm
        f = tvm.runtime.load_module({os.path.abspath("myadd.so")!r})
        for size in (1037, 64, 1):
            a = np.random.rand(size).astype("float32"); b = np.random.rand(size).astype("float32")
            c = tvm.nd.array(np.zeros(size, "float32"))
            f(tvm.nd.array(a), tvm.nd.array(b), c)
            np.testing.assert_allclose(c.numpy(), a + b, rtol=1e-6)
        print("fresh-process-ok")
    """)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(tvm.__file__)))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "fresh-process-ok" in proc.stdout
