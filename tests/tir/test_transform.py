"""TIR passes: semantics preserved (interpreter before/after on random inputs, odd sizes) and
the expected structure produced."""
import numpy as np
import pytest

from kiln import tir
from kiln.tir import ForKind as K
from kiln.tir import transform as T
from kiln.tir.interpreter import run_primfunc
from kiln.tir.stmt_functor import post_order_visit

from tir_helpers import make_func, loop


def _nodes(f, cls):
    out = []
    post_order_visit(f.body, lambda n: out.append(n) if isinstance(n, cls) else None)
    return out


def _run(f, shapes, dtype="float32", seed=0, scalars=()):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(dtype) if dtype.startswith("float")
              else rng.integers(-50, 50, s).astype(dtype) for s in shapes]
    run_primfunc(f, arrays + list(scalars))
    return arrays


def _same(f, g, shapes, **kw):
    a = _run(f, shapes, **kw)
    b = _run(g, shapes, **kw)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


def _split_add(n_expr, factor, kind=K.VECTORIZED, guard=True):
    n = n_expr
    A, B = tir.decl_buffer((n,), "float32", "A"), tir.decl_buffer((n,), "float32", "B")
    io, ii = tir.Var("i_outer"), tir.Var("i_inner")
    idx = io * factor + ii
    st = tir.BufferStore(B, A[idx] * 2.0 + 1.0, [idx])
    if guard:
        st = tir.IfThenElse(tir.likely(idx < n), st)
    body = loop(io, tir.floordiv(n + factor - 1, factor), loop(ii, factor, st, kind))
    return make_func([A, B], body)


# ---------------------------------------------------------------------------------------------
# StorageFlatten
# ---------------------------------------------------------------------------------------------
def _matmul_with_intermediate(n, m, k, lo=0):
    A = tir.decl_buffer((n, k), "float32", "A")
    B = tir.decl_buffer((k, m), "float32", "B")
    C = tir.decl_buffer((n, m), "float32", "C")
    Tb = tir.decl_buffer((n + lo, m), "float32", "T")
    i, j, r = tir.Var("i"), tir.Var("j"), tir.Var("r")
    init = tir.BufferStore(Tb, tir.const(0.0), [i + lo, j])
    upd = loop(r, k, tir.BufferStore(Tb, Tb[i + lo, j] + A[i, r] * B[r, j], [i + lo, j]))
    comp = loop(i, n, loop(j, m, tir.SeqStmt([init, upd])))
    out = loop(i, n, loop(j, m, tir.BufferStore(C, tir.exp(Tb[i + lo, j]), [i, j])))
    body = tir.BufferRealize(Tb, [tir.Range(lo, lo + n), tir.Range(0, m)], tir.const(True),
                             tir.SeqStmt([comp, out]))
    return make_func([A, B, C], body)


@pytest.mark.parametrize("lo", [0, 3])
def test_storage_flatten_realize_and_params(lo):
    f = _matmul_with_intermediate(5, 7, 3, lo)
    g = T.StorageFlatten(64)(f)
    assert not _nodes(g, tir.BufferRealize)
    allocs = _nodes(g, tir.Allocate)
    assert len(allocs) == 1 and str(allocs[0].extents[0]) == "35"
    for n in _nodes(g, tir.BufferLoad) + _nodes(g, tir.BufferStore):
        assert len(n.indices) == 1 and len(n.buffer.shape) == 1
    # buffer_map keeps the N-d buffers; the body uses flat views over the same data
    assert all(len(b.shape) == 2 for b in g.buffer_map.values())
    _same(f, g, [(5, 3), (3, 7), (5, 7)])
    assert "T.allocate([35], \"float32\", \"global\")" in str(g)


def test_storage_flatten_symbolic():
    n, m = tir.Var("n"), tir.Var("m")
    A = tir.decl_buffer((n, m), "float32", "A")
    B = tir.decl_buffer((n, m), "float32", "B")
    i, j = tir.Var("i"), tir.Var("j")
    f = make_func([A, B], loop(i, n, loop(j, m, tir.BufferStore(B, A[i, j] + 1.0, [i, j]))))
    g = T.StorageFlatten()(f)
    assert "A_1[i * m + j]" in str(g)
    for shape in [(3, 5), (1, 9), (4, 1)]:
        _same(f, g, [shape, shape])


