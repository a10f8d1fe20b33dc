"""tir.transform.InjectPrefetch on hand-written TIR (TVM's form: AttrStmt(buffer, "prefetch_scope", offset) just
inside the loop) and StorageFlatten's lowering of Prefetch to tir.prefetch calls; compiled for named targets."""
import numpy as np

import kiln
from kiln import tir
from kiln.tir import stmt as S
from kiln.tir.stmt_functor import post_order_visit
from kiln.tir.transform import InjectPrefetch, StorageFlatten

AVX2 = "llvm -mcpu=core-avx2"
AVX512 = "llvm -mcpu=skylake-avx512"


def _func(kind, offset, n=6, m=20):
    A = tir.decl_buffer((n, m), "float32", name="A")
    B = tir.decl_buffer((n, m), "float32", name="B")
    i, j = tir.Var("i", "int32"), tir.Var("j", "int32")
    inner = S.For(j, 0, m, S.ForKind.SERIAL, S.BufferStore(B, A[i, j] * 3.0, [i, j]))
    if kind == S.ForKind.VECTORIZED:  # the attribute on the vectorized j loop, the i loop outside
        inner = S.For(j, 0, m, kind, S.AttrStmt(A, "prefetch_scope", tir.const(offset),
                                                S.BufferStore(B, A[i, j] * 3.0, [i, j])))
        body = S.For(i, 0, n, S.ForKind.SERIAL, inner)
    else:
        body = S.For(i, 0, n, kind, S.AttrStmt(A, "prefetch_scope", tir.const(offset), inner))
    pa, pb = tir.Var("A", "handle"), tir.Var("B", "handle")
    return tir.PrimFunc([pa, pb], body, None, {pa: A, pb: B}, {"global_symbol": "main", "tir.noalias": True})


def _collect(node, pred):
    out = []
    post_order_visit(node, lambda x: out.append(x) if pred(x) else None)
    return out


def test_attr_becomes_guarded_prefetch_of_the_next_row():
    f = InjectPrefetch()(_func(S.ForKind.SERIAL, 1))
    (pf,) = _collect(f.body, lambda x: isinstance(x, S.Prefetch))
    (guard,) = _collect(f.body, lambda x: isinstance(x, S.IfThenElse))
    assert guard.then_case is pf
    assert "i <= 4" in str(guard.condition) or "i < 5" in str(guard.condition)
    assert str(pf.bounds[0].min) == "i + 1" and pf.bounds[0].extent.value == 1
    assert pf.bounds[1].min.value == 0 and pf.bounds[1].extent.value == 20
    assert not _collect(f.body, lambda x: isinstance(x, S.AttrStmt) and x.attr_key == "prefetch_scope")
    flat = StorageFlatten()(f)
    calls = _collect(flat.body, lambda x: isinstance(x, tir.Call) and x.op == "tir.prefetch")
    assert len(calls) == 2 and not _collect(flat.body, lambda x: isinstance(x, S.Prefetch))


def test_vectorized_loop_prefetch_is_hoisted():
    f = InjectPrefetch()(_func(S.ForKind.VECTORIZED, 4))
    (pf,) = _collect(f.body, lambda x: isinstance(x, S.Prefetch))
    (vloop,) = _collect(f.body, lambda x: isinstance(x, S.For) and x.kind == S.ForKind.VECTORIZED)
    assert not _collect(vloop, lambda x: isinstance(x, S.Prefetch))
    # all lanes' j + 4, clamped to the row: columns 4 .. 19
    assert pf.bounds[1].min.value == 4 and pf.bounds[1].extent.value == 16


def test_offset_past_the_loop_prefetches_nothing():
    f = InjectPrefetch()(_func(S.ForKind.SERIAL, 6))
    assert not _collect(f.body, lambda x: isinstance(x, S.Prefetch))


def test_builds_and_runs_parallel_and_vectorized():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 20)).astype("float32")
    for kind, offset in ((S.ForKind.PARALLEL, 1), (S.ForKind.VECTORIZED, 3), (S.ForKind.UNROLLED, 2)):
        for target in (AVX2, AVX512):
            mod = kiln.build(_func(kind, offset), target=target)
            assert "__builtin_prefetch(" in mod.get_source()
        mod = kiln.build(_func(kind, offset), target="llvm")
        b = kiln.nd.array(np.zeros((6, 20), "float32"))
        mod(kiln.nd.array(a), b)
        np.testing.assert_allclose(b.numpy(), a * 3, rtol=1e-6)
