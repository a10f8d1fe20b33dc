"""NaN and +-inf through every CPU activation, reduction and pooling: compiled kernels give what PyTorch
gives (NaN propagates through relu, clamp, maximum/minimum, max/min reductions and max pooling; argmax and
argmin return the first NaN's index)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kiln
from kiln import relay, te
from kiln.contrib import graph_executor

TARGET = "llvm"
SPECIAL = [np.nan, -1.0, 1.0, 7.0, -np.inf, np.inf, 0.0, 3.0, -0.5, np.nan, 5.0, -2.0, 2.5]


def _data(shape, dtype="float32", seed=0):
    """Random values with NaN, -inf and +inf sprinkled in (odd sizes: vector bodies and scalar tails)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-4, 4, size=shape).astype(dtype)
    flat = x.reshape(-1)
    pos = rng.choice(flat.size, size=max(3, flat.size // 7), replace=False)
    flat[pos] = rng.choice([np.nan, np.inf, -np.inf, np.nan], size=pos.size)
    return x


def _run(build, *arrays, target=TARGET):
    xs = [relay.var(f"x{i}", shape=a.shape, dtype=str(a.dtype)) for i, a in enumerate(arrays)]
    func = relay.Function(xs, build(*xs))
    lib = relay.build(kiln.IRModule.from_expr(func), target=target)
    m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    for i, a in enumerate(arrays):
        m.set_input(f"x{i}", a)
    m.run()
    return m.get_output(0).numpy()


def _check(got, ref):
    ref = ref.detach().numpy() if isinstance(ref, torch.Tensor) else np.asarray(ref)
    assert got.shape == ref.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6, equal_nan=True)


UNARY = {
    "relu": (relay.nn.relu, torch.relu),
    "clip": (lambda v: relay.clip(v, 0.0, 6.0), lambda t: torch.clamp(t, 0.0, 6.0)),
    "clip_neg": (lambda v: relay.clip(v, -1.5, 0.5), lambda t: torch.clamp(t, -1.5, 0.5)),
    "leaky_relu": (lambda v: relay.nn.leaky_relu(v, 0.1), lambda t: F.leaky_relu(t, 0.1)),
    "maximum_const": (lambda v: relay.maximum(v, relay.const(0.5)), lambda t: torch.maximum(t, torch.tensor(0.5))),
    "minimum_const": (lambda v: relay.minimum(relay.const(0.5), v), lambda t: torch.minimum(t, torch.tensor(0.5))),
    "relu_of_scaled": (lambda v: relay.nn.relu(v * relay.const(2.0) + relay.const(1.0)),
                       lambda t: torch.relu(t * 2.0 + 1.0)),
    "sigmoid": (relay.sigmoid, torch.sigmoid),
    "tanh": (relay.tanh, torch.tanh),
    "exp": (relay.exp, torch.exp),
    "abs": (relay.abs, torch.abs),
    "softmax": (lambda v: relay.nn.softmax(v, axis=-1), lambda t: torch.softmax(t, -1)),
    "log_softmax": (lambda v: relay.nn.log_softmax(v, axis=-1), lambda t: torch.log_softmax(t, -1)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_activation_nan_inf(name):
    build, ref = UNARY[name]
    x = _data((3, 37))
    _check(_run(build, x), ref(torch.from_numpy(x)))


def test_relu_clip_exact_values():
    """The issue's examples: relu([nan,-1,1,7]) and clip(nan, 0, 6) are NaN, not 0 and 6."""
    x = np.array([np.nan, -1, 1, 7], "float32")
    got = _run(relay.nn.relu, x)
    assert np.isnan(got[0]) and list(got[1:]) == [0, 1, 7]
    got = _run(lambda v: relay.clip(v, 0.0, 6.0), np.array([np.nan, -3, 9, np.inf, -np.inf], "float32"))
    assert np.isnan(got[0]) and list(got[1:]) == [0, 6, 6, 0]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_binary_maximum_minimum_nan_either_side(op, dtype):
    a = _data((2, 29), dtype, seed=1)
    b = _data((2, 29), dtype, seed=2)
    build = getattr(relay, op)
    _check(_run(build, a, b), getattr(torch, op)(torch.from_numpy(a), torch.from_numpy(b)))
    _check(_run(build, b, a), getattr(torch, op)(torch.from_numpy(b), torch.from_numpy(a)))


@pytest.mark.parametrize("op", ["max", "min", "argmax", "argmin"])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_reductions_nan(op, axis):
    x = _data((5, 41), seed=3)
    x[2, :] = np.random.default_rng(0).uniform(-1, 1, 41)  # one row without NaN
    x[3, 5] = np.inf
    t = torch.from_numpy(x)
    ref = {"max": lambda: t.amax(axis) if axis is not None else t.max(),
           "min": lambda: t.amin(axis) if axis is not None else t.min(),
           "argmax": lambda: t.argmax(axis) if axis is not None else t.argmax(),
           "argmin": lambda: t.argmin(axis) if axis is not None else t.argmin()}[op]()
    got = _run(lambda v: getattr(relay, op)(v, axis=axis), x)
    _check(got, ref.reshape(got.shape))


def test_max_reduction_issue_example():
    got = _run(lambda v: relay.max(v), np.array([1, np.nan, 7, -1], "float32"))
    assert np.isnan(got)


def test_argmax_ties_and_infinities():
    x = np.array([[1, np.inf, np.inf, -np.inf], [-np.inf, -np.inf, 2, 2], [np.nan, 1, np.nan, 0]], "float32")
    t = torch.from_numpy(x)
    _check(_run(lambda v: relay.argmax(v, axis=1), x), t.argmax(1))
    _check(_run(lambda v: relay.argmin(v, axis=1), x), t.argmin(1))


POOLS = {
    "max_pool2d": (lambda v: relay.nn.max_pool2d(v, (3, 3), (2, 2), padding=(1, 1)),
                   lambda t: F.max_pool2d(t, 3, 2, 1)),
    "max_pool2d_nopad": (lambda v: relay.nn.max_pool2d(v, (2, 2), (2, 2)), lambda t: F.max_pool2d(t, 2, 2)),
    "avg_pool2d": (lambda v: relay.nn.avg_pool2d(v, (3, 3), (1, 1), padding=(1, 1), count_include_pad=True),
                   lambda t: F.avg_pool2d(t, 3, 1, 1, count_include_pad=True)),
    "global_max_pool2d": (relay.nn.global_max_pool2d, lambda t: F.adaptive_max_pool2d(t, 1)),
    "global_avg_pool2d": (relay.nn.global_avg_pool2d, lambda t: F.adaptive_avg_pool2d(t, 1)),
    "adaptive_max_pool2d": (lambda v: relay.nn.adaptive_max_pool2d(v, (3, 2)), lambda t: F.adaptive_max_pool2d(t, (3, 2))),
    "adaptive_avg_pool2d": (lambda v: relay.nn.adaptive_avg_pool2d(v, (3, 2)), lambda t: F.adaptive_avg_pool2d(t, (3, 2))),
    "max_pool1d": (lambda v: relay.nn.max_pool1d(relay.reshape(v, (2, 3, 63)), (3,), (2,)),
                   lambda t: F.max_pool1d(t.reshape(2, 3, 63), 3, 2)),
}


@pytest.mark.parametrize("name", sorted(POOLS))
def test_pooling_nan_inf(name):
    build, ref = POOLS[name]
    x = _data((2, 3, 9, 7), seed=4)
    x[1, 2] = np.random.default_rng(5).uniform(-1, 1, (9, 7))  # one channel without specials
    _check(_run(build, x), ref(torch.from_numpy(x)))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_scalar_and_vector_paths_te(dtype):
    """The same max/min compiled unvectorized (scalar helper) and vectorized (x86 helper + tail)."""
    n = 21
    A = te.placeholder((n,), dtype, name="A")
    B = te.placeholder((n,), dtype, name="B")
    C = te.compute((n,), lambda i: kiln.tir.max(kiln.tir.min(A[i], B[i]), kiln.tir.const(-1.0, dtype)), name="C")
    a, b = _data((n,), dtype, seed=6), _data((n,), dtype, seed=7)
    ref = np.maximum(np.minimum(a, b), -1.0)
    for vectorize in (False, True):
        s = te.create_schedule(C.op)
        if vectorize:
            _, inner = s[C].split(C.op.axis[0], factor=8)
            s[C].vectorize(inner)
        f = kiln.build(s, [A, B, C], TARGET)
        c = kiln.nd.empty((n,), dtype)
        f(kiln.nd.array(a), kiln.nd.array(b), c)
        _check(c.numpy(), ref)


@pytest.mark.parametrize("mcpu", ["core-avx2", "skylake-avx512"])
def test_minmax_helpers_compile_for_each_isa(mcpu):
    """The NaN-propagating helpers compile for AVX2 and AVX-512 targets (compiled, not run)."""
    x = relay.var("x", shape=(4, 64), dtype="float32")
    y = relay.var("y", shape=(4, 64), dtype="float32")
    f = relay.Function([x, y], relay.maximum(relay.nn.relu(x), y) + relay.max(x, axis=1, keepdims=True))
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(kiln.IRModule.from_expr(f), target=f"llvm -mcpu={mcpu}")
    src = lib.get_lib().get_source()
    assert "a != a" in src or "_CMP_UNORD_Q" in src or "cmpunord" in src


def test_constant_folding_keeps_nan():
    """tir.max/min fold constants the way the compiled helper computes them: a NaN operand wins."""
    nan, one = kiln.tir.const(float("nan"), "float32"), kiln.tir.const(1.0, "float32")
    for fn in (kiln.tir.max, kiln.tir.min):
        assert np.isnan(fn(nan, one).value) and np.isnan(fn(one, nan).value)


def test_reference_interpreter_propagates_nan():
    """kiln's TIR reference interpreter agrees with the compiled helpers (scalar path)."""
    from kiln.tir.interpreter import eval_expr
    nan, one = kiln.tir.Var("a", "float32"), kiln.tir.Var("b", "float32")
    for fn in (kiln.tir.max, kiln.tir.min):
        e = fn(nan, one)
        assert np.isnan(eval_expr(e, {nan: np.float32("nan"), one: np.float32(1)}))
        assert np.isnan(eval_expr(e, {nan: np.float32(1), one: np.float32("nan")}))
