"""The float -> int8/uint8 activation quantize kernels (qnn.quantize canonicalized to divide, round, add, clip, cast,
fused with a reshape or a pad + layout_transform as in the int8 BERT and ResNet models): exact against numpy
(round half to even, saturation, odd sizes, a scalar tail after the vector body) and SIMD code on every x86 target.

What made them slow on AVX-512: ``round`` lowers to ``nearbyintf``, printed for vectors as a loop of scalar calls
that gcc split into two ymm ``vrndscaleps`` with the halves spilled to the stack, and the 16-lane int32 -> uint8
cast went through two 8-lane AVX2 shuffles stored to and reloaded from the stack (a store-forwarding stall per
vector); the 16-lane clip was a compare + bit-mask select per bound. The AVX2 pad + layout_transform kernel
narrowed its int32 pad mask to uint8 lane by lane (GCC 12 scalarizes ``__builtin_convertvector`` there).
AVX-512 code is compiled (gcc -S), never run."""
import re

import numpy as np
import pytest

import kiln as tvm
from kiln import relay
from kiln.relay import qnn
from kiln.contrib import graph_executor
from vector_code_util import target_asm

AVX2 = "llvm -mcpu=core-avx2"
AVX512 = "llvm -mcpu=skylake-avx512"
RNG = np.random.default_rng(19)


def _bert_quantize(shape, out_dtype="uint8"):
    """DynamicQuantizeLinear's quantize: scale and zero point are run-time scalars; the result is reshaped to 2-D."""
    x = relay.var("x", shape=shape, dtype="float32")
    s = relay.var("s", shape=(), dtype="float32")
    z = relay.var("z", shape=(), dtype="int32")
    y = qnn.op.quantize(x, s, z, out_dtype=out_dtype)
    return relay.Function([x, s, z], relay.reshape(y, (-1, shape[-1])))


def _image_quantize(shape, scale, zp):
    """A QDQ model's input quantize feeding an int8 conv: constant scale, spatial and channel padding with the zero
    point, NCHW -> NCHW4c."""
    x = relay.var("x", shape=shape, dtype="float32")
    y = qnn.op.quantize(x, relay.const(np.float32(scale)), relay.const(np.int32(zp)), out_dtype="uint8")
    cpad = -shape[1] % 4
    y = relay.nn.pad(y, ((0, 0), (0, cpad), (3, 3), (3, 3)), pad_value=relay.const(np.uint8(zp)))
    return relay.Function([x], relay.layout_transform(y, "NCHW", "NCHW4c"))


def _build(func, target):
    with tvm.transform.PassContext(opt_level=3):
        return relay.build(tvm.IRModule.from_expr(func), target)


def _run(lib, **inputs):
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    for k, v in inputs.items():
        m.set_input(k, v)
    m.run()
    return m.get_output(0).numpy()


def _quantize_ref(x, scale, zp, dtype):
    lo, hi = (0, 255) if dtype == "uint8" else (-128, 127)
    with np.errstate(invalid="ignore"):
        return np.clip(np.round(x / np.float32(scale)) + np.float32(zp), lo, hi).astype(dtype)


def _values(shape, scale):
    """Ties (k + 0.5 after the division, both signs), values that saturate both ways, +-inf, -0.0, and random ones."""
    n = int(np.prod(shape))
    ties = (np.arange(-300, 300, dtype=np.float32) + np.float32(0.5)) * np.float32(scale)
    special = np.array([np.inf, -np.inf, -0.0, 0.0, 1e30, -1e30, 2.5 * scale, -2.5 * scale, 3.5 * scale],
                       dtype=np.float32)
    rand = (RNG.standard_normal(n) * 200 * scale).astype(np.float32)
    vals = np.concatenate([ties, special, rand])[:n]
    RNG.shuffle(vals)
    return vals.reshape(shape)


@pytest.mark.parametrize("shape,dtype,zp", [((3, 5, 37), "uint8", 128), ((2, 8, 64), "uint8", 3),
                                            ((1, 7, 19), "int8", -5), ((4, 1, 40), "int8", 0)])
def test_dynamic_quantize_reshape_exact(shape, dtype, zp):
    scale = 0.25  # exact halves: x / 0.25 of (k + 0.5) * 0.25 is k + 0.5
    x = _values(shape, scale)
    out = _run(_build(_bert_quantize(shape, dtype), AVX2), x=x, s=np.float32(scale), z=np.int32(zp))
    np.testing.assert_array_equal(out, _quantize_ref(x, scale, zp, dtype).reshape(-1, shape[-1]))


