"""qnn.conv2d through the x86 int8 kernels: the x86 QNN legalization (uint8 x int8 nn.conv2d, zero-point padding
and correction), the requantize epilogue fused into the conv, against numpy references (zero points,
per-channel scales and weight zero points, int8 and uint8 data, stride 2, padding, odd channel counts)."""
import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.contrib import graph_executor
from kiln.relay import qnn
from kiln.target.x86 import host_can_run
from kiln.topi.x86.conv2d_int8 import SATURATING_OPTION, oc_block

AVX2 = "llvm -mcpu=core-avx2"
RNG = np.random.default_rng(11)
CONV_OPS = ("nn.conv2d", "nn.contrib_conv2d_NCHWc")  # the latter after AlterOpLayout (int8 NCHWc layout)
needs_avx2 = pytest.mark.skipif(not host_can_run(kiln.target.Target(AVX2)), reason="host lacks AVX2")


def conv_ref(d, w, zp_d, zp_w, stride, pad):
    import torch
    kk = w.astype(np.float64) - (np.asarray(zp_w).reshape(-1, 1, 1, 1) if np.ndim(zp_w) else zp_w)
    out = torch.nn.functional.conv2d(torch.tensor(d.astype(np.float64) - zp_d), torch.tensor(kk), stride=stride,
                                     padding=pad)
    return out.numpy().astype(np.int64)


def requant_ref(acc, s_in, s_out, zp_out, dtype):
    v = acc.astype(np.float64) * (np.asarray(s_in, np.float64).reshape(1, -1, 1, 1) / s_out)
    info = np.iinfo(dtype)
    return np.clip(np.floor(v + 0.5) + zp_out, info.min, info.max).astype(dtype), v


def build(body, x, config=None):
    p = relay.var("x", shape=x.shape, dtype=str(x.dtype))
    mod = kiln.IRModule.from_expr(relay.Function([p], body(p)))
    with kiln.transform.PassContext(opt_level=3, config=config or {}):
        opt, _ = relay.optimize(mod, AVX2)
        lib = relay.build(mod, AVX2)
    return opt, lib


def run(lib, x):
    m = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    m.set_input(x=x)
    m.run()
    return [m.get_output(i).numpy() for i in range(m.get_num_outputs())]


def fused_functions(opt):
    """The primitive functions of the optimized module, each as the list of its op names."""
    found = []

    def visit(e):
        if isinstance(e, relay.Function) and e.attrs is not None and e.get_attr("Primitive"):
            ops = []
            relay.analysis.post_order_visit(e.body, lambda c: ops.append(c.op.name) if isinstance(c, relay.Call)
                                            and hasattr(c.op, "name") else None)
            found.append(ops)
    relay.analysis.post_order_visit(opt["main"], visit)
    return found


@needs_avx2
@pytest.mark.parametrize("dtype,zp_d,c,o,stride,pad,per_channel", [
    ("int8", -7, 5, 19, 2, 1, True),
    ("uint8", 131, 16, 32, 1, 1, False),
    ("uint8", 0, 3, 24, 2, 1, True),    # RGB stem: channels padded to 4, NCHW4c -> NCHW8c
    ("uint8", 9, 6, 32, 1, 1, False),   # 6 channels padded to 8, the zero point padding both
    ("int8", 0, 20, 17, 1, 0, False),
])
def test_qnn_conv2d_int8_kernel(dtype, zp_d, c, o, stride, pad, per_channel):
    info = np.iinfo(dtype)
    d = RNG.integers(info.min, info.max + 1, (1, c, 11, 9)).astype(dtype)
    w = RNG.integers(-100, 101, (o, c, 3, 3)).astype("int8")
    zp_w = np.array(RNG.integers(-3, 4, o), "int32") if per_channel else 0
    s_w = np.array(RNG.uniform(0.01, 0.03, o), "float32") if per_channel else np.float32(0.02)
    body = lambda x: qnn.op.conv2d(x, relay.const(w), zp_d, zp_w, 0.1, s_w, kernel_size=(3, 3),  # noqa: E731
                                   channels=o, strides=(stride, stride), padding=(pad, pad))
    opt, lib = build(body, d)
    convs = [ops for ops in fused_functions(opt) if set(CONV_OPS) & set(ops)]
    assert convs, "no conv left"
    # packed layout where the output channels fill whole 16- or 8-channel blocks (input channels are padded
    # to a multiple of 4 by the legalization)
    assert ("nn.contrib_conv2d_NCHWc" in convs[0]) == (o % oc_block(o) == 0)
    (out,) = run(lib, d)
    np.testing.assert_array_equal(out, conv_ref(d, w, zp_d, zp_w, stride, pad))


