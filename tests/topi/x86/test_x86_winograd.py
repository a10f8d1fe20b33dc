"""conv2d_NCHWc_winograd.x86: the F(2x2) / F(4x4) transform matrices, the kernel transform, every config of
small spaces against numpy on sizes the tile does not divide, the packed form with a fused bias + relu, the
NCHW wrapper, the in-tuning placeholders and the input checks."""
import numpy as np
import pytest

import kiln as tvm
from kiln import autotvm, te
from kiln.autotvm.env import GLOBAL_SCOPE
from kiln.autotvm.task.space import FallbackConfigEntity
from kiln.error import KilnError
from kiln.topi import x86
from kiln.topi.testing import conv2d_nchw_python
from kiln.topi.testing import layout_transform_python as lt
from kiln.topi.x86.conv2d_winograd import (conv2d_NCHWc_winograd, conv2d_nchw_winograd,
                                           schedule_conv2d_NCHWc_winograd, schedule_conv2d_nchw_winograd,
                                           schedule_winograd_weight_transform, winograd_matrices,
                                           winograd_weight_transform)

TARGET = "llvm"  # numerical checks run on the host
ISA = {"avx2": "llvm -mcpu=core-avx2", "avx512": "llvm -mcpu=skylake-avx512"}


def _tol(m):
    return 1e-3 if m == 4 else 1e-4


def _task(ic, h, w, oc, p, k=3, s=1, d=1, target=TARGET):
    with tvm.target.Target(target):
        return autotvm.task.create(
            "conv2d_NCHWc_winograd.x86",
            args=(("TENSOR", (1, ic, h, w), "float32"), ("TENSOR", (oc, ic, k, k), "float32"), (s, s), (p,) * 4,
                  (d, d), "NCHW", "NCHW", "float32"), target=target)


def _configs(space):
    return [space.get(i) for i in range(space.range_length) if space.is_index_valid(i)]


def _data(ic, h, w, oc, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((1, ic, h, w)).astype("float32"),
            rng.standard_normal((oc, ic, 3, 3)).astype("float32"), rng.standard_normal(oc).astype("float32"))


def _transform_weights(wt, m, oc_bn):
    """U of ``wt`` by the compiled winograd_weight_transform."""
    with tvm.target.Target(TARGET):
        K = te.placeholder(wt.shape, name="kernel")
        U = winograd_weight_transform(K, m, oc_bn)
        f = tvm.build(schedule_winograd_weight_transform([U]), [K, U], target=TARGET)
    u = tvm.nd.array(np.zeros([int(x) for x in U.shape], "float32"))
    f(tvm.nd.array(wt), u)
    return u.numpy()


def _numpy_weights(wt, m, oc_bn):
    """U of ``wt`` by numpy: [alpha, alpha, CO/oc_bn, CI, oc_bn]."""
    _, _, G = winograd_matrices(m)
    oc, ic = wt.shape[:2]
    u = np.einsum("ei,ocij,nj->enoc", G, wt.astype("float64"), G)              # [e, n, O, C]
    u = u.reshape(m + 2, m + 2, oc // oc_bn, oc_bn, ic).transpose(0, 1, 2, 4, 3)
    return np.ascontiguousarray(u.astype("float32"))


@pytest.mark.parametrize("m", [2, 4])
def test_matrices_1d_identity(m):
    A, B, G = winograd_matrices(m)
    alpha = m + 2
    assert A.shape == (alpha, m) and B.shape == (alpha, alpha) and G.shape == (alpha, 3)
    assert A.dtype == B.dtype == G.dtype == np.float64
    rng = np.random.default_rng(m)
    for _ in range(5):
        g, d = rng.standard_normal(3), rng.standard_normal(alpha)
        y = A.T @ ((G @ g) * (B.T @ d))
        want = np.array([d[i:i + 3] @ g for i in range(m)])
        np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)
    # the 2-D form used by the conv
    g2, d2 = rng.standard_normal((3, 3)), rng.standard_normal((alpha, alpha))
    y2 = A.T @ ((G @ g2 @ G.T) * (B.T @ d2 @ B)) @ A
    want2 = np.array([[np.sum(d2[i:i + 3, j:j + 3] * g2) for j in range(m)] for i in range(m)])
    np.testing.assert_allclose(y2, want2, rtol=1e-12, atol=1e-12)
    with pytest.raises(KilnError, match="2 or 4"):
        winograd_matrices(3)


