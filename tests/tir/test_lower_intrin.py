"""tir.transform.LowerIntrin, register_intrin_lowering and tir.Call's op name (regressions found by
the Intrinsics tutorial flow)."""
import pickle

import pytest

import kiln as tvm
from kiln import tir
from kiln.ir import register_intrin_lowering, structural_equal
from kiln.ir.op import _remove_op_for_tests


@pytest.fixture
def ops():
    names = ["tir.lit_a", "tir.lit_b", "tir.lit_loop"]
    yield names
    for n in names:
        _remove_op_for_tests(n)


def _func(expr_of):
    A = tir.decl_buffer((4,), "float32", name="A")
    B = tir.decl_buffer((4,), "float32", name="B")
    i = tir.Var("i", "int32")
    body = tir.For(i, 0, 4, tir.ForKind.SERIAL, tir.BufferStore(B, expr_of(tir.BufferLoad(A, [i])), [i]))
    a, b = tir.Var("a", "handle"), tir.Var("b", "handle")
    return tir.PrimFunc([a, b], body, buffer_map={a: A, b: B})


def test_call_op_has_name_and_stays_a_string():
    c = tir.call_intrin("float32", "tir.exp", tir.const(1.0, "float32"))
    assert c.op == "tir.exp" and c.op.name == "tir.exp" and isinstance(c.op, str)
    c2 = tir.Call("float32", tvm.ir.register_op("tir.exp"), [tir.const(1.0, "float32")])
    assert c2.op == "tir.exp" and structural_equal(c, c2)
    assert pickle.loads(pickle.dumps(c.op)).name == "tir.exp"
    with pytest.raises(tvm.error.KilnError):
        tir.Call("float32", 3, [])


def test_rules_chain_and_target_fallback(ops):
    register_intrin_lowering("tir.lit_a", target="c",
                             f=lambda op: tir.call_intrin(op.dtype, "tir.lit_b", op.args[0]))
    register_intrin_lowering("tir.lit_b", target="default",
                             f=lambda op: tir.call_pure_extern(op.dtype, "sqrtf", op.args[0]))
    func = _func(lambda x: tir.call_intrin("float32", "tir.lit_a", x))
    out = tir.transform.LowerIntrin("c")(func)
    assert "sqrtf" in str(out) and "lit_a" not in str(out) and "lit_b" not in str(out)
    # for llvm only the default rule of lit_b applies, lit_a has none
    out = tir.transform.LowerIntrin("llvm")(func)
    assert "lit_a" in str(out) and "sqrtf" not in str(out)
    # no target: the default rules only
    assert "lit_a" in str(tir.transform.LowerIntrin()(func))


def test_bad_rules_are_clear_errors(ops):
    register_intrin_lowering("tir.lit_a", f=lambda op: "not an expr")
    with pytest.raises(tvm.error.LoweringError, match="must return a PrimExpr"):
        tir.transform.LowerIntrin("llvm")(_func(lambda x: tir.call_intrin("float32", "tir.lit_a", x)))
    register_intrin_lowering("tir.lit_loop", f=lambda op: tir.call_intrin(op.dtype, "tir.lit_loop", op.args[0] + 0))
    with pytest.raises(tvm.error.LoweringError, match="did not settle"):
        tir.transform.LowerIntrin("llvm")(_func(lambda x: tir.call_intrin("float32", "tir.lit_loop", x)))
    register_intrin_lowering("tir.lit_b", f=lambda op: tir.const(1, "int32"))
    with pytest.raises(tvm.error.LoweringError, match="dtype"):
        tir.transform.LowerIntrin("llvm")(_func(lambda x: tir.call_intrin("float32", "tir.lit_b", x)))
    with pytest.raises(tvm.error.KilnError, match="target"):
        register_intrin_lowering("tir.lit_b", target="", f=lambda op: op)
