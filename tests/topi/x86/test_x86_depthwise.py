"""x86 depthwise conv2d (kiln.topi.x86.depthwise_conv2d, AutoTVM template ``depthwise_conv2d_NCHWc.x86``):
numerics against numpy / PyTorch on odd shapes, the fallback config, tuned configs, the generated code (no
padded copy, vectorized), and relay.build with fused epilogues through AlterOpLayout."""
import numpy as np
import pytest

import kiln as tvm
from kiln import autotvm, relay, te
from kiln.error import KilnError
from kiln.runtime.graph_executor import GraphModule
from kiln.topi.testing import depthwise_conv2d_python_nchw, layout_transform_python as lt
from kiln.topi.x86 import depthwise_conv2d as dw
from kiln.target.codegen_c import parallel_loop_marker
from kiln.target.x86 import host_can_run

TARGET = "llvm -mcpu=core-avx2"


def _ref(a, w, s, p, d=1):
    return depthwise_conv2d_python_nchw(a, w, (s, s), (p, p), (d, d))


def _build_packed(c, bn, h, w_, k, s, p, d=1, target=TARGET):
    with tvm.target.Target(target):
        A = te.placeholder((1, c // bn, h, w_, bn), name="data")
        W = te.placeholder((c // bn, 1, k, k, 1, bn), name="kernel")
        out = dw.depthwise_conv2d_NCHWc(A, W, (s, s), (p, p, p, p), (d, d), f"NCHW{bn}c", f"NCHW{bn}c", "float32")
        sch = dw.schedule_depthwise_conv2d_NCHWc([out])
        mod = tvm.build(sch, [A, W, out], target=target, name="dw")
    return mod, out


def _run_packed(mod, out, a, w, bn):
    args = [tvm.nd.array(lt(a, "NCHW", f"NCHW{bn}c")), tvm.nd.array(lt(w, "OIHW", f"OIHW1i{bn}o")),
            tvm.nd.empty([int(x) for x in out.shape], "float32")]
    mod["dw"](*args)
    return lt(args[-1].numpy(), f"NCHW{bn}c", "NCHW")


@pytest.mark.parametrize("c,bn,hw,k,s,p", [
    (24, 8, 13, 3, 1, 1), (24, 8, 15, 3, 2, 1), (40, 8, 7, 3, 1, 1), (32, 16, 15, 3, 2, 1), (16, 16, 13, 5, 1, 2),
    (48, 16, 14, 5, 2, 2), (24, 8, 13, 3, 1, 0), (32, 16, 9, 3, 2, 0), (12, 4, 11, 3, 1, 1), (6, 3, 8, 3, 2, 1),
])
def test_packed_matches_numpy(c, bn, hw, k, s, p):
    rng = np.random.default_rng(c * 100 + hw)
    a = rng.standard_normal((1, c, hw, hw)).astype("float32")
    w = rng.standard_normal((c, 1, k, k)).astype("float32")
    mod, out = _build_packed(c, bn, hw, hw, k, s, p)
    got = _run_packed(mod, out, a, w, bn)
    np.testing.assert_allclose(got, _ref(a, w, s, p), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("c,hw,k,s,p", [(72, 13, 3, 1, 1), (120, 11, 5, 2, 2), (24, 9, 3, 2, 0)])
def test_24_channel_block_on_avx512(c, hw, k, s, p):
    """AVX-512's 24-channel block (a zmm and a ymm a pixel; :func:`~kiln.topi.x86.conv2d.channel_block`) through
    the fallback: generated for ``llvm -mcpu=skylake-avx512`` with the accumulators in 16- and 8-lane register
    slots, checked against numpy where the host runs AVX-512 code (rows that the register tile does not divide)."""
    target = "llvm -mcpu=skylake-avx512"
    bn = dw.dw_channel_block(c, 16)
    assert bn == 24
    mod, out = _build_packed(c, bn, hw, hw, k, s, p, target=target)
    src = mod.get_source()
    assert "kiln_f32x16 depthwise_conv2d_NCHWc_global_r0" in src and "depthwise_conv2d_NCHWc_global_w8_r0" in src
    assert "float depthwise_conv2d_NCHWc_global[" not in src
    if host_can_run(target):
        rng = np.random.default_rng(c + hw)
        a = rng.standard_normal((1, c, hw, hw)).astype("float32")
        w = rng.standard_normal((c, 1, k, k)).astype("float32")
        np.testing.assert_allclose(_run_packed(mod, out, a, w, bn), _ref(a, w, s, p), rtol=1e-4, atol=1e-4)


def test_packed_rectangular_and_dilated():
    rng = np.random.default_rng(3)
    c, bn, h, w_ = 16, 8, 13, 9
    a = rng.standard_normal((1, c, h, w_)).astype("float32")
    w = rng.standard_normal((c, 1, 3, 3)).astype("float32")
    for s, p, d in ((1, 1, 2), (2, 2, 2), (1, 0, 1)):
        mod, out = _build_packed(c, bn, h, w_, 3, s, p, d)
        np.testing.assert_allclose(_run_packed(mod, out, a, w, bn), _ref(a, w, s, p, d), rtol=1e-4, atol=1e-4)


def test_unpacked_nchw_packs_inside():
    rng = np.random.default_rng(4)
    c, hw = 24, 11
    a = rng.standard_normal((2, c, hw, hw)).astype("float32")
    w = rng.standard_normal((c, 1, 3, 3)).astype("float32")
    with tvm.target.Target(TARGET):
        A = te.placeholder(a.shape, name="data")
        W = te.placeholder(w.shape, name="kernel")
        out = dw.depthwise_conv2d_nchw(A, W, (2, 2), (1, 1, 1, 1), (1, 1), "float32")
        sch = dw.schedule_depthwise_conv2d_nchw([out])
        mod = tvm.build(sch, [A, W, out], target=TARGET, name="dw")
    res = tvm.nd.empty([int(x) for x in out.shape], "float32")
    mod["dw"](tvm.nd.array(a), tvm.nd.array(w), res)
    np.testing.assert_allclose(res.numpy(), _ref(a, w, 2, 1), rtol=1e-4, atol=1e-4)


def test_generated_code_has_no_padded_copy_and_is_vectorized():
    mod, _ = _build_packed(32, 16, 28, 28, 3, 1, 1)
    src = mod.get_source()
    assert "data_pad" not in src                 # the padding is a condition on the read, not a copy
    assert "kiln_vload_f32x8" in src             # 16-channel block = two AVX2 vectors per pixel
    assert parallel_loop_marker() in src         # (batch x channel blocks x rows) in parallel


def test_fallback_config():
    with tvm.target.Target(TARGET) as target:
        A = te.placeholder((1, 9, 56, 56, 16), name="data")
        W = te.placeholder((9, 1, 3, 3, 1, 16), name="kernel")
        out = dw.depthwise_conv2d_NCHWc(A, W, (1, 1), (1, 1, 1, 1), (1, 1), "NCHW16c", "NCHW16c", "float32")
        cfg = autotvm.task.DispatchContext.current.query(target, autotvm.task.get_workload([out]))
    assert cfg.is_fallback
    assert cfg["tile_oc"].size[-1] == 16 and cfg["tile_ic"].size[-1] == 16
    assert cfg["tile_ow"].size[-1] == 4 and cfg["unroll_kw"].val is True
    assert dw.dw_channel_block(144, 8) == 16 and dw.dw_channel_block(24, 8) == 8 and dw.dw_channel_block(6, 8) == 6
    assert dw.dw_row_tile(56, 2, max_acc=8) == 4            # 8 accumulators of 2 vectors, a divisor of the row
    assert dw.dw_row_tile(112, 1, max_acc=8) == 8
    assert dw.dw_row_tile(28, 1, max_acc=8) == 7
    assert dw.dw_row_tile(7, 2, max_acc=8) == 4             # only 1 and 7 divide 7: a 4-pixel tile, guarded tail
    assert dw.dw_row_tile(3, 2, max_acc=8) == 3
    with tvm.target.Target("llvm -mcpu=core-avx2"):          # 8 of AVX2's 16 registers hold accumulators
        assert dw.dw_row_tile(56, 2) == 4
    with tvm.target.Target("llvm -mcpu=skylake-avx512"):     # 16 of AVX-512's 32
        assert dw.dw_row_tile(56, 2) == 8 and dw.dw_row_tile(112, 1) == 16


def test_autotvm_task_space_and_configs():
    """The template's knobs are TVM's; random configs of the space compute the right result."""
    c, bn, hw, s = 24, 8, 13, 2
    with tvm.target.Target(TARGET):
        A = te.placeholder((1, c // bn, hw, hw, bn), name="data")
        W = te.placeholder((c // bn, 1, 3, 3, 1, bn), name="kernel")
        task = autotvm.task.create("depthwise_conv2d_NCHWc.x86",
                                   args=(A, W, (s, s), (1, 1, 1, 1), (1, 1), f"NCHW{bn}c", f"NCHW{bn}c", "float32"),
                                   target=TARGET)
    space = task.config_space
    assert {"tile_ic", "tile_oc", "tile_ow", "unroll_kw"} <= set(space.space_map)
    assert len(space) > 4
    rng = np.random.default_rng(5)
    a = rng.standard_normal((1, c, hw, hw)).astype("float32")
    w = rng.standard_normal((c, 1, 3, 3)).astype("float32")
    ref = _ref(a, w, s, 1)
    for idx in sorted(set(int(i) for i in rng.integers(0, len(space), 4))):
        cfg = space.get(idx)
        with tvm.target.Target(TARGET):
            sch, args = task.instantiate(cfg)          # TVM's order: [output] + inputs
            out = args[0]
            data, kernel = sorted(args[1:], key=lambda t: len(t.shape))
            mod = tvm.build(sch, [data, kernel, out], target=TARGET, name="dw")
        got = _run_packed(mod, out, a, w, bn)
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4, err_msg=str(cfg))


def _nchw_task(c, hw, s, target):
    with tvm.target.Target(target):
        return autotvm.task.create("depthwise_conv2d_NCHWc.x86",
                                   args=(("TENSOR", (1, c, hw, hw), "float32"), ("TENSOR", (c, 1, 3, 3), "float32"),
                                         (s, s), (1, 1, 1, 1), (1, 1), "NCHW", "NCHW", "float32"), target=target)


@pytest.mark.parametrize("target,c,block", [("llvm -mcpu=core-avx2", 144, 16), ("llvm -mcpu=core-avx2", 24, 8),
                                            ("llvm -mcpu=skylake-avx512", 96, 16),
                                            ("llvm -mcpu=skylake-avx512", 960, 16),
                                            ("llvm -mcpu=skylake-avx512", 24, 24),
                                            ("llvm -mcpu=skylake-avx512", 40, 8)])
def test_tuning_space_keeps_the_layout_block(target, c, block):
    """The channel block is not a knob: a tuned block is the graph's layout (conv2d_alter_layout reads
    tile_oc), and mobilenet_v2 records with blocks of 4 to 40 put layout transforms around the depthwise
    convs that the tuned kernels never measured (the tuned network ran slower than the untuned one)."""
    space = _nchw_task(c, 14, 1, target).config_space
    for name in ("tile_ic", "tile_oc"):
        assert [list(e.size) for e in space.space_map[name].entities] == [[-1, block]]
    assert block == dw.dw_channel_block(c, 16 if "avx512" in target else 8)
    assert len(space) == len(space.space_map["tile_ow"]) * 2     # tile_ow x unroll_kw


def test_tuning_measures_the_packed_kernel():
    """While tuning, the NCHW task takes data and kernel already packed (as the network runs it), so the
    measurement is not that of packing the input per call; the kernel still computes the depthwise conv
    (rows of 13 and stride 2: tiles that do not divide the row)."""
    from kiln.autotvm.env import GLOBAL_SCOPE
    c, hw, s = 48, 13, 2
    task = _nchw_task(c, hw, s, TARGET)
    cfg = task.config_space.get(len(task.config_space) - 1)
    with tvm.target.Target(TARGET):
        _, plain_args = task.instantiate(cfg)
    assert sorted(len(a.shape) for a in plain_args[1:]) == [4, 4]
    old = GLOBAL_SCOPE.in_tuning
    GLOBAL_SCOPE.in_tuning = True
    try:
        with tvm.target.Target(TARGET):
            sch, args = task.instantiate(cfg)
            out = args[0]
            data, kernel = sorted(args[1:], key=lambda t: len(t.shape))
            mod = tvm.build(sch, [data, kernel, out], target=TARGET, name="dw")
    finally:
        GLOBAL_SCOPE.in_tuning = old
    bn = dw.dw_channel_block(c, 8)
    assert [tuple(int(d) for d in t.shape) for t in (data, kernel)] == [(1, c // bn, hw, hw, bn), (c // bn, 1, 3, 3, 1, bn)]
    if not host_can_run(TARGET):
        return
    rng = np.random.default_rng(7)
    a = rng.standard_normal((1, c, hw, hw)).astype("float32")
    w = rng.standard_normal((c, 1, 3, 3)).astype("float32")
    np.testing.assert_allclose(_run_packed(mod, out, a, w, bn), _ref(a, w, s, 1), rtol=1e-4, atol=1e-4)


def test_bad_kernel_shape_is_reported():
    with tvm.target.Target(TARGET):
        A = te.placeholder((1, 2, 8, 8, 8), name="data")
        W = te.placeholder((2, 1, 3, 3, 1, 4), name="kernel")
        with pytest.raises(KilnError, match="OIHW1i8o"):
            dw.depthwise_conv2d_NCHWc(A, W, (1, 1), (1, 1, 1, 1), (1, 1), "NCHW8c", "NCHW8c", "float32")
        W2 = te.placeholder((3, 2, 3, 3), name="kernel")
        with pytest.raises(KilnError, match="multiplier"):
            dw.depthwise_conv2d_NCHWc(te.placeholder((1, 3, 8, 8)), W2, (1, 1), (1, 1, 1, 1), (1, 1), "NCHW", "NCHW",
                                      "float32")


def _relay_block(c, hw, k, s, p, epilogue, rng):
    x = relay.var("x", shape=(1, c, hw, hw))
    w = rng.standard_normal((c, 1, k, k)).astype("float32")
    y = relay.nn.conv2d(x, relay.const(w), strides=(s, s), padding=(p, p), groups=c, channels=c,
                        kernel_size=(k, k))
    b = rng.standard_normal((c, 1, 1)).astype("float32")
    if epilogue == "clip":
        y = relay.clip(y, 0.0, 6.0)
    elif epilogue == "bias_clip":
        y = relay.clip(relay.add(y, relay.const(b)), 0.0, 6.0)
    elif epilogue == "add":
        o = (hw + 2 * p - k) // s + 1
        y = relay.add(y, relay.var("r", shape=(1, c, o, o)))
    return tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(y), y)), w, b


@pytest.mark.parametrize("c,hw,k,s,p,epilogue", [
    (24, 13, 3, 1, 1, "clip"), (40, 15, 3, 2, 1, "bias_clip"), (32, 7, 3, 1, 1, "add"), (144, 15, 3, 2, 1, "clip"),
    (24, 13, 5, 2, 2, "clip"), (48, 9, 3, 1, 0, "none"),
])
def test_relay_build_fused_epilogue_matches_torch(c, hw, k, s, p, epilogue):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(c + hw + k)
    mod, w, b = _relay_block(c, hw, k, s, p, epilogue, rng)
    a = rng.standard_normal((1, c, hw, hw)).astype("float32") * 3
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target=TARGET)
    impls = {cc.anchor_op: cc.implementation for cc in lib.lowered}
    assert impls.get("nn.contrib_depthwise_conv2d_NCHWc") == "depthwise_conv2d_NCHWc.x86"
    m = GraphModule(lib["default"](tvm.cpu()))
    m.set_input("x", a)
    ref_t = torch.nn.functional.conv2d(torch.from_numpy(a), torch.from_numpy(w), stride=s, padding=p, groups=c)
    params = {n.name_hint: None for n in mod["main"].params}
    if "r" in params:
        r = rng.standard_normal(tuple(ref_t.shape)).astype("float32")
        m.set_input("r", r)
        ref_t = ref_t + torch.from_numpy(r)
    m.run()
    ref = ref_t.numpy()
    if epilogue == "bias_clip":
        ref = ref + b[None]
    if epilogue in ("clip", "bias_clip"):
        ref = np.clip(ref, 0, 6)
    np.testing.assert_allclose(m.get_output(0).numpy(), ref, rtol=1e-4, atol=1e-4)
