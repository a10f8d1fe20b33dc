"""x86 reductions along a contiguous axis accumulate in one SIMD vector first (injective.lane_split_reduction):
numerics against numpy (odd extents, NaN, inf), where the split applies and where it does not, and the code for
AVX-512 (compiled, not run)."""
import re

import numpy as np
import pytest

import kiln as tvm
from kiln import relay, te, topi
from kiln.contrib import graph_executor
from tests.vector_code_util import build_reduce, c_loop

AVX2 = "llvm -mcpu=core-avx2"
AVX512 = "llvm -mcpu=skylake-avx512"


def _build(fn, shape, target=AVX2):
    return build_reduce(fn, shape, target)


def _run(f, out, a):
    res = tvm.nd.empty(tuple(int(d) for d in out.shape), out.dtype)
    f(tvm.nd.array(a), res)
    return res.numpy()


@pytest.mark.parametrize("shape", [(1, 128, 768), (3, 40), (5, 16), (2, 3, 37), (4, 8)])
@pytest.mark.parametrize("kind", ["sum", "mean", "max", "min", "variance"])
def test_last_axis_reductions(shape, kind):
    fns = {"sum": lambda X: topi.sum(X, axis=[-1], keepdims=True),
           "mean": lambda X: topi.mean(X, axis=[-1], keepdims=True),
           "max": lambda X: topi.max(X, axis=[-1], keepdims=False),
           "min": lambda X: topi.min(X, axis=[-1], keepdims=True),
           "variance": lambda X: topi.variance(X, axis=[-1], keepdims=True)}
    refs = {"sum": lambda a: a.sum(-1, keepdims=True), "mean": lambda a: a.mean(-1, keepdims=True),
            "max": lambda a: a.max(-1), "min": lambda a: a.min(-1, keepdims=True),
            "variance": lambda a: a.var(-1, keepdims=True)}
    f, out, text = _build(fns[kind], shape)
    # split where the reduction is long enough and whole vectors, also where the output row is whole vectors
    # (max without keepdims over (1, 128, 768): 128 outputs in a row, which would gather 8 rows at every step)
    split = shape[-1] % 8 == 0 and shape[-1] >= 16
    assert ("_rf" in text) == split, text
    if split:
        assert "[0:8]" in text  # the partial results are one 8-lane vector
    a = np.random.default_rng(0).standard_normal(shape).astype("float32") * 3
    flat = a.reshape(-1, shape[-1])
    if flat.shape[0] >= 3:
        flat[0, shape[-1] // 2] = np.nan
        flat[1, 1] = np.inf
        flat[2, -1] = -np.inf
    with np.errstate(invalid="ignore"):
        want = refs[kind](a.astype(np.float64))
    np.testing.assert_allclose(_run(f, out, a), want, rtol=2e-5, atol=1e-5)


def test_other_axes_are_not_split():
    # a reduction over a leading axis reads strided elements: no lane split (the row vectorizes instead)
    _, _, text = _build(lambda X: topi.sum(X, axis=[0]), (16, 64))
    assert "_rf" not in text
    # two reduction axes whose innermost one is not whole vectors of 4 lanes, or only 2 of them: left alone
    for shape in ((4, 8, 10), (4, 8, 8)):
        _, _, text = _build(lambda X: topi.sum(X, axis=[1, 2]), shape)
        assert "_rf" not in text
    # 3 vectors of 4 lanes (half AVX2's width): split
    _, _, text = _build(lambda X: topi.sum(X, axis=[1, 2]), (4, 8, 12))
    assert "_rf" in text and "[0:4]" in text


@pytest.mark.parametrize("shape,axis", [((1, 128, 256), None), ((4, 8, 16), [1, 2]), ((3, 7, 40), None),
                                        ((5, 33, 24), [0, 2]), ((2, 9, 13), None)])
@pytest.mark.parametrize("kind", ["min", "max", "sum"])
def test_several_reduction_axes_split_the_innermost(shape, axis, kind):
    """A reduction over several axes (a whole tensor's min / max: DynamicQuantizeLinear's range) splits its
    innermost axis into vector lanes when that axis is contiguous and whole vectors; NaN and inf as numpy."""
    fn = getattr(topi, kind)
    f, out, text = _build(lambda X: fn(X, axis=axis), shape)
    innermost_reduced = axis is None or len(shape) - 1 in [a % len(shape) for a in axis]
    assert ("_rf" in text) == (shape[-1] % 8 == 0 and shape[-1] >= 16 and innermost_reduced), text
    a = np.random.default_rng(2).standard_normal(shape).astype("float32")
    ax = None if axis is None else tuple(axis)
    for special in (None, np.inf, np.nan):
        if special is not None:
            a.reshape(-1)[a.size // 3] = special
        with np.errstate(invalid="ignore"):
            want = getattr(np, kind)(a.astype(np.float64), axis=ax)
        np.testing.assert_allclose(_run(f, out, a), want, rtol=2e-5, atol=1e-4)


def test_layer_norm_graph_avx2_and_avx512():
    shape = (1, 13, 768)
    x = relay.var("x", shape=shape)
    g, b = relay.var("g", shape=(768,)), relay.var("b", shape=(768,))
    mod = tvm.IRModule.from_expr(relay.Function([x, g, b], relay.nn.layer_norm(x, g, b, axis=-1, epsilon=1e-5)))
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target=AVX2)
    rng = np.random.default_rng(1)
    a = rng.standard_normal(shape).astype("float32") * 2 + 1
    gv, bv = rng.standard_normal(768).astype("float32"), rng.standard_normal(768).astype("float32")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    m.set_input("x", a)
    m.set_input("g", gv)
    m.set_input("b", bv)
    m.run()
    a64 = a.astype(np.float64)
    want = (a64 - a64.mean(-1, keepdims=True)) / np.sqrt(a64.var(-1, keepdims=True) + 1e-5) * gv + bv
    np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-4, atol=1e-4)
    with tvm.transform.PassContext(opt_level=3):
        lib512 = relay.build(mod, target=AVX512)
    text = "\n".join(str(k.prim_func) for k in lib512.lowered)
    assert "_rf" in text and "T.vectorized(16)" in text


