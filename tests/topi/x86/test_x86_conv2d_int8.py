"""The x86 int8 conv2d (``conv2d_NCHWc_int8.x86``): uint8 x int8 -> int32 against numpy on odd shapes, each
dot-product mode (VNNI / exact vpmaddubsw / saturating vpmaddubsw), and the instructions the C compiles to for
named targets (AVX-512 VNNI code is compiled, not run, unless the host has it)."""
import subprocess

import numpy as np
import pytest

import kiln as tvm
from kiln import te
from kiln.target.x86 import host_can_run
from kiln.topi.x86 import conv2d_int8 as C8

AVX2 = "llvm -mcpu=core-avx2"
VNNI = "llvm -mcpu=cascadelake"
RNG = np.random.default_rng(3)


def conv_ref(d, w, stride, pad, saturate=False):
    """int64 conv; with ``saturate`` the vpmaddubsw pairing (channels 4c+0/4c+1, 4c+2/4c+3 of one tap summed in
    int16 with saturation) is emulated."""
    n, c, h, wd = d.shape
    o, _, kh, kw = w.shape
    cp = -(-c // 4) * 4
    dp = np.zeros((n, cp, h + 2 * pad, wd + 2 * pad), np.int64)
    dp[:, :c, pad:pad + h, pad:pad + wd] = d
    wp = np.zeros((o, cp, kh, kw), np.int64)
    wp[:, :c] = w
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, o, oh, ow), np.int64)
    for y in range(kh):
        for x in range(kw):
            win = dp[:, :, y:y + stride * oh:stride, x:x + stride * ow:stride]  # n, cp, oh, ow
            prod = np.einsum("ncij,oc->nocij", win, wp[:, :, y, x])  # n, o, cp, oh, ow
            pairs = prod[:, :, 0::2] + prod[:, :, 1::2]
            if saturate:
                pairs = np.clip(pairs, -32768, 32767)
            out += pairs.sum(axis=2)
    return out


def build(shape_d, shape_w, stride, pad, target, config=None):
    with tvm.transform.PassContext(config=config or {}), tvm.target.Target(target):
        d = te.placeholder(shape_d, "uint8", name="d")
        w = te.placeholder(shape_w, "int8", name="w")
        out = C8.conv2d_nchw_int8(d, w, stride, pad, 1)
        s = C8.schedule_conv2d_nchw_int8([out])
        return tvm.build(s, [d, w, out], target), tuple(int(x) for x in out.shape)


def run(f, out_shape, d, w):
    res = tvm.nd.array(np.zeros(out_shape, "int32"))
    f(tvm.nd.array(d), tvm.nd.array(w), res)
    return res.numpy()


@pytest.mark.skipif(not host_can_run(tvm.target.Target(AVX2)), reason="host lacks AVX2")
@pytest.mark.parametrize("c,h,w,o,k,stride,pad", [
    (5, 9, 7, 19, 3, 1, 1),     # channels not a multiple of 4 / 16, odd spatial sizes
    (3, 13, 11, 16, 3, 2, 1),   # stem-like: 3 channels, stride 2
    (32, 7, 7, 40, 1, 1, 0),    # 1x1
    (20, 10, 9, 33, 3, 2, 0),   # stride 2, no padding, odd outputs
    (6, 7, 7, 5, 3, 1, 1),      # fewer output channels than one 16-channel panel
])
def test_conv2d_int8_matches_numpy(c, h, w, o, k, stride, pad):
    d = RNG.integers(0, 256, (1, c, h, w)).astype("uint8")
    wt = RNG.integers(-128, 128, (o, c, k, k)).astype("int8")
    f, shape = build(d.shape, wt.shape, stride, pad, AVX2)
    np.testing.assert_array_equal(run(f, shape, d, wt), conv_ref(d, wt, stride, pad))


