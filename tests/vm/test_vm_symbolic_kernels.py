"""Kernels over symbolic extents on the VM (issue 18, item 2): equal unknown dims share one kernel variable,
x86 schedules (NCHWc conv, dense_pack, batch_matmul) serve unknown sizes, vector accesses stay vector loads,
and straight-line functions replay without aliasing results the caller keeps."""
from __future__ import annotations

import re

import numpy as np
import kiln
from kiln import relay
from kiln.runtime.vm import VirtualMachine
from relay_exec_util import graph_run

A = relay.Any()
rng = np.random.default_rng(11)


def _compile(mod, params=None, target="llvm"):
    with kiln.transform.PassContext(opt_level=3):
        return relay.vm.compile(mod, target=target, params=params)


def _res_block(batch, c=16, h=9):
    """conv -> relu -> conv + residual -> relu: the residual operand and the conv output have the same
    (unknown) batch, which only the VM compiler's dim provenance knows."""
    x = relay.var("x", shape=(batch, c, h, h))
    w1 = relay.var("w1", shape=(c, c, 3, 3))
    w2 = relay.var("w2", shape=(c, c, 3, 3))
    y = relay.nn.relu(relay.nn.conv2d(x, w1, padding=(1, 1), channels=c, kernel_size=(3, 3)))
    z = relay.nn.conv2d(y, w2, padding=(1, 1), channels=c, kernel_size=(3, 3))
    out = relay.nn.relu(z + y)
    params = {"w1": rng.standard_normal((c, c, 3, 3)).astype("float32") * 0.2,
              "w2": rng.standard_normal((c, c, 3, 3)).astype("float32") * 0.2}
    return kiln.IRModule.from_expr(relay.Function([x, w1, w2], out)), params


def test_residual_block_dynamic_batch_matches_static_and_shares_the_batch_var():
    mod, params = _res_block(A)
    exe = _compile(mod, params)
    src = exe.lib.get_source()
    # one variable for the batch of both operands of the residual add: no max(a, b) output extent and no
    # "extent == 1" read of a broadcast operand
    assert not re.search(r"kiln_max_i64\(any_dim\d, any_dim\d\)", src)
    assert not re.search(r"any_dim\d == INT64_C\(1\)", src)
    # the conv over an unknown batch runs the NCHWc x86 schedule (AlterOpLayout chose the blocked layout)
    assert any("contrib_conv2d_NCHWc" in n for n in exe.packed_names), exe.packed_names
    vm = VirtualMachine(exe, kiln.cpu())
    for n in (1, 3):
        x = rng.standard_normal((n, 16, 9, 9)).astype("float32")
        static_mod, _ = _res_block(n)
        want = graph_run(static_mod, {"x": x}, params, opt_level=3)[0]
        np.testing.assert_allclose(vm.run(x).numpy(), want, rtol=1e-4, atol=1e-4)


def _attention(batch_a, batch_b, seq, d=24):
    q = relay.var("q", shape=(batch_a, seq, d))
    k = relay.var("k", shape=(batch_b, seq, d))
    s = relay.nn.softmax(relay.nn.batch_matmul(q, k))           # [b, seq, seq]: N is the unknown seq
    out = relay.nn.batch_matmul(s, k, transpose_b=False)        # [b, seq, d]: K is the unknown seq
    return kiln.IRModule.from_expr(relay.Function([q, k], out))


def _attention_ref(q, k):
    s = q @ k.transpose(0, 2, 1)
    e = np.exp(s - s.max(-1, keepdims=True))
    p = e / e.sum(-1, keepdims=True)
    return p @ k


def test_batch_matmul_symbolic_batch_and_seq_on_x86_schedule():
    # two different unknown batches: either may be 1 at run time (broadcast), as numpy's matmul does
    exe = _compile(_attention(A, A, A))
    assert "packed_b" in exe.lib.get_source()   # batch_matmul.x86's packed panels, not a generic loop nest
    vm = VirtualMachine(exe, kiln.cpu())
    for bq, bk, seq in ((3, 3, 13), (1, 4, 1), (4, 1, 20), (2, 2, 8)):
        q = rng.standard_normal((bq, seq, 24)).astype("float32")
        k = rng.standard_normal((bk, seq, 24)).astype("float32")
        np.testing.assert_allclose(vm.run(q, k).numpy(), _attention_ref(q, k), rtol=1e-4, atol=1e-5)


def test_symbolic_dense_accumulators_are_vector_loads_not_gathers():
    w = np.zeros((1000, 64), "float32")  # 1000 = 125 panels of 8: int64 indices over a symbolic row count
    x = relay.var("x", shape=(A, 64))
    mod = kiln.IRModule.from_expr(relay.Function([x], relay.nn.dense(x, relay.const(w))))
    src = _compile(mod, target="llvm -mcpu=core-avx2").lib.get_source()  # compiled only, not run
    body = src[src.index("tvmgen_vm_fused"):]
    assert "kiln_gather" not in body and "kiln_scatter" not in body


def test_replayed_results_are_not_overwritten_by_later_calls():
    x = relay.var("x", shape=(A, 8))
    w = rng.standard_normal((5, 8)).astype("float32")
    mod = kiln.IRModule.from_expr(relay.Function([x], relay.nn.relu(relay.nn.dense(x, relay.const(w)) + relay.const(1.0))))
    vm = VirtualMachine(_compile(mod), kiln.cpu())
    xs = [rng.standard_normal((n, 8)).astype("float32") for n in (3, 3, 7, 3)]
    outs = [vm.run(v) for v in xs]          # every result kept by the caller
    for v, o in zip(xs, outs):
        np.testing.assert_allclose(o.numpy(), np.maximum(v @ w.T + 1.0, 0), rtol=1e-5, atol=1e-5)
    vm.set_input("main", xs[0])
    vm.invoke_stateful("main")
    first = vm.get_outputs()[0]
    vm.set_input("main", xs[1])
    vm.invoke_stateful("main")
    np.testing.assert_allclose(first.numpy(), np.maximum(xs[0] @ w.T + 1.0, 0), rtol=1e-5, atol=1e-5)
