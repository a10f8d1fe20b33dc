"""Winograd conv2d in Relay (TVM's contrib_conv2d_winograd_weight_transform / _without_weight_transform):
type relations, numpy references, FoldConstant of the weight transform, and relay.build choosing the
Winograd kernel only where a tuning record says it is faster."""
import time

import numpy as np
import pytest

import kiln
from kiln import autotvm, relay
from kiln.autotvm.measure import MeasureInput, MeasureResult
from kiln.error import TypeInferenceError
from kiln.runtime.graph_executor import GraphModule
from kiln.topi.nn.winograd_util import winograd_matrices
from kiln.topi.testing import conv2d_nchw_python
from kiln.topi.testing import layout_transform_python as lt

TARGET = "llvm"


def _infer(expr, *params):
    mod = kiln.IRModule.from_expr(relay.Function(list(params), expr))
    return relay.transform.InferType()(mod)["main"].ret_type


@pytest.mark.parametrize("m", [2, 4])
def test_matrices_compute_the_correlation(m):
    a, b, g = winograd_matrices(m)
    rng = np.random.default_rng(m)
    d, k = rng.standard_normal((m + 2, m + 2)), rng.standard_normal((3, 3))
    y = a.T @ ((g @ k @ g.T) * (b.T @ d @ b)) @ a
    ref = np.array([[np.sum(d[i:i + 3, j:j + 3] * k) for j in range(m)] for i in range(m)])
    np.testing.assert_allclose(y, ref, rtol=1e-12, atol=1e-12)
    with pytest.raises(kiln.error.KilnError, match="2 or 4"):
        winograd_matrices(3)


def test_type_relations():
    w = relay.var("w", shape=(32, 24, 3, 3))
    assert _infer(relay.nn.contrib_conv2d_winograd_weight_transform(w, 4), w).concrete_shape == (6, 6, 32, 24)
    assert _infer(relay.nn.contrib_conv2d_winograd_weight_transform(w, 2), w).concrete_shape == (4, 4, 32, 24)
    x = relay.var("x", shape=(1, 3, 13, 11, 8))
    u = relay.var("u", shape=(6, 6, 2, 24, 16))
    y = relay.nn.contrib_conv2d_winograd_without_weight_transform(
        x, u, 4, padding=(1, 1), data_layout="NCHW8c", kernel_layout="HWOI16o", out_layout="NCHW16c")
    assert _infer(y, x, u).concrete_shape == (1, 2, 13, 11, 16)
    xp = relay.var("xp", shape=(1, 24, 13, 11))
    up = relay.var("up", shape=(4, 4, 32, 24))
    yp = relay.nn.contrib_conv2d_winograd_without_weight_transform(xp, up, 2)
    assert _infer(yp, xp, up).concrete_shape == (1, 32, 11, 9)
    bad = [
        (relay.nn.contrib_conv2d_winograd_without_weight_transform(xp, up, 4), "tile_size=4 needs a 6x6"),
        (relay.nn.contrib_conv2d_winograd_without_weight_transform(xp, up, 2, strides=(2, 2)), "strides"),
        (relay.nn.contrib_conv2d_winograd_without_weight_transform(xp, up, 2, channels=16), "channels=16"),
    ]
    for expr, msg in bad:
        with pytest.raises(TypeInferenceError, match=msg):
            _infer(expr, xp, up)
    w5 = relay.var("w5", shape=(8, 8, 5, 5))
    with pytest.raises(Exception, match="3x3"):
        relay.create_executor("debug", mod=kiln.IRModule.from_expr(relay.Function(
            [w5], relay.nn.contrib_conv2d_winograd_weight_transform(w5, 4)))).evaluate()(
                np.zeros((8, 8, 5, 5), "float32"))


@pytest.mark.parametrize("m", [2, 4])
def test_references_compose_to_the_conv(m):
    """weight transform then the transformed-weight conv (NCHW8c data, HWOI16o weight) equals conv2d."""
    rng = np.random.default_rng(10 + m)
    xv = rng.standard_normal((1, 16, 9, 7)).astype("float32")
    wv = rng.standard_normal((32, 16, 3, 3)).astype("float32")
    x = relay.var("x", shape=(1, 2, 9, 7, 8))
    w = relay.var("w", shape=(32, 16, 3, 3))
    u = relay.layout_transform(relay.nn.contrib_conv2d_winograd_weight_transform(w, m), "HWOI", "HWOI16o")
    y = relay.nn.contrib_conv2d_winograd_without_weight_transform(
        x, u, m, padding=(1, 1), data_layout="NCHW8c", kernel_layout="HWOI16o", out_layout="NCHW16c")
    mod = kiln.IRModule.from_expr(relay.Function([x, w], y))
    got = relay.create_executor("debug", mod=mod).evaluate()(lt(xv, "NCHW", "NCHW8c"), wv).numpy()
    ref = conv2d_nchw_python(xv, wv, (1, 1), (1, 1, 1, 1))
    np.testing.assert_allclose(lt(got, "NCHW16c", "NCHW"), ref, rtol=1e-4, atol=1e-4)


def test_fold_constant_computes_the_weight_transform():
    wv = np.random.default_rng(2).standard_normal((4, 3, 3, 3)).astype("float32")
    mod = kiln.IRModule.from_expr(relay.nn.contrib_conv2d_winograd_weight_transform(relay.const(wv), 4))
    folded = relay.transform.FoldConstant()(relay.transform.InferType()(mod))
    body = folded["main"].body
    assert isinstance(body, relay.Constant)
    g = winograd_matrices(4)[2]
    np.testing.assert_allclose(body.data.numpy(), np.einsum("ea,oiab,nb->enoi", g, wv, g), rtol=1e-6, atol=1e-6)


