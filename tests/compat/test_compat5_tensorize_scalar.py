"""``te.decl_tensor_intrin(..., scalar_params=[...])``: intrinsics taking scalar arguments (TVM's
test_tensor_intrin_scalar_params, with Stage.tensorize); and ``tvm.tir.ir_builder`` as TVM-era code uses it."""
import numpy as np
import pytest

import kiln as tvm
from kiln import te
from kiln.error import KilnError, LoweringError

AXPB_C = """
int axpb(float* c, const float* a, float v, float w, int n) {
  for (int i = 0; i < n; ++i) c[i] = a[i] * v + w;
  return 0;
}
"""


def _axpb_intrin(n):
    x = te.placeholder((n,), name="x")
    v = te.var("v", "float32")
    w = te.var("w", "float32")
    z = te.compute((n,), lambda i: x[i] * v + w, name="z")
    seen = {}

    def intrin_func(ins, outs, sp):
        seen["sp"] = list(sp)
        assert ins[0].shape[0].value == n
        ib = tvm.tir.ir_builder.create()
        ib.emit(tvm.tir.call_extern("int32", "axpb", outs[0].access_ptr("w"), ins[0].access_ptr("r"),
                                    sp[0], sp[1], n))
        return ib.get()

    intrin = te.decl_tensor_intrin(z.op, intrin_func, scalar_params=[v, w], default_buffer_params={"offset_factor": 1})
    assert seen["sp"][0] is v and seen["sp"][1] is w
    assert tuple(intrin.scalar_params) == (v, w) and intrin.reduce_init is None
    return intrin


def test_scalar_params_bound_to_stage_expressions():
    # the stage's multiplier depends on the outer row, its offset is a scalar argument of the function
    n, R, M = 16, 7, 48
    intrin = _axpb_intrin(n)
    A = te.placeholder((R, M), name="A")
    alpha = te.var("alpha", "float32")
    C = te.compute((R, M), lambda i, j: A[i, j] * (i.astype("float32") + 0.5) + alpha, name="C")
    s = te.create_schedule(C.op)
    jo, ji = s[C].split(C.op.axis[1], factor=n)
    s[C].tensorize(ji, intrin)
    s[C].pragma(C.op.axis[0], "import_c", AXPB_C)
    text = str(tvm.lower(s, [A, alpha, C], simple_mode=True))
    assert "axpb" in text and "alpha" in text
    f = tvm.build(s, [A, alpha, C], "llvm")
    rs = np.random.RandomState(0)
    a = rs.randn(R, M).astype("float32")
    c = tvm.nd.array(np.zeros((R, M), "float32"))
    f(tvm.nd.array(a), -1.25, c)
    np.testing.assert_allclose(c.numpy(), a * (np.arange(R, dtype="float32")[:, None] + 0.5) - 1.25, rtol=1e-5, atol=1e-6)


def test_scalar_param_varying_inside_the_region_is_refused():
    n = 16
    intrin = _axpb_intrin(n)
    A = te.placeholder((2, 32), name="A")
    C = te.compute((2, 32), lambda i, j: A[i, j] * j.astype("float32") + 1.0, name="C")
    s = te.create_schedule(C.op)
    jo, ji = s[C].split(C.op.axis[1], factor=n)
    s[C].tensorize(ji, intrin)
    with pytest.raises(LoweringError, match="varies inside the tensorized loops"):
        tvm.lower(s, [A, C])


def test_scalar_params_must_be_vars():
    x = te.placeholder((4,), name="x")
    z = te.compute((4,), lambda i: x[i] * 2.0, name="z")
    with pytest.raises(KilnError, match="scalar_params must be tir.Var"):
        te.decl_tensor_intrin(z.op, lambda ins, outs, sp: tvm.tir.call_packed("f"), scalar_params=[2.0])


def test_ir_builder_loops_ifs_allocate_in_extern():
    # a te.extern body written with the IR builder: out[i] = prefix sum of x up to i, even rows doubled
    n = 13
    X = te.placeholder((n,), name="X")

    def body(ins, outs):
        ib = tvm.tir.ir_builder.create()
        x = ib.buffer_ptr(ins[0])
        out = ib.buffer_ptr(outs[0])
        acc = ib.allocate("float32", (1,), name="acc", scope="local")
        acc[0] = tvm.tir.const(0.0, "float32")
        with ib.for_range(0, n, name="i") as i:
            acc[0] = acc[0] + x[i]
            with ib.if_scope(i % 2 == 0):
                out[i] = acc[0] * 2.0
            with ib.else_scope():
                out[i] = acc[0]
        return ib.get()

    Y = te.extern((n,), [X], body, name="Y", dtype="float32")
    s = te.create_schedule(Y.op)
    f = tvm.build(s, [X, Y], "llvm")
    x = np.random.RandomState(1).randn(n).astype("float32")
    y = tvm.nd.array(np.zeros(n, "float32"))
    f(tvm.nd.array(x), y)
    want = np.cumsum(x)
    want[::2] *= 2
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-6)


def test_ir_builder_misuse_errors():
    ib = tvm.tir.ir_builder.create()
    with pytest.raises(KilnError, match="else_scope can only follow an if_scope"):
        ib.else_scope()
    buf = ib.allocate("float32", (4,), name="b")
    with pytest.raises(KilnError, match="dtype int32"):
        buf[0] = tvm.tir.const(1, "int32")
    with pytest.raises(KilnError, match="unknown loop kind"):
        ib.for_range(0, 4, kind="sideways")
    with ib.for_range(0, 4) as i:
        buf[i] = tvm.tir.const(1.0, "float32")
    stmt = ib.get()
    assert isinstance(stmt, tvm.tir.Allocate) and isinstance(stmt.body, tvm.tir.For)