@needs_avx2
def test_requantize_fuses_into_the_int8_conv():
    d = RNG.integers(-128, 128, (1, 8, 10, 10)).astype("int8")
    w = RNG.integers(-90, 91, (16, 8, 3, 3)).astype("int8")
    s_w = np.array(RNG.uniform(0.01, 0.02, 16), "float32")

    def body(x):
        acc = qnn.op.conv2d(x, relay.const(w), 3, 0, 0.05, s_w, kernel_size=(3, 3), channels=16, padding=(1, 1))
        return qnn.op.requantize(acc, 0.05 * s_w, 0, 0.4, 5, out_dtype="uint8", axis=1)
    opt, lib = build(body, d)
    funcs = fused_functions(opt)
    conv_funcs = [ops for ops in funcs if set(CONV_OPS) & set(ops)]
    assert len(conv_funcs) == 1 and "clip" in conv_funcs[0], funcs  # requantize is the conv's epilogue
    (out,) = run(lib, d)
    want, v = requant_ref(conv_ref(d, w, 3, 0, 1, 1), 0.05 * s_w, 0.4, 5, "uint8")
    diff = out.astype(np.int64) - want.astype(np.int64)
    near_tie = np.abs(np.abs(v - np.floor(v)) - 0.5) < 1e-6
    assert np.all((diff == 0) | (near_tie & (np.abs(diff) <= 1)))


@needs_avx2
def test_saturating_option_keeps_full_range_weights_exact():
    """With relay.x86.int8_saturating_madd, a layer whose weights could saturate vpmaddubsw's int16 pair sums is
    not given to the int8 kernel (the generic lowering runs it); 7-bit weights are."""
    d = RNG.integers(0, 256, (1, 8, 7, 7)).astype("uint8")
    w_full = np.full((16, 8, 3, 3), 127, "int8")
    w7 = RNG.integers(-64, 64, (16, 8, 3, 3)).astype("int8")
    for w, int8_path in ((w_full, False), (w7, True)):
        body = lambda x: qnn.op.conv2d(x, relay.const(w), 0, 0, 0.1, 0.1, kernel_size=(3, 3),  # noqa: E731
                                       channels=16, padding=(1, 1))
        opt, lib = build(body, d, {SATURATING_OPTION: True})
        dtypes = []
        relay.analysis.post_order_visit(opt["main"], lambda e: dtypes.append(e.args[0].checked_type.dtype) if (
            isinstance(e, relay.Call) and getattr(e.op, "name", "") in CONV_OPS) else None)
        assert dtypes and (dtypes == ["uint8"]) == int8_path, dtypes
        (out,) = run(lib, d)
        np.testing.assert_array_equal(out, conv_ref(d, w, 0, 0, 1, 1))


def test_no_int8_legalization_without_an_int8_target():
    """A target without AVX2 keeps the generic canonical form (no uint8 x int8 conv)."""
    w = RNG.integers(-100, 101, (16, 8, 3, 3)).astype("int8")
    x = relay.var("x", shape=(1, 8, 7, 7), dtype="int8")
    body = qnn.op.conv2d(x, relay.const(w), 1, 0, 0.1, 0.1, kernel_size=(3, 3), channels=16, padding=(1, 1))
    mod = relay.transform.InferType()(kiln.IRModule.from_expr(relay.Function([x], body)))
    with kiln.target.Target("llvm -mcpu=x86-64"):
        low = relay.transform.InferType()(qnn.transform.Legalize()(mod))
    found = []
    relay.analysis.post_order_visit(low["main"], lambda e: found.append(e.args[0].checked_type.dtype) if (
        isinstance(e, relay.Call) and getattr(e.op, "name", "") == "nn.conv2d") else None)
    assert found and "uint8" not in found


@needs_avx2
@pytest.mark.parametrize("dtype,zp_d,saturating", [("int8", -4, False), ("uint8", 128, False), ("int8", -4, True),
                                                   ("uint8", 128, True)])