@pytest.mark.skipif(not host_can_run(tvm.target.Target(AVX2)), reason="host lacks AVX2")
def test_saturating_mode_saturates_like_vpmaddubsw_and_exact_mode_does_not():
    c, o = 8, 16
    d = np.full((1, c, 5, 5), 255, "uint8")
    d[0, :, 2, 2] = RNG.integers(0, 256, c)
    wt = RNG.integers(-128, 128, (o, c, 3, 3)).astype("int8")
    wt[:, 0:2] = 127  # pairs 255*127*2 = 64770 > 32767: saturates in int16
    wt[:5, 2:4] = -128
    want = conv_ref(d, wt, 1, 0)
    sat = conv_ref(d, wt, 1, 0, saturate=True)
    assert not np.array_equal(want, sat)
    f, shape = build(d.shape, wt.shape, 1, 0, AVX2, {C8.SATURATING_OPTION: True})
    np.testing.assert_array_equal(run(f, shape, d, wt), sat)
    f, shape = build(d.shape, wt.shape, 1, 0, AVX2)
    np.testing.assert_array_equal(run(f, shape, d, wt), want)
    # 7-bit weights (ONNX Runtime's reduce_range) never saturate
    w7 = RNG.integers(-64, 64, (o, c, 3, 3)).astype("int8")
    f, shape = build(d.shape, w7.shape, 1, 0, AVX2, {C8.SATURATING_OPTION: True})
    np.testing.assert_array_equal(run(f, shape, d, w7), conv_ref(d, w7, 1, 0))


def test_mode_follows_target():
    with tvm.target.Target(VNNI):
        assert C8.int8_mode() == "vnni" and C8.int8_lanes() == 16
    with tvm.target.Target("llvm -mcpu=alderlake"):
        assert C8.int8_mode() == "vnni" and C8.int8_lanes() == 8  # AVX-VNNI on ymm
    with tvm.target.Target("llvm -mcpu=skylake-avx512"):
        assert C8.int8_mode() == "maddubs_exact" and C8.int8_lanes() == 16
    with tvm.transform.PassContext(config={C8.SATURATING_OPTION: True}), tvm.target.Target(AVX2):
        assert C8.int8_mode() == "maddubs" and C8.int8_lanes() == 8
    with tvm.target.Target("llvm -mcpu=znver4"):
        assert C8.int8_mode() == "vnni"


def _asm(src: str, march_flags: list) -> str:
    proc = subprocess.run(["gcc", "-O3", *march_flags, "-fopenmp", "-S", "-x", "c", "-", "-o", "-"], input=src,
                          capture_output=True, text=True, check=True)
    return proc.stdout


@pytest.mark.parametrize("target,instrs", [
    (VNNI, ["vpdpbusd"]),
    ("llvm -mcpu=alderlake", ["vpdpbusd"]),
    (AVX2, ["vpmaddubsw", "vpmaddwd"]),
    ("llvm -mcpu=skylake-avx512", ["vpmaddubsw", "vpmaddwd"]),
])
def test_codegen_uses_int8_dot_instructions(target, instrs):
    from kiln.target.flags import cpu_cflags
    f, _ = build((1, 16, 8, 8), (32, 16, 3, 3), 1, 1, target)
    src = f.get_source()
    asm = _asm(src, cpu_cflags(tvm.target.Target(target)))
    for ins in instrs:
        assert ins in asm, f"{ins} not in the assembly for {target}"
    if target == AVX2:
        assert "vpdpbusd" not in asm


@pytest.mark.parametrize("sat", [False, True])
def test_scalar_fallback_without_the_isa_computes_the_same(sat):
    """Compiled for plain x86-64 (no AVX2), the helpers' scalar loops give the modes' results (saturation
    emulated for ``maddubs``)."""
    c, o = 6, 16
    d = RNG.integers(200, 256, (1, c, 6, 5)).astype("uint8")
    wt = RNG.integers(-128, 128, (o, c, 3, 3)).astype("int8")
    config = {C8.SATURATING_OPTION: True} if sat else {}
    f, shape = build(d.shape, wt.shape, 1, 1, "llvm -mcpu=x86-64", config)
    assert "vpmaddubsw" not in _asm(f.get_source(), ["-march=x86-64"])
    np.testing.assert_array_equal(run(f, shape, d, wt), conv_ref(d, wt, 1, 1, saturate=sat))