# ---------------------------------------------------------------------------------------------
# VectorizeLoop
# ---------------------------------------------------------------------------------------------
def test_vectorize_becomes_ramp_store():
    f = _split_add(tir.const(128), 16, guard=False)
    g = T.VectorizeLoop()(f)
    stores = _nodes(g, tir.BufferStore)
    assert len(stores) == 1
    idx = stores[0].indices[0]
    assert isinstance(idx, tir.Ramp) and idx.lanes == 16 and str(idx.stride) == "1"
    assert stores[0].value.dtype == "float32x16"
    assert not [l for l in _nodes(g, tir.For) if l.kind == K.VECTORIZED]
    assert "B[i_outer * 16:i_outer * 16 + 16] = A[i_outer * 16:i_outer * 16 + 16]" in str(g)
    _same(f, g, [(128,), (128,)])


def test_vectorize_guarded_body_is_one_masked_vector():
    """A body under a branch on the loop variable (the guard of a split that does not divide) becomes one
    vector whose loads and stores touch only the lanes the guard lets through (tests/tir/
    test_vectorize_masked_tail.py has the generated code); the interpreter checks that no lane outside reads."""
    n = tir.Var("n")
    f = _split_add(n, 8)
    g = T.VectorizeLoop()(f)
    kinds = [l.kind for l in _nodes(g, tir.For)]
    assert K.VECTORIZED not in kinds and kinds.count(K.SERIAL) == 1  # the lane loop is gone
    ops = [c.op for c in _nodes(g, tir.Call)]
    assert ops.count("tir.kiln_any_lane") == 1 and ops.count("tir.kiln_lane_masked") == 2  # a load, a store
    for size in (1, 13, 16):
        _same(f, g, [(size,), (size,)])


def test_vectorize_branch_with_else_stays_scalar_loop():
    n = tir.Var("n")
    A, B = tir.decl_buffer((n,), "float32", "A"), tir.decl_buffer((n,), "float32", "B")
    io, ii = tir.Var("i_outer"), tir.Var("i_inner")
    idx = io * 8 + ii
    st = tir.IfThenElse(idx < n - 3, tir.BufferStore(B, A[idx] * 2.0, [idx]), tir.BufferStore(B, A[idx], [idx]))
    f = make_func([A, B], loop(io, tir.floordiv(n + 7, 8),
                               loop(ii, 8, tir.IfThenElse(tir.likely(idx < n), st), K.VECTORIZED)))
    g = T.VectorizeLoop()(f)
    assert not _nodes(g, tir.Ramp)
    for size in (1, 13, 16):
        _same(f, g, [(size,), (size,)])


def test_vectorize_refuses_reduction_into_scalar_location():
    A = tir.decl_buffer((16,), "float32", "A")
    S = tir.decl_buffer((1,), "float32", "S")
    i = tir.Var("i")
    f = make_func([A, S], loop(i, 16, tir.BufferStore(S, S[0] + A[i], [0]), K.VECTORIZED))
    g = T.VectorizeLoop()(f)
    assert not _nodes(g, tir.Ramp)
    _same(f, g, [(16,), (1,)])


def test_vectorize_refuses_loop_carried_dependency():
    A = tir.decl_buffer((9,), "float32", "A")
    i = tir.Var("i")
    f = make_func([A], loop(i, 8, tir.BufferStore(A, A[i] + 1.0, [i + 1]), K.VECTORIZED))
    g = T.VectorizeLoop()(f)
    assert not _nodes(g, tir.Ramp)
    _same(f, g, [(9,)])


def test_vectorize_in_place_update_and_inner_reduction():
    C = tir.decl_buffer((8,), "float32", "C")
    A = tir.decl_buffer((8, 5), "float32", "A")
    i, k = tir.Var("i"), tir.Var("k")
    body = loop(i, 8, tir.SeqStmt([tir.BufferStore(C, tir.const(0.0), [i]),
                                   loop(k, 5, tir.BufferStore(C, C[i] + A[i, k], [i]))]), K.VECTORIZED)
    f = make_func([C, A], body)
    g = T.VectorizeLoop()(f)
    assert _nodes(g, tir.Ramp)
    _same(f, g, [(8,), (8, 5)])


