"""x86 reductions keep several vector accumulators in registers and combine them as a tree
(injective.lane_split_reduction / reduction_accumulators / combine_partials): numerics against numpy through
relay.build on the host (odd shapes, several axes, keepdims, NaN and inf, int32), and the C code for AVX2 and
AVX-512 (compiled, not run): one vector variable per accumulator, no store and no gather in the hot loop."""
import re

import numpy as np
import pytest

import kiln as tvm
from kiln import relay, te, topi
from tests.vector_code_util import build_reduce, c_loop

AVX2 = "llvm -mcpu=core-avx2"
AVX512 = "llvm -mcpu=skylake-avx512"


def _relay_fn(kind, shape, axis, keepdims, dtype="float32"):
    x = relay.var("x", shape=shape, dtype=dtype)
    if kind == "layer_norm":
        g = relay.var("g", shape=shape[-1:])
        b = relay.var("b", shape=shape[-1:])
        return relay.Function([x, g, b], relay.nn.layer_norm(x, g, b, axis=-1, epsilon=1e-5))
    return relay.Function([x], getattr(relay, kind)(x, axis=axis, keepdims=keepdims))


def _run(kind, a, axis=None, keepdims=False, extra=()):
    from kiln.contrib import graph_executor
    mod = tvm.IRModule.from_expr(_relay_fn(kind, a.shape, axis, keepdims, str(a.dtype)))
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    m.set_input("x", a)
    for name, v in extra:
        m.set_input(name, v)
    m.run()
    return m.get_output(0).numpy()


def _np(kind, a, axis, keepdims):
    ax = None if axis is None else tuple(axis) if isinstance(axis, (list, tuple)) else axis
    with np.errstate(invalid="ignore"):
        return getattr(np, kind)(a.astype(np.float64), axis=ax, keepdims=keepdims)


def _check_sum_like(got, a, kind, axis, keepdims):
    """sum / mean within float32 rounding of a reassociated sum: relative to the sum of |x| (per output)."""
    want = _np(kind, a, axis, keepdims)
    scale = _np(kind, np.abs(a), axis, keepdims)
    assert got.shape == np.shape(want)
    np.testing.assert_array_less(np.abs(got - want), 1e-5 * scale + 1e-6)


@pytest.mark.parametrize("shape,axis", [((7, 33), -1), ((3, 1001), -1), ((1,), -1), ((1,), None),
                                        ((128, 1024), -1), ((128, 768), -1), ((5, 64), -1), ((2, 3, 96), [1, 2]),
                                        ((4, 5, 48), [0, 2]), ((1, 3, 22, 32), None), ((9, 160), None),
                                        ((37, 96), 0), ((6, 8, 256), 1), ((128, 1000), -1), ((1, 64, 56, 56), [2, 3]),
                                        ((300, 12), -1), ((64, 8), -1), ((3, 5, 24), None)])
@pytest.mark.parametrize("kind", ["max", "min", "sum", "mean"])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_match_numpy(shape, axis, kind, keepdims):
    a = (np.random.default_rng(sum(shape)).standard_normal(shape) * 4 + 1).astype("float32")
    got = _run(kind, a, axis, keepdims)
    if kind in ("max", "min"):
        np.testing.assert_array_equal(got, _np(kind, a, axis, keepdims).astype("float32"))
    else:
        _check_sum_like(got, a, kind, axis, keepdims)


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("shape,axis,keepdims", [((40, 1024), -1, False), ((40, 768), -1, True),
                                                 ((24, 1024), None, False), ((3, 8, 512), [1, 2], True)])
