"""Analyzer.constraint_scope takes a conjunction of many terms apart without recursion."""
import subprocess
import sys
import textwrap
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_constraint_scope_of_a_3000_term_conjunction_under_a_low_recursion_limit():
    code = textwrap.dedent("""
        import sys
        from kiln import tir
        from kiln.arith import Analyzer
        sys.setrecursionlimit(400)
        i = tir.Var("i", "int32")
        cond = i >= 0
        for k in range(1, 1500):
            cond = tir.And(cond, i < 1500 + k)   # left-nested: depth 1500
        ana = Analyzer()
        with ana.constraint_scope(cond):
            assert ana.can_prove(i < 1501)
            assert ana.can_prove(i >= 0)
        assert not ana.can_prove(i >= 0)
        print("ok")
    """)
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and "ok" in res.stdout, res.stderr[-3000:]
