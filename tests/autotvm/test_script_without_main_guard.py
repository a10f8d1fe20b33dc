"""A tuning script written like TVM's tutorials (no ``if __name__ == "__main__":`` guard) must tune
once: spawned measurement workers must not re-run the user's script."""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.timeout(300)
def test_unguarded_tuning_script_runs_once(tmp_path):
    script = tmp_path / "tune_script.py"
    shutil.copy(os.path.join(os.path.dirname(__file__), "data", "tune_script_no_main_guard.py"), script)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("KILN_AUTOTVM_START_METHOD", None)
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("TUNED-OK") == 1
    assert "TUNED-OK 4" in proc.stdout  # 4 trials logged, by the one and only tuning run
