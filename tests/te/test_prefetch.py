"""Stage.prefetch (TVM's API): TE lowering puts a ``prefetch_scope`` attribute on the loop, InjectPrefetch makes
it a Prefetch of the region the later iteration reads (clamped to the buffer), StorageFlatten one ``tir.prefetch``
per cache line, the C printer ``__builtin_prefetch``. Results never change."""
import re

import numpy as np
import pytest

import kiln
from kiln import te, tir
from kiln.error import KilnError
from kiln.tir import stmt as S
from kiln.tir.stmt_functor import post_order_visit
from kiln.tir.transform import InjectPrefetch

AVX2 = "llvm -mcpu=core-avx2"
AVX512 = "llvm -mcpu=skylake-avx512"


def _host_runs_avx512():
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return False
    return " avx512f " in flags and " avx512bw " in flags and " avx512vl " in flags


def _elementwise(n, m):
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    return A, B


def _prefetches(func):
    found = []
    post_order_visit(func.body, lambda x: found.append(x) if isinstance(x, S.Prefetch) else None)
    return found


def _prefetch_calls(func):
    found = []
    post_order_visit(func.body, lambda x: found.append(x)
                     if isinstance(x, tir.Call) and x.op == "tir.prefetch" else None)
    return found


def _has_prefetch(stmt):
    found = []
    post_order_visit(stmt, lambda x: found.append(x) if isinstance(x, tir.Call) and x.op == "tir.prefetch" else None)
    return bool(found)


def _run(f, arrays):
    nds = [kiln.nd.array(a) for a in arrays]
    f(*nds)
    return [x.numpy() for x in nds]


def test_te_lowering_emits_prefetch_region():
    A, B = _elementwise(37, 53)
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=4)
    s[B].prefetch(A, xo, 1)
    mod = kiln.driver.schedule_to_module(s, [A, B])
    func = mod["main"]
    attrs = []
    post_order_visit(func.body, lambda x: attrs.append(x)
                     if isinstance(x, S.AttrStmt) and x.attr_key == "prefetch_scope" else None)
    assert len(attrs) == 1 and attrs[0].node is func.buffer_map[func.params[0]]
    injected = InjectPrefetch()(func)
    (pf,) = _prefetches(injected)
    text = injected.script()
    assert "T.prefetch(A, [" in text
    # the region of iteration xo + 1: rows 4 * xo + 4 .. 4 * xo + 7 clamped to the 37 rows, every column
    ana = kiln.arith.Analyzer()
    assert ana.can_prove_equal(pf.bounds[1].min, 0) and ana.can_prove_equal(pf.bounds[1].extent, 53)
    lowered = kiln.lower(s, [A, B])["main"]
    assert _prefetch_calls(lowered)
    assert "T.prefetch(T.tvm_access_ptr" in lowered.script()


@pytest.mark.parametrize("target", [AVX2, AVX512])
@pytest.mark.parametrize("shape,factor,offset,emitted", [((37, 53), 4, 1, True), ((11, 7), 3, 2, True),
                                                          ((64, 64), 8, 1, True), ((9, 3), 4, 5, False)])
def test_results_unchanged_odd_shapes(target, shape, factor, offset, emitted):
    rng = np.random.default_rng(1)
    A, B = _elementwise(*shape)
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=factor)
    s[B].prefetch(A, xo, offset)   # TVM-classic call, unmodified
    f = kiln.build(s, [A, B], target)
    src = f.get_source()
    # 3 iterations of xo and offset 5: no later iteration exists, the clamped region is provably empty
    assert ("__builtin_prefetch(" in src) == emitted
    if target == AVX512 and not _host_runs_avx512():
        return
    a = rng.standard_normal(shape).astype("float32")
    _, b = _run(f, [a, np.zeros(shape, "float32")])
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)


