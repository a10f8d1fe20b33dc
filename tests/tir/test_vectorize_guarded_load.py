"""The vectorizer widens an ``if_then_else`` whose lane-dependent condition guards a load (a pad): the load's
indices are clamped to element 0 on the lanes the guard rejects and the result is blended; where the guard is
linear in the lane, iterations whose first and last lanes pass take plain contiguous loads."""
import numpy as np
import pytest

import kiln
from kiln import te, topi
from kiln import tir
from kiln.runtime.cpu_features import host_features
from kiln.tir import transform as T
from kiln.tir.interpreter import run_primfunc

from tir_helpers import loop, make_func

TARGET = "llvm -mcpu=core-avx2"   # the code is compiled for AVX2 and run only where the host has it


def _run(f, inputs, out_shape, out_dtype):
    if "avx2" not in host_features():
        return None
    out = kiln.nd.empty(out_shape, out_dtype)
    f(*[kiln.nd.array(x) for x in inputs], out)
    return out.numpy()


def _vector_stage_source(s, args):
    f = kiln.build(s, args, target=TARGET)
    return f, f.get_source()


@pytest.mark.parametrize("shape,pad,factor", [((3, 7, 21), (1, 2), 8), ((2, 5, 13), (2, 1), 8),
                                              ((1, 3, 5), (1, 1), 4)])
