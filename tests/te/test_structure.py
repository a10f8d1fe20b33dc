"""Shape of the lowered loop nests: loops, guards, kinds, attributes, realizes."""
import numpy as np

from kiln import te, tir
from kiln.tir import stmt_functor
from kiln.ir.node import structural_equal


def _nodes(stmt, cls_name):
    out = []
    stmt_functor.post_order_visit(stmt, lambda n: out.append(n) if type(n).__name__ == cls_name else None)
    return out


def _loops(stmt):
    """(loop var name, extent, kind) outermost first."""
    out = []
    stmt_functor.pre_order_visit(
        stmt, lambda n: out.append((n.loop_var.name, n.extent, n.kind)) if isinstance(n, tir.For) else None)
    return out


def _ext(e):
    return int(e) if isinstance(e, tir.IntImm) else str(e)


def _elementwise(shape):
    A = te.placeholder(shape, name="A")
    B = te.compute(shape, lambda *i: A(*i) + 1.0, name="B")
    return A, B


def test_split_guard_only_when_needed():
    for extent, factor, guarded in [(30, 7, True), (32, 8, False), (8, 16, False)]:
        A, B = _elementwise((extent,))
        s = te.create_schedule(B.op)
        s[B].split(B.op.axis[0], factor=factor)
        f = te.schedule_to_primfunc(s, [A, B])
        ifs = _nodes(f.body, "IfThenElse")
        assert bool(ifs) == guarded, (extent, factor, f.body)
        if guarded:
            cond = ifs[0].condition
            assert isinstance(cond, tir.Call) and cond.op == "tir.likely"


def test_split_tightens_inner_extent_when_factor_exceeds_extent():
    A, B = _elementwise((8,))
    s = te.create_schedule(B.op)
    s[B].split(B.op.axis[0], factor=16)
    f = te.schedule_to_primfunc(s, [A, B])
    assert [(n, _ext(e)) for n, e, _ in _loops(f.body)] == [("i0.inner", 8)]


def test_symbolic_split_has_guard_and_ceil_extent():
    n = te.var("n")
    A, B = _elementwise((n,))
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=64)
    f = te.schedule_to_primfunc(s, [A, B])
    loops = _loops(f.body)
    assert [l[0] for l in loops] == ["i0.outer", "i0.inner"]
    assert _ext(loops[1][1]) == 64
    assert "n" in str(loops[0][1])
    ifs = _nodes(f.body, "IfThenElse")
    assert len(ifs) == 1 and "n" in str(ifs[0].condition)


def test_reorder_and_tile_loop_order():
    A, B = _elementwise((16, 12))
    s = te.create_schedule(B.op)
    xo, yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], 4, 3)
    assert [iv.var.name for iv in s[B].leaf_iter_vars] == ["i0.outer", "i1.outer", "i0.inner", "i1.inner"]
    s[B].reorder(xi, yo)
    assert s[B].leaf_iter_vars == [xo, xi, yo, yi]
    f = te.schedule_to_primfunc(s, [A, B])
    assert [(n, _ext(e)) for n, e, _ in _loops(f.body)] == [
        ("i0.outer", 4), ("i0.inner", 4), ("i1.outer", 4), ("i1.inner", 3)]
    assert not _nodes(f.body, "IfThenElse")


def test_loop_kinds_and_pragma():
    A, B = _elementwise((16, 12))
    s = te.create_schedule(B.op)
    i, j = B.op.axis
    jo, ji = s[B].split(j, factor=4)
    s[B].parallel(i)
    s[B].unroll(jo)
    s[B].vectorize(ji)
    s[B].pragma(i, "auto_unroll_max_step", 16)
    f = te.schedule_to_primfunc(s, [A, B])
    kinds = [k for _, _, k in _loops(f.body)]
    assert kinds == [tir.ForKind.PARALLEL, tir.ForKind.UNROLLED, tir.ForKind.VECTORIZED]
    attrs = _nodes(f.body, "AttrStmt")
    assert [a.attr_key for a in attrs] == ["pragma_auto_unroll_max_step"]
    assert int(attrs[0].value) == 16
    assert isinstance(f.body, tir.AttrStmt)  # the pragma wraps the loop it annotates


def test_relations_and_leaf_vars():
    A, B = _elementwise((6, 7))
    s = te.create_schedule(B.op)
    i, j = B.op.axis
    f = s[B].fuse(i, j)
    fo, fi = s[B].split(f, factor=5)
    rels = s[B].relations
    assert isinstance(rels[0], te.Fuse) and rels[0].outer is i and rels[0].inner is j and rels[0].fused is f
    assert isinstance(rels[1], te.Split) and rels[1].parent is f and int(rels[1].factor) == 5
    assert s[B].leaf_iter_vars == [fo, fi]
    assert len(s[B].all_iter_vars) == 5
    assert s[B].op is B.op and s[B] is s[B.op]