def test_prefetch_addresses_stay_in_the_buffer():
    # every prefetched element offset, evaluated for every iteration, lies inside A (the interpreter checks no
    # accesses, so check the region directly): rows clamped to [0, n), extents zero past the end
    n, m = 10, 6
    A, B = _elementwise(n, m)
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=3)
    s[B].prefetch(A, xo, 2)
    func = InjectPrefetch()(kiln.driver.schedule_to_module(s, [A, B])["main"])
    (pf,) = _prefetches(func)
    guards = []
    post_order_visit(func.body, lambda x: guards.append(x) if isinstance(x, S.IfThenElse) and x.then_case is pf
                     else None)
    (guard,) = guards
    loop_var = None

    def find(x):
        nonlocal loop_var
        if isinstance(x, S.For) and x.loop_var.name.startswith("i.outer"):
            loop_var = x.loop_var
    post_order_visit(func.body, find)
    assert loop_var is not None
    seen = set()
    ana = kiln.arith.Analyzer()
    for it in range(4):
        def at(e):
            return ana.simplify(tir.stmt_functor.substitute(e, {loop_var: it})).value
        if not at(guard.condition):
            assert it >= 2  # iterations 2, 3 have no iteration + 2 inside the rows (3 * 4 >= 10)
            continue
        (lo0, ext0), (lo1, ext1) = [(at(b.min), at(b.extent)) for b in pf.bounds]
        assert ext0 > 0 and 0 <= lo0 and lo0 + ext0 <= n and lo1 == 0 and ext1 == m
        seen.update(range(lo0, lo0 + ext0))
    assert seen == set(range(6, 10))


@pytest.mark.parametrize("target", [AVX2, AVX512])
def test_vectorized_unrolled_parallel_loops(target):
    rng = np.random.default_rng(2)
    n, m = 37, 53
    A, B = _elementwise(n, m)
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=4)
    jo, ji = s[B].split(B.op.axis[1], factor=8)
    s[B].reorder(xo, jo, xi, ji)
    s[B].parallel(xo)
    s[B].unroll(xi)
    s[B].vectorize(ji)
    s[B].prefetch(A, ji, 2)   # hoisted in front of the vector loop
    s[B].prefetch(A, xi, 1)
    s[B].prefetch(A, jo, 1)
    s[B].prefetch(A, xo, 1)
    f = kiln.build(s, [A, B], target)
    assert f.get_source().count("__builtin_prefetch(") >= 4
    if target == AVX512 and not _host_runs_avx512():
        return
    a = rng.standard_normal((n, m)).astype("float32")
    _, b = _run(f, [a, np.zeros((n, m), "float32")])
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)


def test_prefetch_covers_producers_computed_at_the_loop():
    rng = np.random.default_rng(3)
    n, m = 19, 23
    A = te.placeholder((n, m), name="A")
    W = te.placeholder((m, 11), name="W")
    k = te.reduce_axis((0, m), name="k")
    C = te.compute((n, m), lambda i, j: A[i, j] * 3.0, name="C")
    D = te.compute((n, 11), lambda i, o: te.sum(C[i, k] * W[k, o], axis=k), name="D")
    s = te.create_schedule(D.op)
    io, ii = s[D].split(D.op.axis[0], factor=5)
    s[C].compute_at(s[D], io)
    s[D].prefetch(A, io, 1)   # A is read only by C, computed at io
    s[D].prefetch(W, io, 1)
    func = InjectPrefetch()(kiln.driver.schedule_to_module(s, [A, W, D])["main"])
    names = sorted(p.buffer.name for p in _prefetches(func))
    assert names == ["A", "W"]
    f = kiln.build(s, [A, W, D], AVX2)
    a = rng.standard_normal((n, m)).astype("float32")
    w = rng.standard_normal((m, 11)).astype("float32")
    *_, d = _run(f, [a, w, np.zeros((n, 11), "float32")])
    np.testing.assert_allclose(d, (a * 3) @ w, rtol=1e-4, atol=1e-4)


