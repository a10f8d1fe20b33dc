"""Reshapes over computed shapes become static (DynamicToStatic's symbolic pass, issue 18 item 2), the VM's
per-signature plans, and run-time parallel decisions of kernels over unknown extents."""
from __future__ import annotations

import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.relay.transform.dynamic_to_static import dynamic_to_static, has_dyn_ops
from kiln.runtime.cpu_features import host_features
from kiln.runtime.vm import VirtualMachine
from kiln.target.codegen_c import parallel_backend, parallel_loop_marker
from relay_exec_util import vm_of

A = relay.Any()
rng = np.random.default_rng(5)


def _dims(e, *idx):
    """``concatenate([take(shape_of(e), i) as (1,) ...])`` with constants for int entries (ONNX's pattern)."""
    sh = relay.shape_of(e, "int64")
    parts = []
    for i in idx:
        if isinstance(i, str):  # "c:N": the constant N
            parts.append(relay.const(np.array([int(i[2:])], "int64"), dtype="int64"))
        else:
            parts.append(relay.reshape(relay.take(sh, relay.const(i, "int64"), axis=0), [1]))
    return relay.concatenate(parts, 0)


def _main_type(mod):
    return dynamic_to_static(mod)["main"].body.checked_type


def test_split_last_dim_becomes_static_reshape():
    x = relay.var("x", shape=(A, A, 256))
    y = relay.reshape(x, _dims(x, 0, 1, "c:4", "c:64"))
    mod = kiln.IRModule.from_expr(relay.Function([x], relay.nn.softmax(y)))
    out = dynamic_to_static(mod)
    assert not has_dyn_ops(out)
    assert [getattr(d, "value", d) for d in out["main"].body.checked_type.shape][2:] == [4, 64]
    vm = vm_of(mod, opt_level=3)
    for b, s in ((3, 13), (1, 1), (2, 16)):
        a = rng.standard_normal((b, s, 256)).astype("float32")
        r = a.reshape(b, s, 4, 64)
        e = np.exp(r - r.max(-1, keepdims=True))
        np.testing.assert_allclose(vm.run(a).numpy(), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_merge_and_split_of_unknown_dims_and_reshape_like():
    # (b, s, 256) -> dense rows (b*s, 64) -> back to (b, s, 64) from shape_of(x): needs reshape_like
    x = relay.var("x", shape=(A, A, 256))
    w = relay.const(rng.standard_normal((64, 256)).astype("float32"))
    d = relay.nn.dense(relay.reshape(x, [-1, 256]), w)
    back = relay.reshape(d, _dims(x, 0, 1, "c:64"))
    # (b, s, 64) -> (b, s*64) -> (b, s, 64) -> (b, s, 4, 16): a merge, an inferred split, a static split
    merged = relay.reshape(back, _dims(back, 0, "c:-1"))
    unmerged = relay.reshape(merged, _dims(back, 0, 1, "c:64"))
    split = relay.reshape(unmerged, _dims(unmerged, 0, 1, "c:4", "c:16"))
    mod = kiln.IRModule.from_expr(relay.Function([x], split + relay.const(1.0)))
    out = dynamic_to_static(mod)
    assert not has_dyn_ops(out)
    text = out["main"].astext()
    assert "reshape_like" in text and "lhs_end=1" in text
    vm = vm_of(mod, opt_level=3)
    wn = w.data.numpy()
    for b, s in ((3, 13), (1, 1)):
        a = rng.standard_normal((b, s, 256)).astype("float32")
        ref = (a.reshape(-1, 256) @ wn.T).reshape(b, s, 4, 16) + 1
        np.testing.assert_allclose(vm.run(a).numpy(), ref, rtol=1e-4, atol=1e-4)


def test_attention_style_head_merge_uses_split_code():
    # batch_matmul output (b*4, s, s) -> (b, 4, s, s): a -4 split with the static head count
    x = relay.var("x", shape=(A, 4, A, 8))
    q = relay.reshape(x, _dims(x, "c:-1", 2, 3))
    att = relay.nn.batch_matmul(q, q)
    back = relay.reshape(att, relay.concatenate([relay.strided_slice(relay.shape_of(x, "int64"), [0], [3]),
                                                 relay.strided_slice(relay.shape_of(x, "int64"), [2], [3])], 0))
    mod = kiln.IRModule.from_expr(relay.Function([x], relay.nn.softmax(back)))
    t = _main_type(mod)
    assert [getattr(d, "value", d) for d in t.shape][1] == 4
    vm = vm_of(mod, opt_level=3)
    for b, s in ((3, 13), (1, 1)):
        a = rng.standard_normal((b, 4, s, 8)).astype("float32")
        qa = a.reshape(-1, s, 8)
        r = (qa @ qa.transpose(0, 2, 1)).reshape(b, 4, s, s)
        e = np.exp(r - r.max(-1, keepdims=True))
        np.testing.assert_allclose(vm.run(a).numpy(), e / e.sum(-1, keepdims=True), rtol=1e-4, atol=1e-5)


def test_shape_from_data_stays_dynamic():
    x = relay.var("x", shape=(A, A))
    shp = relay.var("shp", shape=(2,), dtype="int64")
    mod = kiln.IRModule.from_expr(relay.Function([x, shp], relay.reshape(x, shp)))
    assert has_dyn_ops(dynamic_to_static(mod))
    # a target whose element count is not provably equal (s*4 vs an unrelated dim) also stays dynamic
    y = relay.var("y", shape=(A, A))
    mod2 = kiln.IRModule.from_expr(relay.Function([x, y], relay.reshape(x, _dims(y, 0, "c:-1"))))
    assert has_dyn_ops(dynamic_to_static(mod2))


def test_reshape_like_ranges_match_tvm():
    x = relay.var("x", shape=(6, 4))
    like = relay.var("like", shape=(2, 3, 7))
    f = relay.Function([x, like], relay.reshape_like(x, like, lhs_begin=0, lhs_end=1, rhs_begin=0, rhs_end=2))
    mod = relay.transform.InferType()(kiln.IRModule.from_expr(f))
    assert [int(d) for d in mod["main"].body.checked_type.shape] == [2, 3, 4]
    with pytest.raises(kiln.error.KilnError):
        relay.transform.InferType()(kiln.IRModule.from_expr(
            relay.Function([x, like], relay.reshape_like(x, like, lhs_end=1, rhs_end=3))))
    a = rng.standard_normal((6, 4)).astype("float32")
    vm = vm_of(mod, opt_level=3)
    np.testing.assert_array_equal(vm.run(a, np.zeros((2, 3, 7), "float32")).numpy(), a.reshape(2, 3, 4))


def test_plans_fresh_inputs_kept_results_and_alternating_sizes():
    x = relay.var("x", shape=(A, A, 32))
    y = relay.reshape(x, _dims(x, 0, 1, "c:4", "c:8"))
    z = relay.transpose(relay.nn.softmax(y), [0, 2, 1, 3])
    mod = kiln.IRModule.from_expr(relay.Function([x], relay.reshape(z, [0, 0, -1]) * relay.const(2.0)))
    vm = vm_of(mod, opt_level=3)

    def ref(a):
        r = a.reshape(a.shape[0], a.shape[1], 4, 8)
        e = np.exp(r - r.max(-1, keepdims=True))
        return (e / e.sum(-1, keepdims=True)).transpose(0, 2, 1, 3).reshape(a.shape[0], 4, -1) * 2
    xs = [rng.standard_normal(s).astype("float32") for s in
          [(2, 5, 32), (2, 5, 32), (1, 3, 32), (2, 5, 32), (1, 3, 32), (2, 5, 32)]]
    outs = [vm.run(a) for a in xs]  # new input arrays every call, every result kept
    for a, o in zip(xs, outs):
        np.testing.assert_allclose(o.numpy(), ref(a), rtol=1e-5, atol=1e-6)
    assert len(vm._replay[0].plans) == 2


def test_plan_reruns_when_a_data_dependent_shape_changes():
    # dyn.strided_slice whose end comes from the data: same input shapes, different output shapes
    x = relay.var("x", shape=(A, 8))
    n = relay.var("n", shape=(1,), dtype="int64")
    y = relay.strided_slice(x, relay.const(np.array([0], "int64"), dtype="int64"), n, relay.const(np.array([1], "int64"), dtype="int64"))
    mod = kiln.IRModule.from_expr(relay.Function([x, n], relay.nn.relu(y) + relay.const(1.0)))
    vm = vm_of(mod, opt_level=3)
    a = rng.standard_normal((6, 8)).astype("float32")
    for k in (4, 4, 2, 5, 5):
        out = vm.run(a, np.array([k], "int64")).numpy()
        np.testing.assert_allclose(out, np.maximum(a[:k], 0) + 1, rtol=1e-6)


def test_parallel_loops_of_symbolic_kernels_decide_per_call():
    x = relay.var("x", shape=(A, A, 256))
    mod = kiln.IRModule.from_expr(relay.Function([x], relay.mean(x, axis=[2], keepdims=True)))
    with kiln.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, target="llvm -mcpu=core-avx2")
    lines = exe.lib.get_source().splitlines()
    at = [i for i, line in enumerate(lines) if parallel_loop_marker() in line]
    # each region goes parallel only if its work test holds (OpenMP: the pragma under `if (work) {`; the pool:
    # `if (work) launch; else body(...)`)
    under_test = (lambda i: lines[i - 1].strip().startswith("if (")) if parallel_backend() == "openmp" else \
        (lambda i: lines[i].strip().startswith("if ("))
    assert at and all(under_test(i) for i in at)
    if "avx2" in host_features():
        vm = VirtualMachine(exe, kiln.cpu())
        for shape in ((1, 1, 256), (64, 80, 256)):
            a = rng.standard_normal(shape).astype("float32")
            np.testing.assert_allclose(vm.run(a).numpy(), a.mean(2, keepdims=True), rtol=1e-5, atol=1e-6)


