"""Kernels of a transformer layer over unknown (batch, seq) (issue 18: the VM within 1.2x of the static build):
softmax over a symbolic row (lane-split max/sum over whole vectors + a scalar tail, reciprocal), a broadcast add
between unknown extents whose split row stays a loop of its own (vectorized, unswitched), LayerNorm's
``x - mean`` over fused unknown rows without a division per vector, and no per-element bound guards from
compute_at over fused unknown rows. Numerics vs numpy at odd sizes, NaN/inf as numpy, the C for core-avx2
(run) and skylake-avx512 (compiled only)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.runtime.vm import VirtualMachine

A = relay.Any
rng = np.random.default_rng(1807)


def _vm_compile(mod, target="llvm"):
    with kiln.transform.PassContext(opt_level=3):
        return relay.vm.compile(mod, target=target)


def _kernel(src: str, name: str) -> str:
    """The C of the kernel ``name`` (its parallel bodies come first in the file)."""
    start = src.index(f"kiln_par_tvmgen_vm_{name}_1") if f"kiln_par_tvmgen_vm_{name}_1" in src else \
        src.index(f"int32_t tvmgen_vm_{name}(")
    end = src.index("\n}\n", src.index(f"int32_t tvmgen_vm_{name}("))
    return src[start:end]


def _softmax_mod(guard_nan: bool):
    x = relay.var("x", shape=(A(), 4, A(), A()))
    y = relay.nn.softmax(x)
    if guard_nan:   # GPT-2's softmax epilogue
        y = relay.where(relay.isnan(y), relay.const(0.0), y)
    return kiln.IRModule.from_expr(relay.Function([x], y))


def _softmax_ref(x):
    x64 = x.astype("float64")
    with np.errstate(invalid="ignore"):
        e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)).astype("float32")


@pytest.fixture(scope="module")
def softmax_vm():
    return VirtualMachine(_vm_compile(_softmax_mod(False)), kiln.cpu())


@pytest.mark.parametrize("shape", [(1, 4, 1, 1), (3, 4, 7, 7), (1, 4, 13, 13), (3, 4, 1, 13), (2, 4, 8, 8),
                                   (1, 4, 5, 17), (4, 4, 64, 64), (1, 4, 3, 0)])
def test_softmax_over_a_symbolic_row(softmax_vm, shape):
    x = (rng.standard_normal(shape) * 4).astype("float32")
    out = softmax_vm.run(x).numpy()
    assert out.shape == shape
    if x.size:
        np.testing.assert_allclose(out, _softmax_ref(x), rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("n", [7, 13, 16, 37])
def test_softmax_nan_and_inf_rows_as_numpy(softmax_vm, n):
    x = rng.standard_normal((1, 4, 5, n)).astype("float32")
    x[0, 0, 0, n - 1] = np.nan          # NaN in the scalar tail (n % 8 != 0) or the last vector
    x[0, 0, 1, 2] = np.nan              # NaN in the first vector
    x[0, 1, 2, :] = -np.inf             # a whole row of -inf: NaN everywhere, as numpy
    x[0, 2, 3, [0, n - 1]] = -np.inf    # some -inf: exactly 0 there
    x[0, 3, 4, n // 2] = np.inf         # +inf: NaN (inf - inf), as numpy
    out = softmax_vm.run(x).numpy()
    ref = _softmax_ref(x)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    assert np.isnan(out[0, 0, 0]).all() and np.isnan(out[0, 0, 1]).all() and np.isnan(out[0, 1, 2]).all()
    assert (out[0, 2, 3, [0, n - 1]] == 0).all()
    ok = ~np.isnan(ref)
    np.testing.assert_allclose(out[ok], ref[ok], rtol=2e-5, atol=1e-6)


def test_softmax_with_nan_guard_epilogue():
    vm = VirtualMachine(_vm_compile(_softmax_mod(True)), kiln.cpu())
    for shape in ((3, 4, 13, 13), (1, 4, 1, 9)):
        x = rng.standard_normal(shape).astype("float32")
        x[0, 0, 0, 0] = np.nan
        ref = np.nan_to_num(_softmax_ref(x), nan=0.0)
        np.testing.assert_allclose(vm.run(x).numpy(), ref, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("target,lanes", [("llvm -mcpu=core-avx2", 8), ("llvm -mcpu=skylake-avx512", 16)])
def test_softmax_symbolic_row_is_lane_split_and_unguarded(target, lanes):
    # compiled for both ISAs; nothing runs here (the host may lack AVX-512)
    body = _kernel(_vm_compile(_softmax_mod(True), target).lib.get_source(), "fused_nn_softmax_isnan_where")
    assert f"T_softmax_maxelem_lanes[{lanes}]" in body and f"T_softmax_expsum_lanes[{lanes}]" in body
    assert f"kiln_max_f32x{lanes}(" in body                     # vector max over the whole vectors
    assert f"% {lanes}; ++" in body                               # the scalar tail loops: n % lanes elements
    assert "T_softmax_recip_r0 = 1.0f /" in body                 # one division per row
    assert not re.search(r"/ kiln_broadcast_f32x\d+\(T_softmax_expsum", body)
    # the fused row index (b, h, s) is proven inside the tensors: no per-element bound guards
    assert "if (0 <= (" not in body


def _mask_add_mod():
    s = relay.var("s", shape=(A(), 4, A(), A()))
    m = relay.var("m", shape=(A(), 1, A(), A()), dtype="bool")   # unknown dims of its own (may broadcast)
    out = s + relay.where(m, relay.const(0.0), relay.const(-1e4))
    return kiln.IRModule.from_expr(relay.Function([s, m], out))


def test_broadcast_add_between_unknown_extents_is_vectorized():
    body = _kernel(_vm_compile(_mask_add_mod(), "llvm -mcpu=core-avx2").lib.get_source(), "fused_where_add")
    # the split row is a loop of its own inside the parallel loop: vector stores, LoopPartition's scalar tail
    assert "kiln_vstore_f32x8(T_add" in body and "kiln_gather" not in body
    assert re.search(r"for \(int32_t i3_outer = 0; i3_outer < kiln_max_i32\(any_dim\d, any_dim\d\) / 8;", body)


def test_broadcast_add_between_unknown_extents_numerics():
    vm = VirtualMachine(_vm_compile(_mask_add_mod()), kiln.cpu())
    for ss, ms in (((3, 4, 13, 13), (3, 1, 13, 13)), ((1, 4, 7, 7), (1, 1, 1, 7)), ((2, 4, 1, 1), (1, 1, 1, 1)),
                   ((3, 4, 9, 17), (1, 1, 9, 1)), ((4, 4, 64, 64), (4, 1, 64, 64))):
        s = rng.standard_normal(ss).astype("float32")
        s.flat[::7] = np.nan
        m = rng.random(ms) > 0.3
        ref = s + np.where(m, np.float32(0.0), np.float32(-1e4))
        np.testing.assert_allclose(vm.run(s, m).numpy(), ref, rtol=1e-6, atol=1e-6)


def test_row_subtract_over_fused_unknown_rows_divides_once_per_row():
    # LayerNorm's x - mean(x) over (b, s, 256): the fused (b, s, 256/8) index unravelled by s and raveled
    # again simplifies back to the loop variable ((f//s)*s*256 + (f%s)*256 == f*256): no division per vector
    x = relay.var("x", shape=(A(), A(), 256))
    mod = kiln.IRModule.from_expr(relay.Function([x], x - relay.mean(x, axis=-1, keepdims=True)))
    src = _vm_compile(mod, "llvm -mcpu=core-avx2").lib.get_source()
    body = _kernel(src, "fused_subtract")
    assert "kiln_vstore_f32x8(T_subtract" in body
    assert not re.search(r"/ any_dim\d", body) and not re.search(r"% any_dim\d", body)
    vm = VirtualMachine(_vm_compile(mod), kiln.cpu())
    for shape in ((3, 13, 256), (1, 1, 256), (2, 7, 256)):
        v = rng.standard_normal(shape).astype("float32")
        np.testing.assert_allclose(vm.run(v).numpy(), v - v.mean(-1, keepdims=True), rtol=1e-5, atol=1e-5)


def _attention_bmm_mod(transpose_b: bool):
    a = relay.var("a", shape=(A(), A(), 64) if transpose_b else (A(), A(), A()))
    b = relay.var("b", shape=(A(), A(), 64))
    return kiln.IRModule.from_expr(relay.Function([a, b], relay.nn.batch_matmul(a, b, transpose_b=transpose_b)))


def test_attention_batch_matmul_packs_whole_panels_without_guards():
    # QKᵀ: N = seq is unknown; the per-call pack of K into 16-column panels runs whole panels unguarded
    # (LoopPartition on likely(z*16 + x < N)), only the last panel is zero-padded under the test
    body = _kernel(_vm_compile(_attention_bmm_mod(True), "llvm -mcpu=core-avx2").lib.get_source(),
                   "fused_nn_batch_matmul")
    packs = re.findall(r"packed_b\[[^\n]*", body)
    assert any("?" not in p for p in packs) and any("?" in p for p in packs), packs


@pytest.mark.parametrize("transpose_b", [True, False])
def test_attention_batch_matmul_at_odd_sizes(transpose_b):
    vm = VirtualMachine(_vm_compile(_attention_bmm_mod(transpose_b)), kiln.cpu())
    for bh, s in ((3, 1), (12, 7), (3, 13), (4, 17), (16, 64)):
        a = rng.standard_normal((bh, s, 64 if transpose_b else s)).astype("float32")
        b = rng.standard_normal((bh, s, 64)).astype("float32")
        ref = a.astype("float64") @ (b.transpose(0, 2, 1) if transpose_b else b).astype("float64")
        np.testing.assert_allclose(vm.run(a, b).numpy(), ref, rtol=1e-4, atol=1e-4)


def test_head_split_transpose_divides_by_run_time_extents_once_per_row():
    # (b, s, 256) -> (b, s, 4, 64) -> (b, 4, s, 64) * scale -> (b*4, s, 64): the fused (b*4, s) loop divides by s,
    # the short static row (8 vectors) stays an inner loop (before: fused too, a division by s per vector)
    x = relay.var("x", shape=(A(), A(), 256))
    y = relay.transpose(relay.reshape(x, (0, 0, 4, 64)), (0, 2, 1, 3)) * relay.const(0.35)
    mod = kiln.IRModule.from_expr(relay.Function([x], relay.reshape(y, (-3, 0, 0))))
    body = _kernel(_vm_compile(mod, "llvm -mcpu=core-avx2").lib.get_source(), "fused_reshape_transpose_multiply_reshape")
    store = next(line for line in body.splitlines() if "kiln_vstore_f32x8(T_reshape" in line)
    loops = re.findall(r"for \(int32_t (\w+) = 0; \1 < (\w+);", body)
    assert ("i2_outer", "8") in loops, loops          # the static row is a loop of its own inside
    assert "i2_outer" in store and re.search(r"/ any_dim\d", store)  # divisions by s index the row, not each vector
    vm = VirtualMachine(_vm_compile(mod), kiln.cpu())
    for b, s in ((1, 1), (3, 7), (2, 13)):
        v = rng.standard_normal((b, s, 256)).astype("float32")
        ref = (v.reshape(b, s, 4, 64).transpose(0, 2, 1, 3) * np.float32(0.35)).reshape(b * 4, s, 64)
        np.testing.assert_allclose(vm.run(v).numpy(), ref, rtol=1e-6)