# -- several independent accumulators (injective.accumulator_count / schedule_lane_partials) ----------------------

def _hot_loop(src: str) -> str:
    """The C body of the reduction's outer loop over whole accumulator blocks (``k..._outer``)."""
    return c_loop(src, "for (int32_t k0_outer")


@pytest.mark.parametrize("target,lanes,acc", [(AVX2, 8, 8), (AVX512, 16, 8)])
def test_hot_loop_has_independent_accumulators(target, lanes, acc):
    """A (128, 1024) row sum keeps ``acc`` vector accumulators (8: half of AVX2's vector registers, a quarter of
    AVX-512's) that each step updates independently; they are combined pairwise after the loop. AVX-512 is
    compiled, not run."""
    with tvm.target.Target(target):
        assert topi.x86.injective.reduction_accumulators(1024 // lanes, 1024 // lanes) == acc
    f, out, text = _build(lambda X: topi.sum(X, axis=[-1], keepdims=True), (128, 1024), target)
    # the accumulators are then combined pairwise (a tree: the first level halves them)
    assert f"T_sum_rf = T.allocate([{lanes * acc}]" in text and f"T_sum_repl_rf = T.allocate([{lanes * acc // 2}]" in text
    loop = _hot_loop(f.get_source())
    # one add per accumulator, each a vector variable of its own (kept in a register), none reading another's
    for u in range(acc):
        assert loop.count(f"T_sum_rf_r{u} = T_sum_rf_r{u} + kiln_vload_f32x{lanes}(") == 1, loop
    assert f"T_sum_rf_r{acc}" not in loop and "kiln_vstore" not in loop
    # kiln compiles without -ffast-math: gcc keeps the adds as written (no reassociation back into one chain)
    from kiln.target.compiler import DEFAULT_CFLAGS
    from kiln.target.flags import target_cflags
    flags = " ".join(list(DEFAULT_CFLAGS) + list(target_cflags(tvm.target.Target(target))))
    assert "-ffast-math" not in flags and "-fassociative-math" not in flags and "-Ofast" not in flags, flags
    if target == AVX2:
        a = np.random.default_rng(3).standard_normal((128, 1024)).astype("float32")
        np.testing.assert_allclose(_run(f, out, a), a.astype(np.float64).sum(-1, keepdims=True), rtol=1e-5,
                                   atol=2e-4)


@pytest.mark.parametrize("n,acc", [(16, 2), (24, 3), (40, 5), (48, 6), (56, 7), (96, 6), (4096, 8), (136, 1)])
def test_accumulator_count_divides_the_row(n, acc):
    """The count is the largest up to 8 (AVX2) that divides the row's vectors: no remainder loop."""
    with tvm.target.Target(AVX2):
        assert topi.x86.injective.reduction_accumulators(n // 8, n // 8) == acc
    f, out, text = _build(lambda X: topi.sum(X, axis=[-1], keepdims=True), (5, n))
    assert f"T_sum_rf = T.allocate([{8 * acc}]" in text
    # the first combining level: an even count is halved, an odd one added into one vector; one 8-lane vector
    # is reduced lane by lane (no level)
    if acc > 1:
        assert f"T_sum_repl_rf = T.allocate([{8 * acc // 2 if acc % 2 == 0 else 8}]" in text
    else:
        assert "T_sum_repl_rf" not in text
    a = np.random.default_rng(n).standard_normal((5, n)).astype("float32") * 10
    np.testing.assert_allclose(_run(f, out, a), a.astype(np.float64).sum(-1, keepdims=True), rtol=1e-5,
                               atol=1e-5 * np.sqrt(n) * 10)


@pytest.mark.parametrize("kind", ["max", "min"])
def test_nan_and_inf_in_every_accumulator(kind):
    """A NaN in any accumulator's slot (and any lane of it) makes its row NaN, as PyTorch's max / min; ±inf
    wins elsewhere."""
    n = 96  # 12 vectors: 4 accumulators of 8 lanes, 3 steps each
    fn = getattr(topi, kind)
    f, out, _ = _build(lambda X: fn(X, axis=[-1], keepdims=True), (40, n))
    a = np.random.default_rng(4).standard_normal((40, n)).astype("float32")
    for row in range(32):
        a[row, (row * 8 + row % 8) % n] = np.nan  # slot row % 4 of the 4 accumulators, lane row % 8, varied steps
    a[32, 95] = np.nan
    a[33, 0] = np.nan
    a[34, 50], a[35, 7], a[36, 64] = np.inf, -np.inf, np.inf
    a[37, 3], a[37, 90] = np.nan, np.inf
    want = getattr(torch_like, kind)(a)
    got = _run(f, out, a)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=0, atol=0)


class torch_like:
    """max / min along the last axis with NaN propagation (numpy's np.max / np.min propagate NaN as well)."""
    max = staticmethod(lambda a: np.max(a, axis=-1, keepdims=True))
    min = staticmethod(lambda a: np.min(a, axis=-1, keepdims=True))


@pytest.mark.parametrize("kind", ["sum", "max", "mean"])
def test_symbolic_rows_static_reduction(kind):
    """A VM kernel's symbolic row count with a static row length: the accumulators apply per row."""
    m = te.var("m")
    X = te.placeholder((m, 160), name="x")
    fns = {"sum": lambda X: topi.sum(X, axis=[-1], keepdims=True),
           "max": lambda X: topi.max(X, axis=[-1], keepdims=True),
           "mean": lambda X: topi.mean(X, axis=[-1], keepdims=True)}
    with tvm.target.Target(AVX2):
        out = fns[kind](X)
        s = topi.x86.schedule_reduce([out])
        text = str(tvm.lower(s, [X, out], simple_mode=True))
        f = tvm.build(s, [X, out], target=AVX2)
    assert "_rf = T.allocate([40]" in text  # 20 vectors: 5 accumulators
    for rows in (1, 3, 17):
        a = np.random.default_rng(rows).standard_normal((rows, 160)).astype("float32")
        if rows == 17:
            a[5, 77] = np.nan
        res = tvm.nd.empty((rows, 1), "float32")
        f(tvm.nd.array(a), res)
        with np.errstate(invalid="ignore"):
            want = getattr(np, kind)(a.astype(np.float64), axis=-1, keepdims=True)
        np.testing.assert_allclose(res.numpy(), want, rtol=2e-5, atol=1e-5)


def _inits(text: str) -> int:
    """How many vector accumulators a lowered reduction initializes (``buf[a:b] = T.Broadcast(init, 8)``)."""
    return len(re.findall(r'\] = T\.Broadcast\(T\.float32\((0\.0|"-inf")\), 8\)$', text, re.M))


def test_vectorized_output_rows_interleave_accumulators():
    """A reduction whose output row is vectorized (a sum over a leading axis, a global pool over NCHW8c)
    reduces 4 output vectors at once on AVX2: the reduction loop outside, 4 unrolled accumulators inside."""
    f, out, text = _build(lambda X: topi.sum(X, axis=[0]), (37, 96))
    assert _inits(text) == 4 and text.split("for k0 in range(37):")[1].count("+ x_1[") == 4, text
    a = np.random.default_rng(5).standard_normal((37, 96)).astype("float32")
    a[3, 17], a[30, 40] = np.nan, np.inf
    with np.errstate(invalid="ignore"):
        want = a.astype(np.float64).sum(0)
    np.testing.assert_allclose(_run(f, out, a), want, rtol=1e-5, atol=1e-5)
    # 5 output vectors: no count up to 4 divides them; one accumulator as before
    _, _, text = _build(lambda X: topi.sum(X, axis=[0]), (9, 40))
    assert _inits(text) == 1, text


@pytest.mark.parametrize("pool", ["avg", "max"])
def test_global_and_window_pools_nchw8c(pool):
    """Global pools over NCHW8c (mobilenet's head): several output vectors per reduction step; 3x3 windows: one;
    numerics against numpy with NaN and inf."""
    X = te.placeholder((1, 12, 7, 15, 8), name="x")
    with tvm.target.Target(AVX2):
        g = topi.nn.global_pool(X, pool, layout="NCHW8c")
        w = topi.nn.pool2d(X, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), pool, layout="NCHW8c")
        fs = []
        for out, acc in ((g, 4), (w, 1)):  # a 3x3 window (9 steps) keeps one accumulator per output vector
            s = topi.x86.schedule_pool([out])
            text = str(tvm.lower(s, [X, out], simple_mode=True))
            assert _inits(text) == acc, text
            fs.append((tvm.build(s, [X, out], target=AVX2), out))
    a = np.random.default_rng(6).standard_normal((1, 12, 7, 15, 8)).astype("float32")
    a[0, 5, 2, 3, 1] = np.nan
    a[0, 9, 6, 14, 7] = np.inf
    red = np.mean if pool == "avg" else np.max
    with np.errstate(invalid="ignore"):
        want_g = red(a.astype(np.float64), axis=(2, 3), keepdims=True)
    np.testing.assert_allclose(_run(*fs[0], a), want_g, rtol=1e-5, atol=1e-5)
    pad = np.pad(a.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1), (0, 0)),
                 constant_values=(-np.inf if pool == "max" else 0.0))
    oh, ow = (7 + 2 - 3) // 2 + 1, (15 + 2 - 3) // 2 + 1
    want_w = np.empty((1, 12, oh, ow, 8))
    for i in range(oh):
        for j in range(ow):
            win = pad[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3, :]
            if pool == "max":
                want_w[:, :, i, j, :] = win.max(axis=(2, 3))
            else:  # count_include_pad=True (topi.nn.pool2d's default)
                want_w[:, :, i, j, :] = win.sum(axis=(2, 3)) / 9.0
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(_run(*fs[1], a), want_w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target,n,acc", [(AVX2, 128, 4), (AVX2, 16, 1), (AVX2, 48, 3), (AVX512, 256, 8),
                                          (AVX512, 48, 1)])
def test_softmax_row_accumulators(target, n, acc):
    """Softmax's static row max and sum keep ``acc`` vector accumulators of two vectors at least each (AVX-512
    compiled, not run); numerics with NaN and -inf on AVX2."""
    lanes = 16 if target == AVX512 else 8
    x = relay.var("x", shape=(6, n))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.nn.softmax(x, axis=-1)))
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target=target)
    text = "\n".join(str(k.prim_func) for k in lib.lowered)
    assert f"T_softmax_maxelem_lanes = T.Buffer((6, {lanes * acc}))" in text
    assert f"T_softmax_expsum_lanes = T.Buffer((6, {lanes * acc}))" in text
    assert ("T_softmax_expsum_acc = T.Buffer" in text) == (acc > 1)
    if target == AVX512:
        return
    a = np.random.default_rng(n).standard_normal((6, n)).astype("float32") * 4
    a[1, n - 1] = np.nan
    a[2, : n // 2] = -np.inf
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    m.set_input("x", a)
    m.run()
    a64 = a.astype(np.float64)
    with np.errstate(invalid="ignore"):
        e = np.exp(a64 - a64.max(-1, keepdims=True))
        want = e / e.sum(-1, keepdims=True)
    got = m.get_output(0).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)