def test_reduction_init_placement_with_reordered_axes():
    A = te.placeholder((4, 6), name="A")
    k = te.reduce_axis((0, 6), "k")
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=2)
    s[B].reorder(ko, B.op.axis[0], ki)
    f = te.schedule_to_primfunc(s, [A, B])
    # init: its own loop over i before the reduction loops
    top = f.body
    assert isinstance(top, tir.SeqStmt)
    init, update = top.seq
    assert isinstance(init, tir.For) and init.loop_var.name == "i.init"
    assert isinstance(init.body, tir.BufferStore) and float(init.body.value.value) == 0.0
    assert [l[0] for l in _loops(update)] == ["k.outer", "i", "k.inner"]


def test_reduction_init_inside_common_loops():
    A = te.placeholder((4, 6), name="A")
    k = te.reduce_axis((0, 6), "k")
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    f = te.schedule_to_primfunc(s, [A, B])
    outer = f.body
    assert isinstance(outer, tir.For) and outer.loop_var.name == "i"
    init, update = outer.body.seq
    assert isinstance(init, tir.BufferStore)
    assert isinstance(update, tir.For) and update.loop_var.name == "k"


def test_params_buffer_map_attrs_and_no_producer_nodes():
    n = te.size_var("n")
    A = te.placeholder((n, 3), name="A", dtype="float64")
    B = te.compute((n, 3), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((n, 3), lambda i, j: B[i, j] + 1.0, name="C")
    s = te.create_schedule(C.op)
    f = te.schedule_to_primfunc(s, [A, C], name="myfunc")
    assert [p.name for p in f.params] == ["A", "C"]
    assert all(p.dtype == "handle" for p in f.params)
    bufA = f.buffer_map[f.params[0]]
    assert bufA.dtype == "float64" and bufA.shape[0] is n and int(bufA.shape[1]) == 3
    assert f.attrs["global_symbol"] == "myfunc" and f.attrs["tir.noalias"] is True
    for cls in ("ProducerLoad", "ProducerStore", "ProducerRealize"):
        assert not _nodes(f.body, cls)
    realizes = _nodes(f.body, "BufferRealize")
    assert len(realizes) == 1 and realizes[0].buffer.name == "B"
    loads = _nodes(f.body, "BufferLoad")
    assert {l.buffer.name for l in loads} == {"A", "B"}
    assert all(len(l.indices) == 2 for l in loads)


def test_compute_inline_removes_stage():
    A = te.placeholder((5,), name="A")
    B = te.compute((5,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((5,), lambda i: B[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    f = te.schedule_to_primfunc(s, [A, C])
    assert not _nodes(f.body, "BufferRealize")
    assert len(_loops(f.body)) == 1


def test_compute_at_region_is_relative_to_attach_point():
    A = te.placeholder((20,), name="A")
    B = te.compute((20,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((18,), lambda i: B[i] + B[i + 2], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=6)
    s[B].compute_at(s[C], xo)
    f = te.schedule_to_primfunc(s, [A, C])
    (realize,) = _nodes(f.body, "BufferRealize")
    assert int(realize.bounds[0].extent) == 8  # 6 outputs read a window of 8
    assert "i.outer" in str(realize.bounds[0].min).replace("i_outer", "i.outer")
    outer = f.body
    assert isinstance(outer, tir.For) and outer.loop_var.name == "i.outer"


def test_lowering_does_not_change_the_schedule():
    A = te.placeholder((9,), name="A")
    B = te.compute((9,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((9,), lambda i: B[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    before = list(s[C].leaf_iter_vars)
    f1 = te.schedule_to_primfunc(s, [A, C])
    f2 = te.schedule_to_primfunc(s, [A, C])
    assert s[C].leaf_iter_vars == before and not s[C].relations
    assert s[B].attach_type == 2  # still "inline" on the user's schedule
    assert structural_equal(f1, f2, map_free_vars=True)


def test_bind_thread_axis():
    A, B = _elementwise((64,))
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=16)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    f = te.schedule_to_primfunc(s, [A, B])
    attrs = _nodes(f.body, "AttrStmt")
    assert sorted((a.node.thread_tag, int(a.value)) for a in attrs) == [("blockIdx.x", 4), ("threadIdx.x", 16)]
    assert not _loops(f.body)
    from kiln.tir.interpreter import run_primfunc
    a = np.arange(64, dtype="float32")
    b = np.zeros(64, "float32")
    run_primfunc(f, [a, b])
    np.testing.assert_allclose(b, a + 1)


def test_attach_fields():
    A, B = _elementwise((8,))
    C = te.compute((8,), lambda i: B[i] * 2.0, name="C")
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    assert s[B].attach_type == 4 and s[B].attach_ivar is C.op.axis[0] and s[B].attach_stage is s[C]
    s[B].compute_root()
    assert s[B].attach_type == 1 and s[B].attach_ivar is None
    assert s.outputs == [C.op]
    assert [st.op.name for st in s.stages] == ["A", "B", "C"]
    assert s[C].is_output and not s[B].is_output


def test_cache_read_and_write_stage_order_and_names():
    A, B = _elementwise((8,))
    s = te.create_schedule(B.op)
    AA = s.cache_read(A, "shared", [B])
    BL = s.cache_write(B, "local")
    assert [st.op.name for st in s.stages] == ["A", "A.shared", "B.local", "B"]
    assert s[AA].scope == "shared" and s[BL].scope == "local"
    assert s[B].op is not B.op and s[B].origin_op is B.op
