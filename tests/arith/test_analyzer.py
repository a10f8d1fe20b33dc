"""Deterministic expectations of the Analyzer API (TVM's tvm.arith.Analyzer)."""
import pytest

from kiln import tir, arith
from kiln.ir.node import structural_equal
from kiln.error import KilnError


def _s(e):
    return str(e)


def test_linear_forms_and_cancellation():
    ana = arith.Analyzer()
    x, a, b = tir.Var("x"), tir.Var("a"), tir.Var("b")
    assert _s(ana.simplify(x * 2 + x)) == "x * 3"
    assert _s(ana.simplify((a + b) - a)) == "b"
    assert _s(ana.simplify(x - x)) == "0"
    assert _s(ana.simplify((x + 3) * 4 - x * 4)) == "12"
    assert _s(ana.simplify(a * 2 - (b - a))) == "a * 3 - b"


def test_div_mod_of_split_index():
    ana = arith.Analyzer()
    io, ii = tir.Var("io"), tir.Var("ii")
    ana.bind(io, tir.Range(0, 16))
    ana.bind(ii, tir.Range(0, 64))
    assert _s(ana.simplify((io * 64 + ii) // 64)) == "io"
    assert _s(ana.simplify((io * 64 + ii) % 64)) == "ii"
    assert _s(ana.simplify((io * 64 + ii + 64) // 64)) == "io + 1"
    # g-rule: floordiv(x*4 + ii%4, 8) == floordiv(x, 2)
    x = tir.Var("x")
    assert _s(ana.simplify((x * 4 + ii % 4) // 8)) == "x // 2"


def test_fused_index_recombines():
    ana = arith.Analyzer()
    f = tir.Var("fused")
    assert _s(ana.simplify((f // 16) * 16 + f % 16)) == "fused"
    assert _s(ana.simplify(f - (f // 8) * 8)) == "fused % 8"


def test_comparisons_with_bounds():
    ana = arith.Analyzer()
    i, n = tir.Var("i"), tir.Var("n")
    ana.bind(i, tir.Range(0, 10))
    assert ana.can_prove(i < 10)
    assert ana.can_prove(i >= 0)
    assert not ana.can_prove(i < 9)
    assert _s(ana.simplify(i < 20)) == "T.bool(True)"
    assert _s(ana.simplify(i >= 10)) == "T.bool(False)"
    assert _s(ana.simplify(i + 1 < n)) == "i < n - 1"
    j = tir.Var("j")
    ana.bind(j, tir.Range(0, n))
    assert ana.can_prove(j < n)
    assert ana.can_prove(j <= n - 1)
    assert not ana.can_prove(j < n - 1)


def test_min_max_with_provable_order():
    ana = arith.Analyzer()
    x, i = tir.Var("x"), tir.Var("i")
    ana.bind(i, tir.Range(0, 8))
    assert _s(ana.simplify(tir.min(x + 1, x + 3))) == "x + 1"
    assert _s(ana.simplify(tir.max(x + 1, x + 3))) == "x + 3"
    assert _s(ana.simplify(tir.min(i, 8))) == "i"
    assert _s(ana.simplify(tir.max(i, 0))) == "i"
    assert _s(ana.simplify(tir.min(tir.min(x, 4), 2))) == "T.min(x, 2)"
    n = tir.Var("n")
    assert _s(ana.simplify(tir.min((n + 63) // 64, n // 64))) == "n // 64"


def test_const_int_bound_and_modular_set():
    ana = arith.Analyzer()
    x = tir.Var("x")
    ana.bind(x, tir.Range(0, 16))
    b = ana.const_int_bound(x * 4 + 3)
    assert (b.min_value, b.max_value) == (3, 63)
    b = ana.const_int_bound(tir.floormod(tir.Var("y"), 8))
    assert (b.min_value, b.max_value) == (0, 7)
    assert ana.const_int_bound(tir.Var("z")).max_value == 2 ** 31 - 1
    m = ana.modular_set(x * 8 + 4)
    assert (m.coeff, m.base) == (8, 4)
    m = ana.modular_set((x * 8 + 4) * 2 + 1)
    assert (m.coeff, m.base) == (16, 9)


def test_constraint_scope_and_bind_expr():
    ana = arith.Analyzer()
    x, n = tir.Var("x"), tir.Var("n")
    with ana.constraint_scope(x < 5):
        assert ana.can_prove(x < 6)
        assert ana.can_prove(x * 2 < 10)
    assert not ana.can_prove(x < 6)
    with ana.constraint_scope(tir.all(x >= 0, x < n)):
        assert ana.can_prove(x < n)
    y = tir.Var("y")
    ana.bind(y, x + 1)
    assert _s(ana.simplify(y - x)) == "1"
    with pytest.raises(KilnError):
        ana.bind(y, x + 2)
    ana.bind(y, x + 2, allow_override=True)
    assert ana.can_prove_equal(y - x, 2)


def test_intset_api():
    x, y = tir.Var("x"), tir.Var("y")
    s = arith.eval_set(x * 2 + y, {x: tir.Range(0, 4), y: tir.Range(1, 3)})
    assert (s.min_value.value, s.max_value.value) == (1, 8)
    s = arith.eval_set(x // 4, {x: arith.IntSet.interval(0, 15)})
    assert (s.min_value.value, s.max_value.value) == (0, 3)
    s = arith.eval_set(x % 8, {x: tir.Range(8, 12)})
    assert (s.min_value.value, s.max_value.value) == (0, 3)
    p = arith.IntSet.single_point(x)
    assert p.is_single_point()
    v = arith.IntSet.vector(tir.Ramp(x, 1, 4))
    assert _s(v.max_value) == "x + 3"
    u = arith.union([arith.IntSet.interval(0, 3), arith.IntSet.interval(5, 9)])
    assert (u.min_value.value, u.max_value.value) == (0, 9)
    i = arith.intersect([arith.IntSet.interval(0, 7), arith.IntSet.interval(5, 9)])
    assert (i.min_value.value, i.max_value.value) == (5, 7)
    assert arith.IntSet.everything().is_everything()
    assert arith.IntSet.nothing().is_nothing()
    r = arith.IntSet.interval(2, 9).cover_range()
    assert (r.min.value, r.extent.value) == (2, 8)
    n = tir.Var("n")
    s = arith.eval_set(x, {x: tir.Range(0, n)})
    assert _s(s.max_value) == "n - 1"
    s = arith.eval_set(tir.Select(x < 2, x, 10), {x: tir.Range(0, 4)})
    assert (s.min_value.value, s.max_value.value) == (0, 10)


def test_deduce_bound():
    io, ii, n = tir.Var("io"), tir.Var("ii"), tir.Var("n")
    s = arith.deduce_bound(io, io * 64 + ii < n, {}, {ii: tir.Range(0, 64)})
    assert arith.is_neg_inf(s.min_value)
    assert _s(s.max_value) == "n // 64 - 1"
    s = arith.deduce_bound(io, io >= 3, {}, {})
    assert _s(s.min_value) == "3" and arith.is_pos_inf(s.max_value)
    s = arith.deduce_bound(io, tir.all(io >= 2, io * 2 < 11), {}, {})
    assert (s.min_value.value, s.max_value.value) == (2, 5)


def test_detect_linear_equation():
    x, y = tir.Var("x"), tir.Var("y")
    c = arith.detect_linear_equation(x * 4 + y * 2 + 7, [x, y])
    assert [int(v.value) for v in c] == [4, 2, 7]
    assert arith.detect_linear_equation(x * x + 1, [x]) == []


def test_vector_rules():
    ana = arith.Analyzer()
    x = tir.Var("x")
    e = tir.Ramp(0, 1, 4) + tir.Broadcast(x * 4, 4)
    assert _s(ana.simplify(e)) == "T.Ramp(x * 4, 1, 4)"
    e = tir.FloorDiv(tir.Ramp(x * 8, 1, 8), tir.Broadcast(tir.const(8), 8))
    assert _s(ana.simplify(e)) == "T.Broadcast(x, 8)"
    e = tir.FloorMod(tir.Ramp(x * 8, 1, 8), tir.Broadcast(tir.const(8), 8))
    assert _s(ana.simplify(e)) == "T.Ramp(0, 1, 8)"
    i = tir.Var("i")
    ana.bind(i, tir.Range(0, 4))
    e = tir.LT(tir.Ramp(i * 8, 1, 8), tir.Broadcast(tir.const(32), 8))
    assert _s(ana.simplify(e)) == "T.Broadcast(T.bool(True), 8)"


def test_float_folding_is_conservative():
    ana = arith.Analyzer()
    f = tir.Var("f", "float32")
    assert _s(ana.simplify(tir.const(1.5) + tir.const(2.0))) == "T.float32(3.5)"
    e = f * 0.0
    assert structural_equal(ana.simplify(e), e)   # NaN * 0 is NaN, keep it