def test_qnn_dense_int8_kernel(dtype, zp_d, saturating):
    """Exact mode (no VNNI, the default): nn.dense on int16 ``x - zx`` and ``w - zw`` (dense_int16.x86, no
    zero-point correction); with the saturating option and 7-bit weights: uint8 x int8 (dense_int8.x86)."""
    info = np.iinfo(dtype)
    d = RNG.integers(info.min, info.max + 1, (3, 37)).astype(dtype)
    lim = 60 if saturating else 120
    w = RNG.integers(-lim, lim + 1, (21, 37)).astype("int8")
    zp_w = np.array(RNG.integers(-3, 4, 21), "int32")
    body = lambda x: qnn.op.dense(x, relay.const(w), zp_d, zp_w, 0.1, np.full(21, 0.2, "float32"),  # noqa: E731
                                  units=21)
    opt, lib = build(body, d, {SATURATING_OPTION: True} if saturating else None)
    dtypes = []
    relay.analysis.post_order_visit(opt["main"], lambda e: dtypes.append(e.args[0].checked_type.dtype) if (
        isinstance(e, relay.Call) and getattr(e.op, "name", "") in ("nn.dense", "nn.contrib_dense_pack")) else None)
    assert dtypes == (["uint8"] if saturating else ["int16"])
    (out,) = run(lib, d)
    np.testing.assert_array_equal(out, (d.astype(np.int64) - zp_d) @ (w.astype(np.int64) - zp_w[:, None]).T)


