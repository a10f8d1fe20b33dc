"""Elementwise VM kernels whose innermost extent is unknown (``(1, ?)`` rows): the x86 injective schedule splits
the row by the SIMD lanes, LoopPartition peels a guard-free vector main loop and a guarded tail, which
VectorizeLoop makes one masked vector (issue 18, item 2; issue 13). Checked: the generated C, numerics at tail-edge extents, NaN/inf as the static build."""
from __future__ import annotations

import re

import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.contrib import graph_executor
from kiln.runtime.vm import VirtualMachine

A = relay.Any()
rng = np.random.default_rng(18)


def _gelu_mod(n):
    x = relay.var("x", shape=(1, n))
    erf = relay.erf(x * relay.const(float(1 / np.sqrt(2.0)), "float32"))
    out = relay.const(0.5) * x * (relay.const(1.0) + erf) + relay.tanh(x)
    return kiln.IRModule.from_expr(relay.Function([x], out))


def _gelu_ref(x):
    from math import erf
    e = np.vectorize(erf, otypes=[np.float64])(x.astype("float64") / np.sqrt(2.0))
    return (0.5 * x * (1.0 + e) + np.tanh(x.astype("float64"))).astype("float32")


def _bcast_mod():
    x = relay.var("x", shape=(1, A))
    y = relay.var("y", shape=(1, A))   # another unknown dim: either operand may broadcast at run time
    return kiln.IRModule.from_expr(relay.Function([x, y], relay.nn.relu(x) * relay.const(2.0) + y))


def _vm_compile(mod, target):
    with kiln.transform.PassContext(opt_level=3):
        return relay.vm.compile(mod, target=target)


def _kernel(src: str) -> str:
    return src[src.index("int32_t tvmgen_vm_fused"):]


def _check_vector_main_loop(src: str, lanes: int) -> None:
    body = _kernel(src)
    loops = re.findall(r"for \(int32_t (\w+) = [^;]*; \1 < ([^;]*);", body)
    # the first loop runs over whole vectors of the unknown row and stores whole vectors, without a guard
    var, bound = loops[0]
    assert f"/ {lanes}" in bound, loops
    first = body[body.index("for ("):]
    main = first[:first.index("\n  }")]
    assert f"kiln_vstore_f32x{lanes}" in main and " if (" not in main, main[:400]
    # then the last partial vector: one masked vector under a test that some lane is on (VectorizeLoop's masked
    # last vector, session 17; a guarded scalar loop before)
    tail = first[len(main):]
    assert re.search(r"if \(\(\(int64_t\)\(any_dim\d\) - .*\) > 0\)", tail), tail[:400]  # some lane is on
    assert f"kiln_mloadn_f32x{lanes}(" in tail and f"kiln_mstoren_f32x{lanes}(" in tail, tail[:400]
    assert "for (" not in tail[tail.index("kiln_mstoren"):], tail[:600]  # no lane loop left


def test_avx2_symbolic_row_is_a_vector_loop_with_masked_tail():
    _check_vector_main_loop(_vm_compile(_gelu_mod(A), "llvm -mcpu=core-avx2").lib.get_source(), 8)


def test_avx512_symbolic_row_compiles_to_16_lane_vectors():
    exe = _vm_compile(_gelu_mod(A), "llvm -mcpu=skylake-avx512")  # compiled only, not run
    _check_vector_main_loop(exe.lib.get_source(), 16)


@pytest.fixture(scope="module")
def gelu_vm():
    return VirtualMachine(_vm_compile(_gelu_mod(A), "llvm"), kiln.cpu())


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 15, 16, 17, 37, 1000])
def test_symbolic_row_numerics_at_tail_edges(gelu_vm, n):
    x = (rng.standard_normal((1, n)) * 3).astype("float32")
    out = gelu_vm.run(x).numpy()
    assert out.shape == (1, n)
    np.testing.assert_allclose(out, _gelu_ref(x), rtol=2e-5, atol=2e-6)


