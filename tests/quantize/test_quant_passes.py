"""relay.quantize's pieces: the simulated_quantize op, the KL threshold search, fixed-point rescaling,
and what annotate / calibrate / realize make of a graph."""
import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.relay import quantize as q
from kiln.relay.quantize import QAnnotateKind, qconfig
from kiln.relay.quantize.kl_divergence import _find_scale_by_kl, find_threshold_by_kl

from quant_models import calls, mlp, run_model, small_cnn

SQ = "relay.op.annotation.simulated_quantize"


def _sq_func(kind, shape=(3, 7, 5)):
    x = relay.var("data", shape=shape)
    s, lo, hi = (relay.var(n, shape=(), dtype="float32") for n in ("s", "lo", "hi"))
    return tvm.IRModule.from_expr(relay.Function([x, s, lo, hi], q.simulated_quantize(x, s, lo, hi, kind)))


@pytest.mark.parametrize("kind", [QAnnotateKind.INPUT, QAnnotateKind.IDENTITY])
def test_quant_simulated_quantize_compiled_matches_numpy(kind):
    rng = np.random.default_rng(0)
    x = (rng.normal(size=(3, 7, 5)) * 4).astype("float32")
    x[0, 0, :3] = [0.125, -0.375, 1000.0]  # ties (half to even) and a value far outside the clip
    scale, lo, hi = np.float32(0.25), np.float32(-127), np.float32(127)
    mod = _sq_func(kind)
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm")
    from kiln.contrib import graph_executor
    g = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    g.set_input("data", x)
    g.set_input("s", np.array(scale))
    g.set_input("lo", np.array(lo))
    g.set_input("hi", np.array(hi))
    g.run()
    out = g.get_output(0).numpy()
    want = x if kind == QAnnotateKind.IDENTITY else np.round(np.clip(x / scale, lo, hi)) * scale
    np.testing.assert_allclose(out, want, rtol=0, atol=0)
    # the numpy reference (interpreter / FoldConstant) agrees
    ref = relay.create_executor("debug", mod=mod).evaluate()(x, np.array(scale), np.array(lo), np.array(hi))
    np.testing.assert_array_equal(ref.numpy(), want)


def test_quant_simulated_quantize_type_errors():
    x = relay.var("x", shape=(2, 3))
    bad = relay.var("s", shape=(3,), dtype="float32")
    ok = relay.var("o", shape=(), dtype="float32")
    mod = tvm.IRModule.from_expr(relay.Function([x, bad, ok], q.simulated_quantize(x, bad, ok, ok, 1)))
    with pytest.raises(tvm.error.KilnError, match="dom_scale must be a float32 scalar"):
        relay.transform.InferType()(mod)