def test_nan_and_inf_reach_every_accumulator_and_lane(kind, shape, axis, keepdims):
    """A NaN anywhere makes its output NaN (PyTorch's and numpy's max / min); +-inf wins elsewhere. The NaNs
    are put at varied positions so every accumulator slot and lane position is hit somewhere."""
    a = np.random.default_rng(7).standard_normal(shape).astype("float32")
    flat = a.reshape(-1, shape[-1])
    n = shape[-1]
    for row in range(0, flat.shape[0], 3):
        flat[row, (row * 17 + row // 3) % n] = np.nan
    flat[1, 5], flat[2, n - 1], flat[4, n // 2] = np.inf, -np.inf, np.inf
    flat[7, 0], flat[7, n - 2] = np.inf, -np.inf
    got = _run(kind, a, axis, keepdims)
    want = _np(kind, a, axis, keepdims)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(got)], want[~np.isnan(want)].astype("float32"))
    # no NaN at all: inf in one row each way
    b = np.random.default_rng(8).standard_normal(shape).astype("float32")
    b.reshape(-1, n)[0, 3] = np.inf if kind == "max" else -np.inf
    np.testing.assert_array_equal(_run(kind, b, axis, keepdims), _np(kind, b, axis, keepdims).astype("float32"))


@pytest.mark.parametrize("shape,axis", [((7, 40), -1), ((64, 512), -1), ((3, 40, 64), None), ((9, 24), None)])
@pytest.mark.parametrize("kind", ["sum", "max", "min"])
def test_float64_reductions(shape, axis, kind):
    """float64: 4 lanes on AVX2, 8 on AVX-512 (no lane halving below one vector of 8 or fewer)."""
    a = np.random.default_rng(5).standard_normal(shape) * 3
    a.reshape(-1)[a.size // 2] = np.nan if kind != "sum" else 1.5
    got = _run(kind, a, axis, False)
    ax = None if axis is None else axis
    with np.errstate(invalid="ignore"):
        want = getattr(np, kind)(a, axis=ax)
    if kind == "sum":
        np.testing.assert_array_less(np.abs(got - want), 1e-12 * np.sum(np.abs(a), axis=ax) + 1e-12)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape,axis", [((16, 256), [-1]), ((3, 1000), [-1]), ((2, 64, 48), None)])
@pytest.mark.parametrize("kind", ["sum", "max"])
def test_float16_reductions(shape, axis, kind):
    """float16 (host target, TE schedule): sums within float16 rounding of the partials, max exact."""
    X = te.placeholder(shape, "float16", name="x")
    with tvm.target.Target("llvm"):
        out = getattr(topi, kind)(X, axis=axis)
        s = topi.x86.schedule_reduce([out])
        f = tvm.build(s, [X, out], target="llvm")
    a = np.random.default_rng(6).standard_normal(shape).astype("float16")
    res = tvm.nd.empty(tuple(int(d) for d in out.shape), "float16")
    f(tvm.nd.array(a), res)
    ax = None if axis is None else tuple(axis)
    want = getattr(np, kind)(a.astype(np.float64), axis=ax)
    if kind == "sum":
        np.testing.assert_array_less(np.abs(res.numpy() - want), 2e-3 * np.abs(a.astype(np.float64)).sum(axis=ax))
    else:
        np.testing.assert_array_equal(res.numpy(), want.astype("float16"))


@pytest.mark.parametrize("shape,axis", [((7, 33), -1), ((128, 1024), -1), ((3, 40, 64), None), ((5, 96), [0, 1])])
@pytest.mark.parametrize("kind", ["sum", "max", "min"])
def test_int32_reductions_exact(shape, axis, kind):
    a = np.random.default_rng(3).integers(-1000, 1000, shape).astype("int32")
    got = _run(kind, a, axis, False)
    ax = None if axis is None else tuple(axis) if isinstance(axis, list) else axis
    np.testing.assert_array_equal(got, getattr(np, kind)(a, axis=ax).astype("int32"))


@pytest.mark.parametrize("shape", [(128, 768), (5, 1024), (3, 7, 96)])
def test_layer_norm_rows(shape):
    rng = np.random.default_rng(4)
    a = (rng.standard_normal(shape) * 3 + 2).astype("float32")
    g, b = rng.standard_normal(shape[-1]).astype("float32"), rng.standard_normal(shape[-1]).astype("float32")
    got = _run("layer_norm", a, extra=(("g", g), ("b", b)))
    a64 = a.astype(np.float64)
    want = (a64 - a64.mean(-1, keepdims=True)) / np.sqrt(a64.var(-1, keepdims=True) + 1e-5) * g + b
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


# -- generated code, compiled for a named target (AVX-512 is not run) ----------------------------------------------

def _source(fn, shape, target):
    f, _, text = build_reduce(fn, shape, target)
    return f.get_source(), text


def _loop(src: str, head: str) -> str:
    """The C text of the loop whose header starts with ``head``, the line before it included."""
    return c_loop(src, head, with_line_before=True)


@pytest.mark.parametrize("target,lanes,acc", [(AVX2, 8, 8), (AVX512, 16, 8)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_row_max_keeps_accumulators_in_registers(target, lanes, acc, keepdims):
    """max over the last axis of (128, 1024), with and without keepdims (without, the 128 outputs are whole
    vectors; that row was vectorized before, each step gathering one element of 8 or 16 rows): ``acc`` vector
    variables, each updated once per step of a loop gcc keeps (``#pragma GCC unroll 1``), no store and no
    gather inside it."""
    src, _ = _source(lambda X: topi.max(X, axis=[-1], keepdims=keepdims), (128, 1024), target)
    assert "kiln_gather" not in src
    names = set(re.findall(r"\bT_max_rf_r\d+\b", src))
    assert names == {f"T_max_rf_r{u}" for u in range(acc)}, names
    loop = _loop(src, "for (int32_t k0_outer")
    assert loop.lstrip().startswith("#pragma GCC unroll 1"), loop
    for u in range(acc):
        assert loop.count(f"T_max_rf_r{u} = kiln_max_f32x{lanes}(T_max_rf_r{u}, kiln_vload_f32x{lanes}(") == 1, loop
    assert "kiln_vstore" not in loop and "T_max[" not in loop


@pytest.mark.parametrize("target,lanes,acc", [(AVX2, 8, 8), (AVX512, 16, 16)])
def test_whole_tensor_min_and_its_tree(target, lanes, acc):
    """DynamicQuantizeLinear's whole-tensor min of 128 x 1024 floats: 8 accumulators on AVX2 (half its 16
    registers), 16 on AVX-512 (a long reduction, one output); then a tree: each level half the partials, whole
    vectors, and on AVX-512 down to 4 lanes."""
    src, text = _source(lambda X: topi.min(X), (128, 1024), target)
    names = set(re.findall(r"\bT_min_rf_r\d+\b", src))
    assert names == {f"T_min_rf_r{u}" for u in range(acc)}, names
    loop = _loop(src, "for (int32_t k1_outer")
    assert "kiln_vstore" not in loop
    sizes = [int(m) for m in re.findall(r"T_min_\w*rf = T\.allocate\(\[(\d+)\]", text)]
    want, w = [lanes * acc], lanes * acc
    floor = 4 if lanes > 8 else lanes
    while w > floor:
        w //= 2
        want.append(w)
    assert sizes == want, (sizes, text)


def test_row_sum_accumulator_counts():
    """The counts: up to 8 for rows (a 768-float row on AVX-512: 48 vectors, 8 accumulators of 6 steps), up to
    16 for long reductions on AVX-512, never more than half the registers (AVX2: 8)."""
    f = topi.x86.injective.reduction_accumulators
    with tvm.target.Target(AVX512):
        assert f(48, 48) == 8 and f(64, 64) == 8 and f(64, 8192) == 16 and f(14, 14 * 672) == 14 and f(3, 3) == 3
    with tvm.target.Target(AVX2):
        assert f(96, 96) == 8 and f(128, 16384) == 8 and f(17, 17) == 1


@pytest.mark.parametrize("target,shape,lanes", [(AVX512, (128, 1000), 8), (AVX512, (64, 56), 8), (AVX2, (64, 56), 8),
                                                (AVX512, (64, 12), 4), (AVX2, (64, 12), 4), (AVX512, (128, 1024), 16),
                                                (AVX2, (64, 8), None), (AVX512, (7, 33), None)])
def test_rows_of_half_vectors_are_split_narrower(target, shape, lanes):
    """A row that is not whole machine vectors is split into half (or quarter) vectors where it is whole ones
    (1000 floats: 125 ymm on AVX-512, not gathered 16 rows at a time); a row of only 2 xmm (8 floats) or of
    no whole xmm (33 floats) is not split."""
    src, text = _source(lambda X: topi.sum(X, axis=[-1]), shape, target)
    if lanes is None:
        assert "_rf" not in text
        return
    assert re.search(rf"kiln_f32x{lanes} T_sum_rf_r0\b", src), src
    assert "kiln_gather" not in src


@pytest.mark.parametrize("target", [AVX2, AVX512])
@pytest.mark.parametrize("kind", ["sum", "max"])
def test_reduction_with_init_keeps_it(target, kind):
    """A reduction with an ``init`` value (``te.sum(..., init=c)``) is not lane-split: ``rfactor`` starts every
    stage from the reducer's identity, so the split lost ``c`` (a sum over (5, 64) gave sum(x), not sum(x) + c).
    The code is checked for both targets; AVX2 is also run."""
    n, c = 64, 100.0
    X = te.placeholder((5, n), name="x")
    k = te.reduce_axis((0, n), name="k")
    red = {"sum": te.sum, "max": te.max}[kind]
    with tvm.target.Target(target):
        out = te.compute((5,), lambda i: red(X[i, k], axis=k, init=tvm.tir.const(c, "float32")), name="o")
        s = topi.x86.schedule_reduce([out])
        text = str(tvm.lower(s, [X, out], simple_mode=True))
        f = tvm.build(s, [X, out], target=target)
    assert "_rf" not in text
    if target != AVX2:
        return
    a = np.random.default_rng(9).standard_normal((5, n)).astype("float32")
    res = tvm.nd.empty((5,), "float32")
    f(tvm.nd.array(a), res)
    want = a.astype(np.float64).sum(-1) + c if kind == "sum" else np.maximum(a.max(-1), c)
    np.testing.assert_allclose(res.numpy(), want, rtol=1e-5)