def test_nan_and_inf_propagate_as_in_the_static_build(gelu_vm):
    n = 37   # specials both in the vector body and in the tail
    x = rng.standard_normal((1, n)).astype("float32")
    x[0, [0, 5, 9, 33, 36]] = [np.nan, np.inf, -np.inf, np.nan, np.inf]
    x[0, [12, 34]] = [-np.inf, -np.inf]
    out = gelu_vm.run(x).numpy()
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(_gelu_mod(n), "llvm")
    m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    m.set_input("x", x)
    m.run()
    static = m.get_output(0).numpy()
    np.testing.assert_array_equal(np.isnan(out), np.isnan(static))
    # same NaN and +-inf positions and values; finite values within an ulp or two (vector vs scalar code)
    np.testing.assert_array_equal(np.isinf(out) * np.sign(out), np.isinf(static) * np.sign(static))
    np.testing.assert_allclose(out, static, rtol=1e-6, atol=1e-7)
    finite = np.isfinite(x[0])
    np.testing.assert_allclose(out[0, finite], _gelu_ref(x)[0, finite], rtol=2e-5, atol=2e-6)
    assert np.isnan(out[0, [0, 33]]).all()


def test_flattened_unknown_extent_is_a_vector_loop():
    z = relay.var("z", shape=(A, 256))
    mod = kiln.IRModule.from_expr(relay.Function([z], relay.reshape(relay.sigmoid(z), (-1,))))
    body = _kernel(_vm_compile(mod, "llvm -mcpu=core-avx2").lib.get_source())
    assert "kiln_vstore_f32x8" in body and "kiln_gather" not in body
    vm = VirtualMachine(_vm_compile(mod, "llvm"), kiln.cpu())
    for n in (0, 1, 3):
        x = rng.standard_normal((n, 256)).astype("float32")
        np.testing.assert_allclose(vm.run(x).numpy(), (1 / (1 + np.exp(-x))).ravel(), rtol=1e-5, atol=1e-6)


def test_broadcast_between_unknown_rows_is_unswitched_into_vector_loops():
    # (n == 1) ? 0 : i reads: one vector body per case under if (any_dim == 1), no gathers
    body = _kernel(_vm_compile(_bcast_mod(), "llvm -mcpu=core-avx2").lib.get_source())
    assert "kiln_gather" not in body and "kiln_vstore_f32x8" in body
    assert re.search(r"if \(any_dim\d == 1\)", body)


def test_index_divided_by_unknown_extent_keeps_the_scalar_loop():
    # vectorized it would divide lane by lane and gather
    z = relay.var("z", shape=(A, 3))
    mod = kiln.IRModule.from_expr(relay.Function([z], relay.reshape(relay.transpose(z) + relay.const(1.0), (-1,))))
    body = _kernel(_vm_compile(mod, "llvm -mcpu=core-avx2").lib.get_source())
    assert "kiln_div_i32x8" not in body and "kiln_gather" not in body
    vm = VirtualMachine(_vm_compile(mod, "llvm"), kiln.cpu())
    x = rng.standard_normal((37, 3)).astype("float32")
    np.testing.assert_allclose(vm.run(x).numpy(), (x.T + 1).ravel(), rtol=1e-6)


def test_two_unknown_rows_broadcast():
    vm = VirtualMachine(_vm_compile(_bcast_mod(), "llvm"), kiln.cpu())
    for nx, ny in ((37, 37), (1, 19), (17, 1), (1, 1), (8, 8), (0, 0)):  # (1, 0): max(), see docs/vm.md "Not done"
        x = rng.standard_normal((1, nx)).astype("float32")
        y = rng.standard_normal((1, ny)).astype("float32")
        x.flat[::5] = np.nan if nx > 3 else x.flat[::5]
        np.testing.assert_allclose(vm.run(x, y).numpy(), np.maximum(x, 0) * 2 + y, rtol=1e-6, atol=1e-6)