def _kl_reference(hist, edges, num_bins, nq):
    """A direct transcription of the search, one bin at a time (slow; small sizes only)."""
    zero = num_bins // 2
    best, best_div = None, np.inf
    for i in range(nq // 2, zero + 1):
        start, stop = zero - i, zero + i + 1
        sliced = [float(h) for h in hist[start:stop]]
        p = list(sliced)
        p[0] += float(sum(hist[:start]))
        p[-1] += float(sum(hist[stop:]))
        merged = len(sliced) // nq
        qb = [sum(sliced[j * merged:(j + 1) * merged]) for j in range(nq)]
        qb[-1] += sum(sliced[nq * merged:])
        qd = [0.0] * len(sliced)
        for j in range(nq):
            a, b = j * merged, (len(sliced) if j == nq - 1 else (j + 1) * merged)
            norm = sum(1 for k in range(a, b) if sliced[k] != 0)
            for k in range(a, b):
                if norm and p[k] != 0:
                    qd[k] = qb[j] / norm

        def smooth(d, eps=1e-4):
            nz = sum(1 for v in d if v == 0)
            nnz = len(d) - nz
            if nnz == 0:
                return None
            e1 = eps * nz / nnz
            return d if e1 >= 1 else [eps if v == 0 else v - e1 for v in d]
        ps, qs = smooth(p), smooth(qd)
        if ps is None or qs is None:
            continue
        sp, sq = sum(ps), sum(qs)
        div = sum((a / sp) * np.log((a / sp) / (b / sq)) for a, b in zip(ps, qs) if a > 0)
        if div < best_div:
            best_div, best = div, edges[stop]
    return best


@pytest.mark.parametrize("dist", ["normal", "laplace_outliers", "relu"])
def test_quant_kl_threshold_matches_direct_search(dist):
    rng = np.random.default_rng(3)
    x = rng.normal(size=3001) if dist == "normal" else rng.laplace(size=3001)
    if dist == "laplace_outliers":
        x[:5] = [40, -35, 30, 25, -50]
    if dist == "relu":
        x = np.maximum(x, 0)
    num_bins, nq = 201, 31
    thres = np.abs(x).max()
    hist, edges = np.histogram(x, bins=num_bins, range=(-thres, thres))
    got = find_threshold_by_kl(hist, edges, num_bins, nq)
    assert got == pytest.approx(_kl_reference(hist, edges, num_bins, nq), rel=1e-12)


def test_quant_kl_scale_clips_outliers():
    rng = np.random.default_rng(4)
    x = rng.normal(size=20000).astype("float32")
    x[:3] = [60.0, -70.0, 80.0]
    t = _find_scale_by_kl(x)
    assert 2.0 < t < 20.0  # far below max |x| = 80, above the bulk of the normal
    assert _find_scale_by_kl(np.zeros(10)) == 1.0


def test_quant_fixed_point_multiply_rounds_like_numpy():
    rng = np.random.default_rng(5)
    data = rng.integers(-2 ** 24, 2 ** 24, size=997).astype("int32")
    data[:4] = [0, 1, -1, 2 ** 24 - 1]
    from kiln.relay.quantize._realize import fixed_point_multiply
    for mult in (0.3712, 1.0 / 3.0, 0.0019, 2.75):
        for rounding in ("UPWARD", "TONEAREST"):
            x = relay.var("x", shape=(997,), dtype="int32")
            mod = tvm.IRModule.from_expr(relay.Function([x], fixed_point_multiply(x, mult, rounding)))
            out = relay.create_executor("debug", mod=mod).evaluate()(data).numpy()
            exact = data.astype(np.float64) * mult
            # the multiplier is kept to 31 bits: results are within one step of the exact product
            assert np.abs(out - exact).max() <= 1.0
            if rounding == "UPWARD":
                want = np.floor(exact + 0.5)
            else:
                want = np.sign(exact) * np.floor(np.abs(exact) + 0.5)
            assert np.mean(out == want) > 0.99


def _quantize(mod, params, **cfg):
    cfg.setdefault("skip_conv_layers", [])
    with qconfig(**cfg):
        return q.quantize(mod, params)


def test_quant_annotate_places_simulated_quantize():
    mod, params, _ = small_cnn()
    with qconfig(skip_conv_layers=[], skip_dense_layer=False):
        opt = q.prerequisite_optimize(mod, {k: tvm.nd.array(v) for k, v in params.items()})
        with q.quantize_context():
            ann = tvm.transform.Sequential([q.partition(), relay.transform.InferType(), q.annotate(),
                                            relay.transform.InferType()])(opt)
    sqs = calls(ann, SQ)
    kinds = [int(c.attrs.kind) for c in sqs]
    assert kinds.count(QAnnotateKind.WEIGHT) >= 3 + 3  # 3 weights and the 3 biases
    assert QAnnotateKind.INPUT in kinds
    for conv in calls(ann, "nn.conv2d") + calls(ann, "nn.dense"):
        data, weight = conv.args
        assert weight.op.name == SQ and int(weight.attrs.kind) == QAnnotateKind.WEIGHT
        # data is quantized here, or is the int8 end of the previous section (partition's stop_fusion)
        assert data.op.name in (SQ, "annotation.stop_fusion", "nn.batch_flatten")
    # every scale / clip variable became a parameter of main
    names = {p.name_hint for p in ann["main"].params}
    assert {"dom_scale", "clip_min", "clip_max"} <= names


def test_quant_calibrate_binds_power2_and_max_scales():
    mod, params, _ = small_cnn()
    for weight_scale in ("power2", "max"):
        with qconfig(skip_conv_layers=[], skip_dense_layer=False, weight_scale=weight_scale, global_scale=4.0,
                     do_simulation=True):
            sim = q.quantize(mod, params)
        assert [p.name_hint for p in sim["main"].params] == ["data"]
        sqs = calls(sim, SQ)
        assert sqs, "do_simulation keeps the simulated_quantize ops"
        for c in sqs:
            s = float(c.args[1].numpy())
            assert float(c.args[2].numpy()) == -127 and float(c.args[3].numpy()) == 127
            if int(c.attrs.kind) == QAnnotateKind.INPUT:
                assert s == 4.0 / 128
            elif weight_scale == "power2":
                assert np.log2(s * 128) == int(np.log2(s * 128))
            else:
                w = c.args[0].numpy()
                assert s == pytest.approx(np.abs(w).max() / 128, rel=1e-6)


def test_quant_realize_gives_int8_ops_with_int32_accumulation():
    mod, params, _ = small_cnn()
    qmod = _quantize(mod, params, skip_dense_layer=False)
    assert not calls(qmod, SQ)
    convs, denses = calls(qmod, "nn.conv2d"), calls(qmod, "nn.dense")
    assert len(convs) == 2 and len(denses) == 1
    for c in convs + denses:
        assert c.attrs.out_dtype == "int32"
        assert [a.checked_type.dtype for a in c.args] == ["int8", "int8"]
        assert c.checked_type.dtype == "int32"
    pools = calls(qmod, "nn.max_pool2d")
    assert all(p.checked_type.dtype == "int8" for p in pools)
    assert calls(qmod, "right_shift")  # power-of-two scales requantize with a shift
    assert qmod["main"].body.checked_type.dtype == "float32"


def test_quant_skip_conv_layers_and_dense():
    mod, params, _ = small_cnn()
    qmod = _quantize(mod, params, skip_conv_layers=[0], skip_dense_layer=True)
    convs, denses = calls(qmod, "nn.conv2d"), calls(qmod, "nn.dense")
    assert [c.checked_type.dtype for c in convs] == ["float32", "int32"]
    assert denses[0].checked_type.dtype == "float32" and denses[0].args[1].checked_type.dtype == "float32"
    qmod = _quantize(mod, params, skip_conv_layers=[1], skip_dense_layer=False)
    assert [c.checked_type.dtype for c in calls(qmod, "nn.conv2d")] == ["int32", "float32"]
    assert calls(qmod, "nn.dense")[0].checked_type.dtype == "int32"


def test_quant_debug_enabled_ops_limits_annotation():
    mod, params, _ = mlp()
    qmod = _quantize(mod, params, skip_dense_layer=False, debug_enabled_ops=["nn.conv2d"])
    assert all(d.checked_type.dtype == "float32" for d in calls(qmod, "nn.dense"))


def test_quant_missing_dataset_and_unbuilt_partition_conversions():
    mod, params, _ = mlp()
    with qconfig(calibrate_mode="kl_divergence", skip_dense_layer=False):
        with pytest.raises(tvm.error.KilnError, match="needs a calibration dataset"):
            q.quantize(mod, params)
    with qconfig(partition_conversions="enabled"):
        with pytest.raises(NotImplementedError, match="partition_conversions"):
            q.quantize(mod, params)


def test_quant_simulation_matches_realized_graph():
    mod, params, shape = mlp()
    rng = np.random.default_rng(7)
    xs = [rng.normal(size=shape).astype("float32") for _ in range(3)]
    sim = _quantize(mod, params, skip_dense_layer=False, global_scale=4.0, do_simulation=True)
    real = _quantize(mod, params, skip_dense_layer=False, global_scale=4.0)
    a, b = run_model(sim, None, xs), run_model(real, None, xs)
    # the integer graph computes what the simulation models, up to the rounding of requantization
    np.testing.assert_allclose(a, b, atol=0.05 * np.abs(a).max())
