import pytest

from kiln import tir
from kiln.error import KilnError
from kiln.tir import ForKind as K

from tir_helpers import make_func, loop


def test_undefined_vars_and_well_formed():
    n = tir.Var("n")
    A = tir.decl_buffer((n,), "float32", "A")
    i, x = tir.Var("i"), tir.Var("x")
    body = loop(i, n, tir.BufferStore(A, tir.Cast("float32", i + x), [i]))
    assert [v.name for v in tir.analysis.undefined_vars(body, [A.data])] == ["n", "x"]
    f = make_func([A], body, scalars=[x])
    assert tir.analysis.verify_well_formed(f)
    bad = make_func([A], tir.SeqStmt([body, body]), scalars=[x])
    with pytest.raises(KilnError, match="more than once"):
        tir.analysis.verify_well_formed(bad)
    assert not tir.analysis.verify_well_formed(bad, assert_mode=False)


def test_unrolled_code_stays_well_formed_and_flops():
    A = tir.decl_buffer((8,), "float32", "A")
    i, t = tir.Var("i"), tir.Var("t", "float32")
    body = loop(i, 8, tir.LetStmt(t, A[i] * 2.0, tir.BufferStore(A, t + 1.0, [i])), K.UNROLLED)
    f = make_func([A], body)
    g = tir.transform.UnrollLoop()(f)
    assert tir.analysis.verify_well_formed(g)
    assert tir.analysis.estimate_tir_flops(f) == 16
    assert tir.analysis.estimate_tir_flops(g) == 16
