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
