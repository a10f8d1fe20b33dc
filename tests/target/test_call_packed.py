"""tir.call_packed from a compiled kernel into a Python function of the global registry."""
import numpy as np
import pytest

import kiln
from kiln import tir
from kiln.tir import stmt as S

from target_tir_helpers import buf, prim, build

seen = []


@kiln.register_func("test_target.scale_and_count", override=True)
def _scale_and_count(x, factor, tag):
    arr = x.numpy() if hasattr(x, "numpy") else np.asarray(x)
    seen.append((arr.shape, float(factor), tag))
    return int(arr.sum() * factor)


@kiln.register_func("test_target.fill", override=True)
def _fill(out, value):
    out.copyfrom(np.full(out.shape, value, dtype=out.dtype)) if hasattr(out, "copyfrom") else None
    return None


@kiln.register_func("test_target.boom", override=True)
def _boom(x):
    raise ValueError("boom from python")


def test_call_packed_scalars_buffers_and_return_value():
    n = 6
    A, C = buf("A", [n], "int32"), buf("C", [1], "int64")
    val = tir.call_packed("test_target.scale_and_count", A[1], 2.5, "hello")
    body = S.BufferStore(C[1], tir.Cast("int64", val) + tir.const(1, "int64"), [tir.const(0)])
    mod = build(prim("pk", [A, C], body))
    assert "__kiln_call_packed(\"test_target.scale_and_count\"" in mod.get_source()
    a = np.arange(n, dtype="int32")
    c = kiln.nd.array(np.zeros(1, "int64"))
    seen.clear()
    mod["pk"](kiln.nd.array(a), c)
    assert seen == [((n,), 2.5, "hello")]
    assert c.numpy()[0] == int(a.sum() * 2.5) + 1


def test_call_packed_statement_writes_buffer():
    n = 5
    A = buf("A", [n])
    body = S.Evaluate(tir.call_packed("test_target.fill", A[1], 4.0))
    mod = build(prim("fill", [A], body))
    a = kiln.nd.array(np.zeros(n, "float32"))
    mod["fill"](a)
    np.testing.assert_array_equal(a.numpy(), np.full(n, 4.0, "float32"))


def test_call_packed_error_propagates():
    A = buf("A", [3])
    body = S.Evaluate(tir.call_packed("test_target.boom", A[1]))
    mod = build(prim("boom", [A], body))
    with pytest.raises(kiln.KilnError, match="boom from python"):
        mod["boom"](kiln.nd.array(np.zeros(3, "float32")))


def test_call_packed_unknown_function():
    A = buf("A", [3])
    body = S.Evaluate(tir.call_packed("test_target.does_not_exist", A[1]))
    mod = build(prim("missing", [A], body))
    with pytest.raises(kiln.KilnError, match="does_not_exist"):
        mod["missing"](kiln.nd.array(np.zeros(3, "float32")))
