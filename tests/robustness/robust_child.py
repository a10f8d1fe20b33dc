"""Run a check in a child Python process under a low recursion limit (tests/robustness helper).

A recursive walker whose depth follows the input fails there at once (RecursionError), and a crash by
signal (SIGSEGV from a C stack overflow) fails the test instead of killing the pytest worker."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_child(prelude: str, body: str, limit: int = 400, timeout: float = 600) -> str:
    """Run ``prelude`` + ``body`` (dedented) with ``sys.setrecursionlimit(limit)`` in between, in a fresh
    interpreter importing this checkout's kiln; assert it exits 0 and return its stdout."""
    code = prelude + f"\nimport sys\nsys.setrecursionlimit({limit})\n" + textwrap.dedent(body)
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, f"exit {res.returncode}\n{res.stdout[-2000:]}\n{res.stderr[-4000:]}"
    return res.stdout