def test_dynamic_quantize_ties_round_half_to_even():
    x = (np.arange(-20, 21, dtype=np.float32) + np.float32(0.5)).reshape(1, 1, 41)  # 41: vector body + tail
    out = _run(_build(_bert_quantize(x.shape, "int8"), AVX2), x=x, s=np.float32(1.0), z=np.int32(0))
    want = np.array([round(float(v)) for v in x.ravel()])  # Python's round: half to even
    assert np.abs(np.abs(want) % 2).max() == 0  # every result even
    np.testing.assert_array_equal(out.ravel().astype(np.int64), want)


def test_dynamic_quantize_nan_same_in_vector_body_and_tail():
    x = np.full((1, 1, 19), np.nan, dtype=np.float32)  # 16 + 3 (AVX2: 8 + 8 + 3)
    out = _run(_build(_bert_quantize(x.shape), AVX2), x=x, s=np.float32(0.5), z=np.int32(7)).ravel()
    assert len(set(out.tolist())) == 1, out


@pytest.mark.parametrize("shape,zp", [((1, 3, 13, 21), 114), ((1, 3, 16, 16), 0), ((2, 5, 9, 11), 255)])
def test_image_quantize_pad_layout_exact(shape, zp):
    scale = 0.0625
    x = _values(shape, scale)
    out = _run(_build(_image_quantize(shape, scale, zp), AVX2), x=x)
    q = _quantize_ref(x, scale, zp, "uint8")
    cpad = -shape[1] % 4
    q = np.pad(q, ((0, 0), (0, cpad), (3, 3), (3, 3)), constant_values=zp)
    n, c, h, w = q.shape
    np.testing.assert_array_equal(out, q.reshape(n, c // 4, 4, h, w).transpose(0, 1, 3, 4, 2))


# -- generated code ------------------------------------------------------------------------------------------------
def _kernel_asm(lib, target, name_part):
    """gcc's assembly of the generated C for ``target`` (compile only), cut to the functions whose name contains
    ``name_part`` (the kernel and its parallel-loop body)."""
    src = lib.get_lib().get_source()
    asm = target_asm(src, target)
    funcs = re.findall(r"^(\w+):\n(.*?)\.size\s+\1", asm, re.S | re.M)
    body = "\n".join(text for name, text in funcs if name_part in name)
    assert body, f"no function named like {name_part!r} in the assembly"
    return src, body


@pytest.mark.parametrize("target,reg,helper", [(AVX2, "%ymm", "_mm256_round_ps"),
                                               (AVX512, "%zmm", "_mm512_roundscale_ps")])
def test_dynamic_quantize_code_is_simd(target, reg, helper):
    lib = _build(_bert_quantize((4, 16, 256)), target)
    src, asm = _kernel_asm(lib, target, "fused_divide_round")
    # the vector round is one instruction, not a lane loop of libm nearbyintf calls
    assert re.search(r"static inline \w+ kiln_nearbyintf_f32x\d+\(", src) and helper in src
    assert "nearbyint" not in asm  # no call to libm in the kernel
    rounds = re.findall(r"(?:vroundps|vrndscaleps)\s+\$12, (%[xyz]mm)\d+", asm)
    assert rounds and set(rounds) == {reg}, rounds  # the whole register at once
    assert re.search(rf"vdivps\s+.*{reg}", asm)


def test_dynamic_quantize_avx512_no_stack_round_trip():
    """The AVX-512 loop: vrndscaleps and vpmovdb on zmm, min/max instructions, and nothing through the stack."""
    lib = _build(_bert_quantize((4, 16, 256)), AVX512)
    _, asm = _kernel_asm(lib, AVX512, "fused_divide_round")
    assert re.search(r"vpmovdb\s+%zmm", asm)
    assert re.search(r"vminps\s+.*%zmm", asm) and re.search(r"vmaxps\s+.*%zmm", asm)
    assert not re.search(r"v\w+\s+%[xyz]mm\d+, -?\d*\(%rsp\)", asm), "vector spilled to the stack"


@pytest.mark.parametrize("target", [AVX2, AVX512])
def test_image_quantize_pad_mask_narrowed_by_shuffle(target):
    # 20 wide: no whole number of vectors, so the row's last vector holds row and pad positions and selects by lane
    lib = _build(_image_quantize((1, 3, 16, 20), 0.05, 120), target)
    src = lib.get_lib().get_source()
    sel = re.search(r"static inline \w+ kiln_select_u8x\d+_w\([^)]*\) \{\n(.*?)\n\}", src, re.S)
    assert sel is not None, "the uint8 pad select"
    assert "__builtin_convertvector" not in sel.group(1)  # gcc narrows that lane by lane
    _, asm = _kernel_asm(lib, target, "fused_divide_round")
    assert "nearbyint" not in asm


def test_image_quantize_avx512_keeps_the_index_affine():
    """Padded to 26 wide, a row of NCHW4c is 104 bytes: 6.5 zmm vectors. No lane divides its index by 26 (the whole
    image fused into the vector axis did, lane by lane)."""
    lib = _build(_image_quantize((1, 3, 16, 20), 0.05, 120), AVX512)
    src = lib.get_lib().get_source()
    assert not re.search(r"kiln_(div|mod)_i32x\d+\([^;]*kiln_broadcast_i32x\d+\(26\)", src)
    _, asm = _kernel_asm(lib, AVX512, "fused_divide_round")
    assert not re.search(r"idiv", asm)


# -- the row-wise schedule (kiln.topi.x86.injective._padded_relayout) ----------------------------------------------
def _image_ref(x, scale, zp, pads, block=4):
    q = _quantize_ref(x, scale, zp, "uint8")
    cpad = -x.shape[1] % block
    q = np.pad(q, ((0, 0), (0, cpad), (pads[0], pads[1]), (pads[2], pads[3])), constant_values=zp)
    n, c, h, w = q.shape
    return q.reshape(n, c // block, block, h, w).transpose(0, 1, 3, 4, 2)


def _image_quantize_pads(shape, scale, zp, pads, block=4):
    x = relay.var("x", shape=shape, dtype="float32")
    y = qnn.op.quantize(x, relay.const(np.float32(scale)), relay.const(np.int32(zp)), out_dtype="uint8")
    cpad = -shape[1] % block
    y = relay.nn.pad(y, ((0, 0), (0, cpad), (pads[0], pads[1]), (pads[2], pads[3])),
                     pad_value=relay.const(np.uint8(zp)))
    return relay.Function([x], relay.layout_transform(y, "NCHW", f"NCHW{block}c"))


@pytest.mark.parametrize("shape,pads,zp", [((1, 3, 37, 29), (3, 3, 3, 3), 128), ((1, 4, 17, 33), (1, 2, 0, 3), 0),
                                           ((2, 3, 11, 32), (0, 0, 2, 1), 255), ((1, 3, 9, 16), (2, 0, 3, 0), 7),
                                           ((1, 5, 8, 40), (0, 1, 1, 2), 200), ((1, 3, 6, 8), (1, 1, 0, 0), 9)])
@pytest.mark.parametrize("target", [AVX2, "llvm"])
def test_image_quantize_rows_exact(shape, pads, zp, target):
    """Odd sizes, pads 0..3 on each side, row widths that are and are not whole vectors: exact against numpy (ties
    rounded half to even, saturation, +-inf), NaN the same (0) wherever it falls; the host's own ISA and AVX2."""
    scale = 0.0625
    x = _values(shape, scale)
    x.ravel()[5::11] = np.nan
    out = _run(_build(_image_quantize_pads(shape, scale, zp, pads), target), x=x)
    with np.errstate(over="ignore"):
        want = _image_ref(np.nan_to_num(x, nan=0.0), scale, zp, pads)  # where x is NaN: checked below
    nan = _image_ref(np.where(np.isnan(x), 1.0, 0.0).astype(np.float32), 1.0, 0, pads) == 1
    np.testing.assert_array_equal(out[~nan], want[~nan])
    assert nan.any() and (out[nan] == 0).all()  # the quantize's NaN: cvttps2dq's 0x80000000, truncated to 0


def test_image_quantize_rows_numpy_block8():
    """NCHW8c (a block of 8, 3 real channels) the same way."""
    shape, pads, zp, scale = (1, 3, 13, 24), (3, 3, 3, 3), 100, 0.05
    x = _values(shape, scale)
    out = _run(_build(_image_quantize_pads(shape, scale, zp, pads, block=8), AVX2), x=x)
    np.testing.assert_array_equal(out, _image_ref(x, scale, zp, pads, block=8))


@pytest.mark.parametrize("target,reg", [(AVX2, "%ymm"), (AVX512, "%zmm")])
def test_image_quantize_rows_read_whole_vectors(target, reg):
    """The input planes are read in whole vectors (no per-lane gather of floats: no ``vinsertps``, which the AVX2
    gather was, no masked ``vbroadcastss``, which the AVX-512 one was) and the interleave into NCHW4c is done with
    byte permutes / unpacks; compiled, not run (224 wide: whole vectors on both ISAs). (gcc's interleave loop ends
    in byte inserts from the local row buffer: 230 pixels are no whole number of its vectors.)"""
    lib = _build(_image_quantize((1, 3, 8, 224), 0.05, 120), target)
    src, asm = _kernel_asm(lib, target, "fused_divide_round")
    kernel = src[src.index("int32_t tvmgen_default_fused_divide_round"):]
    assert "kiln_gather" not in kernel
    assert re.search(r"kiln_vload_f32x\d+\(p0 \+", kernel)
    ops = re.findall(r"^\s+(\w+)", asm, re.M)
    assert not {"vinsertps", "vgatherdps", "vgatherqps"} & set(ops)
    assert not re.search(r"vbroadcastss\s+\([^)]*\),\s*%[xyz]mm\d+\{%k", asm)  # gcc's masked-broadcast gather
    rounds = re.findall(r"(?:vroundps|vrndscaleps)\s+\$12, (%[xyz]mm)\d+", asm)
    assert rounds and set(rounds) == {reg}, rounds
    assert sum(op.startswith(("vpunpck", "vpshufb", "vpermt2b", "vpermb", "vperm2i128", "vpermq")) for op in ops) >= 8


def test_short_inner_lanes_choice():
    from kiln.topi.x86.injective import short_inner_lanes
    assert short_inner_lanes([230, 4], 16) == 8  # 920 = 115 ymm vectors, 57.5 zmm ones
    assert short_inner_lanes([224, 4], 16) == 16  # a whole number of zmm vectors already
    assert short_inner_lanes([230, 4], 8) == 8
    assert short_inner_lanes([3, 4], 8) == 8  # never below 8 float32 lanes: fused deeper as before
    assert short_inner_lanes([3, 4], 16) == 16  # 12 is no multiple of 8 either
    assert short_inner_lanes([4], 16) == 16


def test_narrow_compare_select_keeps_the_foldable_form():
    """An 8-bit max (max pool over uint8) selects by its own compare widened to int32: that select keeps
    ``__builtin_convertvector``, which gcc folds with the widening (the shuffle helper there made a uint8 max pool
    4x slower); values against numpy."""
    from kiln import te
    n = 40
    a = te.placeholder((n,), "uint8", name="a")
    b = te.placeholder((n,), "uint8", name="b")
    c = te.compute((n,), lambda i: tvm.tir.max(a[i], b[i]), name="c")
    s = te.create_schedule(c.op)
    _, inner = s[c].split(c.op.axis[0], factor=8)
    s[c].vectorize(inner)
    f = tvm.build(s, [a, b, c], AVX2)
    src = f.get_source()
    assert "kiln_select_u8x8(" in src and "kiln_select_u8x8_w" not in src
    x, y = RNG.integers(0, 256, n).astype("uint8"), RNG.integers(0, 256, n).astype("uint8")
    out = tvm.nd.empty((n,), "uint8")
    f(tvm.nd.array(x), tvm.nd.array(y), out)
    np.testing.assert_array_equal(out.numpy(), np.maximum(x, y))


@pytest.mark.parametrize("shape,pads,block", [((1, 5, 7, 19), (1, 2, 3, 0), 8), ((2, 3, 6, 32), (0, 1, 0, 2), 4)])
def test_padded_relayout_float_exact(shape, pads, block):
    """The same row-wise schedule on a float32 kernel (a pad with 1.5 and a scale, fused with NCHW -> NCHW{b}c): exact
    against numpy on the host."""
    x = relay.var("x", shape=shape, dtype="float32")
    y = relay.nn.pad(x * relay.const(np.float32(0.5)), ((0, 0), (0, -shape[1] % block), (pads[0], pads[1]),
                                                       (pads[2], pads[3])), pad_value=1.5)
    f = relay.Function([x], relay.layout_transform(y, "NCHW", f"NCHW{block}c"))
    a = RNG.standard_normal(shape).astype(np.float32)
    out = _run(_build(f, "llvm"), x=a)
    q = np.pad(a * np.float32(0.5), ((0, 0), (0, -shape[1] % block), (pads[0], pads[1]), (pads[2], pads[3])),
               constant_values=1.5)
    n, c, h, w = q.shape
    np.testing.assert_array_equal(out, q.reshape(n, c // block, block, h, w).transpose(0, 1, 3, 4, 2))
