"""``nn.dense`` over an unknown row count on the VM takes the x86 ``dense_pack`` schedule (not the generic
loop nest): correct at odd row counts, and the generated code keeps the row blocks out of the parallel loop
index (no division/modulo by the symbolic block count, no guards in the inner loops) and vectorized."""
from __future__ import annotations

import re

import numpy as np

import kiln
from kiln import relay
from kiln.runtime.vm import VirtualMachine


def _mod(w):
    x = relay.var("x", shape=(relay.Any(), w.shape[1]), dtype="float32")
    return kiln.IRModule.from_expr(relay.Function([x], relay.nn.relu(relay.nn.dense(x, relay.const(w)))))


def test_dense_unknown_rows_matches_numpy_at_odd_sizes():
    w = np.random.default_rng(0).standard_normal((72, 40)).astype("float32")
    with kiln.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(_mod(w), target="llvm")
    vm = VirtualMachine(exe, kiln.cpu())
    rng = np.random.default_rng(1)
    for m in (1, 5, 6, 7, 13, 64, 67):
        x = rng.standard_normal((m, 40)).astype("float32")
        np.testing.assert_allclose(vm.run(x).numpy(), np.maximum(x @ w.T, 0), rtol=1e-4, atol=1e-5)


def test_dense_unknown_rows_code_has_no_symbolic_block_index():
    w = np.zeros((64, 32), "float32")
    with kiln.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(_mod(w), target="llvm -mcpu=core-avx2")  # compiled only, not run
    src = exe.lib.get_source()
    assert "T_dense_pack" in src  # the x86 dense_pack schedule, not the generic one
    assert not re.search(r"%\s*\(\(any_dim", src), "row blocks indexed by a modulo of the symbolic block count"
    # the register block is vectorized although its indices are int64 (the symbolic extent's type) over an
    # int32 lane variable: the vectorizer sees int64(x) + c as stride 1
    assert src.count("kiln_vload_f32x8") >= 32