def test_nchwc_like_weight_block_contiguous_span():
    # the whole inner block of a 4-d weight is one contiguous span: one line loop, no per-row loops
    W = te.placeholder((8, 4, 3, 16), name="W")
    X = te.placeholder((4, 3, 16), name="X")
    r = te.reduce_axis((0, 4), name="r")
    t = te.reduce_axis((0, 3), name="t")
    u = te.reduce_axis((0, 16), name="u")
    Y = te.compute((8,), lambda o: te.sum(W[o, r, t, u] * X[r, t, u], axis=[r, t, u]), name="Y")
    s = te.create_schedule(Y.op)
    (o,) = Y.op.axis
    s[Y].prefetch(W, o, 1)
    lowered = kiln.lower(s, [W, X, Y])["main"]
    calls = _prefetch_calls(lowered)
    assert len(calls) == 2  # the line loop and the span's last element
    loops = []
    post_order_visit(lowered.body, lambda x: loops.append(x) if isinstance(x, S.For) and "W" in x.loop_var.name
                     else None)
    # 4 * 3 * 16 floats = 12 lines per weight block, a constant under the guard `o <= 6`
    assert len(loops) == 1 and isinstance(loops[0].extent, tir.IntImm) and loops[0].extent.value == 12
    rng = np.random.default_rng(4)
    f = kiln.build(s, [W, X, Y], AVX2)
    w = rng.standard_normal((8, 4, 3, 16)).astype("float32")
    x = rng.standard_normal((4, 3, 16)).astype("float32")
    *_, y = _run(f, [w, x, np.zeros(8, "float32")])
    np.testing.assert_allclose(y, np.einsum("ortu,rtu->o", w, x), rtol=1e-4, atol=1e-4)


def test_int8_and_symbolic_shape():
    n = te.var("n")
    A = te.placeholder((n, 70), name="A", dtype="int8")
    B = te.compute((n, 70), lambda i, j: A[i, j] + tir.const(1, "int8"), name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=2)
    s[B].prefetch(A, xo, 1)
    f = kiln.build(s, [A, B], AVX2)
    assert "__builtin_prefetch(" in f.get_source()
    for rows in (1, 7):
        a = np.random.default_rng(rows).integers(-100, 100, (rows, 70)).astype("int8")
        _, b = _run(f, [a, np.zeros((rows, 70), "int8")])
        np.testing.assert_array_equal(b, a + 1)


def test_errors():
    A, B = _elementwise(8, 8)
    other = te.placeholder((8, 8), name="other")
    s = te.create_schedule(B.op)
    i, j = B.op.axis
    xo, xi = s[B].split(i, factor=4)
    with pytest.raises(KilnError, match=r"prefetch on stage 'B'.*'i'.*no longer a loop"):
        s[B].prefetch(A, i, 1)
    with pytest.raises(KilnError, match=r"prefetch on stage 'B'.*'other' is not an input"):
        s[B].prefetch(other, xo, 1)
    with pytest.raises(KilnError, match=r"prefetch on stage 'B'.*must be a te.Tensor"):
        s[B].prefetch("A", xo, 1)
    with pytest.raises(KilnError, match=r"prefetch on stage 'B'.*offset must be an integer"):
        s[B].prefetch(A, xo, 1.5)


