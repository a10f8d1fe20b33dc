"""The default LowerIntrin rules: math intrinsics -> C library calls (scalar, float16, vector lanes)."""
import numpy as np
import pytest

import kiln
from kiln import te, tir
from kiln.tir.transform.intrin_rule import LANEWISE_EXTERN


def _lowered(expr_of, dtype="float32", lanes=1, target="llvm"):
    x = tir.Var("x", dtype if lanes == 1 else f"{dtype}x{lanes}")
    out = tir.decl_buffer((16,), dtype, name="out")
    o = tir.Var("o", "handle")
    index = tir.const(0) if lanes == 1 else tir.Ramp(tir.const(0), tir.const(1), lanes)
    f = tir.PrimFunc([o, x], tir.BufferStore(out, expr_of(x), [index]), buffer_map={o: out})
    return tir.transform.LowerIntrin(target)(f).body.value


def test_float_types_pick_the_c_function():
    e = _lowered(tir.log)
    assert e.op == "tir.call_pure_extern" and e.args[0].value == "logf"
    e = _lowered(tir.exp)                           # float32 exp / erf / tanh: kiln.target.vector_math's helpers
    assert e.op == "tir.call_pure_extern" and e.args[0].value == "kiln_exp_f32"
    e = _lowered(tir.exp, "float64")
    assert e.op == "tir.call_pure_extern" and e.args[0].value == "exp"
    e = _lowered(tir.round)
    assert e.args[0].value == "nearbyintf"        # half to even, as numpy rounds
    e = _lowered(tir.log, "float16")                # computed in float32
    assert isinstance(e, tir.Cast) and e.dtype == "float16" and e.value.args[0].value == "logf"


def test_vectors_apply_the_function_lane_by_lane():
    e = _lowered(tir.tan, lanes=8)
    assert e.op == LANEWISE_EXTERN and e.args[0].value == "tanf" and e.dtype == "float32x8"
    e = _lowered(tir.tanh, lanes=8)                # float32 tanh / erf: a vector C helper (kiln.target.vector_math)
    assert e.op == "tir.call_pure_extern" and e.args[0].value == "kiln_tanh_f32" and e.dtype == "float32x8"
    e = _lowered(tir.tanh, "float64", lanes=4)     # other float types keep libm
    assert e.op == LANEWISE_EXTERN and e.args[0].value == "tanh"
    e = _lowered(tir.sigmoid, lanes=4)             # 1 / (1 + exp(0 - x)), exp lowered too
    assert isinstance(e, tir.Div) and "tir.exp(" not in str(e) and "kiln_exp_f32" in str(e)


def test_float_mod_and_floor_division_become_calls():
    assert _lowered(lambda x: tir.Mod(x, tir.const(1.5, "float32"))).args[0].value == "fmodf"
    assert "floorf" in str(_lowered(lambda x: tir.FloorDiv(x, tir.const(1.5, "float32"))))
    assert "floorf" in str(_lowered(lambda x: tir.FloorMod(x, tir.const(1.5, "float32"))))
    e = _lowered(lambda x: tir.FloorMod(x, tir.const(3, "int32")), "int32")
    assert isinstance(e, tir.FloorMod)             # integers stay for the printer


def test_integer_operand_is_a_clear_error():
    with pytest.raises(kiln.error.LoweringError, match="needs float operands"):
        _lowered(lambda x: tir.Call("int32", "tir.exp", [x]), "int32")


@pytest.mark.parametrize("vector", [False, True])
def test_float16_and_float_mod_compute_like_numpy(vector):
    n = 37
    A = te.placeholder((n,), name="A", dtype="float16")
    B = te.compute((n,), lambda i: te.exp(A[i]), name="B")
    C = te.placeholder((n,), name="C")
    D = te.compute((n,), lambda i: tir.FloorMod(C[i], tir.const(1.5, "float32")) + tir.Mod(C[i], tir.const(0.7, "float32")),
                   name="D")
    s = te.create_schedule([B.op, D.op])
    if vector:
        for t in (B, D):
            _, inner = s[t].split(t.op.axis[0], factor=8)
            s[t].vectorize(inner)
    mod = kiln.build(s, [A, B, C, D], "llvm", name=f"f16_mod_{int(vector)}")
    rng = np.random.default_rng(3)
    a = rng.uniform(-3, 3, n).astype("float16")
    c = rng.uniform(-5, 5, n).astype("float32")
    b, d = kiln.nd.empty((n,), "float16"), kiln.nd.empty((n,), "float32")
    mod(kiln.nd.array(a), b, kiln.nd.array(c), d)
    np.testing.assert_allclose(b.numpy(), np.exp(a.astype("float32")).astype("float16"), rtol=1e-3)
    want = (c - np.floor(c / np.float32(1.5)) * np.float32(1.5)) + np.fmod(c, np.float32(0.7))
    np.testing.assert_allclose(d.numpy(), want, rtol=1e-5, atol=1e-5)
