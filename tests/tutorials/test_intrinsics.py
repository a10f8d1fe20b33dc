"""Tutorial flow: "Intrinsics and Math Functions".

Unified math intrinsics (te.exp ...) become the C library call of the target; call_pure_extern calls
an external function directly; register_intrin_lowering overrides how an intrinsic is lowered for a
target; a new intrinsic ("tir.<name>") is declared pure with register_op_attr and lowered by a rule.
The tutorial uses target "cuda"; kiln's CPU targets ("llvm", "c") run the same flow.
"""
import numpy as np
import pytest

import kiln as tvm
import kiln.testing
from kiln import te
from kiln.ir import register_intrin_lowering, register_op_attr

N = 37


def _build_unary(fcompute, name, target="llvm", vector=False):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute(A.shape, lambda i: fcompute(A[i]), name="B")
    s = te.create_schedule(B.op)
    if vector:
        _, inner = s[B].split(B.op.axis[0], factor=8)
        s[B].vectorize(inner)
    return tvm.build(s, [A, B], target, name=name)


def _run_unary(f, a_np):
    b = tvm.nd.empty(a_np.shape, str(a_np.dtype))
    f(tvm.nd.array(a_np), b)
    return b.numpy()


def _erf(x):
    import math
    return np.vectorize(math.erf)(x).astype(x.dtype)


MATH = {
    "exp": (te.exp, np.exp),
    "log": (te.log, np.log),
    "sqrt": (te.sqrt, np.sqrt),
    "tanh": (te.tanh, np.tanh),
    "sigmoid": (te.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    "erf": (te.erf, _erf),
    "floor": (te.floor, np.floor),
    "power": (lambda x: te.power(x, 1.5), lambda x: np.power(x, 1.5)),
}


@pytest.mark.parametrize("fn", list(MATH))
@pytest.mark.parametrize("vector", [False, True])
def test_unified_math_intrinsics(fn, vector):
    te_fn, np_fn = MATH[fn]
    a_np = np.random.default_rng(0).uniform(0.1, 3.0, size=N).astype("float32")
    f = _build_unary(te_fn, f"my{fn}", vector=vector)
    tvm.testing.assert_allclose(_run_unary(f, a_np), np_fn(a_np), rtol=1e-5, atol=1e-6)


def test_exp_source_and_call_pure_extern():
    a_np = np.random.default_rng(1).uniform(-2, 2, size=N).astype("float32")
    f = _build_unary(te.exp, "myexp")
    assert "expf" in f.get_source()
    g = _build_unary(lambda x: tvm.tir.call_pure_extern("float32", "expf", x), "myexp_extern")
    assert "expf(" in g.get_source()
    tvm.testing.assert_allclose(_run_unary(f, a_np), np.exp(a_np), rtol=1e-5)
    tvm.testing.assert_allclose(_run_unary(g, a_np), np.exp(a_np), rtol=1e-5)
    # float64 goes to the double-precision function
    h = _build_unary(lambda x: tvm.tir.call_pure_extern("float64", "exp", x.astype("float64")).astype("float32"),
                     "myexp_f64")
    tvm.testing.assert_allclose(_run_unary(h, a_np), np.exp(a_np), rtol=1e-5)


@pytest.fixture
def exp_rule():
    """Register an llvm lowering rule for tir.exp for one test, then remove it."""
    seen = []

    def my_math_rule(op):
        assert isinstance(op, tvm.tir.Call)
        name = op.op.name
        assert name.startswith("tir.")
        seen.append(name)
        dispatch_name = name[4:]
        if op.dtype == "float32":
            # exp(x) = exp2(x * log2(e)): a different C call, so the rule's effect is visible
            return tvm.tir.call_pure_extern("float32", "%s2f" % dispatch_name, op.args[0] * 1.4426950408889634)
        return op

    register_intrin_lowering("tir.exp", target="llvm", f=my_math_rule, level=99)
    try:
        yield seen
    finally:
        tvm.ir.Op.get("tir.exp").reset_attr("llvm.FLowerIntrinsic")


def test_register_intrin_lowering_overrides_target_rule(exp_rule):
    a_np = np.random.default_rng(2).uniform(-2, 2, size=N).astype("float32")
    f = _build_unary(te.exp, "myexp_rule")
    assert exp_rule == ["tir.exp"]
    assert "exp2f(" in f.get_source()
    tvm.testing.assert_allclose(_run_unary(f, a_np), np.exp(a_np), rtol=1e-5)
    # a rule for "llvm" does not touch target "c"
    g = _build_unary(te.exp, "myexp_c", target="c")
    assert "exp2f(" not in g.get_source()
    tvm.testing.assert_allclose(_run_unary(g, a_np), np.exp(a_np), rtol=1e-5)


@pytest.fixture
def mylog():
    """A new intrinsic tir.tutorial_mylog with a default and an llvm lowering rule."""
    from kiln.ir.op import _remove_op_for_tests

    name = "tir.tutorial_mylog"

    def mylog(x):
        return tvm.tir.call_intrin(x.dtype, name, x)

    def my_mylog_rule(op):
        if op.dtype == "float32":
            return tvm.tir.call_pure_extern("float32", "logf", op.args[0])
        elif op.dtype == "float64":
            return tvm.tir.call_pure_extern("float64", "log", op.args[0])
        return op

    register_op_attr(name, "TCallEffectKind", tvm.tir.CallEffectKind.Pure)
    register_intrin_lowering(name, target="default", f=my_mylog_rule, level=99)
    try:
        yield mylog
    finally:
        _remove_op_for_tests(name)


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_add_your_own_intrinsic(mylog, target):
    a_np = np.random.default_rng(3).uniform(0.1, 4, size=N).astype("float32")
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute(A.shape, lambda i: mylog(A[i]), name="B")
    s = te.create_schedule(B.op)
    assert "tutorial_mylog" in str(tvm.lower(s, [A, B], simple_mode=True))
    f = tvm.build(s, [A, B], target, name="mylog")
    assert "logf(" in f.get_source()
    tvm.testing.assert_allclose(_run_unary(f, a_np), np.log(a_np), rtol=1e-5)


def test_unlowered_intrinsic_is_a_clear_error():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute(A.shape, lambda i: tvm.tir.call_intrin("float32", "tir.tutorial_no_rule", A[i]), name="B")
    s = te.create_schedule(B.op)
    with pytest.raises(tvm.error.KilnError, match="tutorial_no_rule"):
        tvm.build(s, [A, B], "llvm")