@needs_avx2
def test_two_layers_stay_in_the_int8_nchwc_layout():
    """AlterOpLayout packs the kernels OIHW16o4i once; two convs with requantize between them run in NCHW16c
    (one layout_transform in, one out) and equal the interpreter's QNN result."""
    d = RNG.integers(0, 256, (1, 16, 12, 12)).astype("uint8")
    w1 = RNG.integers(-60, 60, (32, 16, 3, 3)).astype("int8")
    w2 = RNG.integers(-60, 60, (16, 32, 1, 1)).astype("int8")

    def layer(v, w, s_in):
        c = qnn.op.conv2d(v, relay.const(w), 0, 0, s_in, 0.02, kernel_size=w.shape[2:], channels=w.shape[0],
                          padding=(w.shape[2] // 2,) * 2)
        return qnn.op.requantize(c, s_in * 0.02, 0, 0.5, 0, out_dtype="uint8")
    body = lambda x: layer(layer(x, w1, 0.1), w2, 0.5)  # noqa: E731
    opt, lib = build(body, d)
    text = opt["main"].astext(show_meta_data=False)
    assert text.count('kernel_layout="OIHW16o4i"') == 2 and text.count("layout_transform(") == 2
    (out,) = run(lib, d)
    p = relay.var("x", shape=d.shape, dtype="uint8")
    mod = kiln.IRModule.from_expr(relay.Function([p], body(p)))
    want = relay.create_executor("debug", mod=mod).evaluate()(d).numpy()
    np.testing.assert_array_equal(out, want)


@needs_avx2
@pytest.mark.parametrize("units,saturating", [(48, True), (43, True), (48, False), (43, False)])
def test_dense_weight_packed_once_nc16n4c(units, saturating):
    """AlterOpLayout gives the int8 dense an NC16n4c weight (NC16n2c int16 in the exact mode) (nn.contrib_dense_pack,
    packed at compile time; rows that 16 does not divide zero-padded, units kept); the requantize fuses in; no
    packing is left at run time; equal to the interpreter's QNN result."""
    d = RNG.integers(-128, 128, (2, 72)).astype("int8")
    w = RNG.integers(-60, 61, (units, 72)).astype("int8")
    body = lambda x: qnn.op.requantize(qnn.op.dense(x, relay.const(w), 3, 0, 0.1, 0.02, units=units),  # noqa: E731
                                       0.002, 0, 0.3, 1, out_dtype="int8")
    opt, lib = build(body, d, {SATURATING_OPTION: True} if saturating else None)
    funcs = fused_functions(opt)
    dense = [ops for ops in funcs if "nn.contrib_dense_pack" in ops]
    assert len(dense) == 1 and "clip" in dense[0], funcs
    assert not any("layout_transform" in ops or "nn.pad" in ops for ops in funcs), funcs
    text = opt["main"].astext(show_meta_data=False)
    assert f'weight_layout="NC16n{4 if saturating else 2}c"' in text
    assert (f"units={units}" in text) == (units % 16 != 0)
    (out,) = run(lib, d)
    p = relay.var("x", shape=d.shape, dtype="int8")
    want = relay.create_executor("debug", mod=kiln.IRModule.from_expr(relay.Function([p], body(p)))).evaluate()(d)
    np.testing.assert_array_equal(out, want.numpy())


def dw_ref(d, w, zp_d, zp_w, stride, pad):
    import torch
    kk = w.astype(np.float64) - (np.asarray(zp_w).reshape(-1, 1, 1, 1) if np.ndim(zp_w) else zp_w)
    out = torch.nn.functional.conv2d(torch.tensor(d.astype(np.float64) - zp_d), torch.tensor(kk), stride=stride,
                                     padding=pad, groups=d.shape[1])
    return out.numpy().astype(np.int64)


@needs_avx2
@pytest.mark.parametrize("dtype,zp_d,c,stride,pad,per_channel", [
    ("uint8", 0, 32, 1, 1, True),       # mobilenet's: blocked NCHW16c, padding read as 0
    ("uint8", 37, 16, 2, 1, False),     # padding with the zero point (explicit pad)
    ("int8", -5, 21, 1, 1, True),       # int8 data shifted to uint8, odd channels (packed inside)
    ("uint8", 2, 24, 1, 1, True),       # blocked NCHW8c
])
def test_qnn_depthwise_int8_kernel(dtype, zp_d, c, stride, pad, per_channel):
    info = np.iinfo(dtype)
    d = RNG.integers(info.min, info.max + 1, (1, c, 10, 9)).astype(dtype)
    w = RNG.integers(-120, 121, (c, 1, 3, 3)).astype("int8")  # w - zp_w fits int8
    zp_w = np.array(RNG.integers(-3, 4, c), "int32") if per_channel else 0
    s_w = np.array(RNG.uniform(0.01, 0.03, c), "float32") if per_channel else np.float32(0.02)

    def body(x):
        acc = qnn.op.conv2d(x, relay.const(w), zp_d, zp_w, 0.1, s_w, kernel_size=(3, 3), channels=c, groups=c,
                            strides=(stride, stride), padding=(pad, pad))
        return qnn.op.requantize(acc, 0.1 * s_w, 0, 0.3, 4, out_dtype="uint8", axis=1)
    opt, lib = build(body, d)
    ops = [op for f in fused_functions(opt) for op in f]
    assert "nn.contrib_depthwise_conv2d_NCHWc" in ops or "nn.conv2d" in ops
    kinds = []
    relay.analysis.post_order_visit(opt["main"], lambda e: kinds.append(e.args[0].checked_type.dtype) if (
        isinstance(e, relay.Call) and getattr(e.op, "name", "") in ("nn.conv2d", "nn.contrib_depthwise_conv2d_NCHWc"))
        else None)
    assert kinds == ["uint8"], kinds  # the int8 depthwise kernel, not the float32 lowering
    assert ("nn.contrib_depthwise_conv2d_NCHWc" in ops) == (c % 8 == 0)
    (out,) = run(lib, d)
    want = arith_requant(dw_ref(d, w, zp_d, zp_w, stride, pad), 0.1 * s_w, 0.3, 4)
    np.testing.assert_array_equal(out, want)


def arith_requant(acc, s_in, s_out, zp_out):
    from kiln.relay.qnn.op import arith
    return arith.requantize(acc, np.broadcast_to(np.asarray(s_in, np.float32), (acc.shape[1],)), 0, s_out, zp_out,
                            "uint8", "UPWARD", axis=1)


@needs_avx2
@pytest.mark.parametrize("dtype,saturating,zp_dtype", [("uint8", False, "uint8"), ("int8", False, "int8"),
                                                       ("uint8", True, "uint8"), ("int8", True, "int8"),
                                                       ("uint8", False, "int32"), ("int8", False, "int32")])
def test_qnn_dense_runtime_zero_point_takes_the_int8_kernel(dtype, saturating, zp_dtype):
    """DynamicQuantizeLinear gives qnn.dense a zero point computed at run time (its uint8 output cast to int32):
    the x86 legalization still feeds an integer kernel: in the exact mode the int16 dense of ``x - z``, with the
    saturating option and 7-bit weights the int8 dense (uint8 x int8) minus zu * colsum(wq). A run-time int32
    zero point not known to fit (``x - z`` might leave int16) takes the uint8 x int8 form in the exact mode too."""
    info = np.iinfo(dtype)
    m, k, n = 5, 37, 48
    d = RNG.integers(info.min, info.max + 1, (m, k)).astype(dtype)
    lim = 60 if saturating else 120
    w = RNG.integers(-lim, lim + 1, (n, k)).astype("int8")  # w - 2 fits int8
    x = relay.var("x", shape=(m, k), dtype=dtype)
    zp = relay.var("zp", shape=(), dtype=zp_dtype)
    body = qnn.op.dense(x, relay.const(w), relay.cast(zp, "int32") if zp_dtype != "int32" else zp, 2, 0.1, 0.2,
                        units=n)
    mod = kiln.IRModule.from_expr(relay.Function([x, zp], body))
    with kiln.transform.PassContext(opt_level=3, config={SATURATING_OPTION: saturating}):
        opt, _ = relay.optimize(mod, AVX2)
        lib = relay.build(mod, AVX2)
    dense_in = []
    relay.analysis.post_order_visit(opt["main"], lambda e: dense_in.append(e.args[0].checked_type.dtype) if (
        isinstance(e, relay.Call) and getattr(e.op, "name", "") in ("nn.dense", "nn.contrib_dense_pack")) else None)
    assert dense_in == (["uint8"] if saturating or zp_dtype == "int32" else ["int16"]), dense_in
    gm = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    for z in (0, int(RNG.integers(info.min, info.max + 1))):
        gm.set_input(x=d, zp=np.array(z, zp_dtype))
        gm.run()
        want = (d.astype(np.int64) - z) @ (w.astype(np.int64) - 2).T
        np.testing.assert_array_equal(gm.get_output(0).numpy(), want)


@needs_avx2
def test_24_channel_layers_stay_blocked_nchw8c():
    """mobilenet_v2's inverted residual with 24 channels: the 1x1 projections to 24 channels write NCHW8c
    (OIHW8o4i kernels), the expansion to 48 and its depthwise conv stay NCHW16c, the residual add runs on the
    blocked tensors; one layout_transform in, one out; equal to the interpreter's QNN result."""
    d = RNG.integers(0, 256, (1, 16, 9, 10)).astype("uint8")
    w0 = RNG.integers(-60, 60, (24, 16, 1, 1)).astype("int8")
    w1 = RNG.integers(-60, 60, (48, 24, 1, 1)).astype("int8")
    wd = RNG.integers(-60, 60, (48, 1, 3, 3)).astype("int8")
    w2 = RNG.integers(-60, 60, (24, 48, 1, 1)).astype("int8")

    def layer(v, w, s_in, groups=1):
        c = qnn.op.conv2d(v, relay.const(w), 3, 0, s_in, 0.02, kernel_size=w.shape[2:], channels=w.shape[0],
                          padding=(w.shape[2] // 2,) * 2, groups=groups)
        return qnn.op.requantize(c, s_in * 0.02, 0, 0.5, 3, out_dtype="uint8")

    def body(x):
        a = layer(x, w0, 0.1)
        b = layer(layer(layer(a, w1, 0.5), wd, 0.5, groups=48), w2, 0.5)
        return qnn.op.add(a, b, 0.5, 3, 0.5, 3, 0.7, 5)
    opt, lib = build(body, d)
    text = opt["main"].astext(show_meta_data=False)
    assert text.count('kernel_layout="OIHW8o4i"') == 2 and text.count('kernel_layout="OIHW16o4i"') == 1, text
    assert text.count('kernel_layout="OIHW1i16o"') == 1
    assert text.count("layout_transform(") == 2, text
    (out,) = run(lib, d)
    p = relay.var("x", shape=d.shape, dtype="uint8")
    want = relay.create_executor("debug", mod=kiln.IRModule.from_expr(relay.Function([p], body(p)))).evaluate()(d)
    np.testing.assert_array_equal(out, want.numpy())


@needs_avx2
@pytest.mark.parametrize("zp", [17, 0])
def test_rgb_stem_is_blocked_from_the_first_layer(zp):
    """resnet's stem (3 input channels, 7x7 stride 2, max pool): the legalization pads the channels to 4 (zero
    weights) in the zero-point pad, so the conv runs on NCHW4c data with no packing inside and writes NCHW16c,
    and the max pool runs blocked; equal to the interpreter's QNN result."""
    d = RNG.integers(0, 256, (1, 3, 20, 19)).astype("uint8")
    w = RNG.integers(-60, 60, (32, 3, 7, 7)).astype("int8")

    def body(x):
        c = qnn.op.conv2d(x, relay.const(w), zp, 0, 0.1, 0.02, kernel_size=(7, 7), channels=32, strides=(2, 2),
                          padding=(3, 3))
        r = qnn.op.requantize(c, 0.002, 0, 0.5, 3, out_dtype="uint8")
        return relay.nn.max_pool2d(r, pool_size=(3, 3), strides=(2, 2), padding=(1, 1))
    opt, lib = build(body, d)
    text = opt["main"].astext(show_meta_data=False)
    assert 'data_layout="NCHW4c"' in text and 'layout="NCHW16c"' in text, text
    assert text.count("layout_transform(") == 2, text
    (out,) = run(lib, d)
    p = relay.var("x", shape=d.shape, dtype="uint8")
    want = relay.create_executor("debug", mod=kiln.IRModule.from_expr(relay.Function([p], body(p)))).evaluate()(d)
    np.testing.assert_array_equal(out, want.numpy())


@pytest.mark.parametrize("target,dtype,layout", [("llvm -mcpu=cascadelake", "uint8", "NC16n4c"),
                                                 ("llvm -mcpu=skylake-avx512", "int16", "NC16n2c"),
                                                 ("llvm -mcpu=core-avx2", "int16", "NC16n2c")])
def test_dense_form_follows_the_target(target, dtype, layout):
    """The exact mode without VNNI (AVX2, AVX-512BW) takes the int16 dense; a VNNI target keeps uint8 x int8
    (vpdpbusd is exact); both with the weight packed at compile time (graph only: no ISA needed to run)."""
    x = relay.var("x", shape=(6, 40), dtype="uint8")
    zp = relay.var("zp", shape=(), dtype="uint8")
    w = RNG.integers(-128, 128, (32, 40)).astype("int8")  # full range
    mod = kiln.IRModule.from_expr(relay.Function([x, zp], qnn.op.dense(x, relay.const(w), relay.cast(zp, "int32"), 0,
                                                                         0.1, 0.2, units=32)))
    with kiln.transform.PassContext(opt_level=3):
        opt, _ = relay.optimize(mod, target)
    dense_in = []
    relay.analysis.post_order_visit(opt["main"], lambda e: dense_in.append(e.args[0].checked_type.dtype) if (
        isinstance(e, relay.Call) and getattr(e.op, "name", "") in ("nn.dense", "nn.contrib_dense_pack")) else None)
    assert dense_in == [dtype]
    assert f'weight_layout="{layout}"' in opt["main"].astext(show_meta_data=False)


@needs_avx2
def test_dense_zero_points_beyond_int16_keep_an_exact_form():
    """A data zero point with ``x - zp`` outside int16 (a legal int32 in QNN) or a weight zero point with
    ``w - zw`` outside int16 does not take the int16 dense; the result stays the exact int32 product."""
    d = RNG.integers(0, 256, (5, 19)).astype("uint8")
    w = RNG.integers(-128, 128, (17, 19)).astype("int8")
    for zp_d, zp_w in ((40000, 0), (3, -40000)):
        body = lambda x: qnn.op.dense(x, relay.const(w), zp_d, zp_w, 0.1, 0.2, units=17)  # noqa: E731
        opt, lib = build(body, d)
        dtypes = []
        relay.analysis.post_order_visit(opt["main"], lambda e: dtypes.append(e.args[0].checked_type.dtype) if (
            isinstance(e, relay.Call) and getattr(e.op, "name", "") in ("nn.dense", "nn.contrib_dense_pack"))
            else None)
        assert "int16" not in dtypes
        (out,) = run(lib, d)
        want = (d.astype(np.int64) - zp_d) @ (w.astype(np.int64) - zp_w).T
        np.testing.assert_array_equal(out, ((want + 2**31) % 2**32 - 2**31).astype(np.int32))
