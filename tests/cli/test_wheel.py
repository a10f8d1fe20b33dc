"""The wheel installs and works in a fresh virtualenv (``tests/cli/wheel_smoke.py``; runs in ``make test``,
whose test extra installs ``build``)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_wheel_installs_in_a_fresh_venv():
    pytest.importorskip("build", reason="needs the 'build' package (pip install -e '.[test]' installs it)")
    res = subprocess.run([sys.executable, os.path.join(HERE, "wheel_smoke.py")], capture_output=True, text=True,
                         timeout=590)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "wheel smoke: ok (kiln " in res.stdout
    assert "built kiln_compiler-" in res.stdout