@pytest.mark.parametrize("m", [2, 4])
def test_weight_transform(m):
    _, wt, _ = _data(8, 1, 1, 16, 1)
    np.testing.assert_allclose(_transform_weights(wt, m, 8), _numpy_weights(wt, m, 8), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_space_and_fallback(isa):
    target = ISA[isa]
    space = _task(64, 56, 56, 64, 1, target=target).config_space
    assert {"tile_ic", "tile_oc", "tile_size", "tile_p"} <= set(space.space_map)
    assert len(space) == 6
    cfgs = _configs(space)
    assert {c["tile_size"].val for c in cfgs} == {2, 4}
    # 16-channel blocks: two AVX2 vectors (10 to 14 accumulators), one AVX-512 vector (20 to 28 of 32 zmm)
    assert {c["tile_p"].val for c in cfgs} == {"avx2": {5, 6, 7}, "avx512": {20, 24, 28}}[isa]
    assert {c["tile_ic"].size[-1] for c in cfgs} == {16} and {c["tile_oc"].size[-1] for c in cfgs} == {16}
    # one vector of 40 channels (blocks of 8 with AVX2, 10 with AVX-512)
    assert {c["tile_p"].val for c in _configs(_task(24, 7, 7, 40, 1, target=target).config_space)} == \
        {"avx2": {10, 12, 14}, "avx512": {20, 24, 28}}[isa]
    task = _task(64, 56, 56, 64, 1, target=target)
    fb = FallbackConfigEntity()
    with task.target:
        task.instantiate(fb)
    # 196 4x4 tiles: AVX2 blocks of 6 (33 blocks, evened out: still 6); AVX-512 9 blocks of at most 24 -> 22
    assert (fb["tile_ic"].size[-1], fb["tile_oc"].size[-1], fb["tile_size"].val, fb["tile_p"].val) == \
        (16, 16, 4, {"avx2": 6, "avx512": 22}[isa])
    # flops are the direct conv's, comparable with conv2d_NCHWc.x86
    assert task.flop == 2 * 64 * 56 * 56 * 64 * 9


@pytest.mark.parametrize("ic,h,w,oc,p,form", [
    (16, 7, 7, 32, 1, "plain"),     # 7x7 output: partial last tiles for m = 4 and m = 2
    (24, 13, 11, 40, 0, "packed"),  # 8-channel blocks, 11x9 output
])
def test_every_config_of_the_space(ic, h, w, oc, p, form):
    """Each config against numpy: the plain form (data packed, kernel transformed inside) or the packed one
    (NCHW{x}c data and a numpy-transformed kernel)."""
    a, wt, _ = _data(ic, h, w, oc, ic + oc)
    ref = conv2d_nchw_python(a, wt, (1, 1), (p,) * 4)
    cfgs = _configs(_task(ic, h, w, oc, p).config_space)
    assert len(cfgs) == 6
    for cfg in cfgs:
        m, icb, ocb = cfg["tile_size"].val, cfg["tile_ic"].size[-1], cfg["tile_oc"].size[-1]
        ins = [a, wt] if form == "plain" else [lt(a, "NCHW", f"NCHW{icb}c"), _numpy_weights(wt, m, ocb)]
        with tvm.target.Target(TARGET):
            A = te.placeholder(ins[0].shape, name="data")
            W = te.placeholder(ins[1].shape, name="kernel")
            with autotvm.task.ApplyConfig(cfg):
                out = conv2d_NCHWc_winograd(A, W, (1, 1), (p,) * 4, (1, 1), "NCHW", "NCHW", "float32")
                s = schedule_conv2d_NCHWc_winograd([out])
            f = tvm.build(s, [A, W, out], target=TARGET)
        assert tuple(int(d) for d in out.shape) == (1, oc // ocb, ref.shape[2], ref.shape[3], ocb)
        res = tvm.nd.array(np.zeros([int(d) for d in out.shape], "float32"))
        f(*[tvm.nd.array(x) for x in ins], res)
        np.testing.assert_allclose(lt(res.numpy(), f"NCHW{ocb}c", "NCHW"), ref, rtol=_tol(m), atol=_tol(m),
                                   err_msg=str(cfg))


@pytest.mark.parametrize("m", [2, 4])
def test_packed_form_with_bias_relu(m):
    ic, h, w, oc, p = 16, 10, 9, 24, 1
    a, wt, bias = _data(ic, h, w, oc, 7)
    ref = np.maximum(conv2d_nchw_python(a, wt, (1, 1), (p,) * 4) + bias[:, None, None], 0)
    icb, ocb = 16, 8
    u = _transform_weights(wt, m, ocb)
    a5 = lt(a, "NCHW", f"NCHW{icb}c")
    with tvm.target.Target(TARGET):
        A = te.placeholder(a5.shape, name="data")
        U = te.placeholder(u.shape, name="U")
        Bs = te.placeholder((1, oc // ocb, 1, 1, ocb), name="bias")
        # a config asking for the other tile size: the transformed kernel's alpha wins
        cfg = _configs(_task(ic, h, w, oc, p).config_space)[-1 if m == 2 else 0]
        with autotvm.task.ApplyConfig(cfg):
            conv = conv2d_NCHWc_winograd(A, U, (1, 1), (p,) * 4, (1, 1), f"NCHW{icb}c", f"NCHW{ocb}c", "float32")
            out = te.compute(conv.shape, lambda n, c, y, x, cb: te.max(conv[n, c, y, x, cb] + Bs[0, c, 0, 0, cb],
                                                                      tvm.tir.const(0.0, "float32")),
                             name="relu", tag="elemwise")
            s = schedule_conv2d_NCHWc_winograd([out])
        f = tvm.build(s, [A, U, Bs, out], target=TARGET)
    res = tvm.nd.array(np.zeros([int(d) for d in out.shape], "float32"))
    f(tvm.nd.array(a5), tvm.nd.array(u), tvm.nd.array(bias.reshape(1, oc // ocb, 1, 1, ocb)), res)
    np.testing.assert_allclose(lt(res.numpy(), f"NCHW{ocb}c", "NCHW"), ref, rtol=_tol(m), atol=_tol(m))


def test_nchw_wrapper_fallback():
    ic, h, w, oc, p = 8, 9, 12, 16, 1
    a, wt, _ = _data(ic, h, w, oc, 3)
    with tvm.target.Target(TARGET):
        A = te.placeholder(a.shape, name="data")
        W = te.placeholder(wt.shape, name="kernel")
        out = conv2d_nchw_winograd(A, W, (1, 1), (p,) * 4, (1, 1))
        s = schedule_conv2d_nchw_winograd([out])
        f = tvm.build(s, [A, W, out], target=TARGET)
    res = tvm.nd.array(np.zeros([int(d) for d in out.shape], "float32"))
    f(tvm.nd.array(a), tvm.nd.array(wt), res)
    np.testing.assert_allclose(res.numpy(), conv2d_nchw_python(a, wt, (1, 1), (p,) * 4), rtol=1e-3, atol=1e-3)
    assert x86.conv2d_NCHWc_winograd is conv2d_NCHWc_winograd


@pytest.mark.parametrize("m", [2, 4])
def test_in_tuning_takes_packed_placeholders(m):
    ic, h, w, oc, p = 16, 9, 11, 32, 1
    task = _task(ic, h, w, oc, p)
    cfg = next(c for c in _configs(task.config_space) if c["tile_size"].val == m)
    old = GLOBAL_SCOPE.in_tuning
    GLOBAL_SCOPE.in_tuning = True
    try:
        with task.target:
            sch, args = task.instantiate(cfg)
            f = tvm.build(sch, args, target=TARGET)
    finally:
        GLOBAL_SCOPE.in_tuning = old
    out, ins = args[0], args[1:]
    shapes = {tuple(int(d) for d in t.shape) for t in ins}
    assert shapes == {(1, 1, h, w, 16), (m + 2, m + 2, 2, ic, 16)}
    a, wt, _ = _data(ic, h, w, oc, 9)
    u = _numpy_weights(wt, m, 16)
    feeds = {(1, 1, h, w, 16): lt(a, "NCHW", "NCHW16c"), (m + 2, m + 2, 2, ic, 16): u}
    res = tvm.nd.array(np.zeros([int(d) for d in out.shape], "float32"))
    f(res, *[tvm.nd.array(feeds[tuple(int(d) for d in t.shape)]) for t in ins])
    np.testing.assert_allclose(lt(res.numpy(), "NCHW16c", "NCHW"), conv2d_nchw_python(a, wt, (1, 1), (p,) * 4),
                               rtol=_tol(m), atol=_tol(m))


@pytest.mark.parametrize("kw,match", [
    (dict(s=2), "stride"),
    (dict(k=1), "3x3"),
    (dict(d=2), "dilation"),
])
def test_bad_input(kw, match):
    k = kw.get("k", 3)
    with tvm.target.Target(TARGET):
        A = te.placeholder((1, 8, 9, 9), name="data")
        W = te.placeholder((8, 8, k, k), name="kernel")
        with pytest.raises(KilnError, match=match):
            conv2d_NCHWc_winograd(A, W, (kw.get("s", 1),) * 2, (1, 1, 1, 1), (kw.get("d", 1),) * 2, "NCHW", "NCHW")
        with pytest.raises(KilnError, match="2 or 4|alpha"):
            conv2d_NCHWc_winograd(te.placeholder((1, 1, 9, 9, 8)), te.placeholder((5, 5, 1, 8, 8)), (1, 1),
                                  (1, 1, 1, 1), (1, 1), "NCHW8c", "NCHW8c")
        with pytest.raises(KilnError, match="input channels"):
            conv2d_NCHWc_winograd(A, te.placeholder((8, 16, 3, 3)), (1, 1), (1, 1, 1, 1), (1, 1), "NCHW", "NCHW")


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_fallback_tile_size_follows_the_tile_count(isa):
    from kiln.topi.x86.conv2d_winograd import fallback_tile_size
    lanes = {"avx2": 8, "avx512": 16}[isa]
    # F(4x4) from 25 4x4 tiles per image with AVX2 (resnet's 56 and 28 layers), from 16 with AVX-512 (its 14
    # layers too), F(2x2) below
    sizes = (56, 28, 20, 17, 16, 14, 13, 12, 7)
    assert [fallback_tile_size(s, s, lanes) for s in sizes] == \
        {"avx2": [4, 4, 4, 4, 2, 2, 2, 2, 2], "avx512": [4, 4, 4, 4, 4, 4, 4, 2, 2]}[isa]
    # the tile count decides, not the shorter side: 2x16 and 1x16 4x4 tiles, 1x10
    assert fallback_tile_size(7, 64, lanes) == 4 and fallback_tile_size(3, 40, lanes) == 2
    assert fallback_tile_size(3, 64, lanes) == {"avx2": 2, "avx512": 4}[isa]
    from kiln.topi.x86.conv2d_alter_op import winograd_tile
    for (h, w), m in (((56, 56), 4), ((14, 14), {"avx2": 2, "avx512": 4}[isa]), ((7, 7), 2)):
        with tvm.target.Target(ISA[isa]):  # no config: the fallback's m, read off the kernel transform
            out = conv2d_nchw_winograd(te.placeholder((1, 64, h, w)), te.placeholder((64, 64, 3, 3)), (1, 1),
                                       (1,) * 4, (1, 1))
        assert winograd_tile(None, [out]) == m


def test_balanced_tile_p():
    from kiln.topi.x86.conv2d_winograd import balanced_tile_p
    assert balanced_tile_p(16, 24) == 24 and balanced_tile_p(24, 24) == 24  # one block: the schedule clamps
    assert balanced_tile_p(49, 24) == 17 and balanced_tile_p(49, 6) == 6 and balanced_tile_p(25, 6) == 5
    assert balanced_tile_p(196, 24) == 22 and balanced_tile_p(48, 24) == 24
    for ntiles in range(1, 300):
        for most in (5, 6, 7, 20, 24, 28):
            tp = balanced_tile_p(ntiles, most)
            blocks = -(-ntiles // tp)
            assert tp <= most or ntiles <= most
            assert blocks == -(-ntiles // most)  # no more blocks than before
            assert ntiles <= most or ntiles - (blocks - 1) * tp >= tp - blocks  # the last block nearly full


def test_winograd_pays_by_isa():
    from kiln.topi.x86.conv2d_winograd import winograd_pays
    for lanes in (8, 16):
        assert winograd_pays(64, 64, 56, 56, lanes) and winograd_pays(256, 256, 14, 14, lanes)
        assert winograd_pays(256, 256, 7, 7, lanes)  # 4.2 MB of F(2x2) weights
        assert winograd_pays(512, 512, 14, 14, lanes)  # 16.8 MB, but reused by 49 tiles
        assert not winograd_pays(24, 64, 56, 56, lanes) and not winograd_pays(64, 64, 6, 6, lanes)
    # 512@7: F(2x2)'s 16.8 MB of transformed weights stream for 16 tiles; AVX-512's direct conv keeps it
    assert winograd_pays(512, 512, 7, 7, 8) and not winograd_pays(512, 512, 7, 7, 16)
    # F(2x2) over 20 / 25 2x2 tiles (9x8, 10x10: 9 4x4 tiles); 13x13 is F(4x4) on AVX-512 (16 4x4 tiles)
    assert not winograd_pays(512, 512, 9, 8, 16) and winograd_pays(512, 512, 10, 10, 16)
    assert winograd_pays(512, 512, 13, 13, 16)


@pytest.mark.parametrize("isa", sorted(ISA))
def test_relay_build_512_at_7_follows_the_isa(isa):
    """Built, not run: a 384-channel 7x7 conv (9.4 MB of F(2x2) weights) takes Winograd for AVX2 and keeps
    the direct conv for AVX-512; a 384-channel 14x14 one takes Winograd for both."""
    from kiln import relay
    for hw, wino in ((7, isa == "avx2"), (14, True)):
        x = relay.var("data", shape=(1, 384, hw, hw))
        w = relay.var("w", shape=(384, 384, 3, 3))
        y = relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1), channels=384, kernel_size=(3, 3)))
        lib = _build(tvm.IRModule.from_expr(relay.Function([x, w], y)), ISA[isa])
        assert any("winograd" in a for a in _conv_anchors(lib)) == wino, (hw, _conv_anchors(lib))


def _default_net(ic, oc, h, w, padding, seed):
    from kiln import relay
    rng = np.random.default_rng(seed)
    x = relay.var("data", shape=(1, ic, h, w))
    wt = rng.standard_normal((oc, ic, 3, 3)).astype("float32") * 0.2
    y = relay.nn.relu(relay.nn.conv2d(x, relay.const(wt), padding=padding, channels=oc, kernel_size=(3, 3)))
    # a stride-2 3x3 conv after it: always the direct conv
    w2 = rng.standard_normal((oc, oc, 3, 3)).astype("float32") * 0.2
    y = relay.nn.conv2d(y, relay.const(w2), strides=(2, 2), padding=(1, 1), channels=oc, kernel_size=(3, 3))
    xv = rng.standard_normal((1, ic, h, w)).astype("float32")
    ref = np.maximum(conv2d_nchw_python(xv, wt, (1, 1), padding), 0)
    ref = conv2d_nchw_python(ref, w2, (2, 2), (1, 1, 1, 1))
    return tvm.IRModule.from_expr(relay.Function([x], y)), xv, ref


def _build(mod, target):
    from kiln import relay
    with tvm.transform.PassContext(opt_level=3), tvm.target.Target(target) as tgt:
        return relay.build(mod, target=tgt)


def _conv_anchors(lib):
    return sorted(k.anchor_op for k in lib.lowered if "conv2d" in (k.anchor_op or ""))


@pytest.mark.parametrize("ic,oc,h,w,padding", [
    (40, 48, 9, 11, (1, 0, 2, 1)),   # channels not dividing the block, asymmetric padding, 10x10 output: F(2x2)
    (32, 32, 23, 21, (1, 1, 1, 1)),  # 36 4x4 tiles, neither size divides 4: F(4x4)
    (32, 40, 13, 15, (1, 1, 1, 1)),  # 16 4x4 tiles (13x15): F(4x4) on an AVX-512 host, F(2x2) on AVX2
])
def test_relay_build_defaults_to_winograd_where_it_pays(ic, oc, h, w, padding):
    from kiln.runtime.graph_executor import GraphModule
    mod, xv, ref = _default_net(ic, oc, h, w, padding, 5)
    lib = _build(mod, TARGET)
    assert _conv_anchors(lib) == ["nn.contrib_conv2d_NCHWc", "nn.contrib_conv2d_winograd_without_weight_transform"]
    # the weight transform was folded at compile time
    assert not any("winograd_weight_transform" in (k.anchor_op or "") for k in lib.lowered)
    m = GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input("data", xv)
    m.run()
    out = m.get_output(0).numpy()
    scale = float(np.max(np.abs(ref)))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * scale)


@pytest.mark.parametrize("ic,oc,h,w", [(24, 64, 12, 12), (64, 24, 12, 12), (64, 64, 6, 6)])
def test_relay_build_keeps_the_direct_conv_where_winograd_does_not_pay(ic, oc, h, w):
    mod, _, _ = _default_net(ic, oc, h, w, (1, 1, 1, 1), 6)
    assert _conv_anchors(_build(mod, TARGET)) == ["nn.contrib_conv2d_NCHWc", "nn.contrib_conv2d_NCHWc"]


@pytest.mark.parametrize("isa", sorted(ISA))
def test_winograd_default_compiles_for_each_isa(isa):
    """Built (not run) for AVX2 and AVX-512 whatever the host: the default picks Winograd on both, with the
    ISA's vector type in the generated C."""
    mod, _, _ = _default_net(48, 64, 16, 16, (1, 1, 1, 1), 7)
    lib = _build(mod, ISA[isa])
    assert "nn.contrib_conv2d_winograd_without_weight_transform" in _conv_anchors(lib)
    src = lib.get_lib().get_source() if hasattr(lib, "get_lib") else lib.lib.get_source()
    assert ("kiln_f32x16" if isa == "avx512" else "kiln_f32x8") in src
