"""``topi.checked_dim`` is a view (no copy) of its input with the unknown dim fixed: the VM's dense over an
unknown K reads its data argument in place (no buffer allocated, static strides), results match numpy at odd
sizes, and a wrong K at run time still fails the call with the check's message."""
import numpy as np
import pytest

import kiln as tvm
from kiln import relay, te
from kiln.error import KilnError, LoweringError
from kiln.runtime.vm import VirtualMachine
from kiln.topi.transform import checked_dim

W = np.random.default_rng(21).standard_normal((13, 9)).astype("float32")


def _dense_unknown_k():
    x = relay.var("x", shape=(relay.Any(), relay.Any()), dtype="float32")
    return tvm.IRModule.from_expr(relay.Function([x], relay.nn.dense(x, relay.const(W))))


def test_dense_over_unknown_k_reads_data_in_place():
    src = relay.vm.compile(_dense_unknown_k(), "llvm -mcpu=core-avx2").lib.get_source()
    kernel = src[src.index("kernel tvmgen_vm_fused_nn_dense"):]
    assert "axis 1 of the input must have size 9 at run time" in kernel
    assert "T_checked_dim" not in kernel and "kiln_alloc" not in kernel  # no copy of the data


def test_dense_over_unknown_k_matches_numpy_and_checks_k():
    vm = VirtualMachine(relay.vm.compile(_dense_unknown_k(), "llvm"), tvm.cpu())
    rng = np.random.default_rng(22)
    for m in (1, 7, 33):
        a = rng.standard_normal((m, 9)).astype("float32")
        np.testing.assert_allclose(vm.run(a).numpy(), a @ W.T, rtol=1e-5, atol=1e-5)
    for k in (8, 10):
        with pytest.raises(KilnError, match="must have size 9 at run time"):
            vm.run(np.ones((5, k), "float32"))


def test_checked_dim_over_an_intermediate_and_as_argument():
    """A view of a tensor computed in the same kernel aliases that tensor's buffer; the view itself cannot be a
    function argument (it has no memory of its own)."""
    m, k = te.var("m"), te.var("k")
    x = te.placeholder((m, k), "float32", name="x")
    y = te.compute((m, k), lambda i, j: x[i, j] * 2.0, name="y")
    v = checked_dim(y, 1, 5, "test op")
    out = te.compute((m, 5), lambda i, j: v[i, j] + 1.0, name="out")
    s = te.create_schedule(out.op)
    f = tvm.build(s, [x, out, m, k], "llvm")
    a = np.random.default_rng(23).standard_normal((3, 5)).astype("float32")
    o = tvm.nd.array(np.zeros((3, 5), "float32"))
    f(tvm.nd.array(a), o, 3, 5)
    np.testing.assert_allclose(o.numpy(), a * 2 + 1, rtol=1e-6)
    with pytest.raises(KilnError, match="test op: axis 1 of the input must have size 5 at run time"):
        f(tvm.nd.array(np.ones((3, 4), "float32")), tvm.nd.array(np.zeros((3, 5), "float32")), 3, 4)
    with pytest.raises(LoweringError, match="is a view of another tensor"):
        tvm.lower(te.create_schedule(v.op), [x, v])