def test_vectorize_if_then_else_with_load_guards_it_pure_select_vectorizes():
    A = tir.decl_buffer((8,), "float32", "A")
    B = tir.decl_buffer((8,), "float32", "B")
    i = tir.Var("i")
    guarded = tir.if_then_else(i >= 1, A[i - 1], tir.const(0.0))
    f = make_func([A, B], loop(i, 8, tir.BufferStore(B, guarded, [i]), K.VECTORIZED))
    g = T.VectorizeLoop()(f)
    assert _nodes(g, tir.Ramp) and _nodes(g, tir.expr.Select)   # the load's index clamped, then a blend
    _same(f, g, [(8,), (8,)])
    n = tir.Var("n")   # a buffer of symbolic shape may be empty: element 0 is not known to exist
    An = tir.decl_buffer((n,), "float32", "An")
    fn = make_func([An, B], loop(i, 8, tir.BufferStore(B, tir.if_then_else(i >= 1, An[i - 1], tir.const(0.0)),
                                                       [i]), K.VECTORIZED))
    assert not _nodes(T.VectorizeLoop()(fn), tir.Ramp)
    pure = tir.if_then_else(i >= 4, tir.Cast("float32", i), tir.const(-1.0))
    f2 = make_func([A, B], loop(i, 8, tir.BufferStore(B, pure + A[i], [i]), K.VECTORIZED))
    g2 = T.VectorizeLoop()(f2)
    assert _nodes(g2, tir.Ramp) and _nodes(g2, tir.expr.Select)
    _same(f2, g2, [(8,), (8,)])


def test_vectorize_disabled():
    f = _split_add(tir.const(32), 8, guard=False)
    g = T.VectorizeLoop(enable=False)(f)
    assert not _nodes(g, tir.Ramp)
    assert [l.kind for l in _nodes(g, tir.For)] == [K.SERIAL, K.SERIAL]


# ---------------------------------------------------------------------------------------------
# UnrollLoop
# ---------------------------------------------------------------------------------------------
def test_unroll_explicit_with_fresh_let_vars():
    A = tir.decl_buffer((12,), "float32", "A")
    B = tir.decl_buffer((12,), "float32", "B")
    io, ii = tir.Var("io"), tir.Var("ii")
    t = tir.Var("t", "float32")
    body = loop(io, 3, loop(ii, 4, tir.LetStmt(t, A[io * 4 + ii], tir.BufferStore(B, t * t, [io * 4 + ii])),
                            K.UNROLLED))
    f = make_func([A, B], body)
    g = T.UnrollLoop()(f)
    lets = _nodes(g, tir.LetStmt)
    assert len(lets) == 4 and len({id(l.var) for l in lets}) == 4
    assert len(_nodes(g, tir.For)) == 1
    assert "t_1: T.float32 = A[io * 4 + 1]" in str(g)
    _same(f, g, [(12,), (12,)])


def test_unroll_auto_max_step():
    f = _split_add(tir.const(12), 3, kind=K.SERIAL, guard=False)
    g = T.UnrollLoop(auto_max_step=4)(f)
    assert len(_nodes(g, tir.For)) == 1
    h = T.UnrollLoop(auto_max_step=2)(f)
    assert len(_nodes(h, tir.For)) == 2
    _same(f, g, [(12,), (12,)])


# ---------------------------------------------------------------------------------------------
# LoopPartition + Simplify + RemoveNoOp
# ---------------------------------------------------------------------------------------------
def test_loop_partition_symbolic_tail():
    n = tir.Var("n")
    f = _split_add(n, 64)
    g = T.Simplify()(T.LoopPartition()(f))
    text = str(g)
    assert "for i_outer in range(n // 64):" in text
    assert "for i_outer_1 in range(n // 64, (n + 63) // 64):" in text
    loops = [l for l in _nodes(g, tir.For) if l.loop_var.name == "i_outer"]
    # the main part has no guard, the tail keeps it
    assert text.count("T.likely") == 1
    for size in (0, 1, 63, 64, 65, 130):
        _same(f, g, [(size,), (size,)])
    v = T.VectorizeLoop()(g)
    assert "B[i_outer * 64:i_outer * 64 + 64] = A[i_outer * 64:i_outer * 64 + 64]" in str(v)
    for size in (5, 64, 129):
        _same(f, v, [(size,), (size,)])


def test_loop_partition_const_loop():
    A, B = tir.decl_buffer((10,), "float32", "A"), tir.decl_buffer((10,), "float32", "B")
    i = tir.Var("i")
    body = loop(i, 10, tir.IfThenElse(tir.likely(i < 7), tir.BufferStore(B, A[i], [i]),
                                      tir.BufferStore(B, tir.const(0.0), [i])))
    f = make_func([A, B], body)
    assert str(T.LoopPartition()(f)) == str(f)  # TVM default: constant loops untouched
    g = T.Simplify()(T.LoopPartition(partition_const_loop=True)(f))
    text = str(g)
    assert "for i in range(7):" in text and "for i_1 in range(7, 10):" in text
    assert "T.likely" not in text
    _same(f, g, [(10,), (10,)])


