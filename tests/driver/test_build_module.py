"""kiln.lower / kiln.build: inputs, targets, entry names, several functions, backend lookup, errors."""
import numpy as np
import pytest

import kiln as tvm
from kiln import te, tir
from kiln.tir import stmt as S
from kiln.target import Target

GOLDEN = '''# @double
@T.prim_func
def double(A: T.Buffer((16, 8), "float32"), B: T.Buffer((16, 8), "float32")):
    T.func_attr({"global_symbol": "double", "tir.noalias": T.bool(True)})
    B_1 = T.Buffer((128,), data=B.data)
    A_1 = T.Buffer((128,), data=A.data)
    for i_outer in T.parallel(4):
        for i_inner in range(4):
            B_1[i_outer * 32 + i_inner * 8:i_outer * 32 + i_inner * 8 + 8] = A_1[i_outer * 32 + i_inner * 8:i_outer * 32 + i_inner * 8 + 8] * T.Broadcast(T.float32(2.0), 8)'''


def _double():
    A = te.placeholder((16, 8), name="A")
    B = te.compute((16, 8), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=4)
    s[B].parallel(xo)
    s[B].vectorize(B.op.axis[1])
    return s, A, B


def test_lower_golden_text():
    s, A, B = _double()
    mod = tvm.lower(s, [A, B], name="double", simple_mode=True)
    assert isinstance(mod, tvm.IRModule)
    assert str(mod).strip() == GOLDEN


def _check_double(f, name=None):
    a = np.random.rand(16, 8).astype("float32")
    b = tvm.nd.array(np.zeros((16, 8), "float32"))
    (f[name] if name else f)(tvm.nd.array(a), b)
    np.testing.assert_allclose(b.numpy(), a * 2, rtol=1e-6)


def test_build_schedule_entry_name_and_targets():
    s, A, B = _double()
    f = tvm.build(s, [A, B], target="c", name="dbl")
    assert f.entry_name == "dbl"
    _check_double(f)
    f2 = tvm.build(s, [A, B], target=Target("llvm -mcpu=core-avx2"), target_host="llvm")
    assert f2.entry_name == "default_function"
    _check_double(f2)
    with Target("c"):
        _check_double(tvm.build(s, [A, B], name="in_scope"))


def test_build_primfunc_and_irmodule_with_several_functions():
    s, A, B = _double()
    lowered = tvm.lower(s, [A, B], name="double")
    n = 6
    X, Y = tir.decl_buffer([n], "float32", "X"), tir.decl_buffer([n], "float32", "Y")
    xh, yh = tir.Var("X", "handle"), tir.Var("Y", "handle")
    i = tir.Var("i", "int32")
    neg = tir.PrimFunc([xh, yh], S.For(i, 0, n, S.ForKind.SERIAL, S.BufferStore(Y, -X[i], [i])),
                       buffer_map={xh: X, yh: Y}, attrs={"global_symbol": "neg", "tir.noalias": True})
    single = tvm.build(neg, name="neg")
    x = np.random.rand(n).astype("float32")
    y = tvm.nd.array(np.zeros(n, "float32"))
    single(tvm.nd.array(x), y)
    np.testing.assert_array_equal(y.numpy(), -x)
    mod = tvm.IRModule({"double": lowered["double"], "neg": neg})
    both = tvm.build(mod, target="llvm", name="neg")
    assert both.entry_name == "neg"
    _check_double(both, "double")
    y2 = tvm.nd.array(np.zeros(n, "float32"))
    both(tvm.nd.array(x), y2)
    np.testing.assert_array_equal(y2.numpy(), -x)
    by_target = tvm.build({"llvm": tvm.IRModule({"neg": neg})}, name="neg")
    y3 = tvm.nd.array(np.zeros(n, "float32"))
    by_target(tvm.nd.array(x), y3)
    np.testing.assert_array_equal(y3.numpy(), -x)


def test_backend_is_looked_up_in_registry():
    from kiln.runtime import registry
    original = registry.get_global_func("target.build.c")
    calls = []

    def spy(mod, target):
        calls.append((sorted(gv.name_hint for gv in mod.functions), str(target)))
        return original(mod, target)

    registry.register_func("target.build.c", spy, override=True)
    try:
        s, A, B = _double()
        _check_double(tvm.build(s, [A, B], target="c", name="spied"))
    finally:
        registry.register_func("target.build.c", original, override=True)
    assert calls == [(["spied"], "c -keys=cpu")]


def test_gpu_bind_on_cpu_target_is_a_clear_error():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    with pytest.raises(tvm.KilnError, match="GPU thread.*(blockIdx|threadIdx).*CPU"):
        tvm.build(s, [A, B], target="llvm")


def test_cuda_target_and_bad_inputs():
    s, A, B = _double()
    with pytest.raises(NotImplementedError, match="cuda"):
        tvm.build(s, [A, B], target="cuda")
    with pytest.raises(tvm.KilnError, match="needs args"):
        tvm.lower(s)
    with pytest.raises(tvm.KilnError, match="te.Schedule, a tir.PrimFunc or an IRModule"):
        tvm.build(42)
