"""Index arithmetic over run-time extents (issue 18): ``(x//y)*y*c + (x%y)*c`` recombines to ``x*c`` for a
symbolic ``y`` (a fused loop over unknown extents unravelled and raveled again), and interval bounds of an
index divided by a ``SizeVar`` (so compute_at over fused unknown rows needs no bound guards). Each rewrite is
checked by evaluating both sides at random values, including negative ``x`` (floor semantics)."""
from __future__ import annotations

import numpy as np

from kiln import te, tir
from kiln.arith import Analyzer
from kiln.arith.int_set import IntSet, eval_set
from kiln.tir.stmt_functor import substitute

rng = np.random.default_rng(5)


def _eval(e, env):
    out = Analyzer().simplify(substitute(e, {v: tir.const(int(val), v.dtype) for v, val in env.items()}))
    assert isinstance(out, tir.IntImm), out
    return int(out.value)


def test_floordiv_mul_plus_floormod_recombines_for_a_symbolic_divisor():
    x, y = te.var("x", "int32"), te.size_var("y", "int32")
    f = te.var("f", "int32")
    ana = Analyzer()
    cases = [((x // y) * y + x % y, x),
             ((x // y) * y * 256 + (x % y) * 256, x * 256),
             (y * (x // y) * 3 + (x % y) * 3 + 5, x * 3 + 5),
             (((f // 32) // y) * y * 256 + ((f // 32) % y) * 256 + (f % 32) * 8, f * 8)]
    for before, after in cases:
        got = ana.simplify(before)
        assert ana.can_prove_equal(got, after), (before, got)
        for _ in range(20):
            env = {x: rng.integers(-500, 500), y: rng.integers(1, 40), f: rng.integers(0, 5000)}
            assert _eval(before, env) == _eval(got, env)


def test_unequal_coefficients_stay():
    x, y = te.var("x", "int32"), te.size_var("y", "int32")
    got = Analyzer().simplify((x // y) * y * 3 + (x % y) * 2)
    assert "%" in str(got) and "//" in str(got)


def test_bounds_of_a_fused_index_split_by_run_time_extents():
    d0, d1 = te.size_var("d0", "int32"), te.size_var("d1", "int32")
    i = te.var("i", "int32")
    ana = Analyzer()
    dom = {i: IntSet.from_range(tir.Range(0, d0 * 4 * d1))}
    b = eval_set((i // d1) // 4, dom, ana)
    assert ana.can_prove(b.min_value >= 0) and ana.can_prove(b.max_value < d0)
    h = eval_set(i // d1, dom, ana)
    assert ana.can_prove(h.max_value < d0 * 4)
    s = eval_set(i % d1, dom, ana)
    assert ana.can_prove(s.min_value >= 0) and ana.can_prove(s.max_value < d1)
    # the bounds hold at run time (d1 > 0 wherever the division is evaluated)
    for _ in range(20):
        v0, v1 = int(rng.integers(1, 6)), int(rng.integers(1, 9))
        iv = np.arange(v0 * 4 * v1)
        assert (iv // v1 // 4).max() <= v0 - 1 and (iv // v1).max() <= v0 * 4 - 1


def test_truncated_mod_by_a_symbolic_divisor_of_a_signed_value_is_not_bounded_below_by_zero():
    x, y = te.var("x", "int32"), te.size_var("y", "int32")
    ana = Analyzer()
    s = eval_set(tir.Mod(x, y), {x: IntSet.from_range(tir.Range(-10, 10))}, ana)
    assert not (s.has_lower_bound() and ana.can_prove(s.min_value >= 0))
