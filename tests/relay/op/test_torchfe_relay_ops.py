"""Relay ops added for the PyTorch frontend: nn.conv3d, nn.conv3d_transpose, nn.max/avg_pool3d,
nn.adaptive_{avg,max}_pool{1,3}d, image.resize1d/resize3d, scatter_elements. Each is built with relay.build
(TOPI compute + generic schedule), run, and compared with its numpy reference and with PyTorch."""
import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.contrib import graph_executor
from kiln.error import KilnError

torch = pytest.importorskip("torch")


def _build_and_run(expr_fn, arrays):
    vs = [relay.var(f"x{i}", shape=a.shape, dtype=str(a.dtype)) for i, a in enumerate(arrays)]
    mod = kiln.IRModule.from_expr(relay.Function(vs, expr_fn(*vs)))
    ref = relay.create_executor("debug", mod=mod, target="llvm").evaluate()(*arrays).numpy()
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm")
    m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    for i, a in enumerate(arrays):
        m.set_input(f"x{i}", a)
    m.run()
    got = m.get_output(0).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    return got


def _rand(*shape):
    return np.random.RandomState(sum(shape)).randn(*shape).astype("float32")


def _t(a):
    return torch.from_numpy(a)


def test_conv3d():
    x, w = _rand(1, 4, 5, 6, 7), _rand(6, 2, 3, 2, 3)
    got = _build_and_run(lambda a, b: relay.nn.conv3d(a, b, strides=(1, 2, 1), padding=(1, 0, 1), dilation=(1, 1, 2),
                                                      groups=2), [x, w])
    want = torch.nn.functional.conv3d(_t(x), _t(w), stride=(1, 2, 1), padding=(1, 0, 1), dilation=(1, 1, 2), groups=2)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-4)


def test_conv3d_transpose():
    x, w = _rand(1, 4, 3, 4, 3), _rand(4, 3, 3, 2, 3)
    got = _build_and_run(lambda a, b: relay.nn.conv3d_transpose(a, b, strides=(2, 1, 2), padding=(1, 0, 1),
                                                                output_padding=(1, 0, 1), groups=2), [x, w])
    want = torch.nn.functional.conv_transpose3d(_t(x), _t(w), stride=(2, 1, 2), padding=(1, 0, 1),
                                                output_padding=(1, 0, 1), groups=2)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pool3d(kind):
    x = _rand(1, 2, 5, 6, 7)
    if kind == "max":
        got = _build_and_run(lambda a: relay.nn.max_pool3d(a, (2, 3, 2), (2, 1, 2), padding=(0, 1, 0)), [x])
        want = torch.nn.functional.max_pool3d(_t(x), (2, 3, 2), (2, 1, 2), padding=(0, 1, 0))
    else:
        got = _build_and_run(lambda a: relay.nn.avg_pool3d(a, (2, 3, 2), (2, 1, 2), padding=(1, 1, 0),
                                                           count_include_pad=True), [x])
        want = torch.nn.functional.avg_pool3d(_t(x), (2, 3, 2), (2, 1, 2), padding=(1, 1, 0), count_include_pad=True)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["avg", "max"])
@pytest.mark.parametrize("nd, shape, size", [(1, (2, 3, 7), (3,)), (3, (1, 2, 5, 7, 3), (2, 3, 2))])
def test_adaptive_pool(kind, nd, shape, size):
    x = _rand(*shape)
    got = _build_and_run(lambda a: getattr(relay.nn, f"adaptive_{kind}_pool{nd}d")(a, size), [x])
    want = getattr(torch.nn.functional, f"adaptive_{kind}_pool{nd}d")(_t(x), size)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


def test_resize3d_and_resize1d():
    x = _rand(1, 2, 3, 4, 5)
    got = _build_and_run(lambda a: relay.image.resize3d(a, (6, 8, 10), method="linear",
                                                        coordinate_transformation_mode="align_corners"), [x])
    want = torch.nn.functional.interpolate(_t(x), size=(6, 8, 10), mode="trilinear", align_corners=True)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)
    y = _rand(1, 2, 5)
    got = _build_and_run(lambda a: relay.image.resize1d(a, (9,), method="linear"), [y])
    want = torch.nn.functional.interpolate(_t(y), size=9, mode="linear")
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reduction", ["update", "add", "mul", "mean", "min", "max"])
def test_scatter_elements(reduction):
    rng = np.random.RandomState(0)
    x, upd = rng.randn(4, 5, 3).astype("float32"), rng.randn(3, 5, 2).astype("float32")
    if reduction == "update":  # distinct targets: PyTorch leaves duplicates unspecified
        idx = np.stack([rng.permutation(4)[:3] for _ in range(10)], 1).reshape(3, 5, 2)
    else:
        idx = rng.randint(-4, 4, size=(3, 5, 2))
    got = _build_and_run(lambda a, i, u: relay.scatter_elements(a, i, u, axis=0, reduction=reduction),
                         [x, idx.astype("int64"), upd])
    ti = torch.from_numpy(idx % 4)
    if reduction == "update":
        want = _t(x).scatter(0, ti, _t(upd))
    else:
        name = {"add": "sum", "mul": "prod", "mean": "mean", "min": "amin", "max": "amax"}[reduction]
        want = _t(x).scatter_reduce(0, ti, _t(upd), name)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


def test_bad_inputs_are_reported():
    x = relay.var("x", shape=(1, 4, 5, 6, 7))
    w = relay.var("w", shape=(6, 3, 3, 3, 3))
    with pytest.raises(KilnError, match="channels"):
        relay.transform.InferType()(kiln.IRModule.from_expr(relay.nn.conv3d(x, w)))
    with pytest.raises(KilnError, match="layout"):
        relay.transform.InferType()(kiln.IRModule.from_expr(relay.nn.max_pool3d(x, layout="NDHWC")))
    i = relay.var("i", shape=(2, 3), dtype="float32")
    with pytest.raises(KilnError, match="integers"):
        relay.transform.InferType()(kiln.IRModule.from_expr(
            relay.scatter_elements(relay.var("d", shape=(4, 3)), i, relay.var("u", shape=(2, 3)))))