def test_padded_elementwise_vectorized_and_exact(shape, pad, factor):
    c, h, w = shape
    right = -(-(w + pad[1] + 1) // factor) * factor - w - pad[1]   # >= 1, the padded width a whole vector count
    a = te.placeholder(shape, "float32", name="a")
    p = topi.nn.pad(a, (0, pad[0], pad[1]), (0, pad[0] + 1, right), pad_value=-3.0, name="p")
    b = te.compute(p.shape, lambda *i: p(*i) * 2.0 + 1.0, name="b")
    s = te.create_schedule(b.op)
    s[p].compute_inline()
    _, wi = s[b].split(b.op.axis[2], factor=factor)
    s[b].vectorize(wi)
    text = str(kiln.lower(s, [a, b], simple_mode=True))
    assert "T.Ramp" in text and "T.Select" in text          # vectorized, the guard became a blend
    f, src = _vector_stage_source(s, [a, b])
    assert f"kiln_vload_f32x{factor}" in src                 # the interior path: contiguous loads
    x = np.random.default_rng(1).standard_normal(shape).astype("float32")
    ref = np.pad(x, ((0, 0), (pad[0], pad[0] + 1), (pad[1], right)), constant_values=-3.0) * 2.0 + 1.0
    got = _run(f, [x], ref.shape, "float32")
    if got is not None:
        np.testing.assert_array_equal(got, ref)


def test_nonlinear_guard_is_a_blended_gather():
    """A channel pad 3 -> 4 fused into a layout transform (the guard is ``j % 4 < 3``): no interior path,
    every vector is a gather with clamped indices and a blend; uint8 quantize as in the int8 models' stem."""
    n, h, w = 1, 5, 7
    a = te.placeholder((n, 3, h, w), "float32", name="a")
    q = te.compute((n, 1, h, w * 4), lambda b, o, y, j: te.if_then_else(
        j % 4 < 3, te.max(te.min(te.round(a[b, j % 4, y, j // 4] / 0.05) + 3.0, 255.0), 0.0), 3.0)
        .astype("uint8"), name="q")
    s = te.create_schedule(q.op)
    _, ji = s[q].split(q.op.axis[3], factor=4)
    s[q].vectorize(ji)
    f, src = _vector_stage_source(s, [a, q])
    assert "kiln_gather_f32x4" in src and "kiln_select" in src
    x = (np.random.default_rng(2).standard_normal((n, 3, h, w)) * 8).astype("float32")
    x[0, 0, 0, :3] = [np.float32(1e9), np.float32(-1e9), 0.0]
    t = np.clip(np.round(x / np.float32(0.05)) + 3, 0, 255).astype("uint8")
    ref = np.full((n, 1, h, w, 4), 3, "uint8")
    ref[0, 0, :, :, :3] = t[0].transpose(1, 2, 0)
    got = _run(f, [x], (n, 1, h, w * 4), "uint8")
    if got is not None:
        np.testing.assert_array_equal(got, ref.reshape(n, 1, h, w * 4))


def test_guarded_integer_division():
    """``if_then_else(d != 0, a // d, 0)``: the divisor is replaced by 1 on the rejected lanes (no fault)."""
    n = 24
    a = te.placeholder((n,), "int32", name="a")
    d = te.placeholder((n,), "int32", name="d")
    out = te.compute((n,), lambda i: te.if_then_else(d[i] != 0, te.floordiv(a[i], d[i]), -7), name="o")
    s = te.create_schedule(out.op)
    _, ii = s[out].split(out.op.axis[0], factor=8)
    s[out].vectorize(ii)
    assert "T.Ramp" in str(kiln.lower(s, [a, d, out], simple_mode=True))
    f = kiln.build(s, [a, d, out], target=TARGET)
    rng = np.random.default_rng(3)
    x = rng.integers(-2**31, 2**31 - 1, n, dtype=np.int64).astype("int32")
    y = rng.integers(-3, 4, n).astype("int32")
    y[[0, 5, 9]] = 0
    x[1], y[1] = np.int32(-2**31), 1
    ref = np.where(y != 0, np.floor_divide(x, np.where(y != 0, y, 1)), -7).astype("int32")
    got = _run(f, [x, y], (n,), "int32")
    if got is not None:
        np.testing.assert_array_equal(got, ref)


def test_guard_on_an_inner_loop_variable_keeps_the_blend():
    """A guard that uses a variable bound inside the vectorized body (an inner loop) cannot be tested outside it:
    no interior path, the blend alone, and the interpreter's result unchanged."""
    A = tir.decl_buffer((11,), "float32", "A")
    B = tir.decl_buffer((3, 8), "float32", "B")
    i, k = tir.Var("i"), tir.Var("k")
    g = tir.if_then_else(tir.all(i + k >= 2, i + k < 12), A[i + k - 2], tir.const(-1.0))
    f = make_func([A, B], loop(i, 8, loop(k, 3, tir.BufferStore(B, g, [k, i])), tir.ForKind.VECTORIZED))
    v = T.VectorizeLoop()(f)
    text = str(v)
    assert "T.Ramp" in text and "T.Select" in text
    x = np.random.default_rng(4).standard_normal(11).astype("float32")
    outs = []
    for fn in (f, v):
        arrays = [x.copy(), np.zeros((3, 8), "float32")]
        run_primfunc(fn, arrays)
        outs.append(arrays[1])
    np.testing.assert_array_equal(outs[0], outs[1])
    ref = np.array([[x[i + k - 2] if 2 <= i + k < 12 else -1.0 for i in range(8)] for k in range(3)], "float32")
    np.testing.assert_array_equal(outs[1], ref)


@pytest.mark.parametrize("n_inputs,vectorized", [(8, True), (70, False)])
def test_long_if_then_else_chain_stays_scalar(n_inputs, vectorized):
    """A concatenate of n inputs is a tree of n - 1 if_then_else: vectorized, every lane would evaluate all n
    loads and each level would guard the levels below (a relay concatenate of 600 inputs took minutes to
    build). Bodies with more blends than the vectorizer's limit stay a scalar loop; small ones are still
    blended."""
    xs = [te.placeholder((4,), "float32", name=f"x{i}") for i in range(n_inputs)]
    c = topi.concatenate(xs, axis=0)
    s = te.create_schedule(c.op)
    _, inner = s[c].split(c.op.axis[0], factor=8)
    s[c].vectorize(inner)
    f, src = _vector_stage_source(s, xs + [c])
    assert ("kiln_select" in src) == vectorized
    rng = np.random.default_rng(n_inputs)
    data = [rng.standard_normal(4).astype("float32") for _ in range(n_inputs)]
    got = _run(f, data, (4 * n_inputs,), "float32")
    if got is not None:
        np.testing.assert_array_equal(got, np.concatenate(data))
