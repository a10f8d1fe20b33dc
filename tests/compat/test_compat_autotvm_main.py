"""A template defined in the user's __main__ script (TVM's tutorial style) measures without cloudpickle."""
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''
    import sys
    sys.modules["cloudpickle"] = None  # as if cloudpickle were not installed
    import kiln as tvm
    from kiln import te, autotvm

    N = 32

    @autotvm.template("compat/main_matmul")
    def matmul(n):
        A = te.placeholder((n, n), name="A")
        B = te.placeholder((n, n), name="B")
        k = te.reduce_axis((0, n), name="k")
        C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
        s = te.create_schedule(C.op)
        cfg = autotvm.get_config()
        cfg.define_split("tile_y", C.op.axis[0], num_outputs=2, filter=None, max_factor=None)
        yo, yi = cfg["tile_y"].apply(s, C, C.op.axis[0])
        return s, [A, B, C]

    task = autotvm.task.create("compat/main_matmul", args=(N,), target="llvm")
    opt = autotvm.measure_option(builder=autotvm.LocalBuilder(), runner=autotvm.LocalRunner(number=1, repeat=1))
    results = []
    tuner = autotvm.tuner.GridSearchTuner(task)
    tuner.tune(n_trial=2, measure_option=opt,
               callbacks=[lambda t, inps, ress: results.extend(r.error_no for r in ress)])
    print("ERRORS", results)
''')


@pytest.mark.slow
def test_main_script_template_without_cloudpickle(tmp_path):
    path = tmp_path / "tune_script.py"
    path.write_text(SCRIPT)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, env=env,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("ERRORS")][-1]
    errors = eval(line[len("ERRORS"):])  # a list of ints printed by the script
    assert errors == [0, 0], out.stdout + out.stderr[-3000:]
