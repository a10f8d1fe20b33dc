"""Elementwise math, broadcast binary ops and reductions: TE compute + generic schedule vs numpy."""
import math

import numpy as np
import pytest

from kiln import te, topi
from kiln.error import KilnError
from kiln.topi.testing import run_te

rng = np.random.default_rng(1)


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


_erf = np.vectorize(math.erf)
UNARY = [
    ("exp", np.exp, (-2, 2)), ("log", np.log, (0.1, 3)), ("sqrt", np.sqrt, (0.1, 3)),
    ("rsqrt", lambda x: 1 / np.sqrt(x), (0.1, 3)), ("tanh", np.tanh, (-3, 3)),
    ("sigmoid", lambda x: 1 / (1 + np.exp(-x)), (-4, 4)), ("erf", _erf, (-2, 2)), ("abs", np.abs, (-2, 2)),
    ("negative", np.negative, (-2, 2)), ("floor", np.floor, (-3, 3)), ("ceil", np.ceil, (-3, 3)),
    ("round", np.round, (-3, 3)), ("sign", np.sign, (-2, 2)), ("sin", np.sin, (-3, 3)), ("cos", np.cos, (-3, 3)),
]


@pytest.mark.parametrize("name,ref,rng_", UNARY, ids=[u[0] for u in UNARY])
def test_unary(name, ref, rng_, backend):
    x = rng.uniform(*rng_, (3, 5)).astype("float32")
    A = te.placeholder(x.shape, name="A")
    (out,) = run_te([A], getattr(topi, name)(A), [x], target=backend)
    close(out, ref(x).astype("float32"), 1e-5)


def test_clip_cast_identity_gelu(backend):
    x = rng.uniform(-3, 3, (4, 3)).astype("float32")
    A = te.placeholder(x.shape, name="A")
    c, k, g, h = topi.clip(A, -1.0, 0.5), topi.cast(A, "int32"), topi.erf_gelu(A), topi.tanh_gelu(A)
    oc, ok, og, oh = run_te([A], [c, k, g, h], [x], target=backend)
    close(oc, np.clip(x, -1, 0.5))
    np.testing.assert_array_equal(ok, x.astype("int32"))
    close(og, x * 0.5 * (1 + _erf(x / np.sqrt(2))))
    close(oh, 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))), 1e-4)


BINARY = [
    ("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply), ("divide", np.divide),
    ("maximum", np.maximum), ("minimum", np.minimum), ("power", np.power),
    ("floor_divide", np.floor_divide), ("floor_mod", np.mod),
    ("equal", np.equal), ("not_equal", np.not_equal), ("less", np.less), ("less_equal", np.less_equal),
    ("greater", np.greater), ("greater_equal", np.greater_equal),
]


@pytest.mark.parametrize("name,ref", BINARY, ids=[b[0] for b in BINARY])
def test_broadcast_binary(name, ref, backend):
    a = rng.uniform(0.5, 2, (2, 1, 5)).astype("float32")
    b = rng.uniform(0.5, 2, (3, 1)).astype("float32")
    if name in ("equal", "not_equal", "less_equal", "greater_equal"):
        b[0, 0] = a[0, 0, 0]
    A, B = te.placeholder(a.shape, name="A"), te.placeholder(b.shape, name="B")
    (out,) = run_te([A, B], getattr(topi, name)(A, B), [a, b], target=backend)
    exp = ref(a, b)
    assert out.shape == exp.shape == (2, 3, 5)
    close(out.astype(exp.dtype), exp, 1e-5)


def test_integer_division_and_logic(backend):
    a = rng.integers(-9, 9, (7,)).astype("int32")
    b = rng.integers(1, 4, (7,)).astype("int32") * rng.choice([-1, 1], 7).astype("int32")
    A, B = te.placeholder((7,), "int32", "A"), te.placeholder((7,), "int32", "B")
    d, fd, fm = run_te([A, B], [topi.divide(A, B), topi.floor_divide(A, B), topi.floor_mod(A, B)], [a, b],
                       target=backend)
    np.testing.assert_array_equal(d, np.trunc(a / b).astype("int32"))  # TVM: divide truncates
    np.testing.assert_array_equal(fd, a // b)
    np.testing.assert_array_equal(fm, a % b)
    p, q = rng.random(6) > 0.5, rng.random(6) > 0.5
    P, Q = te.placeholder((6,), "bool", "P"), te.placeholder((6,), "bool", "Q")
    o1, o2, o3 = run_te([P, Q], [topi.logical_and(P, Q), topi.logical_or(P, Q), topi.logical_not(P)], [p, q],
                        target=backend)
    np.testing.assert_array_equal(o1, p & q)
    np.testing.assert_array_equal(o2, p | q)
    np.testing.assert_array_equal(o3, ~p)


def test_scalar_operand_and_bad_broadcast():
    a = rng.random((2, 3)).astype("float32")
    A = te.placeholder(a.shape, name="A")
    (out,) = run_te([A], topi.multiply(A, 3.0), [a])
    close(out, a * 3)
    (out,) = run_te([A], topi.subtract(1.0, A), [a])
    close(out, 1 - a)
    with pytest.raises(KilnError, match="do not broadcast"):
        topi.add(A, te.placeholder((4,), name="B"))


REDUCE = [
    ("sum", np.sum, None, False), ("sum", np.sum, 1, True), ("sum", np.sum, (0, 2), False),
    ("max", np.max, -1, False), ("min", np.min, (1,), True), ("prod", np.prod, 0, False),
    ("mean", np.mean, (1, 2), False),
]


@pytest.mark.parametrize("name,ref,axis,keepdims", REDUCE)
def test_reduce(name, ref, axis, keepdims, backend):
    x = rng.uniform(0.5, 1.5, (3, 4, 5)).astype("float32")
    A = te.placeholder(x.shape, name="A")
    (out,) = run_te([A], getattr(topi, name)(A, axis, keepdims), [x], target=backend)
    close(out, ref(x, axis=axis, keepdims=keepdims), 1e-5)


def test_reduce_exclude_and_var_std():
    x = rng.standard_normal((3, 4, 5)).astype("float32")
    A = te.placeholder(x.shape, name="A")
    s, v, sd = run_te([A], [topi.sum(A, 1, exclude=True), topi.variance(A, (0, 2)),
                            topi.std(A, 1, keepdims=True, unbiased=True)], [x])
    close(s, x.sum(axis=(0, 2)))
    close(v, x.var(axis=(0, 2)))
    close(sd, x.std(axis=1, keepdims=True, ddof=1))
    with pytest.raises(KilnError, match="out of range"):
        topi.sum(A, 3)


@pytest.mark.parametrize("axis,keepdims", [(1, False), (-1, True), (None, False)])
def test_argmax_argmin(axis, keepdims, backend):
    x = rng.integers(0, 4, (3, 5, 4)).astype("float32")  # ties: the first index wins
    A = te.placeholder(x.shape, name="A")
    mx, mn = run_te([A], [topi.argmax(A, axis, keepdims), topi.argmin(A, axis, keepdims)], [x], target=backend)
    np.testing.assert_array_equal(mx, np.argmax(x, axis=axis, keepdims=keepdims))
    np.testing.assert_array_equal(mn, np.argmin(x, axis=axis, keepdims=keepdims))
