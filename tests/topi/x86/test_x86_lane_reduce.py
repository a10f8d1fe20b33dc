"""x86 reductions along a contiguous axis accumulate in one SIMD vector first (injective.lane_split_reduction):
numerics against numpy (odd extents, NaN, inf), where the split applies and where it does not, and the code for
AVX-512 (compiled, not run)."""
import numpy as np
import pytest

import kiln as tvm
from kiln import relay, te, topi
from kiln.contrib import graph_executor

AVX2 = "llvm -mcpu=core-avx2"
AVX512 = "llvm -mcpu=skylake-avx512"


def _build(fn, shape, target=AVX2):
    X = te.placeholder(shape, name="x")
    with tvm.target.Target(target):
        out = fn(X)
        s = topi.x86.schedule_reduce([out])
        text = str(tvm.lower(s, [X, out], simple_mode=True))
        f = tvm.build(s, [X, out], target=target)
    return f, out, text


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
    out_last = int(out.shape[-1]) if len(out.shape) else 1
    # split where the reduction is long enough, whole vectors, and the output row does not vectorize by itself
    # (max without keepdims over (1, 128, 768): 128 outputs in a row, reduced 8 at a time by strided loads)
    split = shape[-1] % 8 == 0 and shape[-1] >= 16 and out_last % 8 != 0
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
    # two reduction axes whose innermost one is too short (< 2 vectors) or not whole vectors: left alone
    _, _, text = _build(lambda X: topi.sum(X, axis=[1, 2]), (4, 8, 12))
    assert "_rf" not in text


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
