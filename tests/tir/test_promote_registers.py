"""tir.transform.PromoteRegisters: constant-indexed accumulators become register slots (and nothing else does)."""
import numpy as np

import kiln
from kiln import tir
from kiln.tir import expr as E, stmt as S
from kiln.tir.transform.promote_registers import REGISTERS_ATTR
from kiln.target.codegen_c import codegen_c


def _func(acc_dtype, extent, body_of, name="f"):
    """out[0:16] = body over an allocation ``acc`` of ``extent`` elements."""
    out = tir.decl_buffer((16,), "float32", name="out")
    o = tir.Var("o", "handle")
    acc_var = tir.Var("acc", "handle")
    acc = tir.decl_buffer((extent,), acc_dtype, name="acc", data=acc_var)
    body = S.Allocate(acc_var, acc_dtype, [extent], tir.const(True, "bool"), body_of(acc, out))
    return tir.PrimFunc([o], body, buffer_map={o: out}, attrs={"global_symbol": name, "tir.noalias": True})


def _allocs(stmt):
    found = []

    class V(tir.stmt_functor.StmtExprVisitor):
        def visit_Allocate(self, s):
            found.append(s)
            self.generic_visit(s)
    V()(stmt)
    return found


def _ramp(base, lanes):
    return E.Ramp(tir.const(base), tir.const(1), lanes)


def _two_vector_accumulator(acc, out):
    zero = E.Broadcast(tir.const(0.0, "float32"), 16)
    one = E.Broadcast(tir.const(1.0, "float32"), 16)
    return S.SeqStmt([
        S.BufferStore(acc, zero, [_ramp(0, 16)]),
        S.BufferStore(acc, E.BufferLoad(acc, [_ramp(0, 16)]) + one, [_ramp(0, 16)]),
        S.BufferStore(out, E.BufferLoad(acc, [_ramp(0, 16)]), [_ramp(0, 16)]),
    ])


def test_wide_accumulator_becomes_register_slots_of_the_simd_width():
    f = _func("float32", 16, _two_vector_accumulator)
    for width_bytes, lanes, slots in ((32, 8, 2), (64, 16, 1), (16, 4, 4)):
        g = tir.transform.PromoteRegisters(width_bytes)(f)
        (alloc,) = _allocs(g.body)
        assert alloc.annotations.get(REGISTERS_ATTR) is True
        assert alloc.dtype == f"float32x{lanes}" and [int(e) for e in alloc.extents] == [slots]
    src, _ = codegen_c([("f", f)], "llvm -mcpu=core-avx2")
    assert "kiln_f32x8 acc_r0, acc_r1;" in src and "acc[" not in src


def test_promoted_kernel_computes_the_same():
    f = _func("float32", 16, _two_vector_accumulator, name="acc_kernel")
    mod = kiln.build(f, target="llvm")
    out = kiln.nd.array(np.zeros(16, "float32"))
    mod["acc_kernel"](out)
    np.testing.assert_array_equal(out.numpy(), np.ones(16, "float32"))


def test_scalar_slots_and_sparse_slots_are_numbered_densely():
    def body(acc, out):
        return S.SeqStmt([S.BufferStore(acc, tir.const(2.0, "float32"), [tir.const(5)]),
                          S.BufferStore(acc, tir.const(3.0, "float32"), [tir.const(1)]),
                          S.BufferStore(out, E.BufferLoad(acc, [tir.const(5)]) + E.BufferLoad(acc, [tir.const(1)]),
                                        [tir.const(0)])])
    g = tir.transform.PromoteRegisters(32)(_func("float32", 8, body))
    (alloc,) = _allocs(g.body)
    assert alloc.dtype == "float32" and [int(e) for e in alloc.extents] == [2]
    text = str(g)
    assert "[1] = T.float32(2.0)" in text and "[0] = T.float32(3.0)" in text and "[5]" not in text