def test_loop_partition_lower_bound_gives_head():
    n = tir.Var("n")
    A, B = tir.decl_buffer((n,), "float32", "A"), tir.decl_buffer((n,), "float32", "B")
    i = tir.Var("i")
    body = loop(i, n, tir.IfThenElse(tir.likely(i >= 3), tir.BufferStore(B, A[i - 3], [i]),
                                     tir.BufferStore(B, tir.const(5.0), [i])))
    f = make_func([A, B], body)
    g = T.RemoveNoOp()(T.Simplify()(T.LoopPartition()(f)))
    text = str(g)
    # both parts are decided: the head takes the else branch, the rest the then branch
    assert "T.likely" not in text
    assert "for i in range(T.min(n, 3)):" in text and "for i_1 in range(T.min(n, 3), n):" in text
    for size in (0, 2, 3, 4, 11):
        _same(f, g, [(size,), (size,)])


def test_loop_partition_relaxes_a_thread_launched_inside_the_loop():
    """The deduced split point is evaluated outside the loop, so it must not mention a thread
    variable that is only launched inside it: the thread is relaxed over its extent."""
    n = tir.Var("n")
    A, B = tir.decl_buffer((n,), "float32", "A"), tir.decl_buffer((n,), "float32", "B")
    io = tir.Var("i_outer")
    tx = tir.IterVar(tir.Range(0, 4), tir.Var("threadIdx_x"), tir.IterVar.ThreadIndex, "threadIdx.x")
    idx = io * 4 + tx.var
    body = loop(io, tir.floordiv(n + 3, 4), tir.AttrStmt(
        tx, "thread_extent", tir.const(4), tir.IfThenElse(tir.likely(idx < n), tir.BufferStore(B, A[idx], [idx]))))
    g = T.Simplify()(T.LoopPartition()(f := make_func([A, B], body)))
    loops = _nodes(g, tir.For)
    assert len(loops) == 2 and f is not g
    for lp in loops:  # loop bounds use only n
        for bound in (lp.min, lp.extent):
            names = set()
            post_order_visit(bound, lambda x: names.add(x.name) if isinstance(x, tir.Var) else None)
            assert names <= {"n"}, (lp.loop_var.name, str(bound))
    assert "for i_outer in range(n // 4):" in str(g)
    assert str(g).count("T.likely") == 1


def test_simplify_uses_loop_bounds_and_removes_dead_code():
    A = tir.decl_buffer((10,), "int32", "A")
    i = tir.Var("i")
    body = loop(i, 10, tir.SeqStmt([
        tir.IfThenElse(i < 10, tir.BufferStore(A, tir.floordiv(i * 4 + 2, 4) + tir.floormod(i, 16), [i])),
        tir.IfThenElse(i >= 10, tir.BufferStore(A, tir.const(99), [i])),
        tir.Evaluate(0),
    ]))
    f = make_func([A], body)
    g = T.RemoveNoOp()(T.Simplify()(f))
    assert str(g).splitlines()[-2:] == ["    for i in range(10):", "        A[i] = i * 2"]
    _same(f, g, [(10,)], dtype="int32")


def test_remove_no_op():
    A = tir.decl_buffer((4,), "float32", "A")
    i, j = tir.Var("i"), tir.Var("j")
    body = tir.SeqStmt([loop(i, 4, tir.Evaluate(0)), loop(j, 4, tir.BufferStore(A, A[j], [j])),
                        loop(i, 0, tir.BufferStore(A, tir.const(1.0), [i]))])
    g = T.RemoveNoOp()(make_func([A], body))
    assert isinstance(g.body, tir.Evaluate)


def test_full_pipeline_on_2d_split_and_module_input():
    from kiln.ir.module import IRModule
    n, m = tir.Var("n"), tir.Var("m")
    A = tir.decl_buffer((n, m), "float32", "A")
    B = tir.decl_buffer((n, m), "float32", "B")
    i, jo, ji = tir.Var("i"), tir.Var("j_outer"), tir.Var("j_inner")
    j = jo * 8 + ji
    st = tir.IfThenElse(tir.likely(j < m), tir.BufferStore(B, tir.sigmoid(A[i, j]) * A[i, j], [i, j]))
    body = loop(i, n, loop(jo, tir.floordiv(m + 7, 8), loop(ji, 8, st, K.VECTORIZED)), K.PARALLEL)
    f = make_func([A, B], body)
    mod = IRModule({"main": f})
    for p in [T.StorageFlatten(64), T.LoopPartition(), T.Simplify(), T.VectorizeLoop(), T.UnrollLoop(),
              T.Simplify(), T.RemoveNoOp()]:
        mod = p(mod)
        assert p.info.name.startswith("tir.")
    g = mod["main"]
    assert _nodes(g, tir.Ramp)
    for shape in [(3, 8), (2, 13), (1, 1), (4, 17)]:
        _same(f, g, [shape, shape])