def test_no_prefetch_for_inlined_tensor_and_trivial_loop():
    A = te.placeholder((6, 5), name="A")
    C = te.compute((6, 5), lambda i, j: A[i, j] + 1.0, name="C")
    B = te.compute((6, 5), lambda i, j: C[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[C].compute_inline()
    xo, xi = s[B].split(B.op.axis[0], factor=6)   # xo has one iteration
    s[B].prefetch(C, xi, 1)   # C is inlined: nothing to prefetch
    s[B].prefetch(A, xo, 1)   # a loop of one iteration: no later iteration
    lowered = kiln.lower(s, [A, B])["main"]
    assert not _prefetch_calls(lowered)
    f = kiln.build(s, [A, B], AVX2)
    a = np.random.default_rng(5).standard_normal((6, 5)).astype("float32")
    _, b = _run(f, [a, np.zeros((6, 5), "float32")])
    np.testing.assert_allclose(b, (a + 1) * 2, rtol=1e-6)


def test_tir_prefetch_statement_prints_and_flattens():
    # a hand-written Prefetch (TVM's tir.Prefetch) in a PrimFunc: printed, lowered to calls, run
    A = tir.decl_buffer((4, 40), "float32", name="A")
    B = tir.decl_buffer((4, 40), "float32", name="B")
    i = tir.Var("i", "int32")
    j = tir.Var("j", "int32")
    body = S.For(i, 0, 4, S.ForKind.SERIAL, S.SeqStmt([
        S.Prefetch(A, [tir.Range.from_min_extent(i, 1), tir.Range.from_min_extent(0, 40)]),
        S.For(j, 0, 40, S.ForKind.SERIAL, S.BufferStore(B, A[i, j] + 1.0, [i, j]))]))
    pa, pb = tir.Var("A", "handle"), tir.Var("B", "handle")
    func = tir.PrimFunc([pa, pb], body, None, {pa: A, pb: B}, {"global_symbol": "main", "tir.noalias": True})
    assert re.search(r"T\.prefetch\(A, \[i:i \+ 1, 0:40\]\)", func.script())
    f = kiln.build(func, target=AVX2)
    assert f.get_source().count("__builtin_prefetch(") >= 1
    a = np.random.default_rng(6).standard_normal((4, 40)).astype("float32")
    _, b = _run(f, [a, np.zeros((4, 40), "float32")])
    np.testing.assert_allclose(b, a + 1, rtol=1e-6)


def _prefetched_per_iteration(func, outer, arrays):
    """Run ``func`` in the TIR interpreter, recording the element offset of every ``tir.prefetch`` per value of the
    loop variable ``outer``."""
    from kiln.tir import interpreter
    seen = {}
    plain = interpreter._Compiler.e_Call

    def e_call(comp, e):
        if e.op != "tir.prefetch":
            return plain(comp, e)
        off = comp.expr(e.args[0].args[2])

        def record(env):
            seen.setdefault(int(env[outer]), []).append(int(off(env)))
            return 0
        return record
    interpreter._Compiler.e_Call = e_call
    try:
        interpreter.run_primfunc(func, arrays)
    finally:
        interpreter._Compiler.e_Call = plain
    return seen


@pytest.mark.parametrize("shape,axis,factor,offset", [((37, 53), 0, 4, 1), ((10, 6), 0, 3, 2), ((11, 7), 0, 3, 2),
                                                       ((37, 53), 1, 8, 1), ((9, 30), 1, 7, 2)])
def test_loop_dependent_region_has_one_guard(shape, axis, factor, offset):
    # the region of iteration outer + offset has a loop-dependent extent (the last iteration's block is short):
    # the one guard is InjectPrefetch's `outer <= last`, under which the extent is provably positive, so no second
    # `if (extent > 0)` is left inside it; the prefetched lines are those of exactly that region, every iteration
    n, m = shape
    A, B = _elementwise(n, m)
    s = te.create_schedule(B.op)
    i, j = B.op.axis
    outer, inner = s[B].split((i, j)[axis], factor=factor)
    if axis == 1:
        s[B].reorder(outer, i, inner)
    s[B].prefetch(A, outer, offset)
    lowered = kiln.lower(s, [A, B])["main"]
    loops = []
    post_order_visit(lowered.body, lambda x: loops.append(x) if isinstance(x, S.For) else None)
    outer_loop = loops[-1]   # post order: the outermost loop comes last
    # the IfThenElse statements with a prefetch inside (nested guards would each count)
    ifs = []
    post_order_visit(outer_loop.body, lambda x: ifs.append(x) if isinstance(x, S.IfThenElse) and _has_prefetch(x)
                     else None)
    assert len(ifs) == 1, [str(g.condition) for g in ifs]
    trips = -(-(n, m)[axis] // factor)
    ana = kiln.arith.Analyzer()
    live = [it for it in range(trips)
            if ana.simplify(tir.stmt_functor.substitute(ifs[0].condition, {outer_loop.loop_var: it})).value]
    assert live == list(range(trips - offset))
    # the C: one `if` between the loop header and the first prefetch
    for target in (AVX2, AVX512):
        src = kiln.build(s, [A, B], target).get_source()
        head = src[src.index(f"for (int32_t {outer_loop.loop_var.name.replace('.', '_')} = 0"):
                   src.index("__builtin_prefetch(")]
        assert head.count("if (") == 1, head
    # the addresses: every element of iteration it + offset's block (clamped) and nothing else, every cache line
    # of it whatever the alignment of A
    a = np.random.default_rng(7).standard_normal(shape).astype("float32")
    seen = _prefetched_per_iteration(lowered, outer_loop.loop_var, [a, np.zeros(shape, "float32")])
    assert sorted(seen) == live
    for it in live:
        lo = (it + offset) * factor
        hi = min(lo + factor, (n, m)[axis])
        rows, cols = (range(lo, hi), range(m)) if axis == 0 else (range(n), range(lo, hi))
        region = {r * m + c for r in rows for c in cols}
        assert set(seen[it]) <= region
        for align in range(16):
            assert {(e + align) // 16 for e in seen[it]} == {(e + align) // 16 for e in region}
    # numerics, run on every host (AVX2)
    f = kiln.build(s, [A, B], AVX2)
    _, b = _run(f, [a, np.zeros(shape, "float32")])
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)


# --- spread prefetch (kiln's `spread_over`): the next chunk's block requested a share at a time -----------------

def _chunked_matvec(chunks, rows, k, lanes=16, wlanes=None):
    """out[c, r, l] = sum_k X[r, k] * W[c, k, l]: a parallel loop over (chunk, row) whose tasks of one chunk
    read the same block of W, as the NCHWc convs' loop over (output-channel chunk, row tile)."""
    W = te.placeholder((chunks, k, wlanes or lanes), name="W")
    X = te.placeholder((rows, k), name="X")
    rk = te.reduce_axis((0, k), name="rk")
    O = te.compute((chunks, rows, lanes), lambda c, r, l: te.sum(X[r, rk] * W[c, rk, l], axis=rk), name="O")
    s = te.create_schedule(O.op)
    c, r, l = O.op.axis
    par = s[O].fuse(c, r)
    ko, ki = s[O].split(rk, factor=3)
    s[O].reorder(par, ko, ki, l)
    s[O].parallel(par)
    s[O].vectorize(l)
    return s, W, X, O, par, ko


def _requested_lines(func, evaluate_for):
    """{element offset: times requested} of every spread prefetch, for every value of the loop variables named
    in ``evaluate_for`` ({name: extent}), with the guard evaluated."""
    found = []

    def walk(node, path):
        if isinstance(node, S.Evaluate) and isinstance(node.value, tir.Call) and node.value.op == "tir.prefetch":
            found.append((node.value, list(path)))
            return
        kids = []
        if isinstance(node, S.SeqStmt):
            kids = list(node.seq)
        elif isinstance(node, (S.For, S.LetStmt, S.AttrStmt, S.Allocate, S.DeclBuffer)):
            kids = [node.body]
        elif isinstance(node, S.IfThenElse):
            kids = [node.then_case] + ([node.else_case] if node.else_case is not None else [])
        for kid in kids:
            walk(kid, path + [node])
    walk(func.body, [])
    assert found, "no spread prefetch emitted"
    ana = kiln.arith.Analyzer()
    counts = {}
    import itertools
    for call, path in found:
        line_loop = path[-1]
        assert isinstance(line_loop, S.For) and line_loop.loop_var.name.endswith(".pf_line")
        loop_vars = {f.loop_var.name: f.loop_var for f in path if isinstance(f, S.For)}
        names = sorted(evaluate_for)
        for values in itertools.product(*[range(evaluate_for[n]) for n in names]):
            env = {loop_vars[n]: v for n, v in zip(names, values)}

            def at(e):
                out = ana.simplify(tir.stmt_functor.substitute(e, env))
                return out.value
            if any(isinstance(g, S.IfThenElse) and not at(g.condition) for g in path):
                continue
            lo, ext = at(line_loop.min), at(line_loop.extent)
            for line in range(lo, lo + max(ext, 0)):
                env[line_loop.loop_var] = line
                addr = at(call.args[0].args[2])
                counts[addr] = counts.get(addr, 0) + 1
                del env[line_loop.loop_var]
    return counts


@pytest.mark.parametrize("chunks,rows,k", [(4, 3, 7), (3, 5, 10), (2, 2, 1)])
def test_spread_prefetch_requests_each_line_of_the_next_chunk_once(chunks, rows, k):
    s, W, X, O, par, ko = _chunked_matvec(chunks, rows, k)
    s[O].prefetch(W, par, rows, spread_over=ko)
    func = kiln.lower(s, [W, X, O])["main"]
    assert "prefetch_spread" not in func.script()  # the markers are consumed
    par_name = next(f.loop_var.name for f in _fors(func) if f.kind == S.ForKind.PARALLEL)
    loops = {par_name: chunks * rows}
    ko_loop = [f for f in _fors(func) if f.loop_var.name.startswith("rk.outer")]
    if ko_loop:  # (a loop of one iteration is a let: the tasks' parts are not split further)
        loops[ko_loop[0].loop_var.name] = -(-k // 3)
    counts = _requested_lines(func, loops)   # every (task, reduction chunk) pair
    block = k * 16
    expect = {c * block + 16 * j: 1 for c in range(1, chunks) for j in range(block // 16)}
    assert counts == expect  # chunk c's tasks request chunk c + 1 once; the last chunk's request nothing


def _fors(func):
    out = []
    post_order_visit(func.body, lambda x: out.append(x) if isinstance(x, S.For) else None)
    return out


@pytest.mark.parametrize("target", [AVX2, AVX512])
def test_spread_prefetch_builds_and_leaves_results_unchanged(target):
    chunks, rows, k = 5, 3, 7
    s, W, X, O, par, ko = _chunked_matvec(chunks, rows, k)
    s[O].prefetch(W, par, rows, spread_over=ko)
    f = kiln.build(s, [W, X, O], target)
    src = f.get_source()
    assert re.search(r"__builtin_prefetch\([^;]*, 0, 2\)", src)  # locality 2: below L1
    if target == AVX512 and not _host_runs_avx512():
        return
    rng = np.random.default_rng(4)
    w = rng.standard_normal((chunks, k, 16)).astype("float32")
    x = rng.standard_normal((rows, k)).astype("float32")
    *_, out = _run(f, [w, x, np.zeros((chunks, rows, 16), "float32")])
    np.testing.assert_allclose(out, np.einsum("rk,ckl->crl", x, w), rtol=1e-5, atol=1e-5)


def test_spread_prefetch_dropped_where_it_cannot_apply():
    # a region that is not one span (W's rows are 32 wide, 16 read) and an intermediate tensor: no prefetch,
    # no marker left, results unchanged
    s, W, X, O, par, ko = _chunked_matvec(3, 2, 5, wlanes=32)
    s[O].prefetch(W, par, 2, spread_over=ko)
    func = kiln.lower(s, [W, X, O])["main"]
    assert not _prefetch_calls(func) and "prefetch_spread" not in func.script()
    f = kiln.build(s, [W, X, O], AVX2)
    rng = np.random.default_rng(5)
    w = rng.standard_normal((3, 5, 32)).astype("float32")
    x = rng.standard_normal((2, 5)).astype("float32")
    *_, out = _run(f, [w, x, np.zeros((3, 2, 16), "float32")])
    np.testing.assert_allclose(out, np.einsum("rk,ckl->crl", x, w[:, :, :16]), rtol=1e-5, atol=1e-5)

    A = te.placeholder((4, 6, 16), name="A")
    W2 = te.compute((4, 6, 16), lambda c, k, l: A[c, k, l] * 2.0, name="W2")
    X2 = te.placeholder((3, 6), name="X2")
    rk = te.reduce_axis((0, 6), name="rk")
    O2 = te.compute((4, 3, 16), lambda c, r, l: te.sum(X2[r, rk] * W2[c, rk, l], axis=rk), name="O2")
    s2 = te.create_schedule(O2.op)
    c, r, l = O2.op.axis
    par2 = s2[O2].fuse(c, r)
    s2[W2].compute_root()
    s2[O2].prefetch(W2, par2, 3, spread_over=O2.op.reduce_axis[0])
    func2 = kiln.lower(s2, [A, X2, O2])["main"]
    assert not _prefetch_calls(func2) and "prefetch_spread" not in func2.script()


def test_spread_prefetch_errors():
    s, W, X, O, par, ko = _chunked_matvec(2, 2, 4)
    other = te.placeholder((4,), name="other")
    with pytest.raises(KilnError, match="spread_over must be a loop"):
        s[O].prefetch(W, par, 2, spread_over=other)
    stray = te.reduce_axis((0, 4), name="stray")
    with pytest.raises(KilnError, match="spread_over must be a loop"):
        s[O].prefetch(W, par, 2, spread_over=stray)
