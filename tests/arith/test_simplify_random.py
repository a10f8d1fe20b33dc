"""Randomized checking of the simplifier: the simplified expression must evaluate like the
original for random in-range variable values (floor/trunc semantics as in C/TVM)."""
import random

import pytest

from kiln import tir, arith
from kiln.tir.interpreter import eval_expr


def _rand_expr(rng, vars_, depth):
    if depth == 0 or rng.random() < 0.2:
        if rng.random() < 0.7:
            return rng.choice(vars_)
        return tir.const(rng.randint(-9, 9))
    kind = rng.choice(["add", "sub", "mul", "fdiv", "fmod", "tdiv", "tmod", "min", "max", "sel", "addc", "mulv"])
    a = _rand_expr(rng, vars_, depth - 1)
    if kind == "add":
        return a + _rand_expr(rng, vars_, depth - 1)
    if kind == "sub":
        return a - _rand_expr(rng, vars_, depth - 1)
    if kind == "addc":
        return a + rng.randint(-70, 70)
    if kind == "mul":
        return a * rng.choice([-3, -2, -1, 2, 3, 4, 8, 16])
    if kind == "mulv":
        return a * rng.choice(vars_)
    if kind == "fdiv":
        return tir.floordiv(a, rng.choice([1, 2, 3, 4, 7, 8, 16, 64]))
    if kind == "fmod":
        return tir.floormod(a, rng.choice([1, 2, 3, 4, 7, 8, 16, 64]))
    if kind == "tdiv":
        return tir.truncdiv(a, rng.choice([1, 2, 3, 4, 8]))
    if kind == "tmod":
        return tir.truncmod(a, rng.choice([2, 3, 4, 8]))
    b = _rand_expr(rng, vars_, depth - 1)
    if kind == "min":
        return tir.min(a, b)
    if kind == "max":
        return tir.max(a, b)
    c = _rand_cond(rng, vars_, depth - 1)
    return tir.Select(c, a, b)


def _rand_cond(rng, vars_, depth):
    a = _rand_expr(rng, vars_, max(depth, 0))
    b = _rand_expr(rng, vars_, max(depth - 1, 0))
    op = rng.choice(["lt", "le", "gt", "ge", "eq", "ne"])
    c = {"lt": tir.less, "le": tir.less_equal, "gt": tir.greater, "ge": tir.greater_equal,
         "eq": tir.equal, "ne": tir.not_equal}[op](a, b)
    if rng.random() < 0.2:
        c = tir.logical_and(c, _rand_cond(rng, vars_, 0))
    if rng.random() < 0.1:
        c = tir.logical_not(c)
    return c


RANGES = [(0, 16), (-20, 20), (0, 64), (3, 10)]


@pytest.mark.parametrize("seed", range(12))
def test_random_expressions_keep_value(seed):
    rng = random.Random(seed)
    xs = [tir.Var(n) for n in ("x", "y", "z", "w")]
    ana = arith.Analyzer()
    for v, (lo, hi) in zip(xs, RANGES):
        ana.bind(v, tir.Range(lo, hi))
    for _ in range(60):
        e = _rand_expr(rng, xs, rng.randint(1, 4)) if rng.random() < 0.8 else _rand_cond(rng, xs, 2)
        s = ana.simplify(e)
        for _ in range(12):
            env = {v: rng.randrange(lo, hi) for v, (lo, hi) in zip(xs, RANGES)}
            want = eval_expr(e, env)
            got = eval_expr(s, env)
            assert int(want) == int(got), f"{e}  ==>  {s}  at {env}: {want} vs {got}"


@pytest.mark.parametrize("seed", range(4))
def test_random_expressions_unbounded_vars(seed):
    """Without bounds the simplifier may use only identities that hold for all integers."""
    rng = random.Random(100 + seed)
    xs = [tir.Var(n) for n in ("a", "b", "c")]
    ana = arith.Analyzer()
    for _ in range(80):
        e = _rand_expr(rng, xs, rng.randint(1, 4))
        s = ana.simplify(e)
        for _ in range(10):
            env = {v: rng.randint(-200, 200) for v in xs}
            assert int(eval_expr(e, env)) == int(eval_expr(s, env)), f"{e} ==> {s} at {env}"


@pytest.mark.parametrize("seed", range(3))
def test_const_int_bound_is_sound(seed):
    rng = random.Random(200 + seed)
    xs = [tir.Var(n) for n in ("x", "y", "z", "w")]
    ana = arith.Analyzer()
    for v, (lo, hi) in zip(xs, RANGES):
        ana.bind(v, tir.Range(lo, hi))
    for _ in range(60):
        e = _rand_expr(rng, xs, rng.randint(1, 4))
        b = ana.const_int_bound(e)
        for _ in range(10):
            env = {v: rng.randrange(lo, hi) for v, (lo, hi) in zip(xs, RANGES)}
            val = int(eval_expr(e, env))
            assert b.min_value <= val <= b.max_value, f"{e}: {val} outside {b}"


@pytest.mark.parametrize("seed", range(3))
def test_eval_set_is_sound(seed):
    rng = random.Random(300 + seed)
    xs = [tir.Var(n) for n in ("x", "y", "z", "w")]
    dom = {v: tir.Range(lo, hi) for v, (lo, hi) in zip(xs, RANGES)}
    for _ in range(50):
        e = _rand_expr(rng, xs, rng.randint(1, 3))
        s = arith.eval_set(e, dom)
        lo = None if arith.is_neg_inf(s.min_value) else s.min_value
        hi = None if arith.is_pos_inf(s.max_value) else s.max_value
        for _ in range(10):
            env = {v: rng.randrange(a, b) for v, (a, b) in zip(xs, RANGES)}
            val = int(eval_expr(e, env))
            if lo is not None:
                assert int(eval_expr(lo, env)) <= val, f"{e}: {val} < {lo}"
            if hi is not None:
                assert val <= int(eval_expr(hi, env)), f"{e}: {val} > {hi}"


def _rand_index(rng, xs):
    """Index-like expressions: linear forms of bounded vars, divided/modded by constants, nested."""
    e = None
    for v in xs:
        if rng.random() < 0.7:
            t = v * rng.choice([1, 2, 3, 4, 8, 16, 64])
            if rng.random() < 0.3:
                t = tir.floormod(v, rng.choice([2, 4, 8])) * rng.choice([1, 4])
            e = t if e is None else e + t
    if e is None:
        e = xs[0]
    e = e + rng.randint(-20, 20)
    for _ in range(rng.randint(1, 2)):
        c = rng.choice([2, 3, 4, 8, 16, 32])
        e = tir.floordiv(e, c) if rng.random() < 0.5 else tir.floormod(e, c)
        if rng.random() < 0.5:
            e = e * rng.choice([1, 2, 4]) + rng.choice(xs)
    return e


@pytest.mark.parametrize("seed", range(6))
def test_random_index_expressions(seed):
    rng = random.Random(500 + seed)
    xs = [tir.Var(n) for n in ("x", "y", "z", "w")]
    ranges = [(0, 4), (0, 8), (0, 16), (-5, 9)]
    ana = arith.Analyzer()
    for v, (lo, hi) in zip(xs, ranges):
        ana.bind(v, tir.Range(lo, hi))
    for _ in range(80):
        e = _rand_index(rng, xs)
        s = ana.simplify(e)
        for _ in range(16):
            env = {v: rng.randrange(lo, hi) for v, (lo, hi) in zip(xs, ranges)}
            assert int(eval_expr(e, env)) == int(eval_expr(s, env)), f"{e} ==> {s} at {env}"