def test_elementwise_kernels_over_unknown_dims_are_vectorized():
    x = relay.var("x", shape=(A, A, 256))
    y = relay.var("y", shape=(A, A, 1))
    mod = kiln.IRModule.from_expr(relay.Function([x, y], relay.erf(x - y) * relay.const(0.5)))
    with kiln.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, target="llvm -mcpu=core-avx2")
    assert "kiln_vload_f32x8" in exe.lib.get_source()
    if "avx2" in host_features():
        vm = VirtualMachine(exe, kiln.cpu())
        a, b = rng.standard_normal((3, 13, 256)).astype("float32"), rng.standard_normal((3, 13, 1)).astype("float32")
        from math import erf
        ref = np.vectorize(erf)(a - b).astype("float32") * 0.5
        np.testing.assert_allclose(vm.run(a, b).numpy(), ref, rtol=1e-5, atol=1e-6)


def test_plans_with_tuple_results_and_an_input_returned():
    x = relay.var("x", shape=(A, 4))
    r = relay.nn.relu(x)
    mod = kiln.IRModule.from_expr(relay.Function([x], relay.Tuple([x, r, r * relay.const(2.0)])))
    vm = vm_of(mod, opt_level=3)
    xs = [rng.standard_normal((n, 4)).astype("float32") for n in (3, 3, 3, 1, 3)]
    outs = [vm.run(a) for a in xs]
    for a, o in zip(xs, outs):
        np.testing.assert_array_equal(o[0].numpy(), a)
        np.testing.assert_array_equal(o[1].numpy(), np.maximum(a, 0))
        np.testing.assert_array_equal(o[2].numpy(), np.maximum(a, 0) * 2)


def test_reductions_over_unknown_rows_accumulate_in_vectors():
    # LayerNorm's mean over a static 256-wide row, rows unknown: a vector partial sum per row (rfactor), as static
    x = relay.var("x", shape=(A, A, 256))
    mod = kiln.IRModule.from_expr(relay.Function([x], relay.mean(x, axis=[2], keepdims=True)))
    with kiln.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, target="llvm -mcpu=core-avx2")
    src = exe.lib.get_source()
    assert "T_sum_rf" in src and "kiln_vload_f32x8" in src
    if "avx2" in host_features():
        vm = VirtualMachine(exe, kiln.cpu())
        for shape in ((1, 16, 256), (3, 7, 256), (1, 1, 256)):
            a = rng.standard_normal(shape).astype("float32")
            np.testing.assert_allclose(vm.run(a).numpy(), a.mean(2, keepdims=True), rtol=1e-5, atol=1e-6)