def _net(seed=0):
    """conv3x3(16->32, pad 1) + bias + relu -> conv1x1(32->16) on an odd 13x11 image, and its reference."""
    rng = np.random.default_rng(seed)
    x = relay.var("data", shape=(1, 16, 13, 11))
    w1 = relay.const(rng.standard_normal((32, 16, 3, 3)).astype("float32") * 0.2)
    b1 = relay.const(rng.standard_normal(32).astype("float32"))
    w2 = relay.const(rng.standard_normal((16, 32, 1, 1)).astype("float32") * 0.2)
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, w1, padding=(1, 1), channels=32, kernel_size=(3, 3)), b1))
    y = relay.nn.conv2d(y, w2, channels=16, kernel_size=(1, 1))
    mod = kiln.IRModule.from_expr(relay.Function([x], y))
    xv = rng.standard_normal((1, 16, 13, 11)).astype("float32")
    ref = relay.create_executor("debug", mod=mod).evaluate()(xv).numpy()
    return mod, xv, ref


def _build_and_run(mod, xv, log=None):
    target = kiln.target.Target(TARGET)
    with kiln.transform.PassContext(opt_level=3), target:
        if log is None:
            lib = relay.build(mod, target=target)
        else:
            with autotvm.apply_history_best(str(log)):
                lib = relay.build(mod, target=target)
    m = GraphModule(lib["default"](kiln.cpu(0)))
    m.set_input("data", xv)
    m.run()
    return lib, m.get_output(0).numpy()


def _anchors(lib):
    return sorted(k.anchor_op for k in lib.lowered if "conv2d" in (k.anchor_op or ""))


@pytest.mark.parametrize("winograd_faster", [True, False])
def test_relay_build_takes_winograd_where_its_record_is_faster(tmp_path, winograd_faster):
    mod, xv, ref = _net()
    tasks = autotvm.task.extract_from_program(mod["main"], target=TARGET, params={},
                                              ops=(relay.op.get("nn.conv2d"),))
    names = sorted(t.name for t in tasks)
    # the 3x3 conv has both templates, the 1x1 conv only the direct one
    assert names == ["conv2d_NCHWc.x86", "conv2d_NCHWc.x86", "conv2d_NCHWc_winograd.x86"]
    wino = next(t for t in tasks if t.name == "conv2d_NCHWc_winograd.x86")
    direct = next(t for t in tasks if t.name == "conv2d_NCHWc.x86" and t.args[0] == wino.args[0])
    log = tmp_path / "tuned.log"
    with open(log, "w") as f:
        for task, cost in ((direct, 2e-4), (wino, 1e-4 if winograd_faster else 4e-4)):
            space = task.config_space
            cfg = space.get(next(i for i in range(space.range_length) if space.is_index_valid(i)))
            res = MeasureResult((cost,), 0, 0.1, time.time())
            f.write(autotvm.record.encode(MeasureInput(task.target, task, cfg), res) + "\n")
    untuned, out_u = _build_and_run(mod, xv)
    tuned, out_t = _build_and_run(mod, xv, log)
    assert "nn.contrib_conv2d_winograd_without_weight_transform" not in _anchors(untuned)
    want = "nn.contrib_conv2d_winograd_without_weight_transform" if winograd_faster else "nn.contrib_conv2d_NCHWc"
    assert _anchors(tuned).count(want) >= 1
    np.testing.assert_allclose(out_u, ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out_t, ref, rtol=1e-3, atol=1e-3)
    if winograd_faster:
        # the weight transform was folded at compile time: no kernel computes it
        assert not any("winograd_weight_transform" in (k.anchor_op or "") for k in tuned.lowered)


def test_weight_as_graph_input_is_transformed_at_run_time(tmp_path):
    """With the weight an input (not a constant), the tuned build computes the weight transform in a kernel."""
    rng = np.random.default_rng(7)
    x = relay.var("data", shape=(1, 16, 9, 10))
    w = relay.var("w", shape=(16, 16, 3, 3))
    mod = kiln.IRModule.from_expr(relay.Function([x, w], relay.nn.conv2d(x, w, padding=(1, 1), channels=16,
                                                                         kernel_size=(3, 3))))
    tasks = autotvm.task.extract_from_program(mod["main"], target=TARGET, params={},
                                              ops=(relay.op.get("nn.conv2d"),))
    wino = next(t for t in tasks if t.name == "conv2d_NCHWc_winograd.x86")
    space = wino.config_space
    cfg = next(space.get(i) for i in range(space.range_length)
               if space.is_index_valid(i) and space.get(i)["tile_size"].val == 2)
    log = tmp_path / "w.log"
    log.write_text(autotvm.record.encode(MeasureInput(wino.target, wino, cfg),
                                         MeasureResult((1e-6,), 0, 0.1, time.time())) + "\n")
    xv = rng.standard_normal((1, 16, 9, 10)).astype("float32")
    wv = rng.standard_normal((16, 16, 3, 3)).astype("float32")
    with kiln.transform.PassContext(opt_level=3), kiln.target.Target(TARGET) as target:
        with autotvm.apply_history_best(str(log)):
            lib = relay.build(mod, target=target)
    assert "nn.contrib_conv2d_winograd_weight_transform" in [k.anchor_op for k in lib.lowered]
    m = GraphModule(lib["default"](kiln.cpu(0)))
    m.set_input("data", xv)
    m.set_input("w", wv)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), conv2d_nchw_python(xv, wv, (1, 1), (1, 1, 1, 1)),
                               rtol=1e-4, atol=1e-4)