def test_unpromotable_allocations_are_left_alone():
    i = tir.Var("i", "int32")

    def loop_index(acc, out):       # a loop variable index: stays an array
        return S.For(i, 0, 4, S.ForKind.SERIAL, S.BufferStore(acc, tir.const(1.0, "float32"), [i]))

    def address_taken(acc, out):    # the buffer's address escapes into a call
        return S.Evaluate(tir.call_extern("int32", "consume", acc.data))

    def misaligned(acc, out):       # a vector access not aligned to its width
        return S.BufferStore(acc, E.Broadcast(tir.const(1.0, "float32"), 4), [_ramp(2, 4)])

    def mixed_widths(acc, out):
        return S.SeqStmt([S.BufferStore(acc, E.Broadcast(tir.const(1.0, "float32"), 4), [_ramp(0, 4)]),
                          S.BufferStore(out, E.BufferLoad(acc, [tir.const(1)]), [tir.const(0)])])

    for body in (loop_index, address_taken, misaligned, mixed_widths):
        f = _func("float32", 8, body)
        assert tir.transform.PromoteRegisters(32)(f) is f, body.__name__
    big = _func("float32", 65 * 16, lambda acc, out: S.BufferStore(acc, tir.const(1.0, "float32"), [tir.const(0)]))
    assert tir.transform.PromoteRegisters(32)(big) is big


def _pieces_accumulator(pieces, value=1.0):
    """acc[base : base + lanes] = value, then out[...] = acc[...] for each ``(base, lanes)`` piece: the 16-lane
    and 8-lane pieces of a 24-lane row (AVX-512's NCHW24c block) as the printer splits a 24-lane store."""
    def body(acc, out):
        stmts = []
        for base, lanes in pieces:
            stmts.append(S.BufferStore(acc, E.Broadcast(tir.const(value + base, "float32"), lanes), [_ramp(base, lanes)]))
        for base, lanes in pieces:
            stmts.append(S.BufferStore(out, E.BufferLoad(acc, [_ramp(base, lanes)]), [_ramp(0, lanes)]))
        return S.SeqStmt(stmts)
    return body


def test_disjoint_pieces_of_two_widths_become_two_register_sets():
    """A 24-lane row accessed as a zmm piece and a ymm piece (0:16, 16:24, 24:40, 40:48): one allocation of
    16-lane slots, one of 8-lane slots, each piece its own register; compiled for the named AVX-512 target."""
    pieces = [(0, 16), (16, 8), (24, 16), (40, 8)]
    f = _func("float32", 48, _pieces_accumulator(pieces))
    g = tir.transform.PromoteRegisters(64)(f)
    allocs = _allocs(g.body)
    assert [(a.dtype, [int(e) for e in a.extents]) for a in allocs] == [("float32x16", [2]), ("float32x8", [2])]
    assert all(a.annotations.get(REGISTERS_ATTR) is True for a in allocs)
    src, _ = codegen_c([("f", f)], "llvm -mcpu=skylake-avx512")
    assert "kiln_f32x16 acc_r0, acc_r1;" in src and "kiln_f32x8 acc_w8_r0, acc_w8_r1;" in src
    assert "acc[" not in src


def test_mixed_width_pieces_compute_the_same():
    """The two register sets hold what the array held (run on the host: pieces of 8 and 4 lanes there too)."""
    pieces = [(0, 8), (8, 4), (12, 4)]

    def body(acc, out):
        stmts = [S.BufferStore(acc, E.Broadcast(tir.const(float(b + 1), "float32"), n), [_ramp(b, n)])
                 for b, n in pieces]
        stmts += [S.BufferStore(acc, E.BufferLoad(acc, [_ramp(b, n)]) * E.Broadcast(tir.const(2.0, "float32"), n),
                                [_ramp(b, n)]) for b, n in pieces]
        stmts += [S.BufferStore(out, E.BufferLoad(acc, [_ramp(b, n)]), [_ramp(b, n)]) for b, n in pieces]
        return S.SeqStmt(stmts)
    f = _func("float32", 16, body, name="mixed_kernel")
    assert {a.dtype for a in _allocs(tir.transform.PromoteRegisters(32)(f).body)} == {"float32x8", "float32x4"}
    mod = kiln.build(f, target="llvm")
    out = kiln.nd.array(np.zeros(16, "float32"))
    mod["mixed_kernel"](out)
    want = np.concatenate([np.full(n, 2.0 * (b + 1), "float32") for b, n in pieces])
    np.testing.assert_array_equal(out.numpy(), want)


def test_overlapping_pieces_of_two_widths_keep_the_array():
    """A 16-lane access over two 8-lane ones would put one value in two registers: the array stays."""
    f = _func("float32", 16, _pieces_accumulator([(0, 16), (0, 8), (8, 8)]))
    (alloc,) = _allocs(tir.transform.PromoteRegisters(64)(f).body)
    assert alloc.annotations.get(REGISTERS_ATTR) is None and alloc.dtype == "float32"