@pytest.mark.parametrize("target", ["llvm -mcpu=cascadelake", "llvm -mcpu=znver4"])
def test_vnni_targets_compile_with_vpdpbusd(target):
    """Compile only (the host need not have VNNI): the conv's C for cascadelake / znver4 builds with gcc's flags
    for the target and uses vpdpbusd; the requantize helper compiles alongside."""
    from kiln.target.flags import cpu_cflags
    from kiln.topi.x86.fixed_point_int8 import fixed_point_multiply
    with tvm.target.Target(target):
        assert C8.int8_mode() == "vnni"
        d = te.placeholder((1, 32, 9, 9), "uint8", name="d")
        w = te.placeholder((32, 32, 3, 3), "int8", name="w")
        m = te.placeholder((1, 32, 1, 1), "int32", name="m")
        conv = C8.conv2d_nchw_int8(d, w, (1, 1), (1, 1), (1, 1), "int32")
        out = fixed_point_multiply(conv, m, m, m, high_word=True)
        f = tvm.build(C8.schedule_conv2d_nchw_int8([out]), [d, w, m, out], target)
    asm = _asm(f.get_source(), cpu_cflags(tvm.target.Target(target)))
    assert "vpdpbusd" in asm and "vpmuldq" in asm


def test_oc_block_picks_8_where_it_pads_less():
    assert [C8.oc_block(o) for o in (16, 24, 32, 40, 144, 19, 5, 33, 1000)] == [16, 8, 16, 8, 16, 8, 8, 8, 8]


@pytest.mark.skipif(not host_can_run(tvm.target.Target(AVX2)), reason="host lacks AVX2")
@pytest.mark.parametrize("ic_bn,oc_bn", [(8, 8), (16, 8), (8, 16)])
def test_blocked_nchwc_int8_with_8_channel_blocks(ic_bn, oc_bn):
    """The AlterOpLayout form: NCHW{ic_bn}c data and an OIHW{oc_bn}o4i kernel ([O/oc_bn, C/4, KH, KW, oc_bn, 4])
    -> NCHW{oc_bn}c, with 8-channel blocks on either side (mobilenet_v2's 24-channel layers)."""
    c, o, h = 48, 24 if oc_bn == 8 else 32, 7
    d = RNG.integers(0, 256, (1, c, h, h)).astype("uint8")
    wt = RNG.integers(-128, 128, (o, c, 3, 3)).astype("int8")
    with tvm.target.Target(AVX2):
        dv = te.placeholder((1, c // ic_bn, h, h, ic_bn), "uint8", name="d")
        wv = te.placeholder((o // oc_bn, c // 4, 3, 3, oc_bn, 4), "int8", name="w")
        out = C8.conv2d_NCHWc_int8(dv, wv, (1, 1), (1, 1), (1, 1), f"NCHW{ic_bn}c", f"NCHW{oc_bn}c", "int32")
        assert tuple(int(x) for x in out.shape) == (1, o // oc_bn, h, h, oc_bn)
        f = tvm.build(C8.schedule_conv2d_NCHWc_int8([out]), [dv, wv, out], AVX2)
    d5 = d.reshape(1, c // ic_bn, ic_bn, h, h).transpose(0, 1, 3, 4, 2).copy()
    w6 = wt.reshape(o // oc_bn, oc_bn, c // 4, 4, 3, 3).transpose(0, 2, 4, 5, 1, 3).copy()
    res = tvm.nd.array(np.zeros((1, o // oc_bn, h, h, oc_bn), "int32"))
    f(tvm.nd.array(d5), tvm.nd.array(w6), res)
    got = res.numpy().transpose(0, 1, 4, 2, 3).reshape(1, o, h, h)
    np.testing.assert_array_equal(got, conv_ref(d, wt, 1, 1))


def test_blocked_kernel_with_a_bad_block_is_refused():
    from kiln.error import KilnError
    with tvm.target.Target(AVX2):
        dv = te.placeholder((1, 2, 5, 5, 8), "uint8", name="d")
        wv = te.placeholder((6, 4, 3, 3, 4, 4), "int8", name="w")
        with pytest.raises(KilnError, match="oc_bn|OIHW"):
            C8.conv2d_NCHWc_int8(dv, wv, (1, 1), (1, 1), (1, 1), "NCHW8c", "NCHW4c", "int32")


@pytest.mark.parametrize("target,instr", [(VNNI, "vpdpbusd"), ("llvm -mcpu=skylake-avx512", "vpmaddubsw")])
def test_8_channel_blocks_on_avx512_use_ymm_dot_products(target, instr):
    """Compile only: with 8-channel blocks an AVX-512 target takes the 8-lane (ymm) form of the dot product."""
    from kiln.target.flags import cpu_cflags
    f, _ = build((1, 16, 6, 6), (24, 16, 1, 1), 1, 0, target)
    src = f.get_source()
    mode = "vnni" if instr == "vpdpbusd" else "maddubs_exact"
    assert f"kiln_dot4_u8s8_{mode}_i32x8(" in src and f"kiln_dot4_u8s8_{mode}_i32x16(" not in src
    assert instr in _asm(src, cpu_cflags(tvm.target.Target(target)))


@pytest.mark.skipif(not host_can_run(tvm.target.Target(AVX2)), reason="host lacks AVX2")
@pytest.mark.parametrize("c,h,w,o,k,stride,pad", [
    (5, 9, 13, 19, 3, 1, 1),    # 7-pixel tile over 13 columns (a remainder), channels padded
    (20, 11, 9, 24, 3, 2, 1),   # stride 2, 8-channel output blocks
    (3, 15, 15, 16, 7, 2, 3),   # stem-like 7x7 on 4 padded channels (4-pixel tile)
    (36, 7, 7, 40, 1, 1, 0),    # 1x1, oc not a multiple of 16
    (16, 5, 23, 33, 3, 1, 0),   # wide odd row, no padding
])
def test_asm_step_saturating_mode_matches_vpmaddubsw_emulation(c, h, w, o, k, stride, pad):
    """The conv's one-asm-statement step (maddubs, 8 lanes) on odd shapes with the int8 extremes: equal to the
    numpy emulation of vpmaddubsw's int16 saturation, and to the exact result for 7-bit weights."""
    d = RNG.integers(0, 256, (1, c, h, w)).astype("uint8")
    d.flat[::3] = 255
    d.flat[1::7] = 0
    wt = RNG.integers(-128, 128, (o, c, k, k)).astype("int8")
    wt.flat[::5] = 127
    wt.flat[1::5] = -128
    f, shape = build(d.shape, wt.shape, stride, pad, AVX2, {C8.SATURATING_OPTION: True})
    assert "kiln_dot4_u8s8_maddubs_asm_i32x8(" in f.get_source()
    sat = conv_ref(d, wt, stride, pad, saturate=True)
    assert not np.array_equal(sat, conv_ref(d, wt, stride, pad))  # the extremes do saturate
    np.testing.assert_array_equal(run(f, shape, d, wt), sat)
    w7 = RNG.integers(-64, 65, (o, c, k, k)).astype("int8")
    w7.flat[::4] = 64
    w7.flat[2::4] = -64
    f, shape = build(d.shape, w7.shape, stride, pad, AVX2, {C8.SATURATING_OPTION: True})
    np.testing.assert_array_equal(run(f, shape, d, w7), conv_ref(d, w7, stride, pad))


def test_asm_step_codegen_and_register_tile():
    """Compile only (core-avx2): the asm step's instructions are in the assembly and the 3x3 kernel's register
    tile is 7 pixels x 16 channels (14 accumulators); an AVX-512 target keeps the intrinsic form."""
    from kiln.target.flags import cpu_cflags
    with tvm.transform.PassContext(config={C8.SATURATING_OPTION: True}):
        f, _ = build((1, 64, 14, 14), (64, 64, 3, 3), 1, 1, AVX2, {C8.SATURATING_OPTION: True})
        src = f.get_source()
        asm = _asm(src, cpu_cflags(tvm.target.Target(AVX2)))
        assert "vpmaddubsw" in asm and "vpmaddwd" in asm
        assert "kiln_dot4_u8s8_maddubs_asm_i32x8(" in src
        assert "_r13 =" in src and "_r14 =" not in src  # 14 accumulators r0..r13
        f, _ = build((1, 64, 14, 14), (64, 64, 3, 3), 1, 1, "llvm -mcpu=skylake-avx512", {C8.SATURATING_OPTION: True})
        assert "_asm_" not in f.get_source()


def test_asm_tile_pixels():
    assert C8._asm_tile_px(2, 3, 3, 16) == 7
    assert C8._asm_tile_px(2, 1, 1, 16) == 4
    assert C8._asm_tile_px(2, 7, 7, 4) == 4
    assert C8._asm_tile_px(1, 3, 3, 16) == 8
